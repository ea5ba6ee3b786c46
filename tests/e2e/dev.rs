//! End to end through `sortie dev`: the real binary, the real `sortie-pilot` as local
//! runners, real terraform 0.11.11, and moto for DynamoDB, SQS, S3 and EventBridge.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sortie_testkit::http::call;

pub(crate) struct Dev {
    child: Child,
    pub(crate) url: String,
    pub(crate) token: String,
    /// The named users' tokens (`--user NAME`), by name.
    users: std::collections::BTreeMap<String, String>,
    dir: PathBuf,
    table: String,
    bucket: String,
}

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "--- sortie dev log ---\n{}",
                std::fs::read_to_string(self.dir.join("dev.log")).unwrap_or_default()
            );
        }
    }
}

/// The names one `sortie dev` uses: a restart with the same names finds its own state.
#[derive(Clone)]
pub(crate) struct Names {
    table: String,
    queue: String,
    bucket: String,
    bus: String,
    dir: PathBuf,
}

impl Names {
    /// The EventBridge bus's name.
    pub(crate) fn bus(&self) -> &str {
        &self.bus
    }

    pub(crate) fn fresh() -> Self {
        Self {
            table: sortie_testkit::unique("sortie-dev"),
            queue: sortie_testkit::unique("jobs"),
            bucket: sortie_testkit::unique("artifacts"),
            bus: sortie_testkit::unique("bus"),
            dir: sortie_testkit::scratch_dir("dev").unwrap(),
        }
    }
}

impl Dev {
    pub(crate) fn start() -> Self {
        Self::launch(&Names::fresh(), &[])
    }

