//! Issue 28's policy gate end to end through `sortie dev`: real `sortie-pilot` runners,
//! real Terraform 1.0.3 (and 0.11.11 for plan data that is unavailable), moto, and policy
//! sets made through the API. Each environment is labelled so exactly one set applies.

use std::time::Duration;

use serde_json::{json, Value};

use crate::dev::{grant, hello_files, setup_tf1, state_bucket, try_read_state, Dev, Names};

const LIMIT: Duration = Duration::from_secs(120);

/// A set at `acme` for environments labelled `policy: <label>`, whose `deny` refuses
/// the `message` output the hello example sets, and whose `warn` says it changes.
fn policy_set(dev: &Dev, name: &str, enforcement: &str, label: &str) {
    let rego = "package hello\n\ndeny contains \"the message output may not be set\" if {\n  input.plan.output_changes.message\n}\n";
    let rego = if enforcement == "advisory" {
        format!("{rego}\nwarn contains \"outputs change\" if {{\n  input.plan.output_changes\n}}\n")
    } else {
        rego.to_string()
    };
    dev.ok(
        "POST",
        &format!("/v1/groups/acme/-/policy-sets/{name}"),
        Some(json!({
            "enforcement": enforcement,
            "criteria": {"labels": {"policy": label}},
            "modules": [{"name": "hello", "rego": rego}],
        })),
    );
}

fn apply_as(dev: &Dev, user: &str, env: &str) -> String {
    let (status, v) = dev.api_as(
        user,
        "POST",
        &format!("/v1/environments/acme/demo/{env}/-/jobs"),
        Some(json!({"operation": "apply", "files": hello_files(), "variables": {"greeting": "gated"}})),
    );
    assert_eq!(status, 201, "{v}");
    v["id"].as_str().unwrap().to_string()
}

fn not_running(j: &Value) -> bool {
    !["queued", "dispatching", "running"].contains(&j["state"].as_str().unwrap_or_default())
}

