//! `sortie_policy_set` with each Terraform: create, no changes, update in place, an
//! out-of-band change seen and put back, a module that does not compile refused in the
//! API's words naming `modules`, import, destroy.

use serde_json::json;

use crate::common::{terraforms, unique, Dev, Tf};

const REGO: &str = "package deletes\n\ndeny contains msg if {\n  some rc in input.plan.resource_changes\n  \"delete\" in rc.change.actions\n  msg := sprintf(\"%s would be deleted\", [rc.address])\n}\n";

fn config(group: &str, enforcement: &str, rego: &str) -> String {
    format!(
        "resource \"sortie_policy_set\" \"p\" {{\n  group = \"{group}\"\n  name = \"no-deletes\"\n  enforcement = \"{enforcement}\"\n  labels = {{ tier = \"1\" }}\n  modules = {{\n    \"deletes.rego\" = {}\n  }}\n}}\n",
        serde_json::to_string(rego).unwrap()
    )
}

#[test]
fn policy_sets_live_and_die_with_each_terraform() {
    crate::require_aws!();
    let dev = Dev::start("tfp-policy");
    for (version, bin) in terraforms() {
        let group = unique("pol").replace('-', "");
        let group = &group[..group.len().min(20)];
        let at = format!("/v1/groups/{group}/-/policy-sets/no-deletes");
        let tf = Tf::new(&bin, &dev, "tfp-policy");
        tf.write(&config(group, "review", REGO));
        tf.apply();
        let (status, set) = dev.api("GET", &at, None, None);
        assert_eq!(status, 200, "Terraform {version}: {set}");
        assert_eq!(set["enforcement"], "review");
        assert_eq!(set["modules"][0]["rego"], REGO);
        assert_eq!(set["criteria"]["labels"], json!({"tier": "1"}));
        let plan = tf.plan();
        assert_eq!(plan.code, 0, "Terraform {version}: {}", plan.out);

        // Update in place.
        tf.write(&config(group, "mandatory", REGO));
        let plan = tf.plan();
        assert!(
            plan.out.contains("updated in-place") && !plan.out.contains("must be replaced"),
            "Terraform {version}: {}",
            plan.out
        );
        tf.apply();
        let (_, set) = dev.api("GET", &at, None, None);
        assert_eq!(set["enforcement"], "mandatory");
        assert_eq!(tf.plan().code, 0);

        // A module that does not compile: the API's words, naming `modules`.
        tf.write(&config(
            group,
            "mandatory",
            "package deletes\n\ndeny contains msg if {\n  msg := ]\n}\n",
        ));
        let r = tf.run(&["apply", "-input=false", "-no-color", "-auto-approve"]);
        assert_ne!(r.code, 0);
        assert!(
            r.all().contains("Invalid `modules`") && r.all().contains("does not compile"),
            "Terraform {version}: {}",
            r.all()
        );
        tf.write(&config(group, "mandatory", REGO));

        // Import, then no changes.
        std::fs::remove_file(tf.dir.join("terraform.tfstate")).unwrap();
        tf.ok(&[
            "import",
            "-input=false",
            "-no-color",
            "sortie_policy_set.p",
            &format!("{group}/no-deletes"),
        ]);
        let plan = tf.plan();
        assert_eq!(
            plan.code, 0,
            "Terraform {version}: after import:\n{}",
            plan.out
        );

        tf.ok(&["destroy", "-input=false", "-no-color", "-auto-approve"]);
        let (status, _) = dev.api("GET", &at, None, None);
        assert_eq!(status, 404, "Terraform {version}: destroy left the set");
        let _ = std::fs::remove_dir_all(&tf.dir);
    }
}
