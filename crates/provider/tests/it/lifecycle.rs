//! Every resource type through its life with real Terraform: create, no changes on a second
//! plan, update in place, replacement, out-of-band change and delete, a concurrent change
//! between plan and apply, import, a bad attribute refused by sortie-core's rule (the API's),
//! the pool token kept out of the plan, and destroy.

use serde_json::json;

use crate::common::{terraforms, unique, Dev, Tf};

fn config(group: &str, env_labels: &str, runner_timeout: u32, pool_name: &str) -> String {
    format!(
        r#"
resource "sortie_agent_pool" "pool" {{
  group = "{group}"
  name  = "{pool_name}"
}}

resource "sortie_runner" "local" {{
  group       = "{group}"
  name        = "local"
  description = "managed by terraform"
  local {{
    timeout_seconds = {runner_timeout}
    env             = {{ A = "1" }}
  }}
  state_local {{
    directory = "/tmp/sortie-tfp-state"
  }}
  identity {{
    audience           = "sts.amazonaws.com"
    aws_plan_role_arn  = "arn:aws:iam::123456789012:role/read"
    aws_apply_role_arn = "arn:aws:iam::123456789012:role/write"
  }}
}}

resource "sortie_runner_rule" "default" {{
  scope     = "{group}"
  rule_id   = "default"
  runner_id = sortie_runner.local.id
}}

resource "sortie_environment" "dev" {{
  group    = "{group}"
  name     = "dev"
  env_type = "dev"
  labels   = {env_labels}
  tags     = ["a", "b"]
  depends_on = [sortie_runner_rule.default]
}}

data "sortie_environment" "dev" {{
  path = sortie_environment.dev.id
}}

output "runner_of_dev" {{
  value = data.sortie_environment.dev.runner_id
}}
"#
    )
}