#[test]
fn the_policy_gate_fails_holds_or_lets_an_apply_go_on_by_enforcement() {
    sortie_testkit::require_aws!();
    let dev = Dev::launch(&Names::fresh(), &["--user", "dave", "--user", "mia"]);
    grant(&dev, "dave", "deployer");
    grant(&dev, "mia", "maintainer");
    let bucket = state_bucket();
    for (env, label) in [
        ("strict", "strict"),
        ("held", "review"),
        ("advised", "advice"),
    ] {
        setup_tf1(&dev, &bucket, env, json!({"labels": {"policy": label}}));
    }
    policy_set(&dev, "strict", "mandatory", "strict");
    policy_set(&dev, "owners", "review", "review");
    policy_set(&dev, "advice", "advisory", "advice");

    // Mandatory: the apply fails at its plan's end; nothing was applied.
    let id = apply_as(&dev, "dave", "strict");
    let failed = dev.wait_terminal(&id, LIMIT);
    assert_eq!(failed["state"], "failed", "{failed}");
    assert_eq!(
        failed["review"]["policy_only"], true,
        "two phases: {failed}"
    );
    let reason = failed["transitions"].as_array().unwrap().last().unwrap()["reason"].clone();
    assert_eq!(
        reason, "policy_denied: acme/strict: the message output may not be set",
        "{failed}"
    );
    assert_eq!(failed["policy"]["status"], "denied", "{failed}");
    assert!(
        try_read_state(&bucket, "sortie/acme/demo/strict/terraform.tfstate").is_none(),
        "a denied apply wrote state"
    );
    // The release follows the job's end (its record is written first).
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let env = dev.ok("GET", "/v1/environments/acme/demo/strict", None);
        if env.get("active_job").is_none() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the lock is never released: {env}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // Review: an auto apply is held; a deployer may not approve it, a maintainer may.
    let id = apply_as(&dev, "dave", "held");
    let held = dev.wait_job(&id, LIMIT, "held for review", not_running);
    assert_eq!(held["state"], "awaiting_approval", "{held}");
    assert_eq!(
        held["policy"]["sets"][0]["deny"][0],
        "the message output may not be set"
    );
    assert!(try_read_state(&bucket, "sortie/acme/demo/held/terraform.tfstate").is_none());
    let (status, refused) = dev.api_as("dave", "POST", &format!("/v1/jobs/{id}/approve"), None);
    assert_eq!(status, 403, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("maintainer"),
        "{refused}"
    );
    let (status, approved) = dev.api_as(
        "mia",
        "POST",
        &format!("/v1/jobs/{id}/approve"),
        Some(json!({"comment": "accepted risk"})),
    );
    assert_eq!(status, 200, "{approved}");
    let done = dev.wait_terminal(&id, LIMIT);
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(
        done["review"]["decision"]["overrode_policy"], true,
        "{done}"
    );
    assert_eq!(done["review"]["decision"]["by"], "mia");
    assert!(try_read_state(&bucket, "sortie/acme/demo/held/terraform.tfstate").is_some());

    // Advisory: recorded, and the apply goes on by itself.
    let id = apply_as(&dev, "dave", "advised");
    let done = dev.wait_terminal(&id, LIMIT);
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(done["policy"]["status"], "warned", "{done}");
    assert_eq!(done["review"]["decision"]["by"], "sortie:policy", "{done}");
    assert_eq!(
        done["policy"]["sets"][0]["warn"][0], "outputs change",
        "{done}"
    );
    assert!(try_read_state(&bucket, "sortie/acme/demo/advised/terraform.tfstate").is_some());

    // `sortie job get` shows the result.
    let out = std::process::Command::new(sortie_tests::sortie())
        .args(["job", "get", &id])
        .env("SORTIE_API_URL", &dev.url)
        .env("SORTIE_TOKEN", &dev.token)
        .env(
            "SORTIE_CONFIG",
            std::env::temp_dir().join("sortie-policy-gate-no-config.yaml"),
        )
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("policy"), "{text}");
    assert!(
        text.contains("acme/advice (advisory): outputs change"),
        "{text}"
    );
}

#[test]
fn terraform_0_11_has_no_plan_data_and_on_unavailable_decides() {
    sortie_testkit::require_aws!();
    let dev = Dev::start();
    let bucket = state_bucket();
    // The default local runner: terraform 0.11.11 (first on PATH in the tests).
    dev.setup(&bucket, "");
    dev.ok(
        "POST",
        "/v1/groups/acme/-/policy-sets/strict",
        Some(json!({
            "enforcement": "mandatory",
            "modules": [{"name": "any", "rego": "package any\n\ndeny contains \"never\" if { false }\n"}],
        })),
    );
    let id = dev.submit("apply", hello_files());
    let failed = dev.wait_terminal(&id, LIMIT);
    assert_eq!(failed["state"], "failed", "{failed}");
    assert_eq!(failed["policy"]["status"], "unavailable", "{failed}");
    assert_eq!(
        failed["policy"]["reason"], "plan data unavailable for Terraform 0.11",
        "{failed}"
    );
    let reason = failed["transitions"].as_array().unwrap().last().unwrap()["reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        reason.starts_with("policy_denied: acme/strict: no plan data"),
        "{reason}"
    );
    // `skip`: the same plan goes on.
    dev.ok(
        "PUT",
        "/v1/groups/acme/-/policy-sets/strict",
        Some(json!({
            "enforcement": "mandatory",
            "on_unavailable": "skip",
            "modules": [{"name": "any", "rego": "package any\n\ndeny contains \"never\" if { false }\n"}],
        })),
    );
    let id = dev.submit("apply", hello_files());
    let done = dev.wait_terminal(&id, LIMIT);
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(done["policy"]["status"], "unavailable", "{done}");
}