    /// Starts `sortie dev` with these names and extra arguments.
    pub(crate) fn launch(names: &Names, extra: &[&str]) -> Self {
        let dir = names.dir.clone();
        let ready = dir.join("ready.json");
        let _ = std::fs::remove_file(&ready);
        let runner = sortie_testkit::runtime::function_binary("sortie-pilot");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("dev.log"))
            .unwrap();
        let child = Command::new(sortie_tests::sortie())
            .args(["dev", "--sweep-every", "1"])
            .args([
                "--table",
                &names.table,
                "--queue",
                &names.queue,
                "--bucket",
                &names.bucket,
                "--bus",
                &names.bus,
            ])
            .args(extra)
            .arg("--ready-file")
            .arg(&ready)
            .arg("--work-dir")
            .arg(&dir)
            .arg("--runner")
            .arg(&runner)
            .env("AWS_ENDPOINT_URL", sortie_testkit::endpoint())
            // The Terraform these tests' checks were written against (0.11.11), pinned.
            .envs(sortie_testkit::pinned_terraform().map(|tf| ("SORTIE_TERRAFORM", tf)))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start sortie dev");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !ready.exists()
            || std::fs::read_to_string(&ready)
                .unwrap_or_default()
                .is_empty()
        {
            assert!(
                Instant::now() < deadline,
                "sortie dev did not start: {}",
                std::fs::read_to_string(dir.join("dev.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let r: Value = serde_json::from_str(&std::fs::read_to_string(&ready).unwrap()).unwrap();
        Self {
            child,
            url: r["url"].as_str().unwrap().into(),
            token: r["token"].as_str().unwrap().into(),
            users: r["users"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                        .collect()
                })
                .unwrap_or_default(),
            dir,
            table: names.table.clone(),
            bucket: names.bucket.clone(),
        }
    }

    pub(crate) fn api(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        self.api_with(&self.token, method, path, body)
    }

    /// A call as the named user `user` (`sortie dev --user <user>`).
    pub(crate) fn api_as(
        &self,
        user: &str,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let token = self
            .users
            .get(user)
            .expect("a --user of this sortie dev")
            .clone();
        self.api_with(&token, method, path, body)
    }

    fn api_with(&self, token: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let auth = format!("Bearer {token}");
        let body = body.map(|b| {
            if let Value::String(s) = b {
                s
            } else {
                b.to_string()
            }
        });
        call(
            &self.url,
            method,
            path,
            &[("Authorization", &auth)],
            body.as_deref(),
        )
    }

    pub(crate) fn ok(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let (status, v) = self.api(method, path, body);
        assert!(
            (200..300).contains(&status),
            "{method} {path}: {status} {v}"
        );
        v
    }

    /// A runner, a rule and an environment; state in the moto bucket `bucket`.
    pub(crate) fn setup(&self, bucket: &str, runner_extra: &str) {
        let s3 = format!(
            "runner_configuration:\n  type: local\n{runner_extra}state_storage_configuration:\n  type: s3\n  bucket: {bucket}\n  key_prefix: sortie/\n  region: us-east-1\n  endpoint: {}\n",
            sortie_testkit::endpoint()
        );
        self.ok(
            "POST",
            "/v1/groups/acme/-/runners/local",
            Some(Value::String(s3)),
        );
        self.ok(
            "POST",
            "/v1/groups/acme/-/rules",
            Some(json!({"id": "default", "runner_id": "acme/local"})),
        );
        self.ok(
            "POST",
            "/v1/groups/acme/demo/-/environments",
            Some(json!({"name": "hello", "env_type": "development"})),
        );
    }

    pub(crate) fn submit(&self, operation: &str, files: Value) -> String {
        self.submit_to("acme/demo/hello", operation, files)
    }

    fn submit_to(&self, env: &str, operation: &str, files: Value) -> String {
        let v = self.ok("POST", &format!("/v1/environments/{env}/-/jobs"), Some(json!({"operation": operation, "files": files, "variables": {"greeting": "hi from the e2e test"}})));
        v["id"].as_str().unwrap().to_string()
    }

    pub(crate) fn wait_terminal(&self, id: &str, limit: Duration) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            let job = self.ok("GET", &format!("/v1/jobs/{id}"), None);
            if ["succeeded", "failed", "canceled", "timed_out", "discarded"]
                .contains(&job["state"].as_str().unwrap())
            {
                return job;
            }
            assert!(Instant::now() < deadline, "job {id} did not finish: {job}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Waits until `check` holds for the job, and returns it.
    pub(crate) fn wait_job(
        &self,
        id: &str,
        limit: Duration,
        what: &str,
        check: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            let job = self.ok("GET", &format!("/v1/jobs/{id}"), None);
            if check(&job) {
                return job;
            }
            assert!(Instant::now() < deadline, "job {id}: never {what}: {job}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    pub(crate) fn log(&self, id: &str) -> String {
        let mut offset = 0;
        let mut text = String::new();
        loop {
            let v = self.ok("GET", &format!("/v1/jobs/{id}/logs?offset={offset}"), None);
            text.push_str(v["data"].as_str().unwrap());
            offset = v["next_offset"].as_u64().unwrap();
            if v["data"].as_str().unwrap().is_empty() {
                return text;
            }
        }
    }
}

pub(crate) fn hello_files() -> Value {
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

fn at(job: &Value, state: &str) -> String {
    job["transitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["to"] == state)
        .map(|t| t["at"].as_str().unwrap().to_string())
        .next_back()
        .unwrap_or_default()
}

pub(crate) fn state_bucket() -> String {
    let bucket = sortie_testkit::unique("state");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let s3 = sortie_testkit::s3_client(&sortie_testkit::sdk_config().await);
        s3.create_bucket().bucket(&bucket).send().await.unwrap();
    });
    bucket
}

fn read_state(bucket: &str, key: &str) -> Value {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let s3 = sortie_testkit::s3_client(&sortie_testkit::sdk_config().await);
        let out = s3
            .get_object()
            .bucket(bucket)
            .key(key)
            .send()
            .await
            .expect("the state object exists");
        serde_json::from_slice(&out.body.collect().await.unwrap().into_bytes()).unwrap()
    })
}

#[test]
fn plan_and_apply_succeed_with_state_in_s3_ordered_logs_and_a_second_apply_that_waits() {
    sortie_testkit::require_aws!();
    let dev = Dev::start();
    let bucket = state_bucket();
    dev.setup(&bucket, "");
    let plan = dev.submit("plan", hello_files());
    let apply = dev.submit("apply", hello_files());
    let second = dev.submit("apply", hello_files());
    let (plan, apply, second) = (
        dev.wait_terminal(&plan, Duration::from_secs(90)),
        dev.wait_terminal(&apply, Duration::from_secs(90)),
        dev.wait_terminal(&second, Duration::from_secs(90)),
    );
    for job in [&plan, &apply, &second] {
        assert_eq!(job["state"], "succeeded", "{job}");
        assert_eq!(
            job["summary"]["destroy"], 0,
            "a summary was reported: {job}"
        );
    }
    // One writer at a time, in FIFO order: each job starts after the previous one ended.
    assert!(
        at(&apply, "dispatching") >= at(&plan, "succeeded"),
        "apply waited for the plan"
    );
    assert!(
        at(&second, "dispatching") >= at(&apply, "succeeded"),
        "the second apply waited for the first"
    );
    // The state object is under the environment's key, with the applied output.
    let state = read_state(&bucket, "sortie/acme/demo/hello/terraform.tfstate");
    let root = state["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["path"] == json!(["root"]))
        .unwrap();
    assert_eq!(root["outputs"]["message"]["value"], "hi from the e2e test!");
    // The log has terraform's output, in order.
    let log = dev.log(apply["id"].as_str().unwrap());
    let init = log
        .find("Initializing the backend")
        .expect("init in the log");
    let done = log.find("Apply complete!").expect("apply in the log");
    assert!(init < done, "in order:\n{log}");
    assert!(log.contains("message = hi from the e2e test!"));
    // The runner's uploads went through presigned URLs into the control plane's bucket.
    let (objects, _) = everything_stored(&dev);
    let (plan_id, apply_id) = (plan["id"].as_str().unwrap(), apply["id"].as_str().unwrap());
    for key in [
        format!("artifacts/{plan_id}/plan.tfplan"),
        format!("artifacts/{plan_id}/summary.json"),
        format!("artifacts/{apply_id}/summary.json"),
        format!("artifacts/{apply_id}/outputs.json"),
    ] {
        assert!(objects.contains(&key), "{key} uploaded");
    }
    for job in [&plan, &apply, &second] {
        assert!(job.get("upload_problems").is_none(), "{job}");
    }
}

/// Deliver 3: the control plane's bucket refuses every upload (it is gone); the apply
/// still succeeds, and its job record says what did not arrive.
#[test]
fn refused_uploads_leave_a_successful_apply_successful_with_the_problems_recorded() {
    sortie_testkit::require_aws!();
    let dev = Dev::start();
    let bucket = state_bucket();
    dev.setup(&bucket, "");
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let s3 = sortie_testkit::s3_client(&sortie_testkit::sdk_config().await);
        s3.delete_bucket().bucket(&dev.bucket).send().await.unwrap();
    });
    let id = dev.submit("apply", hello_files());
    let job = dev.wait_terminal(&id, Duration::from_secs(120));
    assert_eq!(job["state"], "succeeded", "{job}");
    let problems: Vec<String> = job["upload_problems"]
        .as_array()
        .unwrap_or_else(|| panic!("problems recorded: {job}"))
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect();
    let all = problems.join("\n");
    assert!(
        all.contains("summary") && all.contains("NoSuchBucket"),
        "{all}"
    );
    assert!(all.contains("the log from byte 0"), "{all}");
    assert!(
        !all.contains("X-Amz-Signature"),
        "no presigned URL is shown: {all}"
    );
}

#[test]
fn a_terraform_syntax_error_fails_the_job_with_the_error_as_its_reason_and_in_the_log() {
    sortie_testkit::require_aws!();
    let dev = Dev::start();
    let bucket = state_bucket();
    dev.setup(&bucket, "");
    let id = dev.submit(
        "apply",
        json!({"main.tf": "output \"broken\" {\n  value = \n"}),
    );
    let job = dev.wait_terminal(&id, Duration::from_secs(90));
    assert_eq!(job["state"], "failed", "{job}");
    let reason = job["transitions"].as_array().unwrap().last().unwrap()["reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        reason.contains("code 1") && reason.to_lowercase().contains("error"),
        "the terraform error is the reason: {reason}"
    );
    let log = dev.log(&id);
    assert!(
        log.to_lowercase().contains("error"),
        "and it is in the log:\n{log}"
    );
    assert!(
        log.trim_end()
            .lines()
            .last()
            .unwrap()
            .starts_with("sortie-pilot:"),
        "the last log line is the runner's one-line reason:\n{log}"
    );
}

#[test]
fn canceling_a_running_local_job_kills_its_process_group_and_ends_canceled() {
    sortie_testkit::require_aws!();
    let dev = Dev::start();
    let bucket = state_bucket();
    // A runner that never finishes on its own, with a child process of its own.
    let script = dev.dir.join("slow-runner.sh");
    std::fs::write(&script, "#!/bin/sh\nsleep 300 &\nwait\n").unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&script)
        .status()
        .unwrap();
    dev.setup(&bucket, &format!("  runner_binary: {}\n", script.display()));
    let id = dev.submit("apply", hello_files());
    let deadline = Instant::now() + Duration::from_secs(30);
    let task = loop {
        let job = dev.ok("GET", &format!("/v1/jobs/{id}"), None);
        if job["state"] == "running" {
            break job["task_arn"].as_str().unwrap().to_string();
        }
        assert!(Instant::now() < deadline, "never ran: {job}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let pid: i32 = task.rsplit('-').next().unwrap().parse().unwrap();
    let (status, body) = dev.api("POST", &format!("/v1/jobs/{id}/cancel"), None);
    assert_eq!(status, 202, "{body}");
    let job = dev.wait_terminal(&id, Duration::from_secs(30));
    assert_eq!(job["state"], "canceled", "{job}");
    assert!(
        !at(&job, "canceled").is_empty(),
        "the cancel is recorded with its time"
    );
    // The whole process group is gone: the runner and its `sleep` child.
    let alive = || {
        Command::new("pgrep")
            .args(["-g", &pid.to_string()])
            .output()
            .map(|o| !o.stdout.is_empty())
            .unwrap_or(false)
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!alive(), "process group {pid} still has processes");
}

#[test]
fn requests_without_the_dev_token_are_refused() {
    sortie_testkit::require_aws!();
    let dev = Dev::start();
    let (status, body) = call(&dev.url, "GET", "/v1/groups/acme/-/runners", &[], None);
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (401, Some("unauthenticated"))
    );
    assert_eq!(call(&dev.url, "GET", "/v1/health", &[], None).0, 200);
    // Routes are matched as the router matches them, (method, template): a user route
    // that ends like an agent's route, and a runner route's path with another method,
    // need the token.
    for (method, path) in [
        ("DELETE", "/v1/agent-pools/apool-1/tokens/exit"),
        ("DELETE", "/v1/jobs/j1/spec"),
        ("GET", "/v1/jobs/spec"),
    ] {
        let (status, body) = call(&dev.url, method, path, &[], None);
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (401, Some("unauthenticated")),
            "{method} {path}: {body}"
        );
    }
    // The ready file holds every token: only its owner may read it.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dev.dir.join("ready.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "ready.json is {mode:o}");
    }
    // The scheme in any case; a wrong token is `invalid_token`, and each 401 challenges.
    let lower = format!("bearer {}", dev.token);
    let (status, _) = call(
        &dev.url,
        "GET",
        "/v1/groups/acme/-/runners",
        &[("Authorization", &lower)],
        None,
    );
    assert_eq!(status, 200);
    let (status, body) = call(
        &dev.url,
        "GET",
        "/v1/groups/acme/-/runners",
        &[("Authorization", "Bearer wrong")],
        None,
    );
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (401, Some("invalid_token"))
    );
    let challenge = |auth: Option<&str>| -> Option<String> {
        use std::io::{Read, Write};
        let host = dev.url.trim_start_matches("http://").trim_end_matches('/');
        let mut stream = std::net::TcpStream::connect(host).unwrap();
        let auth = auth
            .map(|a| format!("Authorization: {a}\r\n"))
            .unwrap_or_default();
        write!(stream, "GET /v1/groups/acme/-/runners HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n{auth}\r\n").unwrap();
        let mut raw = String::new();
        stream.read_to_string(&mut raw).unwrap();
        raw.lines().take_while(|l| !l.is_empty()).find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("www-authenticate:")
                .map(|_| l["www-authenticate:".len()..].trim().to_string())
        })
    };
    assert_eq!(challenge(None).as_deref(), Some("Bearer"));
    assert_eq!(challenge(Some("Basic eDp5")).as_deref(), Some("Bearer"));
    assert_eq!(
        challenge(Some("Bearer wrong")).as_deref(),
        Some(r#"Bearer error="invalid_token""#)
    );
}

