//! Issue 28's policy gate end to end with the machine's Terraform 1.11 and real
//! `terraform_data` resources (moto, `sortie dev`, the real pilot):
//! - a mandatory deny on a replacement fails the apply before anything is applied: the
//!   state object (its serial, lineage and resource id, byte for byte) is untouched;
//! - a drift check's plan is checked too, and a violation on drift is published as
//!   `sortie.job.policy_checked` (read from an SQS queue the dev's EventBridge bus feeds).

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::dev::{make_drift_due, state_bucket, try_read_state, wait_drift, Dev, Names};

const LIMIT: Duration = Duration::from_secs(180);

/// A resource replaced whenever `v` changes.
const REPLACED_TF: &str = "variable \"v\" {\n  type = string\n}\n\nresource \"terraform_data\" \"app\" {\n  input            = var.v\n  triggers_replace = [var.v]\n}\n";

/// A resource whose input never changes (it drifts only behind Sortie's back).
const STEADY_TF: &str = "variable \"v\" {\n  type    = string\n  default = \"steady\"\n}\n\nresource \"terraform_data\" \"app\" {\n  input = \"steady\"\n}\n";

/// A mandatory set at `acme` for environments labelled `policy: <label>`.
fn mandatory(dev: &Dev, name: &str, label: &str, rego: &str) {
    dev.ok(
        "POST",
        &format!("/v1/groups/acme/-/policy-sets/{name}"),
        Some(json!({
            "enforcement": "mandatory",
            "criteria": {"labels": {"policy": label}},
            "modules": [{"name": "main", "rego": rego}],
        })),
    );
}

fn apply(dev: &Dev, env: &str, tf: &str, v: &str) -> String {
    let job = dev.ok(
        "POST",
        &format!("/v1/environments/acme/demo/{env}/-/jobs"),
        Some(json!({"operation": "apply", "files": {"main.tf": tf}, "variables": {"v": v}})),
    );
    job["id"].as_str().unwrap().to_string()
}

/// The raw state object of `env`, and its serial, lineage and resource id.
fn state(bucket: &str, env: &str) -> (Value, u64, String, String) {
    let key = format!("sortie/acme/demo/{env}/terraform.tfstate");
    let state = try_read_state(bucket, &key).unwrap_or_else(|| panic!("no state at {key}"));
    let serial = state["serial"].as_u64().unwrap();
    let lineage = state["lineage"].as_str().unwrap().to_string();
    let id = state["resources"][0]["instances"][0]["attributes"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    (state, serial, lineage, id)
}

/// Writes `state` back with the resource's `input` changed, behind Sortie's back.
fn tamper(bucket: &str, env: &str, mut state: Value) {
    state["resources"][0]["instances"][0]["attributes"]["input"] =
        json!({"value": "tampered", "type": "string"});
    let key = format!("sortie/acme/demo/{env}/terraform.tfstate");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let s3 = sortie_testkit::s3_client(&sortie_testkit::sdk_config().await);
        s3.put_object()
            .bucket(bucket)
            .key(&key)
            .body(state.to_string().into_bytes().into())
            .send()
            .await
            .unwrap();
    });
}

/// Receives events until one of `kind` about job `job` arrives (60 s at most); it and
/// every event received.
async fn wait_event(
    sqs: &aws_sdk_sqs::Client,
    url: &str,
    kind: &str,
    job: &str,
) -> (Value, Vec<Value>) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = vec![];
    loop {
        let got = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .send()
            .await
            .unwrap();
        for m in got.messages.unwrap_or_default() {
            let event: Value = serde_json::from_str(m.body().unwrap_or("{}")).unwrap();
            seen.push(event);
        }
        if let Some(found) = seen
            .iter()
            .find(|e| e["detail-type"] == kind && e["detail"]["job_id"] == job)
        {
            return (found.clone(), seen);
        }
        assert!(
            Instant::now() < deadline,
            "no {kind} event for {job}: {seen:#?}"
        );
    }
}

