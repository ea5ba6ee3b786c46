//! `sortie_notification_destination` with each Terraform: create (the signing secret made
//! once, kept in the state, readable as a sensitive output), no changes, update in place,
//! an address inside refused in the API's words naming `url`, import, destroy.

use crate::common::{terraforms, unique, Dev, Tf};

fn config(group: &str, url: &str, description: &str) -> String {
    format!(
        "resource \"sortie_notification_destination\" \"d\" {{\n  group = \"{group}\"\n  name = \"ops\"\n  type = \"webhook\"\n  url = \"{url}\"\n  events = [\"job_failed\", \"awaiting_approval\"]\n  environments = \"{group}/**\"\n  description = \"{description}\"\n}}\n\noutput \"secret\" {{\n  value = sortie_notification_destination.d.signing_secret\n  sensitive = true\n}}\n"
    )
}

#[test]
fn notification_destinations_live_and_die_with_each_terraform() {
    crate::require_aws!();
    let dev = Dev::start("tfp-notify");
    for (version, bin) in terraforms() {
        let group = unique("ntf").replace('-', "");
        let group = &group[..group.len().min(20)];
        let at = format!("/v1/groups/{group}/-/notifications/ops");
        let url = "https://hooks.example.com/sortie";
        let tf = Tf::new(&bin, &dev, "tfp-notify");
        tf.write(&config(group, url, "on call"));
        tf.apply();
        let (status, made) = dev.api("GET", &at, None, None);
        assert_eq!(status, 200, "Terraform {version}: {made}");
        assert_eq!(made["url"], url);
        assert_eq!(
            made["events"],
            serde_json::json!(["job_failed", "awaiting_approval"])
        );
        assert!(made.get("signing_secret").is_none(), "{made}");
        // The secret shown once is the state's, for the receiver's configuration.
        let secret = tf.ok(&["output", "-raw", "secret"]).out;
        assert!(
            secret.starts_with("whsec_") && secret.len() == 70,
            "Terraform {version}: {secret}"
        );
        assert_eq!(tf.plan().code, 0, "Terraform {version}: no changes");

        // Update in place; the secret stays.
        tf.write(&config(group, url, "on call, weekdays"));
        let plan = tf.plan();
        assert!(
            plan.out.contains("updated in-place") && !plan.out.contains("must be replaced"),
            "Terraform {version}: {}",
            plan.out
        );
        tf.apply();
        let (_, updated) = dev.api("GET", &at, None, None);
        assert_eq!(updated["description"], "on call, weekdays");
        assert_eq!(tf.ok(&["output", "-raw", "secret"]).out, secret);
        assert_eq!(tf.plan().code, 0);

        // An address inside: the API's words, naming `url`.
        tf.write(&config(group, "https://169.254.169.254/latest", "x"));
        let r = tf.run(&["apply", "-input=false", "-no-color", "-auto-approve"]);
        assert_ne!(r.code, 0);
        assert!(
            r.all().contains("`url`") && r.all().contains("169.254.169.254"),
            "Terraform {version}: {}",
            r.all()
        );
        tf.write(&config(group, url, "on call, weekdays"));

        // Import, then no changes.
        std::fs::remove_file(tf.dir.join("terraform.tfstate")).unwrap();
        tf.ok(&[
            "import",
            "-input=false",
            "-no-color",
            "sortie_notification_destination.d",
            &format!("{group}/ops"),
        ]);
        let plan = tf.plan();
        assert_eq!(
            plan.code, 0,
            "Terraform {version}: after import:\n{}",
            plan.out
        );

        tf.ok(&["destroy", "-input=false", "-no-color", "-auto-approve"]);
        let (status, _) = dev.api("GET", &at, None, None);
        assert_eq!(status, 404, "Terraform {version}: destroy left it");
        let _ = std::fs::remove_dir_all(&tf.dir);
    }
}