/// Exactly-once in local mode: `sortie dev` killed with SIGKILL while 60 jobs flow over 6
/// environments, then restarted against the same moto and work directory.
#[test]
fn a_sigkilled_sortie_dev_restarts_and_every_job_ends_once_launched_once() {
    sortie_testkit::require_aws!();
    let names = Names::fresh();
    let lease = 10;
    let lease_arg = lease.to_string();
    let args = ["--dispatch-lease", lease_arg.as_str()];
    let mut dev = Dev::launch(&names, &args);
    let bucket = state_bucket();
    dev.setup(&bucket, "");
    let envs: Vec<String> = std::iter::once("acme/demo/hello".to_string())
        .chain((1..6).map(|i| format!("acme/demo/e{i}")))
        .collect();
    for env in &envs[1..] {
        let name = env.rsplit('/').next().unwrap();
        dev.ok(
            "POST",
            "/v1/groups/acme/demo/-/environments",
            Some(json!({"name": name, "env_type": "development"})),
        );
    }
    let files = hello_files();
    // Submitted by one client per environment at once, so that the environments build
    // queues faster than `sortie dev` works them off: the kill below must find jobs
    // still waiting. Job i goes to environment i % 6, as its 1 + i / 6th job.
    let per_env: Vec<Vec<String>> = std::thread::scope(|scope| {
        let submitters: Vec<_> = (0..6)
            .map(|e| {
                let (dev, envs, files) = (&dev, &envs, &files);
                scope.spawn(move || {
                    (0..10)
                        .map(|k| {
                            let i = k * 6 + e;
                            let op = if i % 3 == 0 { "apply" } else { "plan" };
                            dev.submit_to(&envs[e], op, files.clone())
                        })
                        .collect::<Vec<String>>()
                })
            })
            .collect();
        submitters.into_iter().map(|s| s.join().unwrap()).collect()
    });
    let ids: Vec<String> = (0..60).map(|i| per_env[i % 6][i / 6].clone()).collect();
    let states = |dev: &Dev| -> Vec<(String, Value)> {
        ids.iter()
            .map(|id| (id.clone(), dev.ok("GET", &format!("/v1/jobs/{id}"), None)))
            .collect()
    };
    // Kill it mid-flow: some jobs done, some running, most still waiting (watching the
    // first two jobs of each environment only, to keep the polling light).
    let deadline = Instant::now() + Duration::from_secs(120);
    while ids[..12]
        .iter()
        .filter(|id| dev.ok("GET", &format!("/v1/jobs/{id}"), None)["state"] == "succeeded")
        .count()
        < 6
    {
        assert!(Instant::now() < deadline, "jobs did not start flowing");
        std::thread::sleep(Duration::from_millis(100));
    }
    let url_port: u16 = dev.url.rsplit(':').next().unwrap().parse().unwrap();
    dev.child.kill().unwrap(); // SIGKILL: no shutdown path runs
    dev.child.wait().unwrap();
    let killed_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, true);
    drop(dev);
    // Let some runners finish while nobody listens.
    std::thread::sleep(Duration::from_secs(2));
    // The same port: runners launched before the kill call back the URL they were given.
    let restarted = Instant::now();
    let port = url_port.to_string();
    let mut again = args.to_vec();
    again.extend(["--port", port.as_str()]);
    let dev = Dev::launch(&names, &again);
    let deadline = Instant::now() + Duration::from_secs(300);
    let terminal = |j: &Value| {
        ["succeeded", "failed", "canceled", "timed_out"].contains(&j["state"].as_str().unwrap())
    };
    let finished = loop {
        let now = states(&dev);
        if now.iter().all(|(_, j)| terminal(j)) {
            break now;
        }
        assert!(
            Instant::now() < deadline,
            "not every job ended after the restart"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let all_done = restarted.elapsed();
    // From the recorded transitions: what was in flight and what was waiting at the kill.
    let ended_at = |j: &Value| {
        j["transitions"].as_array().unwrap().last().unwrap()["at"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (mut in_flight, mut waiting, mut in_flight_end) = (0, 0, String::new());
    for (_, j) in &finished {
        let claimed = at(j, "dispatching");
        if claimed > killed_at {
            waiting += 1;
        } else if ended_at(j) > killed_at {
            in_flight += 1;
            in_flight_end = in_flight_end.max(ended_at(j));
        }
    }
    let in_flight_done = chrono::DateTime::parse_from_rfc3339(&in_flight_end)
        .map(|t| {
            (t.with_timezone(&chrono::Utc)
                - chrono::DateTime::parse_from_rfc3339(&killed_at)
                    .unwrap()
                    .with_timezone(&chrono::Utc))
            .to_std()
            .unwrap_or_default()
        })
        .unwrap_or_default();
    assert!(
        waiting >= 10,
        "the kill came mid-flow: {waiting} jobs still waiting"
    );
    eprintln!(
        "restart: {waiting} jobs waiting and {in_flight} in flight at the kill; the in-flight ones ended {:.1}s after the kill; all 60 terminal {:.1}s after the restart",
        in_flight_done.as_secs_f64(),
        all_done.as_secs_f64()
    );
    // 0 lost, 0 failed (no refused token, no false "vanished").
    for (id, job) in &finished {
        assert_eq!(job["state"], "succeeded", "{id}: {job}");
    }
    // 0 launched twice: one launch record per job, and one move to running per job.
    let jobs_dir = names.dir.join("jobs");
    for (id, job) in &finished {
        let launches = std::fs::read_dir(&jobs_dir)
            .unwrap()
            .flatten()
            .filter(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.starts_with(id.as_str()) && n.ends_with(".task.json")
            })
            .count();
        assert_eq!(launches, 1, "{id} was launched {launches} times: {job}");
        let runs = job["transitions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["to"] == "running")
            .count();
        assert_eq!(runs, 1, "{id}: {job}");
    }
    // Every job in flight at the kill ended after the restart, adopted (launched once,
    // above), not waited out: within two dispatch leases on an idle host (22 s); the bound
    // is a loaded host's (one moto serves every test at once: 40 s was seen).
    assert!(
        in_flight_done <= Duration::from_secs(12 * lease),
        "in-flight jobs took {in_flight_done:?}"
    );
}

/// Every object of the control plane's bucket and every item of its table, as text.
fn everything_stored(dev: &Dev) -> (String, String) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let config = sortie_testkit::sdk_config().await;
        let s3 = sortie_testkit::s3_client(&config);
        let mut objects = String::new();
        let listed = s3
            .list_objects_v2()
            .bucket(&dev.bucket)
            .send()
            .await
            .unwrap();
        for o in listed.contents() {
            let key = o.key().unwrap();
            let out = s3
                .get_object()
                .bucket(&dev.bucket)
                .key(key)
                .send()
                .await
                .unwrap();
            objects.push_str(key);
            objects.push('\n');
            objects.push_str(&String::from_utf8_lossy(
                &out.body.collect().await.unwrap().into_bytes(),
            ));
        }
        let ddb = sortie_testkit::dynamodb_client(&config);
        let mut items = String::new();
        let mut start = None;
        loop {
            let page = ddb
                .scan()
                .table_name(&dev.table)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .unwrap();
            for item in page.items() {
                items.push_str(&format!("{item:?}\n"));
            }
            match page.last_evaluated_key {
                Some(k) if !k.is_empty() => start = Some(k),
                _ => break,
            }
        }
        (objects, items)
    })
}