#[test]
fn a_mandatory_deny_keeps_a_replacement_unapplied_and_a_drift_violation_is_published() {
    sortie_testkit::require_aws!();
    // Fails, never skips, without the machine's Terraform 1.11 (`terraform_data`).
    let _ = sortie_testkit::terraform111_bin();
    let names = Names::fresh();
    let dev = Dev::launch(&names, &[]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (sqs, queue) = rt.block_on(crate::common::capture_events(names.bus(), "policy-events"));
    let bucket = state_bucket();
    let runner = format!(
        "tool_version: \">= 1.5\"\nrunner_configuration:\n  type: local\nstate_storage_configuration:\n  type: s3\n  bucket: {bucket}\n  key_prefix: sortie/\n  region: us-east-1\n  endpoint: {}\n",
        sortie_testkit::endpoint()
    );
    dev.ok(
        "POST",
        "/v1/groups/acme/-/runners/tf111",
        Some(Value::String(runner)),
    );
    dev.ok(
        "POST",
        "/v1/groups/acme/-/rules",
        Some(json!({"id": "tf111", "runner_id": "acme/tf111"})),
    );
    for (name, label, extra) in [
        ("replaced", "replace", json!({})),
        ("drifty", "drift", json!({"drift_schedule": "*/15 * * * *"})),
    ] {
        let mut body = json!({"name": name, "env_type": "production", "labels": {"policy": label}});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        dev.ok("POST", "/v1/groups/acme/demo/-/environments", Some(body));
    }
    mandatory(
        &dev,
        "no-replace",
        "replace",
        "package noreplace\n\ndeny contains msg if {\n  some rc in input.plan.resource_changes\n  \"delete\" in rc.change.actions\n  \"create\" in rc.change.actions\n  msg := sprintf(\"%s would be replaced\", [rc.address])\n}\n",
    );
    mandatory(
        &dev,
        "no-drift",
        "drift",
        "package nodrift\n\ndeny contains msg if {\n  input.job.drift_check\n  some rc in input.plan.resource_changes\n  rc.change.actions != [\"no-op\"]\n  msg := sprintf(\"%s drifted\", [rc.address])\n}\n",
    );

    // (a) The first apply creates the resource (nothing to deny): it passes the gate.
    let first = apply(&dev, "replaced", REPLACED_TF, "one");
    let done = dev.wait_terminal(&first, LIMIT);
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(done["policy"]["status"], "passed", "{done}");
    let (before, serial, lineage, id) = state(&bucket, "replaced");
    assert!(!id.is_empty(), "{before}");
    // A new `v` replaces it: denied at the plan's end, nothing applied.
    let second = apply(&dev, "replaced", REPLACED_TF, "two");
    let failed = dev.wait_terminal(&second, LIMIT);
    assert_eq!(failed["state"], "failed", "{failed}");
    let reason = failed["transitions"].as_array().unwrap().last().unwrap()["reason"].clone();
    assert_eq!(
        reason, "policy_denied: acme/no-replace: terraform_data.app would be replaced",
        "{failed}"
    );
    assert_eq!(failed["policy"]["status"], "denied", "{failed}");
    assert_eq!(
        failed["review"]["phase"], "plan",
        "the apply phase never ran: {failed}"
    );
    let (after, serial_after, lineage_after, id_after) = state(&bucket, "replaced");
    assert_eq!(
        (serial_after, &lineage_after, &id_after),
        (serial, &lineage, &id),
        "the state moved"
    );
    assert_eq!(after, before, "the state object changed");
    let (denied, _) = rt.block_on(wait_event(
        &sqs,
        &queue,
        "sortie.job.policy_checked",
        &second,
    ));
    assert_eq!(denied["detail"]["verdict"], "fail", "{denied}");
    assert_eq!(denied["detail"]["violation"], true, "{denied}");

    // (b) A drift check's plan is checked: apply, drift behind Sortie's back, check.
    let applied = apply(&dev, "drifty", STEADY_TF, "steady");
    let done = dev.wait_terminal(&applied, LIMIT);
    assert_eq!(done["state"], "succeeded", "{done}");
    let (state_before, ..) = state(&bucket, "drifty");
    tamper(&bucket, "drifty", state_before);
    let (tampered, ..) = state(&bucket, "drifty");
    // The environment records its latest apply just after the job's end is written.
    let deadline = Instant::now() + Duration::from_secs(30);
    while dev.ok("GET", "/v1/environments/acme/demo/drifty", None)["last_apply"]["job_id"]
        != applied.as_str()
    {
        assert!(Instant::now() < deadline, "the apply is never recorded");
        std::thread::sleep(Duration::from_millis(200));
    }
    make_drift_due(&dev, "acme/demo/drifty");
    let env = wait_drift(&dev, "acme/demo/drifty", None);
    assert_eq!(env["drift"]["status"], "drifted", "{env}");
    let check_id = env["drift"]["job_id"].as_str().unwrap().to_string();
    let check = dev.ok("GET", &format!("/v1/jobs/{check_id}"), None);
    assert_eq!(check["drift_check"], true, "{check}");
    assert_eq!(
        check["state"], "succeeded",
        "policy never fails a drift check: {check}"
    );
    assert_eq!(check["policy"]["status"], "denied", "{check}");
    assert_eq!(
        check["policy"]["sets"][0]["deny"][0], "terraform_data.app drifted",
        "{check}"
    );
    let (event, seen) = rt.block_on(wait_event(
        &sqs,
        &queue,
        "sortie.job.policy_checked",
        &check_id,
    ));
    assert_eq!(event["detail"]["drift_check"], true, "{event}");
    assert_eq!(event["detail"]["violation"], true, "{event}");
    assert_eq!(event["detail"]["verdict"], "recorded", "{event}");
    assert_eq!(
        event["detail"]["policy"]["sets"][0]["deny"][0], "terraform_data.app drifted",
        "{event}"
    );
    let checks = seen
        .iter()
        .filter(|e| {
            e["detail-type"] == "sortie.job.policy_checked"
                && e["detail"]["job_id"] == check_id.as_str()
        })
        .count();
    assert_eq!(
        checks, 1,
        "one policy_checked for the drift check: {seen:#?}"
    );
    // Nothing was applied by the check (remediation is off): the state is as tampered.
    let (now, ..) = state(&bucket, "drifty");
    assert_eq!(now, tampered);
}
