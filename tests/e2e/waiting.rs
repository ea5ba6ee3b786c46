//! Issue 24, items 2 and 5, end to end through `sortie dev` on moto: a waiting job says what
//! it waits for (`job get`, `jobs list`), `runner check` on an agent runner says when its
//! pool last saw an agent, and typos are caught (`did you mean`, exit 3).

use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};

use crate::common;

use common::{Dev, Out};

impl Dev {
    /// Runs `sortie ARGS` against this API, with no config file of the user's.
    fn sortie_waiting(&self, args: &[&str]) -> Out {
        let home = std::env::temp_dir().join("sortie-waiting-test-home-that-does-not-exist");
        Out::from(
            common::sortie_command(self)
                .args(args)
                .env_remove("SORTIE_CONFIG")
                .env("HOME", &home)
                .output()
                .expect("run sortie"),
        )
    }

    fn ok_waiting(&self, args: &[&str]) -> String {
        let out = self.sortie_waiting(args);
        assert_eq!(
            out.code, 0,
            "sortie {args:?}: exit {}\nstdout: {}\nstderr: {}",
            out.code, out.stdout, out.stderr
        );
        out.stdout
    }

    fn submit(&self, env: &str, operation: &str) -> String {
        let v = self.api(
            "POST",
            &format!("/v1/environments/{env}/-/jobs"),
            Some(json!({"operation": operation, "files": hello_files(), "variables": {"greeting": "waiting"}})),
        );
        v["id"].as_str().unwrap().to_string()
    }
}

fn hello_files() -> Value {
    let dir = sortie_testkit::example_dir("hello");
    let mut files = serde_json::Map::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "tf") {
            files.insert(
                p.file_name().unwrap().to_string_lossy().into(),
                Value::String(std::fs::read_to_string(&p).unwrap()),
            );
        }
    }
    Value::Object(files)
}

/// (a) A job queued behind a reviewed job awaiting approval says so in `job get` and in
/// `jobs list`; (c) a typo'd environment gets `did you mean`, `jobs list` of a missing
/// environment exits 3, and `list envs` counts the environments of subgroups it leaves out.
#[test]
fn a_job_behind_a_reviewed_job_says_so_and_typos_get_did_you_mean() {
    sortie_testkit::require_aws!();
    let dev = common::launch("waiting", 1, Some(&common::runner_binary()));
    let bucket = common::state_bucket();
    common::local_runner_on_s3(&dev, "tf1", "1.0.3", &bucket);
    dev.api(
        "POST",
        "/v1/groups/acme/demo/-/environments",
        Some(json!({"name": "prod", "env_type": "production", "approval": "required"})),
    );

    let reviewed = dev.submit("acme/demo/prod", "apply");
    dev.wait_job(&reviewed, "awaiting approval", |j| {
        assert!(
            !["failed", "canceled", "timed_out", "discarded"]
                .contains(&j["state"].as_str().unwrap()),
            "{j}"
        );
        j["state"] == "awaiting_approval"
    });
    let behind = dev.submit("acme/demo/prod", "plan");

    let expected = format!(
        "queued behind {}… (awaiting approval since ",
        &reviewed[..8]
    );
    let got = dev.ok_waiting(&["job", "get", &behind]);
    let line = got
        .lines()
        .find(|l| l.contains(&expected))
        .unwrap_or_else(|| panic!("no `{expected}` in job get:\n{got}"));
    assert!(
        line.contains("waiting") && line.trim_end().ends_with("UTC)"),
        "{line}"
    );
    let listed = dev.ok_waiting(&["jobs", "list", "acme/demo/prod"]);
    assert!(listed.contains("WAITING"), "{listed}");
    let row = listed
        .lines()
        .find(|l| l.starts_with(&behind))
        .unwrap_or_else(|| panic!("no row of {behind}:\n{listed}"));
    assert!(row.contains(&expected), "{row}");
    // The reviewed job shows its plan's change summary in the list, as `job get` does.
    let reviewed_row = listed.lines().find(|l| l.starts_with(&reviewed)).unwrap();
    assert!(
        reviewed_row.contains("awaiting approval since"),
        "{reviewed_row}"
    );

    // Following it without a terminal prints the reason on a line of its own.
    let mut follow = common::sortie_command(&dev)
        .args(["job", "logs", "-f", &behind])
        .env_remove("SORTIE_CONFIG")
        .env(
            "HOME",
            std::env::temp_dir().join("sortie-waiting-test-home-that-does-not-exist"),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let _ = follow.kill();
    let followed = follow.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&followed.stderr);
    assert_eq!(
        stderr.matches(&format!("waiting: {expected}")).count(),
        1,
        "once, not at every poll: {stderr}"
    );

    // (c) Typos.
    let typo = dev.sortie_waiting(&["get", "env", "acme/demo/prdo"]);
    assert_eq!(typo.code, 3, "{} {}", typo.stdout, typo.stderr);
    assert!(
        typo.stderr.contains("did you mean: acme/demo/prod"),
        "{}",
        typo.stderr
    );
    let missing = dev.sortie_waiting(&["jobs", "list", "acme/demo/prdo"]);
    assert_eq!(
        missing.code, 3,
        "not an empty list: {} {}",
        missing.stdout, missing.stderr
    );
    assert!(
        missing.stderr.contains("did you mean: acme/demo/prod"),
        "{}",
        missing.stderr
    );
    // The id with its last character changed: to `1` when it ends in `0` (a ULID's last
    // character is random, so `0` alone would be the same id once in 32 runs).
    let other = if behind.ends_with('0') { '1' } else { '0' };
    let near = format!("{}{other}", &behind[..behind.len() - 1]);
    let run = dev.sortie_waiting(&["job", "get", &near]);
    assert_eq!(run.code, 3, "{}", run.stderr);

    let top = dev.ok_waiting(&["list", "envs", "--group", "acme"]);
    assert!(
        top.contains("(1 environment in subgroups not shown; use --recursive)"),
        "{top}"
    );
    let all = dev.ok_waiting(&["list", "envs", "--group", "acme", "--recursive"]);
    assert!(
        all.contains("acme/demo/prod") && !all.contains("not shown"),
        "{all}"
    );

    dev.ok_waiting(&["job", "discard", &reviewed]);
}