/// Deliver 4: a secret in Secrets Manager reaches terraform through the job's
/// `secret_refs` (as `TF_VAR_db_password`), resolved by the `local` launcher as ECS
/// would; the value appears nowhere in the log, the table or the bucket.
#[test]
fn a_secret_reaches_terraform_and_is_never_stored_or_logged() {
    sortie_testkit::require_aws!();
    use sha2::Digest;
    let dev = Dev::start();
    let bucket = state_bucket();
    dev.setup(&bucket, "");
    let value = format!("s3cr3t-{}", sortie_testkit::unique("value"));
    let arn = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let sm = aws_sdk_secretsmanager::Client::new(&sortie_testkit::sdk_config().await);
        sm.create_secret()
            .name(sortie_testkit::unique("db-password"))
            .secret_string(&value)
            .send()
            .await
            .unwrap()
            .arn
            .unwrap()
    });
    // The configuration proves it saw the value by its SHA-256, never by the value.
    let files = json!({"main.tf": "variable \"db_password\" {}\n\noutput \"db_password_sha256\" {\n  value = \"${sha256(var.db_password)}\"\n}\n"});
    let job = dev.ok(
        "POST",
        "/v1/environments/acme/demo/hello/-/jobs",
        Some(json!({"operation": "apply", "files": files, "secret_refs": {"TF_VAR_db_password": arn}})),
    );
    let id = job["id"].as_str().unwrap();
    let job = dev.wait_terminal(id, Duration::from_secs(120));
    let log = dev.log(id);
    assert_eq!(job["state"], "succeeded", "{job}\n{log}");
    let digest: String = sha2::Sha256::digest(value.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert!(
        log.contains(&format!("db_password_sha256 = {digest}")),
        "terraform saw the value: {log}"
    );
    assert!(log.contains("TF_VAR_db_password"), "{log}");
    assert!(!log.contains(&value), "the value is in the log: {log}");
    let (objects, items) = everything_stored(&dev);
    assert!(
        objects.contains(&format!("logs/{id}/")),
        "the scan saw the log"
    );
    assert!(items.contains(&arn), "the table holds the reference");
    assert!(!objects.contains(&value), "the value is in the bucket");
    assert!(!items.contains(&value), "the value is in the table");
}

/// The hello example plus a sensitive output, for Terraform 1.0.3.
fn hello_with_secret_output() -> Value {
    let mut files = hello_files();
    files.as_object_mut().unwrap().insert(
        "secret.tf".into(),
        Value::String(
            "output \"db_password\" {\n  value     = \"s3cr3t-never-shown\"\n  sensitive = true\n}\n".into(),
        ),
    );
    files
}

