//! `sortie_gitlab_connection` with real Terraform: connected, kept through a second plan
//! (the token and the secret the API never shows again), moved to another instance in
//! place, refused without quoting the token, and disconnected.

use serde_json::json;

use crate::common::{terraforms, unique, Dev, Tf};

fn config(org: &str, instance: Option<&str>, token: &str) -> String {
    let instance = instance
        .map(|url| format!("  instance_url   = \"{url}\"\n"))
        .unwrap_or_default();
    format!(
        r#"
variable "not_a_token" {{
  type      = string
  sensitive = true
  default   = "glpat with spaces 5521"
}}

resource "sortie_gitlab_connection" "org" {{
  org            = "{org}"
{instance}  token          = {token}
  webhook_secret = "gitlab-secret-token-provider-test"
}}

output "webhook_url" {{
  value = sortie_gitlab_connection.org.webhook_url
}}

output "issuer" {{
  value = sortie_gitlab_connection.org.issuer
}}
"#
    )
}

#[test]
fn a_gitlab_connection_is_connected_kept_moved_refused_and_disconnected_with_each_terraform() {
    crate::require_aws!();
    let dev = Dev::start("tfp-glconn");
    let token = "\"glpat-provider-test-token-0001\"";
    for (version, bin) in terraforms() {
        let org = unique("org").replace('-', "");
        let org = &org[..org.len().min(20)];
        let path = format!("/v1/groups/{org}/-/vcs/gitlab");
        let tf = Tf::new(&bin, &dev, "tfp-glconn");

        tf.write(&config(org, None, token));
        let applied = tf.apply();
        assert!(
            !applied.all().contains("glpat-provider") && !applied.all().contains("secret-token"),
            "Terraform {version}: a secret reached the output:\n{}",
            applied.all()
        );
        let (status, view) = dev.api("GET", &path, None, None);
        assert_eq!(status, 200, "Terraform {version}: {view:#}");
        assert_eq!(view["instance_url"], json!("https://gitlab.com"));
        let url = tf.ok(&["output", "-raw", "webhook_url"]);
        assert_eq!(url.out.trim(), view["webhook_url"].as_str().unwrap());
        assert!(
            url.out.contains(&format!("/v1/vcs/gitlab/{org}/webhook")),
            "{}",
            url.out
        );
        let issuer = tf.ok(&["output", "-raw", "issuer"]);
        assert_eq!(issuer.out.trim(), view["issuer"].as_str().unwrap());
        // The token and the secret are the state's, not the API's: no change.
        let plan = tf.plan();
        assert_eq!(
            plan.code,
            0,
            "Terraform {version}: a second plan has changes:\n{}",
            plan.all()
        );

        // A self-managed instance: replaced in place, through the API's PUT.
        tf.write(&config(org, Some("https://gitlab.example.com"), token));
        tf.apply();
        let (_, view) = dev.api("GET", &path, None, None);
        assert_eq!(
            view["instance_url"],
            json!("https://gitlab.example.com"),
            "Terraform {version}: {view:#}"
        );
        assert_eq!(
            tf.plan().code,
            0,
            "Terraform {version}: kept after a change"
        );

        // A token that is not one (from a sensitive variable, as a real one would be):
        // refused on the attribute, never quoted; nothing changes.
        tf.write(&config(
            org,
            Some("https://gitlab.example.com"),
            "var.not_a_token",
        ));
        let refused = tf.run(&["apply", "-input=false", "-no-color", "-auto-approve"]);
        let said = refused.all();
        assert_ne!(refused.code, 0, "Terraform {version}: {said}");
        assert!(said.contains("token"), "Terraform {version}: {said}");
        assert!(
            !said.contains("glpat with spaces"),
            "Terraform {version}: the refused token was quoted:\n{said}"
        );

        // Disconnected.
        tf.write(&config(org, Some("https://gitlab.example.com"), token));
        tf.ok(&["destroy", "-input=false", "-no-color", "-auto-approve"]);
        let (status, view) = dev.api("GET", &path, None, None);
        assert_eq!(status, 404, "Terraform {version}: {view:#}");
    }
}