#[test]
fn every_resource_lives_and_dies_with_each_terraform() {
    crate::require_aws!();
    let dev = Dev::start("tfp-life");
    for (version, bin) in terraforms() {
        let group = unique("org").replace('-', "");
        let group = &group[..group.len().min(20)];
        let tf = Tf::new(&bin, &dev, "tfp-life");
        let labels = r#"{ team = "payments", tier = "1" }"#;
        tf.write(&config(group, labels, 600, "pool1"));

        // Create, then nothing to do.
        let applied = tf.apply();
        assert!(
            !applied.out.contains("sortie-pool-"),
            "Terraform {version}: the pool token leaked:\n{}",
            applied.out
        );
        let out = tf.ok(&["output", "-raw", "runner_of_dev"]);
        assert_eq!(
            out.out.trim(),
            format!("{group}/local"),
            "Terraform {version}"
        );
        let plan = tf.plan();
        assert_eq!(
            plan.code,
            0,
            "Terraform {version}: a second plan has changes:\n{}",
            plan.all()
        );
        let (_, env) = dev.api("GET", &format!("/v1/environments/{group}/dev"), None, None);
        assert_eq!(
            env["labels"],
            json!({"team": "payments", "tier": "1"}),
            "Terraform {version}"
        );

        // Update in place (labels, a runner's nested setting).
        tf.write(&config(group, r#"{ team = "cards" }"#, 900, "pool1"));
        let plan = tf.plan();
        assert!(
            plan.out.contains("updated in-place") || plan.out.contains("will be updated"),
            "{}",
            plan.out
        );
        assert!(
            !plan.out.contains("must be replaced"),
            "Terraform {version}: {}",
            plan.out
        );
        tf.apply();
        let (_, env) = dev.api("GET", &format!("/v1/environments/{group}/dev"), None, None);
        assert_eq!(env["labels"], json!({"team": "cards"}));
        let (_, runner) = dev.api(
            "GET",
            &format!("/v1/groups/{group}/-/runners/local"),
            None,
            None,
        );
        assert_eq!(
            runner["runner_configuration"]["timeout_seconds"],
            json!(900)
        );
        assert_eq!(
            runner["identity"],
            json!({"audience": "sts.amazonaws.com", "aws": {
                "plan_role_arn": "arn:aws:iam::123456789012:role/read",
                "apply_role_arn": "arn:aws:iam::123456789012:role/write"}}),
            "Terraform {version}: the identity block"
        );
        assert_eq!(
            tf.plan().code,
            0,
            "Terraform {version}: changes after the update"
        );

        // Replacement: a pool's name cannot change in place.
        tf.write(&config(group, r#"{ team = "cards" }"#, 900, "pool2"));
        let plan = tf.plan();
        assert!(
            plan.out.contains("must be replaced"),
            "Terraform {version}: {}",
            plan.out
        );
        tf.apply();
        assert_eq!(tf.plan().code, 0);

        // An out-of-band change shows in the next plan and apply puts it back.
        let (_, env) = dev.api("GET", &format!("/v1/environments/{group}/dev"), None, None);
        let (status, _) = dev.api(
            "PATCH",
            &format!("/v1/environments/{group}/dev"),
            Some(&json!({"labels": {"team": "rogue"}})),
            Some(env["version"].as_u64().unwrap()),
        );
        assert_eq!(status, 200, "Terraform {version}: the out-of-band change");
        let plan = tf.plan();
        assert_eq!(
            plan.code, 2,
            "Terraform {version}: the out-of-band change is not seen:\n{}",
            plan.out
        );
        assert!(plan.out.contains("rogue"), "{}", plan.out);
        tf.apply();
        let (_, env) = dev.api("GET", &format!("/v1/environments/{group}/dev"), None, None);
        assert_eq!(env["labels"], json!({"team": "cards"}));

        // A concurrent change between plan and apply is refused, never overwritten.
        tf.write(&config(
            group,
            r#"{ team = "cards", x = "y" }"#,
            900,
            "pool2",
        ));
        tf.ok(&["plan", "-input=false", "-no-color", "-out=saved.plan"]);
        let (status, _) = dev.api(
            "PATCH",
            &format!("/v1/environments/{group}/dev"),
            Some(&json!({"labels": {"team": "other"}})),
            Some(env["version"].as_u64().unwrap()),
        );
        assert_eq!(status, 200);
        let r = tf.run(&["apply", "-input=false", "-no-color", "saved.plan"]);
        assert_ne!(
            r.code, 0,
            "Terraform {version}: a concurrent change was overwritten"
        );
        assert!(r.all().contains("changed outside Terraform"), "{}", r.all());
        let (_, env) = dev.api("GET", &format!("/v1/environments/{group}/dev"), None, None);
        assert_eq!(
            env["labels"],
            json!({"team": "other"}),
            "the concurrent change stands"
        );
        tf.apply();

        // An out-of-band delete is re-created.
        let (status, _) = dev.api(
            "DELETE",
            &format!("/v1/environments/{group}/dev"),
            None,
            None,
        );
        assert!(status < 300, "delete: {status}");
        let plan = tf.plan();
        assert!(
            plan.out.contains("will be created"),
            "Terraform {version}: {}",
            plan.out
        );
        tf.apply();

        // Import each type into a fresh state, then no changes.
        std::fs::remove_file(tf.dir.join("terraform.tfstate")).unwrap();
        for (address, id) in [
            ("sortie_runner.local", format!("{group}/local")),
            ("sortie_runner_rule.default", format!("{group}/default")),
            ("sortie_environment.dev", format!("{group}/dev")),
        ] {
            tf.ok(&["import", "-input=false", "-no-color", address, &id]);
        }
        // (The pool's token is not readable after creation: it is replaced rather than imported here.)
        let plan = tf.plan();
        assert!(
            !plan.out.contains("sortie_environment.dev will be")
                && !plan.out.contains("sortie_runner.local will be"),
            "Terraform {version}: imported objects show changes:\n{}",
            plan.out
        );

        // A bad attribute is refused by sortie-core's rule (the API's), naming the attribute.
        let bad = format!("{}\nresource \"sortie_environment\" \"bad\" {{\n  group = \"{group}\"\n  name = \"Bad Name!\"\n  env_type = \"dev\"\n}}\n", config(group, r#"{ team = "cards" }"#, 900, "pool2"));
        tf.write(&bad);
        let r = tf.run(&["apply", "-input=false", "-no-color", "-auto-approve"]);
        assert_ne!(r.code, 0);
        assert!(
            r.all().contains("Invalid `name`"),
            "Terraform {version}: {}",
            r.all()
        );

        // Destroy removes everything.
        tf.write(&config(group, r#"{ team = "cards" }"#, 900, "pool2"));
        tf.ok(&["destroy", "-input=false", "-no-color", "-auto-approve"]);
        let (status, _) = dev.api("GET", &format!("/v1/environments/{group}/dev"), None, None);
        assert_eq!(status, 404, "Terraform {version}");
        let (status, _) = dev.api(
            "GET",
            &format!("/v1/groups/{group}/-/runners/local"),
            None,
            None,
        );
        assert_eq!(status, 404, "Terraform {version}");
        let _ = std::fs::remove_dir_all(&tf.dir);
    }
}
