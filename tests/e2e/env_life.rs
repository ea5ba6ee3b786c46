//! Issue 31 end to end (moto, `sortie dev`, the real pilot and the machine's Terraform 1.11
//! with `terraform_data`): state history (two applies make two versions, a restore of the
//! first makes its plan show the difference, nothing sensitive in a version's answer) and
//! triggers (A's apply with changed outputs makes B plan with A's new output, a cycle
//! A → B → A is refused, five quick applies of A give B one queued run).

use std::path::Path;

use serde_json::{json, Value};

use crate::common::{self, Dev};

/// A versioned bucket on the shared moto, for Terraform's state; its name.
fn versioned_state_bucket() -> String {
    let bucket = common::state_bucket();
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let s3 = sortie_testkit::s3_client(&sortie_testkit::sdk_config().await);
        s3.put_bucket_versioning()
            .bucket(&bucket)
            .versioning_configuration(
                aws_sdk_s3::types::VersioningConfiguration::builder()
                    .status(aws_sdk_s3::types::BucketVersioningStatus::Enabled)
                    .build(),
            )
            .send()
            .await
            .unwrap();
    });
    bucket
}

/// `sortie dev` with org `acme` on a local runner whose state is in a versioned bucket.
fn dev(prefix: &str) -> Dev {
    // Fails, never skips, without the machine's Terraform 1.11 (`terraform_data`).
    let _ = sortie_testkit::terraform111_bin();
    let dev = common::launch(prefix, 1, Some(&common::runner_binary()));
    common::local_runner_on_s3(&dev, "tf111", ">= 1.5", &versioned_state_bucket());
    dev
}

fn write_config(dir: &Path, main_tf: &str) -> String {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("main.tf"), main_tf).unwrap();
    dir.display().to_string()
}

/// Submits `operation` on `env` from `source` with `vars` (`NAME=VALUE`); the job's id.
fn run(dev: &Dev, operation: &str, env: &str, source: &str, vars: &[&str]) -> String {
    let mut args = vec!["-o", "json", "run", operation, env, "--source", source];
    for v in vars {
        args.extend(["--var", v]);
    }
    let out: common::Out = common::sortie(dev, &args).into();
    let submitted: Value =
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {out:?}"));
    submitted["id"].as_str().unwrap().to_string()
}

fn succeeded(dev: &Dev, id: &str) -> Value {
    let job = dev.wait_terminal(id);
    assert_eq!(job["state"], "succeeded", "{job}\n{}", dev.log(id));
    job
}

const STATE_TF: &str = "variable \"size\" {\n  type = string\n}\n\nvariable \"token\" {\n  type      = string\n  sensitive = true\n  default   = \"tok-SECRET-1\"\n}\n\nresource \"terraform_data\" \"app\" {\n  input = { size = var.size, token = var.token }\n}\n\noutput \"size\" {\n  value = var.size\n}\n\noutput \"token\" {\n  value     = var.token\n  sensitive = true\n}\n";

