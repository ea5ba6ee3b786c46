//! examples/two-environments end to end: the platform (runner, rule, two environments)
//! applied with the provider, a real apply of environment A through `sortie dev` and the
//! pilot (Terraform 1.11's `terraform_data`), then environment B's code reading A's outputs
//! with each Terraform; A's sensitive output never reaches B's plan, output or state.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common::{sortie_binary, terraforms, Dev, Tf};

/// The value of `db_password` in examples/two-environments/network.
const SECRET: &str = "pw-SECRET-network-7f3a";

fn example(part: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/two-environments")
        .join(part)
}

/// A Terraform directory holding a copy of the example's `part` (its own state).
fn copy(tf: &Tf, part: &str) {
    let text = std::fs::read_to_string(example(part).join("main.tf")).unwrap();
    std::fs::write(tf.dir.join("main.tf"), text).unwrap();
}

#[test]
fn environment_b_reads_environment_a_outputs() {
    crate::require_aws!();
    let (_, tf111) = terraforms().pop().expect("Terraform 1.11");
    let pilot = PathBuf::from(env!("CARGO_BIN_EXE_terraform-provider-sortie"))
        .with_file_name("sortie-pilot");
    assert!(
        pilot.is_file(),
        "{} is missing: build it (`cargo build -p sortie-pilot`)",
        pilot.display()
    );
    // The pilot runs A with Terraform 1.11 (`terraform_data`), passed as SORTIE_TERRAFORM.
    std::env::set_var("SORTIE_TERRAFORM", &tf111);
    let dev = Dev::start_with("tfp-two", &["--runner".as_ref(), pilot.as_os_str()]);

    let platform = Tf::new(&tf111, &dev, "tfp-two-platform");
    copy(&platform, "platform");
    let state_dir = dev.dir.join("state");
    let var = format!("-var=state_directory={}", state_dir.display());
    platform.ok(&["apply", "-input=false", "-no-color", "-auto-approve", &var]);
    let r = platform.run(&[
        "plan",
        "-input=false",
        "-no-color",
        "-detailed-exitcode",
        &var,
    ]);
    assert_eq!(
        r.code,
        0,
        "the platform has changes after apply:\n{}",
        r.all()
    );

    // A real apply of environment A, by Sortie.
    let out = Command::new(sortie_binary())
        .args(["run", "apply", "acme/network", "--source"])
        .arg(example("network"))
        .args(["--wait"])
        .env("SORTIE_API_URL", &dev.url)
        .env("SORTIE_TOKEN", &dev.token)
        .env("SORTIE_CONFIG", dev.dir.join("config.yaml"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "sortie run apply acme/network:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // Environment B's code reads A's outputs, with each Terraform.
    for (version, bin) in terraforms() {
        let app = Tf::new(&bin, &dev, "tfp-two-app");
        copy(&app, "app");
        let plan = app.run(&["plan", "-input=false", "-no-color"]);
        assert_eq!(plan.code, 0, "Terraform {version}: {}", plan.all());
        assert!(
            plan.out.contains("vpc-0a1b2c3d"),
            "Terraform {version}: {}",
            plan.out
        );
        assert!(
            !plan.all().contains(SECRET),
            "Terraform {version}: the plan shows A's secret"
        );
        let applied = app.ok(&["apply", "-input=false", "-no-color", "-auto-approve"]);
        assert!(!applied.all().contains(SECRET));
        let outputs: Value =
            serde_json::from_str(&app.ok(&["output", "-json"]).out).expect("output -json");
        assert_eq!(
            outputs["vpc_id"]["value"], "vpc-0a1b2c3d",
            "Terraform {version}"
        );
        assert_eq!(
            outputs["subnets"]["value"],
            serde_json::json!(["10.0.1.0/24", "10.0.2.0/24"])
        );
        assert_eq!(
            outputs["network_secrets"]["value"],
            serde_json::json!(["db_password"]),
            "Terraform {version}: A's sensitive output is named"
        );
        let shown = app.ok(&["show", "-json"]).out;
        assert!(
            !shown.contains(SECRET),
            "Terraform {version}: B's state holds A's secret"
        );
        let state = std::fs::read_to_string(app.dir.join("terraform.tfstate")).unwrap();
        assert!(
            !state.contains(SECRET),
            "Terraform {version}: B's state file holds A's secret"
        );
        let _ = std::fs::remove_dir_all(&app.dir);
    }
    platform.ok(&[
        "destroy",
        "-input=false",
        "-no-color",
        "-auto-approve",
        &var,
    ]);
    let _ = std::fs::remove_dir_all(&platform.dir);
}
