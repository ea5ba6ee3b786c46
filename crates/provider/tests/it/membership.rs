//! `sortie_membership` through its life with each Terraform (create, no changes, a change
//! that replaces it, an out-of-band revoke re-created, import, a bad value refused by
//! sortie-core's rule (the API's), destroy), and the agent pool's token: never in plan
//! output, null after import.

use serde_json::Value;

use crate::common::{terraforms, unique, Dev, Tf};

fn membership(group: &str, role: &str, pattern: &str) -> String {
    format!(
        r#"
resource "sortie_membership" "alice" {{
  group   = "{group}"
  role    = "{role}"
  subject = "alice"
  issuer  = "https://idp.example"
}}

resource "sortie_membership" "ci" {{
  group   = "{group}"
  role    = "deployer"
  claim   = "sub"
  pattern = "{pattern}"
}}
"#
    )
}

fn memberships(dev: &Dev, group: &str) -> Vec<Value> {
    let (status, body) = dev.api(
        "GET",
        &format!("/v1/groups/{group}/-/memberships"),
        None,
        None,
    );
    assert_eq!(status, 200, "{body}");
    body["memberships"].as_array().cloned().unwrap_or_default()
}

fn state(tf: &Tf) -> Value {
    serde_json::from_str(&tf.ok(&["show", "-json"]).out).expect("terraform show -json")
}

/// The attribute values of the resource at `address` in `terraform show -json`.
fn values<'a>(state: &'a Value, address: &str) -> &'a Value {
    state["values"]["root_module"]["resources"]
        .as_array()
        .and_then(|rs| rs.iter().find(|r| r["address"] == address))
        .map(|r| &r["values"])
        .unwrap_or_else(|| panic!("{address} is not in the state: {state}"))
}

