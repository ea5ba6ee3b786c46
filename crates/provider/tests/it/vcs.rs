//! `sortie_environment`'s `vcs` block with real Terraform: a binding set, kept through a
//! second plan (the defaults the API leaves out, a directory it trims), changed, refused
//! with the field named, and removed.

use serde_json::json;

use crate::common::{terraforms, unique, Dev, Tf};

fn config(group: &str, vcs: &str) -> String {
    format!(
        r#"
resource "sortie_runner" "local" {{
  group = "{group}"
  name  = "local"
  local {{}}
  state_local {{
    directory = "/tmp/sortie-tfp-state"
  }}
}}

resource "sortie_runner_rule" "default" {{
  scope     = "{group}"
  rule_id   = "default"
  runner_id = sortie_runner.local.id
}}

resource "sortie_environment" "prod" {{
  group      = "{group}"
  name       = "prod"
  env_type   = "prod"
  depends_on = [sortie_runner_rule.default]
{vcs}
}}
"#
    )
}

const BOUND: &str = r#"
  vcs {
    repository = "acme/infra"
    directory  = "envs/prod/"
    requirements {
      approved  = 2
      mergeable = true
    }
  }
"#;

const BEFORE_MERGE: &str = r#"
  vcs {
    repository    = "acme/infra"
    directory     = "envs/prod"
    branch        = "release"
    when_modified = ["envs/prod/**", "modules/**"]
    apply         = "before_merge"
  }
"#;

const NOT_A_REPOSITORY: &str = r#"
  vcs {
    repository = "not a repository"
  }
"#;

#[test]
fn a_repository_binding_is_set_kept_changed_refused_and_removed_with_each_terraform() {
    crate::require_aws!();
    let dev = Dev::start("tfp-vcs");
    for (version, bin) in terraforms() {
        let group = unique("org").replace('-', "");
        let group = &group[..group.len().min(20)];
        let env = format!("/v1/environments/{group}/prod");
        let tf = Tf::new(&bin, &dev, "tfp-vcs");

        tf.write(&config(group, BOUND));
        tf.apply();
        let (_, view) = dev.api("GET", &env, None, None);
        assert_eq!(
            view["vcs"],
            json!({
                "repository": "acme/infra",
                "directory": "envs/prod",
                "requirements": {"approved": 2, "mergeable": true},
            }),
            "Terraform {version}: {view:#}"
        );
        // The defaults the API leaves out and the trimmed directory: no change.
        let plan = tf.plan();
        assert_eq!(
            plan.code,
            0,
            "Terraform {version}: a second plan has changes:\n{}",
            plan.all()
        );

        // Changed in place: another branch, globs, applied before merge, no requirements.
        tf.write(&config(group, BEFORE_MERGE));
        tf.apply();
        let (_, view) = dev.api("GET", &env, None, None);
        assert_eq!(
            view["vcs"],
            json!({
                "repository": "acme/infra",
                "directory": "envs/prod",
                "branch": "release",
                "when_modified": ["envs/prod/**", "modules/**"],
                "apply": "before_merge",
            }),
            "Terraform {version}: {view:#}"
        );
        assert_eq!(
            tf.plan().code,
            0,
            "Terraform {version}: kept after a change"
        );

        // Refused by the API, naming the attribute; the binding stays as it was.
        tf.write(&config(group, NOT_A_REPOSITORY));
        let refused = tf.run(&["apply", "-input=false", "-no-color", "-auto-approve"]);
        assert_ne!(refused.code, 0, "Terraform {version}: {}", refused.all());
        let said = refused.all();
        assert!(
            said.contains("must be `owner/name`")
                && said.contains("in resource \"sortie_environment\" \"prod\""),
            "Terraform {version}: the API's reason on the resource:\n{said}"
        );
        let (_, view) = dev.api("GET", &env, None, None);
        assert_eq!(view["vcs"]["apply"], json!("before_merge"), "{view:#}");

        // Removed: no block, no binding.
        tf.write(&config(group, ""));
        tf.apply();
        let (_, view) = dev.api("GET", &env, None, None);
        assert!(view.get("vcs").is_none(), "Terraform {version}: {view:#}");
        assert_eq!(tf.plan().code, 0, "Terraform {version}: kept after removal");
        tf.ok(&["destroy", "-input=false", "-no-color", "-auto-approve"]);
    }
}