#[test]
fn two_applies_make_two_versions_and_a_restore_plans_the_difference() {
    sortie_testkit::require_aws!();
    let dev = dev("history");
    dev.api(
        "POST",
        "/v1/groups/acme/-/environments",
        Some(json!({"name": "app", "env_type": "development"})),
    );
    let source = write_config(&dev.dir.join("app"), STATE_TF);
    let first = run(&dev, "apply", "acme/app", &source, &["size=small"]);
    let first_job = succeeded(&dev, &first);
    // No pause: the second apply may start within the second of the first's last write (S3
    // stamps a version to the second). Each version is credited by the serial and lineage
    // its job recorded, not by time.
    let second = run(&dev, "apply", "acme/app", &source, &["size=large"]);
    let second_job = succeeded(&dev, &second);

    let list = dev.api("GET", "/v1/environments/acme/app/-/state-versions", None);
    let versions = list["versions"].as_array().unwrap();
    let by =
        |job: &str| -> Vec<&Value> { versions.iter().filter(|v| v["job_id"] == job).collect() };
    assert!(
        !by(&first).is_empty() && !by(&second).is_empty(),
        "{list:#}"
    );
    assert_eq!(
        versions[0]["job_id"],
        json!(second),
        "the newest is the second apply's: {list:#}"
    );
    assert_eq!(versions[0]["is_latest"], true);
    let first_version = by(&first)[0];
    assert!(first_version["serial"].as_u64().unwrap() < versions[0]["serial"].as_u64().unwrap());
    assert_eq!(first_version["lineage"], versions[0]["lineage"]);
    // Each job recorded the state it ended with, and its version is matched by it.
    for (job, version) in [(&first_job, first_version), (&second_job, &versions[0])] {
        assert_eq!(
            job["state_written"]["serial"], version["serial"],
            "{job}\n{list:#}"
        );
        assert_eq!(job["state_written"]["lineage"], version["lineage"], "{job}");
        assert_eq!(version["matched_by"], "serial", "{list:#}");
    }
    let version = first_version["version_id"].as_str().unwrap().to_string();

    // One version: nothing sensitive in it, the rest as written.
    let one = dev.api(
        "GET",
        &format!("/v1/environments/acme/app/-/state-versions/{version}"),
        None,
    );
    assert!(!one.to_string().contains("SECRET"), "{one:#}");
    assert!(one.to_string().contains("small"), "{one:#}");
    let table: common::Out = common::sortie(&dev, &["env", "state-versions", "acme/app"]).into();
    assert_eq!(table.code, 0, "{table:?}");
    assert!(
        table.stdout.contains(&version) && table.stdout.contains(&second),
        "{table:?}"
    );

    // The restore of the first: a job that writes it back, then plans the difference (no
    // pause here either: it may start within the second of the second apply's write).
    let out: common::Out = common::sortie(
        &dev,
        &[
            "-o",
            "json",
            "env",
            "restore",
            "acme/app",
            &version,
            "--reason",
            "size went wrong",
        ],
    )
    .into();
    assert_eq!(out.code, 0, "{out:?}");
    let restore: Value = serde_json::from_str(&out.stdout).unwrap();
    let id = restore["job_id"].as_str().unwrap().to_string();
    let job = succeeded(&dev, &id);
    let log = dev.log(&id);
    assert_eq!(job["restore"]["reason"], "size went wrong", "{job}");
    assert!(
        log.contains("state push -force") || log.contains("state restored"),
        "{log}"
    );
    let changes: u64 = ["add", "change", "destroy"]
        .iter()
        .map(|k| job["summary"][k].as_u64().unwrap_or(0))
        .sum();
    assert!(
        changes > 0,
        "the plan shows the restored size: {job}\n{log}"
    );
    let after = dev.api("GET", "/v1/environments/acme/app/-/state-versions", None);
    let newest = &after["versions"][0];
    assert_eq!(
        newest["job_id"],
        json!(id),
        "the restore wrote the newest: {after:#}"
    );
    assert_eq!(newest["matched_by"], "serial", "{after:#}");
    // The versions before it keep their writers.
    let writer_of = |v: &str| {
        after["versions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["version_id"] == v)
            .map(|x| x["job_id"].clone())
    };
    assert_eq!(writer_of(&version), Some(json!(first)), "{after:#}");
    assert_eq!(
        writer_of(versions[0]["version_id"].as_str().unwrap()),
        Some(json!(second)),
        "{after:#}"
    );
}

const UPSTREAM_TF: &str = "variable \"ip\" {\n  type = string\n}\n\nresource \"terraform_data\" \"net\" {\n  input = var.ip\n}\n\noutput \"ip\" {\n  value = var.ip\n}\n";
const DOWNSTREAM_TF: &str = "variable \"ip\" {\n  type    = string\n  default = \"none\"\n}\n\nresource \"terraform_data\" \"app\" {\n  input = \"app at ${var.ip}\"\n}\n";

fn trigger_jobs(dev: &Dev, env: &str) -> Vec<Value> {
    let jobs = dev.api(
        "GET",
        &format!("/v1/environments/{env}/-/jobs?limit=100"),
        None,
    );
    jobs["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["requested_by"] == "sortie:trigger")
        .cloned()
        .collect()
}

/// How long a trigger may take to appear: it is submitted just after the upstream job's
/// terminal write (the end's follow-up), so a reader that saw the end may be early.
const TRIGGER_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Waits ([`TRIGGER_WAIT`] at most) for `env`'s trigger job submitted by the end of
/// upstream job `upstream_job`; it, as listed.
fn wait_trigger(dev: &Dev, env: &str, upstream_job: &str) -> Value {
    let deadline = std::time::Instant::now() + TRIGGER_WAIT;
    loop {
        let jobs = trigger_jobs(dev, env);
        if let Some(j) = jobs
            .iter()
            .find(|j| j["trigger"]["upstream_job_id"] == upstream_job)
        {
            return j.clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no trigger job on {env} for upstream job {upstream_job} within {TRIGGER_WAIT:?}: {jobs:#?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
}

#[test]
fn an_upstream_apply_with_new_outputs_makes_its_downstream_plan_with_them() {
    sortie_testkit::require_aws!();
    let dev = dev("triggers");
    dev.api(
        "POST",
        "/v1/groups/acme/-/environments",
        Some(json!({"name": "a", "env_type": "development"})),
    );
    let up = write_config(&dev.dir.join("a"), UPSTREAM_TF);
    let down = write_config(&dev.dir.join("b"), DOWNSTREAM_TF);
    succeeded(&dev, &run(&dev, "apply", "acme/a", &up, &["ip=10.0.0.1"]));
    dev.api(
        "POST",
        "/v1/groups/acme/-/environments",
        Some(json!({"name": "b", "env_type": "development", "triggers": ["acme/a"], "trigger_inputs": ["ip"]})),
    );
    // B's own apply: the configuration its triggered plans run.
    succeeded(&dev, &run(&dev, "apply", "acme/b", &down, &[]));

    // A cycle is refused, named.
    let (status, body) = dev.api_with(
        &dev.token,
        "PATCH",
        "/v1/environments/acme/a",
        Some(json!({"triggers": ["acme/b"]})),
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body.to_string().contains("acme/a → acme/b → acme/a"),
        "{body}"
    );

    // `get env` shows both directions.
    let shown: common::Out = common::sortie(&dev, &["get", "env", "acme/a"]).into();
    assert!(shown.stdout.contains("downstream:   acme/b"), "{shown:?}");

    // A's apply with a new output: B plans with it.
    let apply = run(&dev, "apply", "acme/a", &up, &["ip=10.0.0.2"]);
    succeeded(&dev, &apply);
    let id = wait_trigger(&dev, "acme/b", &apply)["id"]
        .as_str()
        .unwrap()
        .to_string();
    let triggered = trigger_jobs(&dev, "acme/b");
    assert_eq!(triggered.len(), 1, "{triggered:#?}");
    let job = succeeded(&dev, &id);
    assert_eq!(job["operation"], "plan");
    assert_eq!(
        job["trigger"],
        json!({"upstream": "acme/a", "upstream_job_id": apply}),
        "{job}"
    );
    assert!(dev.log(&id).contains("app at 10.0.0.2"), "{}", dev.log(&id));

    // The same outputs again: nothing (checked again at the end, long after).
    let same = run(&dev, "apply", "acme/a", &up, &["ip=10.0.0.2"]);
    succeeded(&dev, &same);
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert_eq!(trigger_jobs(&dev, "acme/b").len(), 1);

    // B busy (a reviewed apply holds its lock, awaiting approval): five quick applies of
    // A leave B one queued run, with the last outputs.
    dev.api(
        "PATCH",
        "/v1/environments/acme/b",
        Some(json!({"approval": "required"})),
    );
    let held = run(&dev, "apply", "acme/b", &down, &[]);
    dev.wait_job(&held, "awaiting approval", |j| {
        j["state"] == "awaiting_approval"
    });
    let mut applies = vec![];
    for i in 3..=7 {
        applies.push(run(
            &dev,
            "apply",
            "acme/a",
            &up,
            &[&format!("ip=10.0.0.{i}")],
        ));
    }
    for id in &applies {
        succeeded(&dev, id);
    }
    // The last apply's trigger is the one left queued (each replaced the one before).
    wait_trigger(&dev, "acme/b", applies.last().unwrap());
    let queued: Vec<Value> = trigger_jobs(&dev, "acme/b")
        .into_iter()
        .filter(|j| j["state"] == "queued")
        .collect();
    assert_eq!(queued.len(), 1, "one queued run, not five: {queued:#?}");
    assert_eq!(
        queued[0]["trigger"]["upstream_job_id"],
        json!(applies.last().unwrap()),
        "{queued:#?}"
    );
    let last = queued[0]["id"].as_str().unwrap().to_string();
    dev.api("POST", &format!("/v1/jobs/{held}/discard"), Some(json!({})));
    succeeded(&dev, &last);
    assert!(
        dev.log(&last).contains("app at 10.0.0.7"),
        "{}",
        dev.log(&last)
    );
    let all = trigger_jobs(&dev, "acme/b");
    assert!(
        all.iter()
            .all(|j| j["trigger"]["upstream_job_id"] != same.as_str()),
        "an apply with the same outputs triggered nothing: {all:#?}"
    );
}
