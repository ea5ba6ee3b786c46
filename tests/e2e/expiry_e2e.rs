//! Issue 31 end to end (moto, `sortie dev`, the real pilot and the machine's Terraform 1.11
//! with `terraform_data`): an environment created with a 3-minute TTL gets its three
//! `sortie.environment.expiring` events (read from an SQS queue the dev's EventBridge bus
//! delivers to) and is destroyed on time by a `sortie:expiry` destroy: its state ends
//! with no resources, the environment is marked destroyed and refuses a new job (409).

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::common::{self, Dev, DevOptions};

const TTL_SECONDS: i64 = 180;

const MAIN_TF: &str = "resource \"terraform_data\" \"app\" {\n  input = \"short-lived\"\n}\n\noutput \"id\" {\n  value = terraform_data.app.id\n}\n";

/// `sortie dev` (sweeping every second, the shortest TTL lowered to a minute) with org
/// `acme` on a local runner whose state is in a fresh bucket; the dev and the bucket.
fn dev() -> (Dev, String) {
    // Fails, never skips, without the machine's Terraform 1.11 (`terraform_data`).
    let _ = sortie_testkit::terraform111_bin();
    let runner_bin = common::runner_binary();
    let dev = common::start_dev(DevOptions {
        prefix: "expiry-e2e",
        sweep_every: 1,
        runner: Some(runner_bin),
        env: &[("SORTIE_MIN_TTL_SECONDS", "60")],
        ..Default::default()
    });
    let bucket = common::state_bucket();
    common::local_runner_on_s3(&dev, "tf111", ">= 1.5", &bucket);
    (dev, bucket)
}

/// The resources of every state file in `bucket`.
async fn state_resources(bucket: &str) -> Vec<Value> {
    let s3 = sortie_testkit::s3_client(&sortie_testkit::sdk_config().await);
    let listed = s3.list_objects_v2().bucket(bucket).send().await.unwrap();
    let mut resources = vec![];
    let mut states = 0;
    for object in listed.contents() {
        let key = object.key().unwrap_or_default();
        if !key.ends_with(".tfstate") {
            continue;
        }
        states += 1;
        let body = s3
            .get_object()
            .bucket(bucket)
            .key(key)
            .send()
            .await
            .unwrap();
        let bytes = body.body.collect().await.unwrap().into_bytes();
        let state: Value = serde_json::from_slice(&bytes).unwrap();
        resources.extend(state["resources"].as_array().cloned().unwrap_or_default());
    }
    assert!(states > 0, "no state file in {bucket}: {listed:?}");
    resources
}

