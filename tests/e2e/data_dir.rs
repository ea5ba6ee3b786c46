//! `sortie dev --data-dir`: a restart of `sortie dev` AND of moto keeps the port, the
//! tokens, the runner, the rule, the environment, the job history and the Terraform state.
//!
//! The test runs its own moto (the one `scripts/with-moto.sh` starts is shared with other
//! tests and must not be restarted), and the new moto listens on another port, as
//! `scripts/with-moto.sh` would pick: the runner's `s3` state storage endpoint follows. It
//! needs `scripts/with-moto.sh` for the tools
//! (`.tools/venv`, `SORTIE_TEST_TERRAFORM`) and the `sortie-pilot` binary built next to
//! `sortie` (`cargo build -p sortie-pilot --bins`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common;

use common::{Dev, DevOptions};

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A moto server of this test's own, killed on drop.
struct Moto {
    child: Child,
    port: u16,
}

impl Moto {
    fn start(port: u16, log: &Path) -> Moto {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let child = Command::new(root().join(".tools/venv/bin/python"))
            .arg(root().join("scripts/moto_server.py"))
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start moto (run the test through scripts/with-moto.sh)");
        let moto = Moto { child, port };
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "moto never answered on {port}");
            std::thread::sleep(Duration::from_millis(200));
        }
        moto
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `sortie dev --data-dir DIR` on `endpoint`'s moto, with `--user` for each of `users`.
fn start_dev(dir: &Path, endpoint: &str, users: &[&str]) -> Dev {
    let runner = common::sibling_runner();
    assert!(
        runner.exists(),
        "build it first: cargo build -p sortie-pilot --bins"
    );
    common::start_dev(DevOptions {
        runner: Some(runner),
        users,
        extra_args: &[
            "--snapshot-every",
            "1",
            "--table",
            "sortie-keep",
            "--queue",
            "keep-jobs",
            "--bucket",
            "keep-artifacts",
            "--bus",
            "keep-bus",
        ],
        data_dir: Some(dir),
        endpoint: Some(endpoint),
        ..Default::default()
    })
}

impl Dev {
    /// Stops it as Ctrl-C would (SIGTERM), and waits for its last snapshot.
    fn stop(mut self) {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "sortie dev stopped with {status}");
                return;
            }
            assert!(Instant::now() < deadline, "sortie dev did not stop");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn apply(&self, greeting: &str) -> Value {
        let files = json!({"main.tf": std::fs::read_to_string(sortie_testkit::example_dir("hello").join("main.tf")).unwrap()});
        let v = self.api(
            "POST",
            "/v1/environments/acme/demo/hello/-/jobs",
            Some(
                json!({"operation": "apply", "files": files, "variables": {"greeting": greeting}}),
            ),
        );
        let job = self.wait_terminal(v["id"].as_str().unwrap());
        assert_eq!(job["state"], "succeeded", "{job}");
        job
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The state object of acme/demo/hello in `bucket` on `endpoint`, if there is one.
fn state(endpoint: &str, bucket: &str) -> Option<Value> {
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let s3 = sortie_testkit::s3_client(&sortie_testkit::sdk_config_at(endpoint).await);
        let out = s3
            .get_object()
            .bucket(bucket)
            .key("sortie/acme/demo/hello/terraform.tfstate")
            .send()
            .await
            .ok()?;
        serde_json::from_slice(&out.body.collect().await.unwrap().into_bytes()).ok()
    })
}

fn create_bucket(endpoint: &str, bucket: &str) {
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let s3 = sortie_testkit::s3_client(&sortie_testkit::sdk_config_at(endpoint).await);
        s3.create_bucket().bucket(bucket).send().await.unwrap();
    });
}

