//! The protocol core with each Terraform: the handshake and AutoMTLS, the schema, and the
//! provider's configuration.

use crate::common::{terraforms, Dev, Tf};

#[test]
fn each_terraform_loads_the_provider_and_validates_an_empty_configuration() {
    crate::require_aws!();
    let dev = Dev::start("tfp-proto");
    for (version, bin) in terraforms() {
        let tf = Tf::new(&bin, &dev, "tfp-proto");
        tf.write("");
        tf.ok(&["validate", "-no-color"]);
        let plan = tf.plan();
        assert_eq!(
            plan.code,
            0,
            "Terraform {version}: an empty plan has no changes:\n{}",
            plan.all()
        );
        let schema = tf.ok(&["providers", "schema", "-json"]);
        let v: serde_json::Value = serde_json::from_str(&schema.out).unwrap();
        let provider = v["provider_schemas"]
            .as_object()
            .and_then(|m| m.values().next())
            .unwrap_or_else(|| panic!("Terraform {version}: no provider schema in {}", schema.out));
        for r in [
            "sortie_environment",
            "sortie_runner",
            "sortie_runner_rule",
            "sortie_agent_pool",
        ] {
            assert!(
                provider["resource_schemas"][r].is_object(),
                "Terraform {version}: {r} missing"
            );
        }
        assert_eq!(
            provider["resource_schemas"]["sortie_environment"]["block"]["attributes"]["labels"]
                ["type"],
            serde_json::json!(["map", "string"])
        );
    }
}

#[test]
fn a_missing_api_url_is_a_clear_error() {
    crate::require_aws!();
    let dev = Dev::start("tfp-noconf");
    let (_, bin) = terraforms().remove(0);
    let tf = Tf::new(&bin, &dev, "tfp-noconf");
    tf.write("data \"sortie_runner\" \"r\" {\n  id = \"acme/none\"\n}\n");
    let r = std::process::Command::new(&tf.bin)
        .args(["plan", "-no-color", "-input=false"])
        .current_dir(&tf.dir)
        .env("TF_CLI_CONFIG_FILE", tf.dir.join("terraformrc"))
        .env_remove("SORTIE_API_URL")
        .env_remove("SORTIE_TOKEN")
        .output()
        .unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&r.stdout),
        String::from_utf8_lossy(&r.stderr)
    );
    assert!(!r.status.success());
    assert!(all.contains("SORTIE_API_URL"), "{all}");
}

/// With each real Terraform, no API needed: plain `http://` to a host that is not this
/// machine is refused on `api_url` (the token would travel in clear), and a failing
/// `token_command` is reported with its exit status but none of its stderr.
#[test]
fn cleartext_api_url_is_refused_and_a_failing_token_commands_stderr_is_withheld() {
    // Terraform comes with the AWS tier (scripts/with-moto.sh); the fast tier skips.
    crate::require_aws!();
    for (version, bin) in terraforms() {
        let tf = Tf::offline(&bin, "tfp-conf");
        let main = |provider: &str| {
            let text = format!(
                "terraform {{\n  required_providers {{\n    sortie = {{ source = \"sortie/sortie\" }}\n  }}\n}}\n\nprovider \"sortie\" {{\n{provider}\n}}\n\ndata \"sortie_runner\" \"r\" {{\n  id = \"acme/none\"\n}}\n"
            );
            std::fs::write(tf.dir.join("main.tf"), text).unwrap();
            let r = tf.run(&["plan", "-no-color", "-input=false"]);
            // Terraform wraps a diagnostic's text: compare with whitespace made one space.
            let all = r.all().split_whitespace().collect::<Vec<_>>().join(" ");
            (r.code, all)
        };
        let (code, all) = main("  api_url = \"http://192.0.2.10:8080\"\n  token   = \"t\"");
        assert_ne!(
            code, 0,
            "Terraform {version}: plain http to another host configures"
        );
        assert!(
            all.contains("`api_url`") && all.contains("in clear"),
            "Terraform {version}:\n{all}"
        );
        // The secret is made by the command, so only its stderr could show it whole.
        let (code, all) = main(
            "  api_url       = \"http://127.0.0.1:9\"\n  token_command = \"printf 'S3cret-%s-value\\\\n' tok >&2; exit 4\"",
        );
        assert_ne!(
            code, 0,
            "Terraform {version}: a failing token_command configures"
        );
        assert!(
            !all.contains("S3cret-tok-value"),
            "Terraform {version}: stderr shown:\n{all}"
        );
        assert!(
            all.contains("exit status: 4") && all.contains("withheld"),
            "Terraform {version}:\n{all}"
        );
        let _ = std::fs::remove_dir_all(&tf.dir);
    }
}
