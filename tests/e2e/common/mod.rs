//! One `sortie dev` of a test's own (fresh table, queue, bucket and bus), killed on drop,
//! its log printed when the test failed. Shared by the CLI's end-to-end tests, with what
//! they need around it: the runner binary, API calls, `sortie` runs, waits on jobs, and a
//! `sortie` in a real pseudo-terminal.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portable_pty::{native_pty_system, CommandBuilder, PtySize};
use serde_json::Value;
use sortie_testkit::http::call;

/// A running `sortie dev`: its API URL, its development token, its `--user` tokens and its
/// work directory.
pub struct Dev {
    pub child: Child,
    pub url: String,
    pub token: String,
    pub users: serde_json::Map<String, Value>,
    pub dir: PathBuf,
    /// Its EventBridge bus (empty when `extra_args` named it).
    pub bus: String,
    /// Its DynamoDB table (empty with `data_dir`).
    pub table: String,
    /// Its audit archive's bucket (empty with `data_dir`).
    pub audit_bucket: String,
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

/// How to start a `sortie dev`.
pub struct DevOptions<'a> {
    /// Names the scratch directory and the table.
    pub prefix: &'a str,
    pub sweep_every: u32,
    /// `--runner`.
    pub runner: Option<PathBuf>,
    /// A `--user` each.
    pub users: &'a [&'a str],
    /// Added to the command line as they are.
    pub extra_args: &'a [&'a str],
    /// `--data-dir DIR` (its names then come from `extra_args`), instead of fresh names and
    /// a scratch `--work-dir`.
    pub data_dir: Option<&'a Path>,
    /// `AWS_ENDPOINT_URL`, when not the shared moto's.
    pub endpoint: Option<&'a str>,
    /// Environment variables of its process, such as `SORTIE_MIN_TTL_SECONDS`.
    pub env: &'a [(&'a str, &'a str)],
}

impl Default for DevOptions<'_> {
    fn default() -> Self {
        Self {
            prefix: "dev",
            sweep_every: 1,
            runner: None,
            users: &[],
            extra_args: &[],
            data_dir: None,
            endpoint: None,
            env: &[],
        }
    }
}

/// Starts `sortie dev` on fresh names in a scratch directory named after `prefix`, sweeping
/// every `sweep_every` seconds, with `runner` as the local runner binary when given.
pub fn launch(prefix: &str, sweep_every: u32, runner: Option<&Path>) -> Dev {
    start_dev(DevOptions {
        prefix,
        sweep_every,
        runner: runner.map(Path::to_path_buf),
        ..Default::default()
    })
}