#[test]
fn an_environment_with_a_three_minute_ttl_is_reminded_and_destroyed_on_time() {
    sortie_testkit::require_aws!();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (dev, bucket) = dev();
    let (sqs, queue) = rt.block_on(common::capture_events(&dev.bus, "all-sortie"));
    // An environment that exists before the organisation has a default (issue 47 item 2).
    let (status, older) = dev.api_with(
        &dev.token,
        "POST",
        "/v1/groups/acme/-/environments",
        Some(json!({"name": "older", "env_type": "development"})),
    );
    assert_eq!(status, 201, "{older}");
    // The organisation's limits, through the CLI: the one not named is kept. A new default
    // leaves the existing environment alone, and says so.
    let out: common::Out =
        common::sortie(&dev, &["group", "expiry", "acme", "--default-ttl", "3d"]).into();
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains("no environment below it will expire sooner\n1 existing environment keeps its end: the default reaches them only with --apply-to-existing\n"),
        "{out:?}"
    );
    let out: common::Out =
        common::sortie(&dev, &["group", "expiry", "acme", "--max-ttl", "14d"]).into();
    assert!(
        out.stdout.starts_with(
            "acme: default TTL 3d, maximum 14d (in force below it: default 3d, maximum 14d)\nits default reaches the environments created since "
        ),
        "{out:?}"
    );
    let out: common::Out = common::sortie(&dev, &["get", "env", "acme/older"]).into();
    assert!(out.stdout.contains("expiry"), "{out:?}");
    assert!(!out.stdout.contains("default ttl"), "{out:?}");
    // Reaching it is asked for, previewed, and confirmed: not in a terminal, only with --yes.
    let apply = [
        "group",
        "expiry",
        "acme",
        "--default-ttl",
        "3d",
        "--apply-to-existing",
    ];
    let out: common::Out = common::sortie(&dev, &[&apply[..], &["--dry-run"]].concat()).into();
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains(
            "1 environment would expire sooner than before (or at all), the first acme/older at "
        ),
        "{out:?}"
    );
    assert!(out.stdout.contains("\n  acme/older  "), "{out:?}");
    let out: common::Out = common::sortie(&dev, &apply).into();
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("add --yes to confirm"), "{out:?}");
    let (_, older) = dev.api_with(&dev.token, "GET", "/v1/environments/acme/older", None);
    assert!(
        older.get("expiry").is_none(),
        "a refused change scheduled it: {older}"
    );
    let (status, created) = dev.api_with(
        &dev.token,
        "POST",
        "/v1/groups/acme/-/environments",
        Some(json!({"name": "short", "env_type": "development", "ttl": "3m"})),
    );
    assert_eq!(status, 201, "{created}");
    let (_, env) = dev.api_with(&dev.token, "GET", "/v1/environments/acme/short", None);
    // `ttl_from: created`: the end is the creation (its runner link) plus the TTL.
    let created_at: DateTime<Utc> = env["runner"]["linked_at"]
        .as_str()
        .unwrap_or_else(|| panic!("no runner.linked_at: {env}"))
        .parse()
        .unwrap();
    let end = created_at + chrono::Duration::seconds(TTL_SECONDS);
    let left = (end - Utc::now()).num_seconds();
    assert!(
        (TTL_SECONDS - 30..=TTL_SECONDS).contains(&left),
        "ends in {left} s"
    );

    // A real resource to destroy.
    let dir = dev.dir.join("short");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("main.tf"), MAIN_TF).unwrap();
    let source = dir.display().to_string();
    let out: common::Out = common::sortie(
        &dev,
        &[
            "-o",
            "json",
            "run",
            "apply",
            "acme/short",
            "--source",
            &source,
        ],
    )
    .into();
    let submitted: Value =
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {out:?}"));
    let apply = submitted["id"].as_str().unwrap().to_string();
    let job = dev.wait_terminal(&apply);
    assert_eq!(job["state"], "succeeded", "{job}\n{}", dev.log(&apply));
    assert_eq!(rt.block_on(state_resources(&bucket)).len(), 1);

    // Wait for the end, the destroy and the mark (bounded: the end plus four minutes, a
    // loaded host's bound: one moto serves every test at once; alone it is seconds).
    let deadline = Instant::now()
        + Duration::from_secs(u64::try_from((end - Utc::now()).num_seconds().max(0)).unwrap())
        + Duration::from_secs(240);
    let destroyed = loop {
        let (_, env) = dev.api_with(&dev.token, "GET", "/v1/environments/acme/short", None);
        if env["destroyed"].is_object() {
            break env["destroyed"].clone();
        }
        assert!(
            Instant::now() < deadline,
            "not destroyed by {end} + 4 min: {env}"
        );
        std::thread::sleep(Duration::from_secs(2));
    };
    let destroy = destroyed["job_id"]
        .as_str()
        .expect("a destroy job")
        .to_string();
    let job = dev.job(&destroy);
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(job["operation"], "destroy", "{job}");
    assert_eq!(job["requested_by"], "sortie:expiry", "{job}");
    let at: DateTime<Utc> = destroyed["at"].as_str().unwrap().parse().unwrap();
    assert!(at >= end, "destroyed at {at}, before its end {end}");
    assert!(
        at - end <= chrono::Duration::seconds(210),
        "destroyed at {at}, late for its end {end}"
    );
    assert_eq!(rt.block_on(state_resources(&bucket)), Vec::<Value>::new());

    // Its three reminders, each once, all before the end.
    std::thread::sleep(Duration::from_secs(2));
    let events = rt.block_on(common::drain_events(&sqs, &queue));
    let expiring: Vec<&Value> = events
        .iter()
        .filter(|e| e["detail-type"] == "sortie.environment.expiring")
        .collect();
    let mut leads: Vec<&str> = expiring
        .iter()
        .map(|e| e["detail"]["lead"].as_str().unwrap())
        .collect();
    leads.sort_unstable();
    assert_eq!(leads, vec!["2d", "2h", "30m"], "{events:#?}");
    for e in &expiring {
        assert_eq!(e["detail"]["environment"], "acme/short");
        let sent: DateTime<Utc> = e["time"].as_str().unwrap().parse().unwrap();
        assert!(sent < end, "{e}");
    }

    // Destroyed: a new job is refused, naming why.
    let (status, refused) = dev.api_with(
        &dev.token,
        "POST",
        "/v1/environments/acme/short/-/jobs",
        Some(json!({"operation": "plan", "files": {"main.tf": ""}})),
    );
    assert_eq!(status, 409, "{refused}");
    assert!(refused.to_string().contains("destroyed"), "{refused}");
}
