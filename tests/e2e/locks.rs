//! Issue 31 end to end (moto, `sortie dev`, the real pilot and the machine's Terraform 1.11
//! with `terraform_data`): a locked environment refuses a job with 409 naming the reason,
//! a group freeze does the same for every environment below it, and after the unlock the
//! job runs and applies a real resource.

use serde_json::{json, Value};

use crate::common::{self, Dev};

const TF: &str = "resource \"terraform_data\" \"app\" {\n  input = \"one\"\n}\n\noutput \"id\" {\n  value = terraform_data.app.id\n}\n";

/// `sortie dev` with org `acme` on a local runner (Terraform >= 1.5, state in a bucket on
/// moto) and two environments: `acme/app/web` and `acme/app/eu/api`.
fn dev() -> Dev {
    // Fails, never skips, without the machine's Terraform 1.11 (`terraform_data`).
    let _ = sortie_testkit::terraform111_bin();
    let dev = common::launch("locks", 1, Some(&common::runner_binary()));
    common::local_runner_on_s3(&dev, "tf111", ">= 1.5", &common::state_bucket());
    for (group, name) in [("acme/app", "web"), ("acme/app/eu", "api")] {
        dev.api(
            "POST",
            &format!("/v1/groups/{group}/-/environments"),
            Some(json!({"name": name, "env_type": "development"})),
        );
    }
    dev
}

fn sortie(dev: &Dev, args: &[&str]) -> common::Out {
    common::sortie(dev, args).into()
}

/// Submits a plan to `env` through the API: the status and the body.
fn submit(dev: &Dev, env: &str) -> (u16, Value) {
    dev.api_with(
        &dev.token,
        "POST",
        &format!("/v1/environments/{env}/-/jobs"),
        Some(json!({"operation": "apply", "files": {"main.tf": TF}})),
    )
}

#[test]
fn a_locked_environment_and_a_frozen_group_refuse_jobs_naming_the_reason() {
    sortie_testkit::require_aws!();
    let dev = dev();

    let out = sortie(
        &dev,
        &["env", "lock", "acme/app/web", "--reason", "incident 42"],
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("locked acme/app/web"), "{out:?}");
    // Who, when (as the CLI prints times, not RFC 3339) and why; `get env` shows it too.
    assert!(
        out.stdout.contains(" UTC: \"incident 42\"") && !out.stdout.contains("Z:"),
        "{out:?}"
    );
    let shown = sortie(&dev, &["get", "env", "acme/app/web"]);
    assert!(
        shown
            .stdout
            .lines()
            .any(|l| l.starts_with("lock:") && l.contains("UTC: \"incident 42\"")),
        "{shown:?}"
    );
    let (status, body) = submit(&dev, "acme/app/web");
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "locked");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("incident 42"),
        "{body}"
    );
    // The CLI's run says so too, and exits non-zero.
    let dir = sortie_testkit::scratch_dir("locks-src").unwrap();
    std::fs::write(dir.join("main.tf"), TF).unwrap();
    let source = dir.display().to_string();
    let out = sortie(&dev, &["run", "apply", "acme/app/web", "--source", &source]);
    assert_ne!(out.code, 0, "{out:?}");
    assert!(out.stderr.contains("incident 42"), "{out:?}");

    let out = sortie(&dev, &["env", "unlock", "acme/app/web"]);
    assert_eq!(out.code, 0, "{out:?}");
    let (status, body) = submit(&dev, "acme/app/web");
    assert_eq!(status, 201, "{body}");
    let job = dev.wait_terminal(body["id"].as_str().unwrap());
    assert_eq!(job["state"], "succeeded", "{job}");

    let out = sortie(
        &dev,
        &["group", "lock", "acme/app", "--reason", "release freeze"],
    );
    assert_eq!(out.code, 0, "{out:?}");
    for env in ["acme/app/web", "acme/app/eu/api"] {
        let (status, body) = submit(&dev, env);
        assert_eq!(status, 409, "{env}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("release freeze") && message.contains("acme/app"),
            "{message}"
        );
    }
    let out = sortie(&dev, &["group", "unlock", "acme/app"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("unlocked acme/app"), "{out:?}");
    let (status, body) = submit(&dev, "acme/app/eu/api");
    assert_eq!(status, 201, "{body}");
    let job = dev.wait_terminal(body["id"].as_str().unwrap());
    assert_eq!(job["state"], "succeeded", "{job}");
}