#[test]
fn memberships_live_and_die_with_each_terraform() {
    crate::require_aws!();
    let dev = Dev::start("tfp-member");
    for (version, bin) in terraforms() {
        let group = unique("mem").replace('-', "");
        let group = &group[..group.len().min(20)];
        let tf = Tf::new(&bin, &dev, "tfp-member");
        tf.write(&membership(group, "viewer", "repo:acme/*"));
        tf.apply();
        let granted = memberships(&dev, group);
        assert_eq!(granted.len(), 2, "Terraform {version}: {granted:?}");
        let alice = granted
            .iter()
            .find(|m| m["grantee"]["subject"] == "alice")
            .expect("alice's membership");
        assert_eq!(alice["role"], "viewer");
        assert_eq!(alice["grantee"]["issuer"], "https://idp.example");
        assert_eq!(
            tf.plan().code,
            0,
            "Terraform {version}: a second plan has changes"
        );

        // The API never edits a membership: a new role replaces it.
        tf.write(&membership(group, "maintainer", "repo:acme/*"));
        let plan = tf.plan();
        assert!(
            plan.out.contains("must be replaced"),
            "Terraform {version}: {}",
            plan.out
        );
        tf.apply();
        let granted = memberships(&dev, group);
        assert_eq!(granted.len(), 2, "the old one is revoked: {granted:?}");
        assert!(granted
            .iter()
            .any(|m| m["grantee"]["subject"] == "alice" && m["role"] == "maintainer"));
        assert_eq!(tf.plan().code, 0);

        // An out-of-band revoke is planned for re-creation and re-granted.
        let ci = granted
            .iter()
            .find(|m| m["grantee"]["kind"] == "claim_pattern")
            .unwrap();
        let (status, _) = dev.api(
            "DELETE",
            &format!(
                "/v1/groups/{group}/-/memberships/{}",
                ci["id"].as_str().unwrap()
            ),
            None,
            None,
        );
        assert!(status < 300, "revoke: {status}");
        let plan = tf.plan();
        assert!(
            plan.out.contains("sortie_membership.ci will be created"),
            "Terraform {version}: {}",
            plan.out
        );
        tf.apply();
        assert_eq!(memberships(&dev, group).len(), 2);

        // Import into a fresh state, then no changes.
        let before = state(&tf);
        let ids: Vec<(String, String)> = ["sortie_membership.alice", "sortie_membership.ci"]
            .iter()
            .map(|a| {
                (
                    a.to_string(),
                    values(&before, a)["id"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        std::fs::remove_file(tf.dir.join("terraform.tfstate")).unwrap();
        for (address, id) in &ids {
            tf.ok(&["import", "-input=false", "-no-color", address, id]);
        }
        let plan = tf.plan();
        assert_eq!(
            plan.code, 0,
            "Terraform {version}: imported memberships show changes:\n{}",
            plan.out
        );

        // A bad value is refused at plan time by sortie-core's rule (the API's), naming the
        // attribute.
        tf.write(&membership(group, "maintainer", "repo:[acme"));
        let r = tf.run(&["apply", "-input=false", "-no-color", "-auto-approve"]);
        assert_ne!(r.code, 0);
        assert!(
            r.all().contains("Invalid `pattern`") && r.all().contains("not a valid glob"),
            "Terraform {version}: {}",
            r.all()
        );
        // ... and a grantee missing its pattern is refused at plan time.
        tf.write(&format!(
            "resource \"sortie_membership\" \"x\" {{\n  group = \"{group}\"\n  role = \"viewer\"\n  claim = \"sub\"\n}}\n"
        ));
        let r = tf.run(&["validate", "-no-color"]);
        assert_ne!(r.code, 0);
        assert!(r.all().contains("needs `pattern`"), "{}", r.all());

        // Destroy revokes both.
        tf.write(&membership(group, "maintainer", "repo:acme/*"));
        tf.ok(&["destroy", "-input=false", "-no-color", "-auto-approve"]);
        assert_eq!(
            memberships(&dev, group).len(),
            0,
            "Terraform {version}: destroy left memberships"
        );
        let _ = std::fs::remove_dir_all(&tf.dir);
    }
}

fn pool(group: &str, name: &str) -> String {
    format!("resource \"sortie_agent_pool\" \"p\" {{\n  group = \"{group}\"\n  name  = \"{name}\"\n}}\n")
}

#[test]
fn a_pool_token_stays_out_of_plans_and_is_null_after_import() {
    crate::require_aws!();
    let dev = Dev::start("tfp-pool");
    for (version, bin) in terraforms() {
        let group = unique("pool").replace('-', "");
        let group = &group[..group.len().min(20)];
        let tf = Tf::new(&bin, &dev, "tfp-pool");
        tf.write(&pool(group, "one"));
        let applied = tf.apply();
        let s = state(&tf);
        let token = values(&s, "sortie_agent_pool.p")["token"]
            .as_str()
            .expect("the first token is in the state")
            .to_string();
        assert!(token.len() > 20, "{token}");
        assert!(
            !applied.all().contains(&token),
            "Terraform {version}: apply printed the token"
        );

        // A replacement plan shows the old token only as sensitive.
        tf.write(&pool(group, "two"));
        let plan = tf.plan();
        assert_eq!(plan.code, 2);
        assert!(
            !plan.all().contains(&token),
            "Terraform {version}: the plan printed the token:\n{}",
            plan.all()
        );
        assert!(
            plan.out.contains("(sensitive value)"),
            "Terraform {version}: {}",
            plan.out
        );
        let saved = tf.run(&["plan", "-input=false", "-no-color", "-out=p.plan"]);
        assert_eq!(saved.code, 0, "{}", saved.all());
        let shown = tf.ok(&["show", "-no-color", "p.plan"]);
        assert!(
            !shown.all().contains(&token),
            "Terraform {version}: show printed the token"
        );

        // Import: the token is not readable again, so it stays null.
        let id = values(&s, "sortie_agent_pool.p")["id"]
            .as_str()
            .unwrap()
            .to_string();
        tf.write(&pool(group, "one"));
        std::fs::remove_file(tf.dir.join("terraform.tfstate")).unwrap();
        tf.ok(&[
            "import",
            "-input=false",
            "-no-color",
            "sortie_agent_pool.p",
            &id,
        ]);
        let imported = state(&tf);
        assert!(
            values(&imported, "sortie_agent_pool.p")["token"].is_null(),
            "Terraform {version}: {imported}"
        );
        let plan = tf.plan();
        assert_eq!(
            plan.code,
            0,
            "Terraform {version}: changes after import:\n{}\n{}",
            plan.out,
            tf.ok(&["show", "-json"]).out
        );
        tf.ok(&["destroy", "-input=false", "-no-color", "-auto-approve"]);
        let _ = std::fs::remove_dir_all(&tf.dir);
    }
}