/// A runner on Terraform 1.0.3 (by the runner's own `version`), a rule, and environment
/// `acme/demo/<name>` with `settings`.
pub(crate) fn setup_tf1(dev: &Dev, bucket: &str, name: &str, settings: Value) {
    let runner = format!(
        "tool_version: \"1.0.3\"\nrunner_configuration:\n  type: local\nstate_storage_configuration:\n  type: s3\n  bucket: {bucket}\n  key_prefix: sortie/\n  region: us-east-1\n  endpoint: {}\n",
        sortie_testkit::endpoint()
    );
    let (status, _) = dev.api("GET", "/v1/groups/acme/-/runners/tf1", None);
    if status == 404 {
        dev.ok(
            "POST",
            "/v1/groups/acme/-/runners/tf1",
            Some(Value::String(runner)),
        );
        dev.ok(
            "POST",
            "/v1/groups/acme/-/rules",
            Some(json!({"id": "tf1", "runner_id": "acme/tf1"})),
        );
    }
    let mut body = json!({"name": name, "env_type": "production"});
    for (k, v) in settings.as_object().unwrap() {
        body[k] = v.clone();
    }
    dev.ok("POST", "/v1/groups/acme/demo/-/environments", Some(body));
}

pub(crate) fn grant(dev: &Dev, user: &str, role: &str) {
    dev.ok(
        "POST",
        "/v1/groups/acme/-/memberships",
        Some(json!({"role": role, "grantee": {"kind": "subject", "subject": user}})),
    );
}

/// Issue 15's end-to-end test: with `approval: required` and four eyes, an apply plans,
/// waits holding the lock (a job submitted meanwhile waits too), is refused to its own
/// requester and to a viewer, is approved by a second person, and a second task applies
/// exactly the saved plan; its outputs are served with the sensitive one redacted.
#[test]
fn a_reviewed_apply_waits_for_a_second_person_then_applies_the_saved_plan_with_terraform_1() {
    sortie_testkit::require_aws!();
    let dev = Dev::launch(
        &Names::fresh(),
        &["--user", "alice", "--user", "bob", "--user", "carol"],
    );
    let bucket = state_bucket();
    setup_tf1(
        &dev,
        &bucket,
        "prod",
        json!({"approval": "required", "four_eyes": true}),
    );
    grant(&dev, "alice", "deployer");
    grant(&dev, "bob", "deployer");
    grant(&dev, "carol", "viewer");

    let (status, submitted) = dev.api_as(
        "alice",
        "POST",
        "/v1/environments/acme/demo/prod/-/jobs",
        Some(json!({"operation": "apply", "files": hello_with_secret_output(), "variables": {"greeting": "reviewed"}})),
    );
    assert_eq!(status, 201, "{submitted}");
    let id = submitted["id"].as_str().unwrap().to_string();
    assert_eq!(submitted["review"]["phase"], "plan", "{submitted}");
    let awaiting = dev.wait_job(&id, Duration::from_secs(90), "awaiting approval", |j| {
        j["state"] != "queued" && j["state"] != "dispatching" && j["state"] != "running"
    });
    assert_eq!(awaiting["state"], "awaiting_approval", "{awaiting}");
    let plan_task = awaiting["plan_phase"]["task_arn"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(awaiting["plan_phase"]["summary"].is_object(), "{awaiting}");
    assert_eq!(
        awaiting["tool_used"],
        json!({"tool": "terraform", "version": "1.0.3"})
    );
    // The plan changed nothing: no state object yet.
    let state_key = "sortie/acme/demo/prod/terraform.tfstate";
    assert!(
        try_read_state(&bucket, state_key).is_none(),
        "the plan phase wrote state"
    );

    // A job submitted meanwhile waits: the reviewed job holds the environment's lock.
    let (_, waiting) = dev.api_as(
        "bob",
        "POST",
        "/v1/environments/acme/demo/prod/-/jobs",
        Some(json!({"operation": "plan", "files": hello_files()})),
    );
    let waiting_id = waiting["id"].as_str().unwrap().to_string();
    std::thread::sleep(Duration::from_secs(3));
    let still = dev.ok("GET", &format!("/v1/jobs/{waiting_id}"), None);
    assert_eq!(still["state"], "queued", "{still}");
    let env = dev.ok("GET", "/v1/environments/acme/demo/prod", None);
    assert_eq!(env["active_job"], id.as_str(), "{env}");

    // Four eyes: alice may not approve her own job; carol (a viewer) sees it but is told
    // the role she lacks; nobody may approve a job that is not awaiting approval.
    let (status, own) = dev.api_as("alice", "POST", &format!("/v1/jobs/{id}/approve"), None);
    assert_eq!(status, 403, "{own}");
    assert!(
        own["error"]["message"]
            .as_str()
            .unwrap()
            .contains("four eyes"),
        "{own}"
    );
    let (status, viewer) = dev.api_as("carol", "POST", &format!("/v1/jobs/{id}/approve"), None);
    assert_eq!(status, 403, "{viewer}");
    assert!(
        viewer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("deployer"),
        "{viewer}"
    );
    let (status, not_awaiting) = dev.api_as(
        "bob",
        "POST",
        &format!("/v1/jobs/{waiting_id}/approve"),
        None,
    );
    assert_eq!(status, 409, "{not_awaiting}");
    assert!(
        not_awaiting["error"]["message"]
            .as_str()
            .unwrap()
            .contains("queued"),
        "{not_awaiting}"
    );

    // Bob approves: a second task applies the saved plan.
    let (status, approved) = dev.api_as(
        "bob",
        "POST",
        &format!("/v1/jobs/{id}/approve"),
        Some(json!({"comment": "looks right"})),
    );
    assert_eq!(status, 200, "{approved}");
    let done = dev.wait_terminal(&id, Duration::from_secs(90));
    assert_eq!(done["state"], "succeeded", "{done}");
    let decision = &done["review"]["decision"];
    assert_eq!(decision["verdict"], "approved");
    assert_eq!(decision["by"], "bob");
    assert_eq!(decision["comment"], "looks right");
    assert_eq!(done["review"]["phase"], "apply");
    assert_ne!(
        done["task_arn"].as_str().unwrap(),
        plan_task,
        "a second task applied it"
    );
    assert_eq!(done["attempt"], 2, "{done}");
    // Both phases in one log: the plan to a file, then the apply of exactly that file.
    let log = dev.log(&id);
    let planned = log
        .find("-out=plan.tfplan")
        .expect("the plan phase in the log");
    let applied = log
        .find("$ terraform apply -input=false -no-color plan.tfplan")
        .expect("the apply of the saved plan in the log");
    assert!(planned < applied, "{log}");
    assert!(!log.contains("-auto-approve"), "{log}");
    assert!(
        !log.contains("s3cr3t-never-shown"),
        "a sensitive value reached the log"
    );
    let state = read_state(&bucket, state_key);
    assert_eq!(state["outputs"]["message"]["value"], "reviewed!", "{state}");

    // Outputs: of the job and of the environment's latest apply (recorded just after the
    // job's end); the sensitive one has no value.
    wait_last_apply(&dev, "acme/demo/prod", &id);
    for path in [
        format!("/v1/jobs/{id}/outputs"),
        "/v1/environments/acme/demo/prod/-/outputs".to_string(),
    ] {
        let outputs = dev.ok("GET", &path, None);
        assert_eq!(outputs["job_id"], id.as_str());
        assert_eq!(
            outputs["outputs"]["message"]["value"], "reviewed!",
            "{outputs}"
        );
        assert_eq!(
            outputs["outputs"]["db_password"]["sensitive"], true,
            "{outputs}"
        );
        assert!(
            outputs["outputs"]["db_password"].get("value").is_none(),
            "{outputs}"
        );
        assert!(!outputs.to_string().contains("s3cr3t"), "{outputs}");
    }
    // The job that waited ran after the reviewed job ended.
    let waited = dev.wait_terminal(&waiting_id, Duration::from_secs(90));
    assert_eq!(waited["state"], "succeeded", "{waited}");
    assert!(
        at(&waited, "dispatching") >= at(&done, "succeeded"),
        "{waited}"
    );
    // Approving it again: 409, naming the state.
    let (status, again) = dev.api_as("bob", "POST", &format!("/v1/jobs/{id}/approve"), None);
    assert_eq!(status, 409, "{again}");
    assert!(
        again["error"]["message"]
            .as_str()
            .unwrap()
            .contains("succeeded"),
        "{again}"
    );
}

/// A discarded plan ends the job `discarded`, applies nothing and frees the environment.
#[test]
fn a_discarded_plan_applies_nothing_and_releases_the_environment() {
    sortie_testkit::require_aws!();
    let dev = Dev::launch(&Names::fresh(), &["--user", "alice"]);
    let bucket = state_bucket();
    setup_tf1(&dev, &bucket, "stage", json!({"approval": "required"}));
    let id = dev.submit_to("acme/demo/stage", "apply", hello_files());
    dev.wait_job(&id, Duration::from_secs(90), "awaiting approval", |j| {
        j["state"] == "awaiting_approval"
    });
    let discarded = dev.ok(
        "POST",
        &format!("/v1/jobs/{id}/discard"),
        Some(json!({"comment": "not today"})),
    );
    assert_eq!(discarded["state"], "discarded", "{discarded}");
    assert_eq!(discarded["review"]["decision"]["verdict"], "discarded");
    let env = dev.ok("GET", "/v1/environments/acme/demo/stage", None);
    assert!(env.get("active_job").is_none(), "{env}");
    assert!(try_read_state(&bucket, "sortie/acme/demo/stage/terraform.tfstate").is_none());
    let (status, _) = dev.api("GET", &format!("/v1/jobs/{id}/outputs"), None);
    assert_eq!(status, 404);
}

pub(crate) fn try_read_state(bucket: &str, key: &str) -> Option<Value> {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let s3 = sortie_testkit::s3_client(&sortie_testkit::sdk_config().await);
        let out = s3.get_object().bucket(bucket).key(key).send().await.ok()?;
        serde_json::from_slice(&out.body.collect().await.ok()?.into_bytes()).ok()
    })
}