#[test]
fn a_restart_of_sortie_dev_and_moto_keeps_port_tokens_records_history_and_state() {
    sortie_testkit::require_aws!();
    let dir = sortie_testkit::scratch_dir("data-dir").unwrap();
    let port = free_port();
    let moto = Moto::start(port, &dir.join("moto.log"));
    let endpoint = moto.endpoint();
    let bucket = "keep-state";
    create_bucket(&endpoint, bucket);

    // Before: a runner with its state in moto's S3, a rule, an environment, one apply.
    let dev = start_dev(&dir, &endpoint, &["alice"]);
    let runner = format!(
        "runner_configuration:\n  type: local\nstate_storage_configuration:\n  type: s3\n  bucket: {bucket}\n  key_prefix: sortie/\n  region: us-east-1\n  endpoint: {endpoint}\n"
    );
    dev.api(
        "POST",
        "/v1/groups/acme/-/runners/local",
        Some(Value::String(runner)),
    );
    dev.api(
        "POST",
        "/v1/groups/acme/-/rules",
        Some(json!({"id": "default", "runner_id": "acme/local"})),
    );
    dev.api(
        "POST",
        "/v1/groups/acme/demo/-/environments",
        Some(json!({"name": "hello", "env_type": "development"})),
    );
    let first = dev.apply("before the restart");
    let before = state(&endpoint, bucket).expect("the first apply wrote its state");
    assert_eq!(
        before["modules"][0]["outputs"]["message"]["value"], "before the restart!",
        "{before}"
    );
    let (url, token) = (dev.url.clone(), dev.token.clone());
    let alice = dev.users["alice"].as_str().unwrap().to_string();
    dev.stop();
    assert!(
        dir.join("snapshot/world.json").exists(),
        "a snapshot was written"
    );

    // moto forgets everything: a fresh one, on another port.
    moto.stop();
    let moto = Moto::start(free_port(), &dir.join("moto.log"));
    let (old_endpoint, endpoint) = (endpoint, moto.endpoint());
    assert!(
        state(&endpoint, bucket).is_none(),
        "the new moto starts empty"
    );

    // After: one more user; the rest comes back from the data dir.
    let dev = start_dev(&dir, &endpoint, &["bob"]);
    let log = std::fs::read_to_string(dir.join("dev.log")).unwrap();
    assert!(log.contains("sortie dev: restored "), "{log}");
    assert_eq!(dev.url, url, "the port is kept");
    assert_eq!(dev.token, token, "the dev token is kept");
    assert_eq!(dev.users["alice"], alice.as_str(), "alice's token is kept");
    assert!(dev.users["bob"].as_str().is_some_and(|t| t != alice));
    let (status, _) = dev.api_with(&alice, "GET", "/v1/whoami", None);
    assert_ne!(status, 401, "alice's token still opens the API");
    let runner = dev.api("GET", "/v1/groups/acme/-/runners/local", None);
    assert!(runner.to_string().contains(bucket), "{runner}");
    assert!(
        runner.to_string().contains(&endpoint) && !runner.to_string().contains(&old_endpoint),
        "the state storage follows moto to its new port: {runner}"
    );
    let rules = dev.api("GET", "/v1/groups/acme/-/rules", None);
    assert!(rules.to_string().contains("acme/local"), "{rules}");
    let env = dev.api("GET", "/v1/environments/acme/demo/hello", None);
    assert!(env.to_string().contains("development"), "{env}");
    let jobs = dev.api("GET", "/v1/environments/acme/demo/hello/-/jobs", None);
    assert!(
        jobs.to_string().contains(first["id"].as_str().unwrap()),
        "the job history is kept: {jobs}"
    );
    let restored = dev.api(
        "GET",
        &format!("/v1/jobs/{}", first["id"].as_str().unwrap()),
        None,
    );
    assert_eq!(restored["state"], "succeeded", "{restored}");
    let kept = state(&endpoint, bucket).expect("the state came back with moto's bucket");
    assert_eq!(kept, before, "the state object is the one of before");

    // `sortie dev status` prints the export line again, and says it runs.
    let out = Command::new(sortie_tests::sortie())
        .args(["dev", "status", "--data-dir"])
        .arg(&dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(&format!("export SORTIE_API_URL={url} SORTIE_TOKEN={token}")),
        "{text}"
    );
    assert!(text.contains(&format!("running at {url}")), "{text}");

    // A job after the restart applies on the same state: same lineage, one serial more.
    dev.apply("after the restart");
    let after = state(&endpoint, bucket).unwrap();
    assert_eq!(
        after["lineage"], before["lineage"],
        "the same state: {after}"
    );
    assert_eq!(
        after["serial"].as_u64().unwrap(),
        before["serial"].as_u64().unwrap() + 1,
        "one write more: {after}"
    );
    assert_eq!(
        after["modules"][0]["outputs"]["message"]["value"],
        "after the restart!"
    );
    dev.stop();

    // Stopped: `status` says so (exit 1), and still prints the export line.
    let out = Command::new(sortie_tests::sortie())
        .args(["dev", "status", "--data-dir"])
        .arg(&dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("not running") && text.contains("export SORTIE_API_URL="),
        "{text}"
    );
    drop(moto);
    let _ = std::fs::remove_dir_all(&dir);
}
