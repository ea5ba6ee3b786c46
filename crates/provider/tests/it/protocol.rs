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