/// Makes the environment's next drift check due now, as if its time had come: the
/// sweeper (every second under test) fires it on its next pass.
pub(crate) fn make_drift_due(dev: &Dev, path: &str) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let ddb = sortie_testkit::dynamodb_client(&sortie_testkit::sdk_config().await);
        let past = (chrono::Utc::now() - chrono::Duration::minutes(1))
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let item = ddb
            .get_item()
            .table_name(&dev.table)
            .key(
                "pk",
                aws_sdk_dynamodb::types::AttributeValue::S(format!("ENV#{path}")),
            )
            .key(
                "sk",
                aws_sdk_dynamodb::types::AttributeValue::S("ENV".into()),
            )
            .send()
            .await
            .unwrap()
            .item
            .expect("the environment item");
        assert!(
            item.contains_key("next_drift_at"),
            "a drift schedule sets next_drift_at: {item:?}"
        );
        ddb.update_item()
            .table_name(&dev.table)
            .key(
                "pk",
                aws_sdk_dynamodb::types::AttributeValue::S(format!("ENV#{path}")),
            )
            .key(
                "sk",
                aws_sdk_dynamodb::types::AttributeValue::S("ENV".into()),
            )
            .update_expression("SET next_drift_at = :t, gsi3sk = :s")
            .expression_attribute_values(
                ":t",
                aws_sdk_dynamodb::types::AttributeValue::S(past.clone()),
            )
            .expression_attribute_values(
                ":s",
                aws_sdk_dynamodb::types::AttributeValue::S(format!("{past}#{path}")),
            )
            .send()
            .await
            .unwrap();
    });
}

/// Changes the applied output's value inside the state object, behind Sortie's back.
fn tamper_state(bucket: &str, key: &str) {
    let mut state = read_state(bucket, key);
    state["outputs"]["message"]["value"] = json!("changed behind sortie's back");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let s3 = sortie_testkit::s3_client(&sortie_testkit::sdk_config().await);
        s3.put_object()
            .bucket(bucket)
            .key(key)
            .body(state.to_string().into_bytes().into())
            .send()
            .await
            .unwrap();
    });
}

