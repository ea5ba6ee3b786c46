//! `sortie_environment`'s expiry and trigger attributes with real Terraform: set, kept
//! through a second plan (a `ttl` the API stores in another spelling, the defaults it
//! leaves out), an extension outside Terraform kept, cleared, and the data source's
//! upstream and downstream.

use serde_json::json;

use crate::common::{terraforms, unique, Dev, Tf};

fn config(group: &str, down: &str) -> String {
    format!(
        r#"
resource "sortie_runner" "local" {{
  group       = "{group}"
  name        = "local"
  description = "managed by terraform"
  local {{
    timeout_seconds = 600
  }}
  state_local {{
    directory = "/tmp/sortie-tfp-state"
  }}
}}

resource "sortie_runner_rule" "default" {{
  scope     = "{group}"
  rule_id   = "default"
  runner_id = sortie_runner.local.id
}}

resource "sortie_environment" "up" {{
  group      = "{group}"
  name       = "up"
  env_type   = "dev"
  depends_on = [sortie_runner_rule.default]
}}

resource "sortie_environment" "down" {{
  group      = "{group}"
  name       = "down"
  env_type   = "dev"
  depends_on = [sortie_runner_rule.default]
{down}
}}

data "sortie_environment" "up" {{
  path       = sortie_environment.up.id
  depends_on = [sortie_environment.down]
}}

output "downstream" {{
  value = join(",", data.sortie_environment.up.downstream)
}}
"#
    )
}

const FOLLOWS: &str = r#"
  ttl               = "72h"
  ttl_from          = "last_apply"
  triggers          = [sortie_environment.up.id]
  trigger_operation = "apply"
  trigger_inputs    = ["vpc_id"]
"#;

#[test]
fn expiry_and_triggers_are_set_kept_and_cleared_with_each_terraform() {
    crate::require_aws!();
    let dev = Dev::start("tfp-envlife");
    for (version, bin) in terraforms() {
        let group = unique("org").replace('-', "");
        let group = &group[..group.len().min(20)];
        let tf = Tf::new(&bin, &dev, "tfp-envlife");
        tf.write(&config(group, FOLLOWS));
        tf.apply();
        let (_, down) = dev.api("GET", &format!("/v1/environments/{group}/down"), None, None);
        assert_eq!(down["ttl"], json!("3d"), "Terraform {version}: {down:#}");
        assert_eq!(down["ttl_from"], json!("last_apply"));
        assert_eq!(down["triggers"], json!([format!("{group}/up")]));
        assert_eq!(down["trigger_operation"], json!("apply"));
        assert_eq!(down["trigger_inputs"], json!(["vpc_id"]));
        let out = tf.ok(&["output", "-raw", "downstream"]);
        assert_eq!(
            out.out.trim(),
            format!("{group}/down"),
            "Terraform {version}"
        );
        // `72h` stored as `3d`, and the defaults the API leaves out: no change.
        let plan = tf.plan();
        assert_eq!(
            plan.code,
            0,
            "Terraform {version}: a second plan has changes:\n{}",
            plan.all()
        );

        // An extension outside Terraform is an end Terraform keeps.
        let (status, extended) = dev.api(
            "POST",
            &format!("/v1/environments/{group}/down/-/extend"),
            Some(&json!({"by": "24h"})),
            None,
        );
        assert_eq!(status, 200, "{extended:#}");
        let plan = tf.plan();
        assert_eq!(
            plan.code,
            0,
            "Terraform {version}: an extension shows as a change:\n{}",
            plan.all()
        );
        // A refresh records it in the state (a plan does not write the state).
        tf.ok(&[
            "apply",
            "-refresh-only",
            "-auto-approve",
            "-input=false",
            "-no-color",
        ]);
        let state = tf.ok(&["state", "show", "-no-color", "sortie_environment.down"]);
        assert!(state.out.contains("expires_at"), "{}", state.out);
        assert_eq!(
            tf.plan().code,
            0,
            "Terraform {version}: the extended end is kept"
        );

        // Cleared: no ttl, no triggers; the trigger settings go with them.
        tf.write(&config(group, ""));
        tf.apply();
        let (_, down) = dev.api("GET", &format!("/v1/environments/{group}/down"), None, None);
        assert!(down.get("ttl").is_none(), "Terraform {version}: {down:#}");
        assert!(down.get("triggers").is_none(), "{down:#}");
        assert!(down.get("trigger_inputs").is_none(), "{down:#}");
        let out = tf.ok(&["output", "-raw", "downstream"]);
        assert_eq!(
            out.out.trim(),
            "",
            "Terraform {version}: no downstream left"
        );
        let plan = tf.plan();
        assert_eq!(
            plan.code,
            0,
            "Terraform {version}: changes after clearing:\n{}",
            plan.all()
        );
        tf.ok(&["destroy", "-input=false", "-no-color", "-auto-approve"]);
    }
}