/// (b) An agent runner's job with no agent running says which pool it waits for, and
/// `runner check` says no agent of the pool has asked for work.
#[test]
fn an_agent_runners_job_with_no_agent_says_which_pool_it_waits_for() {
    sortie_testkit::require_aws!();
    let dev = common::launch("waiting-agent", 1, None);
    let pool = dev.api(
        "POST",
        "/v1/agent-pools",
        Some(json!({"group": "acme", "name": "onprem", "description": "no agent runs"})),
    );
    let pool = pool["id"].as_str().unwrap().to_string();
    let runner = format!(
        "runner_configuration:\n  type: agent\n  pool: {pool}\n  timeout_seconds: 600\nstate_storage_configuration:\n  type: local\n  directory: {}\n",
        dev.dir.join("agent-state").display()
    );
    dev.api(
        "POST",
        "/v1/groups/acme/-/runners/agents",
        Some(Value::String(runner)),
    );
    dev.api(
        "POST",
        "/v1/groups/acme/-/rules",
        Some(json!({"id": "default", "runner_id": "acme/agents"})),
    );
    dev.api(
        "POST",
        "/v1/groups/acme/demo/-/environments",
        Some(json!({"name": "e0", "env_type": "development"})),
    );
    let id = dev.submit("acme/demo/e0", "plan");
    let job = dev.wait_job(&id, "offered to the pool", |j| {
        j["waiting"]["kind"] == "agent"
    });
    assert_eq!(job["waiting"]["pool"], pool.as_str(), "{job}");

    let got = dev.ok_waiting(&["job", "get", &id]);
    let expected = format!("waiting for an agent of pool {pool}: none has claimed for ");
    assert!(got.contains(&expected), "{got}");
    assert!(got.contains("(no agent has ever asked for work)"), "{got}");
    let listed = dev.ok_waiting(&["jobs", "list", "acme/demo/e0"]);
    assert!(listed.contains(&expected), "{listed}");

    let check = dev.sortie_waiting(&["runner", "check", "acme/agents"]);
    let said = format!("{}{}", check.stdout, check.stderr);
    assert!(
        said.contains(&format!("no agent of pool {pool} has asked for work yet")),
        "{said}"
    );
    let row = check
        .stdout
        .lines()
        .find(|l| l.starts_with("agent_seen"))
        .unwrap_or_else(|| panic!("no agent_seen check: {said}"));
    assert!(
        row.contains("failed"),
        "a pool no agent polls fails its check: {row}"
    );
    assert!(said.contains("passed: false"), "{said}");
}