/// Waits until environment `path` records `job` as its latest apply, and returns it.
fn wait_last_apply(dev: &Dev, path: &str, job: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let env = dev.ok("GET", &format!("/v1/environments/{path}"), None);
        if env["last_apply"]["job_id"] == job {
            return env;
        }
        assert!(
            Instant::now() < deadline,
            "{job} never became the latest apply: {env}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub(crate) fn wait_drift(dev: &Dev, path: &str, not_job: Option<&str>) -> Value {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let env = dev.ok("GET", &format!("/v1/environments/{path}"), None);
        if let Some(drift) = env.get("drift") {
            if not_job.is_none_or(|j| drift["job_id"] != j) {
                return env;
            }
        }
        assert!(Instant::now() < deadline, "no drift check recorded: {env}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Issue 15's drift test: a scheduled check of an untouched environment is `in_sync`; after
/// the state is changed behind Sortie's back, the next scheduled check reports `drifted`.
#[test]
fn a_scheduled_drift_check_reports_in_sync_then_drifted_after_the_state_changed_behind_sortie() {
    sortie_testkit::require_aws!();
    let dev = Dev::start();
    let bucket = state_bucket();
    let path = "acme/demo/drifty";
    setup_tf1(
        &dev,
        &bucket,
        "drifty",
        json!({"drift_schedule": "*/15 * * * *"}),
    );
    // Nothing applied yet: a fire is skipped and says why.
    make_drift_due(&dev, path);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let env = dev.ok("GET", &format!("/v1/environments/{path}"), None);
        if let Some(skipped) = env.get("drift_skipped") {
            assert!(
                skipped["reason"]
                    .as_str()
                    .unwrap()
                    .contains("no successful apply"),
                "{env}"
            );
            assert!(
                env["next_drift_at"].as_str().unwrap() > skipped["at"].as_str().unwrap(),
                "{env}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the fire was not recorded as skipped: {env}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let apply = dev.submit_to(path, "apply", hello_files());
    assert_eq!(
        dev.wait_terminal(&apply, Duration::from_secs(90))["state"],
        "succeeded"
    );
    // The environment records its latest apply just after the job's end is written.
    let env = wait_last_apply(&dev, path, &apply);
    assert_eq!(env["last_apply"]["job_id"], apply.as_str(), "{env}");

    make_drift_due(&dev, path);
    let env = wait_drift(&dev, path, None);
    assert_eq!(env["drift"]["status"], "in_sync", "{env}");
    let first = env["drift"]["job_id"].as_str().unwrap().to_string();
    let check = dev.ok("GET", &format!("/v1/jobs/{first}"), None);
    assert_eq!(check["operation"], "plan");
    assert_eq!(check["requested_by"], "sortie:drift");
    assert_eq!(check["drift_check"], true);
    assert_eq!(check["summary"]["has_changes"], false, "{check}");
    assert!(dev.log(&first).contains("-detailed-exitcode"));

    tamper_state(&bucket, "sortie/acme/demo/drifty/terraform.tfstate");
    make_drift_due(&dev, path);
    let env = wait_drift(&dev, path, Some(&first));
    assert_eq!(env["drift"]["status"], "drifted", "{env}");
    let second = env["drift"]["job_id"].as_str().unwrap();
    let check = dev.ok("GET", &format!("/v1/jobs/{second}"), None);
    assert_eq!(
        check["state"], "succeeded",
        "a drift is a successful check: {check}"
    );
    assert_eq!(check["summary"]["has_changes"], true, "{check}");
    // Remediation is off by default: nothing else was submitted.
    assert!(env["drift"].get("remediation_job_id").is_none(), "{env}");
    let jobs = dev.ok("GET", &format!("/v1/environments/{path}/-/jobs"), None);
    assert_eq!(jobs["jobs"].as_array().unwrap().len(), 3, "{jobs}");
}

/// A `sortie-agent` process pulling the jobs of `pool`, running terraform `terraform`.
struct Agent {
    child: Child,
    log: PathBuf,
}

impl Agent {
    fn start(
        dev: &Dev,
        pool: &str,
        token: &str,
        name: &str,
        terraform: &std::path::Path,
        max_jobs: u32,
    ) -> Self {
        let work = dev.dir.join(format!("agent-{name}"));
        std::fs::create_dir_all(&work).unwrap();
        let log = dev.dir.join(format!("agent-{name}.log"));
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(sortie_testkit::runtime::function_binary("sortie-agent"))
            .args([
                "--api-url",
                &dev.url,
                "--pool",
                pool,
                "--token",
                token,
                "--name",
                name,
            ])
            .args(["--max-jobs", &max_jobs.to_string(), "--wait-seconds", "2"])
            .arg("--runner-binary")
            .arg(sortie_testkit::runtime::function_binary("sortie-pilot"))
            .arg("--work-dir")
            .arg(&work)
            .env("SORTIE_TERRAFORM", terraform)
            .env("AWS_ENDPOINT_URL", sortie_testkit::endpoint())
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("start sortie-agent");
        Self { child, log }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "--- {} ---\n{}",
                self.log.display(),
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
        }
        self.kill();
    }
}

/// Terraform behind a wrapper that sleeps before `commands` (`plan`, `apply`): a job an agent
/// can be killed in the middle of.
fn slow_terraform(dir: &std::path::Path, commands: &str) -> PathBuf {
    let path = dir.join(format!("slow-terraform-{}", commands.replace('|', "-")));
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\ncase \"$1\" in {commands}) sleep 120;; esac\nexec {} \"$@\"\n",
            sortie_testkit::terraform_bin().display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// An agent pool of `acme`, an `agent` runner on it with state in a local directory, the
/// default rule, and `envs` environments `acme/demo/e<i>`. Returns the pool id and token.
fn agent_setup(dev: &Dev, envs: usize, max_concurrent_jobs: u32) -> (String, String) {
    let pool = dev.ok(
        "POST",
        "/v1/agent-pools",
        Some(json!({"group": "acme", "name": "onprem", "description": "the test's agents"})),
    );
    let (id, token) = (
        pool["id"].as_str().unwrap().to_string(),
        pool["token"].as_str().unwrap().to_string(),
    );
    let state = dev.dir.join("agent-state");
    let runner = format!(
        "runner_configuration:\n  type: agent\n  pool: {id}\n  max_concurrent_jobs: {max_concurrent_jobs}\n  timeout_seconds: 600\nstate_storage_configuration:\n  type: local\n  directory: {}\n",
        state.display()
    );
    dev.ok(
        "POST",
        "/v1/groups/acme/-/runners/agents",
        Some(Value::String(runner)),
    );
    dev.ok(
        "POST",
        "/v1/groups/acme/-/rules",
        Some(json!({"id": "default", "runner_id": "acme/agents"})),
    );
    for i in 0..envs {
        dev.ok(
            "POST",
            "/v1/groups/acme/demo/-/environments",
            Some(json!({"name": format!("e{i}"), "env_type": "development"})),
        );
    }
    (id, token)
}

/// The agents that claimed a job, in order, from its transitions.
fn claims(job: &Value) -> Vec<String> {
    job["transitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["reason"].as_str())
        .filter_map(|r| r.strip_prefix("claimed by agent "))
        .map(|r| r.split(' ').next().unwrap().to_string())
        .collect()
}

#[test]
fn agents_authenticate_per_pool_and_a_killed_agent_requeues_its_plan_and_fails_its_apply() {
    sortie_testkit::require_aws!();
    let dev = Dev::launch(&Names::fresh(), &["--agent-silence", "3"]);
    let (pool, token) = agent_setup(&dev, 1, 1);
    let claim = json!({"agent": "probe", "wait_seconds": 0});
    // No credential, a wrong token of this pool, a revoked token: 401. Another pool's
    // token, or an unknown pool: 404. A good token and nothing offered: 204.
    let claims_path = format!("/v1/agent-pools/{pool}/claims");
    assert_eq!(
        dev.api_with("", "POST", &claims_path, Some(claim.clone()))
            .0,
        401
    );
    let wrong = format!("sortie-pool-{pool}.tok-x.{}", "0".repeat(64));
    let (status, body) = dev.api_with(&wrong, "POST", &claims_path, Some(claim.clone()));
    assert_eq!(status, 401, "{body}");
    assert!(
        !std::fs::read_to_string(dev.dir.join("dev.log"))
            .unwrap()
            .contains(&wrong[40..]),
        "a refused token is never logged"
    );
    let other = dev.ok(
        "POST",
        "/v1/agent-pools",
        Some(json!({"group": "globex", "name": "theirs"})),
    );
    let other_token = other["token"].as_str().unwrap();
    assert_eq!(
        dev.api_with(other_token, "POST", &claims_path, Some(claim.clone()))
            .0,
        404
    );
    assert_eq!(
        dev.api_with(
            &token,
            "POST",
            "/v1/agent-pools/apool-00000000000000000000000000/claims",
            Some(claim.clone())
        )
        .0,
        404
    );
    assert_eq!(
        dev.api_with(&token, "POST", &claims_path, Some(claim.clone()))
            .0,
        204
    );
    let rotated = dev.ok("POST", &format!("/v1/agent-pools/{pool}/tokens"), None);
    let old_id = dev.ok("GET", &format!("/v1/agent-pools/{pool}"), None)["tokens"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    dev.ok(
        "DELETE",
        &format!("/v1/agent-pools/{pool}/tokens/{old_id}"),
        None,
    );
    assert_eq!(
        dev.api_with(&token, "POST", &claims_path, Some(claim.clone()))
            .0,
        401,
        "the rotated-out token is refused"
    );
    let token = rotated["token"].as_str().unwrap().to_string();
    // A heartbeat for a job that does not exist: 404.
    let (status, body) = dev.api_with(
        &token,
        "POST",
        &format!("/v1/agent-pools/{pool}/jobs/01jnx6v4k2m8q9r3s5t7w0y1za/heartbeat"),
        Some(json!({"agent": "probe", "attempt": 1})),
    );
    assert_eq!(status, 404, "{body}");

    // A plan on an agent that dies mid-plan: requeued, and run once more on another agent.
    let slow = slow_terraform(&dev.dir, "plan|apply");
    let mut doomed = Agent::start(&dev, &pool, &token, "doomed", &slow, 1);
    let plan = dev.submit_to("acme/demo/e0", "plan", hello_files());
    dev.wait_job(&plan, Duration::from_secs(60), "claimed", |j| {
        j["state"] == "running"
    });
    std::thread::sleep(Duration::from_secs(2));
    doomed.kill();
    // The bounds below are a loaded host's (one moto serves every test at once), not the
    // sweep's speed: alone, each loss is seen within the silence and two sweeper periods.
    let requeued = dev.wait_job(&plan, Duration::from_secs(120), "requeued", |j| {
        j["transitions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["reason"].as_str().unwrap_or("").contains("agent lost"))
    });
    assert_ne!(
        requeued["state"], "failed",
        "a plan is requeued: {requeued}"
    );
    let _good = Agent::start(
        &dev,
        &pool,
        &token,
        "good",
        &sortie_testkit::terraform_bin(),
        1,
    );
    let done = dev.wait_terminal(&plan, Duration::from_secs(90));
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(claims(&done), ["doomed", "good"], "{done}");
    assert!(
        done["task_arn"]
            .as_str()
            .unwrap()
            .starts_with(&format!("agent:{pool}:good:")),
        "{done}"
    );
    drop(_good);

    // An apply on an agent that dies mid-apply: failed, "agent lost", never re-run.
    let mut doomed = Agent::start(
        &dev,
        &pool,
        &token,
        "doomed2",
        &slow_terraform(&dev.dir, "apply"),
        1,
    );
    let env = dev.ok("GET", "/v1/environments/acme/demo/e0", None);
    eprintln!("after the plan: {env}");
    let apply = dev.submit_to("acme/demo/e0", "apply", hello_files());
    dev.wait_job(&apply, Duration::from_secs(90), "claimed", |j| {
        j["state"] == "running"
    });
    std::thread::sleep(Duration::from_secs(4));
    doomed.kill();
    let killed_at = Instant::now();
    let failed = dev.wait_terminal(&apply, Duration::from_secs(120));
    eprintln!("the apply ended {:?} after the kill", killed_at.elapsed());
    assert_eq!(failed["state"], "failed", "{failed}");
    let reason = failed["transitions"].as_array().unwrap().last().unwrap()["reason"]
        .as_str()
        .unwrap();
    assert!(reason.contains("agent lost"), "{failed}");
    assert_eq!(claims(&failed), ["doomed2"], "{failed}");
    // It heartbeated before the kill: the loss is the kill's, not a slow beat's.
    assert_eq!(failed["agent"]["agent"], "doomed2", "{failed}");
    assert!(
        failed["agent"]["heartbeat_at"].as_str().unwrap()
            > failed["agent"]["claimed_at"].as_str().unwrap(),
        "no heartbeat before the kill: {failed}"
    );
    // The ended job is held by nobody: a late heartbeat of its agent is 409.
    let (status, body) = dev.api_with(
        &token,
        "POST",
        &format!("/v1/agent-pools/{pool}/jobs/{apply}/heartbeat"),
        Some(json!({"agent": "doomed2", "attempt": 1})),
    );
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "not_held", "{body}");
}

#[test]
fn a_canceled_job_is_stopped_through_the_heartbeat_and_ends_canceled() {
    sortie_testkit::require_aws!();
    let dev = Dev::launch(&Names::fresh(), &[]);
    let (pool, token) = agent_setup(&dev, 1, 1);
    let _agent = Agent::start(
        &dev,
        &pool,
        &token,
        "a1",
        &slow_terraform(&dev.dir, "plan"),
        1,
    );
    let plan = dev.submit_to("acme/demo/e0", "plan", hello_files());
    dev.wait_job(&plan, Duration::from_secs(60), "claimed", |j| {
        j["state"] == "running"
    });
    dev.ok("POST", &format!("/v1/jobs/{plan}/cancel"), None);
    // Delivered in the next heartbeat (every 10 s); the agent kills the process group and
    // reports the exit.
    let done = dev.wait_terminal(&plan, Duration::from_secs(40));
    assert_eq!(done["state"], "canceled", "{done}");
}

#[test]
fn three_agents_start_each_of_fifty_jobs_exactly_once() {
    sortie_testkit::require_aws!();
    let dev = Dev::launch(&Names::fresh(), &[]);
    let (pool, token) = agent_setup(&dev, 10, 2);
    let terraform = sortie_testkit::terraform_bin();
    let _agents: Vec<Agent> = (0..3)
        .map(|i| Agent::start(&dev, &pool, &token, &format!("a{i}"), &terraform, 2))
        .collect();
    let jobs: Vec<String> = (0..50)
        .map(|i| dev.submit_to(&format!("acme/demo/e{}", i % 10), "plan", hello_files()))
        .collect();
    let mut by_agent = std::collections::BTreeMap::<String, usize>::new();
    for id in &jobs {
        let job = dev.wait_terminal(id, Duration::from_secs(300));
        assert_eq!(job["state"], "succeeded", "{job}");
        let claimed = claims(&job);
        assert_eq!(claimed.len(), 1, "each job is started exactly once: {job}");
        assert_eq!(job["attempt"], 1, "{job}");
        *by_agent.entry(claimed[0].clone()).or_default() += 1;
    }
    assert_eq!(by_agent.values().sum::<usize>(), 50);
    assert!(by_agent.len() >= 2, "the work is shared: {by_agent:?}");
}