/// Starts `sortie dev` as `options` say and waits for its ready file.
pub fn start_dev(options: DevOptions) -> Dev {
    let dir = match options.data_dir {
        Some(dir) => dir.to_path_buf(),
        None => sortie_testkit::scratch_dir(options.prefix).unwrap(),
    };
    let ready = dir.join("ready.json");
    let _ = std::fs::remove_file(&ready);
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("dev.log"))
        .unwrap();
    let bus = match options.data_dir {
        Some(_) => String::new(),
        None => sortie_testkit::unique("bus"),
    };
    let table = match options.data_dir {
        Some(_) => String::new(),
        None => sortie_testkit::unique(&format!("sortie-{}", options.prefix)),
    };
    let audit_bucket = match options.data_dir {
        Some(_) => String::new(),
        None => sortie_testkit::unique("audit"),
    };
    let mut command = Command::new(sortie_tests::sortie());
    command.args(["dev", "--sweep-every", &options.sweep_every.to_string()]);
    match options.data_dir {
        Some(data_dir) => {
            command.arg("--data-dir").arg(data_dir);
        }
        None => {
            command
                .args(["--table", table.as_str()])
                .args(["--queue", &sortie_testkit::unique("jobs")])
                .args(["--bucket", &sortie_testkit::unique("artifacts")])
                .args([
                    "--live-bucket",
                    &format!("{}--use1-az4--x-s3", sortie_testkit::unique("live")),
                ])
                .args(["--audit-bucket", audit_bucket.as_str()])
                .args(["--bus", bus.as_str()])
                .arg("--work-dir")
                .arg(&dir);
        }
    }
    command
        .args(options.extra_args)
        .arg("--ready-file")
        .arg(&ready)
        // The Terraform these tests' checks were written against (0.11.11), pinned.
        .envs(sortie_testkit::pinned_terraform().map(|tf| ("SORTIE_TERRAFORM", tf)));
    if let Some(runner) = &options.runner {
        command.arg("--runner").arg(runner);
    }
    for user in options.users {
        command.args(["--user", user]);
    }
    let endpoint = options
        .endpoint
        .map(str::to_string)
        .unwrap_or_else(sortie_testkit::endpoint);
    command.envs(options.env.iter().copied());
    let child = command
        .env("AWS_ENDPOINT_URL", endpoint)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("start sortie dev");
    let mut dev = Dev {
        child,
        url: String::new(),
        token: String::new(),
        users: Default::default(),
        dir,
        bus,
        table,
        audit_bucket,
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(&ready)
        .unwrap_or_default()
        .is_empty()
    {
        assert!(
            Instant::now() < deadline,
            "sortie dev did not start: {}",
            std::fs::read_to_string(dev.dir.join("dev.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&ready).unwrap()).unwrap();
    dev.url = r["url"].as_str().unwrap().into();
    dev.token = r["token"].as_str().unwrap().into();
    dev.users = r["users"].as_object().cloned().unwrap_or_default();
    dev
}

/// The `sortie-pilot` built next to the `sortie` under test (`cargo build -p
/// sortie-pilot --bins`), whether it exists or not.
pub fn sibling_runner() -> PathBuf {
    sortie_tests::pilot()
}

/// The real `sortie-pilot`: the one `SORTIE_TEST_RUNNER` names, else the one next to
/// `sortie`, else built with the workspace (only when missing).
pub fn runner_binary() -> PathBuf {
    if let Some(runner) = std::env::var_os("SORTIE_TEST_RUNNER") {
        return PathBuf::from(runner);
    }
    let sibling = sibling_runner();
    if sibling.is_file() {
        sibling
    } else {
        sortie_testkit::runtime::function_binary("sortie-pilot")
    }
}

/// A terminal state of a job.
pub const TERMINAL: [&str; 5] = ["succeeded", "failed", "canceled", "timed_out", "discarded"];

impl Dev {
    /// The named `--user`'s token.
    pub fn user(&self, name: &str) -> String {
        self.users
            .get(name)
            .and_then(Value::as_str)
            .expect("a --user of this dev")
            .to_string()
    }

    /// An API call with `token`; a JSON string body is sent as its text.
    pub fn api_with(
        &self,
        token: &str,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let auth = format!("Bearer {token}");
        let body = body.map(|b| match b {
            Value::String(s) => s,
            other => other.to_string(),
        });
        call(
            &self.url,
            method,
            path,
            &[("Authorization", &auth)],
            body.as_deref(),
        )
    }

    /// An API call with the development token; asserts a 2xx answer.
    pub fn api(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let (status, v) = self.api_with(&self.token, method, path, body);
        assert!(
            (200..300).contains(&status),
            "{method} {path}: {status} {v}"
        );
        v
    }

    pub fn job(&self, id: &str) -> Value {
        self.api("GET", &format!("/v1/jobs/{id}"), None)
    }

    /// Waits (2 minutes at most) until `check` holds for the job; the job.
    pub fn wait_job(&self, id: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let job = self.job(id);
            if check(&job) {
                return job;
            }
            assert!(Instant::now() < deadline, "job {id}: never {what}: {job}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Waits (2 minutes at most) for the job to end; the job.
    pub fn wait_terminal(&self, id: &str) -> Value {
        self.wait_job(id, "ended", |job| {
            TERMINAL.contains(&job["state"].as_str().unwrap())
        })
    }

    /// The job's whole log.
    pub fn log(&self, id: &str) -> String {
        let mut offset = 0;
        let mut text = String::new();
        loop {
            let v = self.api("GET", &format!("/v1/jobs/{id}/logs?offset={offset}"), None);
            let data = v["data"].as_str().unwrap();
            text.push_str(data);
            offset = v["next_offset"].as_u64().unwrap();
            if data.is_empty() {
                return text;
            }
        }
    }
}

/// `sortie` against `dev`: its URL and development token, no config file of the user's
/// (`SORTIE_CONFIG` names one that does not exist), no terminal.
pub fn sortie_command(dev: &Dev) -> Command {
    let mut cmd = Command::new(sortie_tests::sortie());
    cmd.env("SORTIE_API_URL", &dev.url)
        .env("SORTIE_TOKEN", &dev.token)
        .env("SORTIE_CONFIG", dev.dir.join("no-config.yaml"))
        .stdin(Stdio::null());
    cmd
}

/// Runs `sortie ARGS` against `dev` ([`sortie_command`]) to its end.
pub fn sortie(dev: &Dev, args: &[&str]) -> Output {
    sortie_command(dev).args(args).output().expect("run sortie")
}

/// What a `sortie` command did.
#[derive(Debug)]
pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Out {
    fn from(out: Output) -> Self {
        Out {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// A fresh bucket on the shared moto, for Terraform's state; its name.
pub fn state_bucket() -> String {
    let bucket = sortie_testkit::unique("state");
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let s3 = sortie_testkit::s3_client(&sortie_testkit::sdk_config().await);
        s3.create_bucket().bucket(&bucket).send().await.unwrap();
    });
    bucket
}

/// Registers a local runner `acme/<name>` running Terraform `tool_version`, with its state
/// in `bucket` on the shared moto, and the organisation's default rule naming it.
pub fn local_runner_on_s3(dev: &Dev, name: &str, tool_version: &str, bucket: &str) {
    let runner = format!(
        "tool_version: \"{tool_version}\"\nrunner_configuration:\n  type: local\nstate_storage_configuration:\n  type: s3\n  bucket: {bucket}\n  key_prefix: sortie/\n  region: us-east-1\n  endpoint: {}\n",
        sortie_testkit::endpoint()
    );
    dev.api(
        "POST",
        &format!("/v1/groups/acme/-/runners/{name}"),
        Some(Value::String(runner)),
    );
    dev.api(
        "POST",
        "/v1/groups/acme/-/rules",
        Some(serde_json::json!({"id": "default", "runner_id": format!("acme/{name}")})),
    );
}

/// A `sortie` command in a real pseudo-terminal, with what it printed so far; killed on
/// drop.
pub struct Terminal {
    child: Box<dyn portable_pty::Child + Send + Sync>,
    writer: Box<dyn Write + Send>,
    screen: Arc<Mutex<String>>,
    patience: Duration,
    _master: Box<dyn portable_pty::MasterPty + Send>,
}

impl Terminal {
    /// Starts `cmd` in a terminal 40 rows by `cols`; [`Terminal::expect`] waits `patience`.
    pub fn start(cmd: CommandBuilder, cols: u16, patience: Duration) -> Self {
        let pty = native_pty_system()
            .openpty(PtySize {
                rows: 40,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        let child = pty.slave.spawn_command(cmd).unwrap();
        drop(pty.slave);
        let mut reader = pty.master.try_clone_reader().unwrap();
        let writer = pty.master.take_writer().unwrap();
        let screen = Arc::new(Mutex::new(String::new()));
        let s = screen.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                s.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Self {
            child,
            writer,
            screen,
            patience,
            _master: pty.master,
        }
    }

    pub fn text(&self) -> String {
        self.screen.lock().unwrap().clone()
    }

    /// Waits until the output contains `what`.
    pub fn expect(&self, what: &str) {
        let deadline = Instant::now() + self.patience;
        while !self.text().contains(what) {
            assert!(
                Instant::now() < deadline,
                "never saw {what:?}; output:\n{}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Types `bytes` at the terminal (`\x03` is Ctrl-C).
    pub fn send(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).unwrap();
        self.writer.flush().unwrap();
    }

    /// Its exit code, waiting at most `within`.
    pub fn exit_code(&mut self, within: Duration) -> u32 {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.exit_code();
            }
            assert!(
                Instant::now() < deadline,
                "sortie did not exit; output:\n{}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

/// An SQS queue (named from `name`) that receives, through the rule `name`, every event of
/// `bus` whose source is `sortie`; the client and the queue's URL.
pub async fn capture_events(bus: &str, name: &str) -> (aws_sdk_sqs::Client, String) {
    let config = sortie_testkit::sdk_config().await;
    let sqs = aws_sdk_sqs::Client::new(&config);
    let eb = aws_sdk_eventbridge::Client::new(&config);
    let queue = sortie_testkit::unique(name);
    let url = sqs
        .create_queue()
        .queue_name(&queue)
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    let arn = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap()[&aws_sdk_sqs::types::QueueAttributeName::QueueArn]
        .clone();
    eb.put_rule()
        .name(name)
        .event_bus_name(bus)
        .event_pattern(serde_json::json!({"source": ["sortie"]}).to_string())
        .send()
        .await
        .unwrap();
    eb.put_targets()
        .rule(name)
        .event_bus_name(bus)
        .targets(
            aws_sdk_eventbridge::types::Target::builder()
                .id("queue")
                .arn(arn)
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    (sqs, url)
}

/// Every message in the queue `url` (events [`capture_events`] routed there), as JSON,
/// deleted as it is received, until the queue answers empty (at most 100 receives).
pub async fn drain_events(sqs: &aws_sdk_sqs::Client, url: &str) -> Vec<Value> {
    let mut events = vec![];
    for _ in 0..100 {
        let got = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .wait_time_seconds(0)
            .send()
            .await
            .unwrap();
        let messages = got.messages.unwrap_or_default();
        if messages.is_empty() {
            break;
        }
        for m in messages {
            events.push(serde_json::from_str(m.body().unwrap_or("{}")).unwrap());
            sqs.delete_message()
                .queue_url(url)
                .receipt_handle(m.receipt_handle().unwrap())
                .send()
                .await
                .unwrap();
        }
    }
    events
}

/// A configuration of one `terraform_data` resource `name` and an output of it, as the
/// pull-request tests commit to their repositories.
pub fn terraform_data(name: &str) -> String {
    format!(
        "resource \"terraform_data\" \"{name}\" {{\n  input = \"{name}\"\n}}\n\noutput \"name\" {{\n  value = terraform_data.{name}.output\n}}\n"
    )
}
