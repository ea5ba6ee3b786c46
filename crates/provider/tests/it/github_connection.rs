//! `sortie_github_connection` with real Terraform: connected, kept through a second plan
//! (the key and the secret the API never shows again), changed in place, refused without
//! quoting the key, and disconnected.

use std::path::PathBuf;

use serde_json::json;

use crate::common::{terraforms, unique, Dev, Tf};

/// An RSA private key (PEM) the API accepts as an App's.
fn key_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../api/tests/fixtures/oidc/rsa-1.pem")
}

fn config(org: &str, app_id: u64, key: &str) -> String {
    format!(
        r#"
variable "not_a_key" {{
  type      = string
  sensitive = true
  default   = "not-a-pem-key-at-all-4411"
}}

resource "sortie_github_connection" "org" {{
  org            = "{org}"
  app_id         = {app_id}
  private_key    = {key}
  webhook_secret = "whsec-provider-test"
}}

output "webhook_url" {{
  value = sortie_github_connection.org.webhook_url
}}
"#
    )
}

#[test]
fn a_github_connection_is_connected_kept_changed_refused_and_disconnected_with_each_terraform() {
    crate::require_aws!();
    let dev = Dev::start("tfp-ghconn");
    let key = format!("file({:?})", key_file().display().to_string());
    for (version, bin) in terraforms() {
        let org = unique("org").replace('-', "");
        let org = &org[..org.len().min(20)];
        let path = format!("/v1/groups/{org}/-/vcs/github");
        let tf = Tf::new(&bin, &dev, "tfp-ghconn");

        tf.write(&config(org, 1001, &key));
        let applied = tf.apply();
        assert!(
            !applied.all().contains("PRIVATE KEY") && !applied.all().contains("whsec-provider"),
            "Terraform {version}: a secret reached the output:\n{}",
            applied.all()
        );
        let (status, view) = dev.api("GET", &path, None, None);
        assert_eq!(status, 200, "Terraform {version}: {view:#}");
        assert_eq!(view["app_id"], json!(1001));
        assert_eq!(view["api_url"], json!("https://api.github.com"));
        let url = tf.ok(&["output", "-raw", "webhook_url"]);
        assert_eq!(url.out.trim(), view["webhook_url"].as_str().unwrap());
        // The key and the secret are the state's, not the API's: no change.
        let plan = tf.plan();
        assert_eq!(
            plan.code,
            0,
            "Terraform {version}: a second plan has changes:\n{}",
            plan.all()
        );

        // Another App: replaced in place, through the API's PUT.
        tf.write(&config(org, 2002, &key));
        tf.apply();
        let (_, view) = dev.api("GET", &path, None, None);
        assert_eq!(view["app_id"], json!(2002), "Terraform {version}: {view:#}");
        assert_eq!(
            tf.plan().code,
            0,
            "Terraform {version}: kept after a change"
        );

        // A key that is not one (from a sensitive variable, as a real one would be, so that
        // Terraform's own echo of the configuration holds no value): refused on the
        // attribute, never quoted; nothing changes.
        tf.write(&config(org, 3003, "var.not_a_key"));
        let refused = tf.run(&["apply", "-input=false", "-no-color", "-auto-approve"]);
        let said = refused.all();
        assert_ne!(refused.code, 0, "Terraform {version}: {said}");
        assert!(said.contains("private_key"), "Terraform {version}: {said}");
        assert!(
            !said.contains("not-a-pem-key-at-all-4411"),
            "Terraform {version}: the refused key was quoted:\n{said}"
        );
        let (_, view) = dev.api("GET", &path, None, None);
        assert_eq!(view["app_id"], json!(2002), "{view:#}");

        // Disconnected.
        tf.write(&config(org, 2002, &key));
        tf.ok(&["destroy", "-input=false", "-no-color", "-auto-approve"]);
        let (status, view) = dev.api("GET", &path, None, None);
        assert_eq!(status, 404, "Terraform {version}: {view:#}");
    }
}
