//! `sortie run ... --wait`, `sortie job logs` and `sortie jobs list` end to end: the real
//! `sortie` binary against `sortie dev` on moto, with the real `sortie-pilot` and real
//! terraform 0.11.11. One test drives the CLI in a real pseudo-terminal and reads the
//! screen through a terminal emulator (vt100): the spinner, the live log, the end.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sortie_testkit::http::call;

use crate::common;

use common::Dev;

impl Dev {
    /// Starts `sortie dev` on fresh names, then makes a runner (state in a fresh moto
    /// bucket), a rule and the environment `acme/demo/hello` over HTTP.
    fn start() -> Self {
        Self::start_with(|runner, _| runner.to_path_buf())
    }

    /// Like [`Dev::start`], with the runner executable `runner(real, work dir)` chooses.
    fn start_with(runner: impl FnOnce(&Path, &Path) -> PathBuf) -> Self {
        let scratch = sortie_testkit::scratch_dir("follow-runner").unwrap();
        let runner = runner(
            &sortie_testkit::runtime::function_binary("sortie-pilot"),
            &scratch,
        );
        let dev = common::launch("follow", 1, Some(&runner));
        let bucket = state_bucket();
        let runner_file = format!(
            "runner_configuration:\n  type: local\nstate_storage_configuration:\n  type: s3\n  bucket: {bucket}\n  key_prefix: sortie/\n  region: us-east-1\n  endpoint: {}\n",
            sortie_testkit::endpoint()
        );
        dev.ok("POST", "/v1/groups/acme/-/runners/local", &runner_file);
        dev.ok(
            "POST",
            "/v1/groups/acme/-/rules",
            &json!({"id": "default", "runner_id": "acme/local"}).to_string(),
        );
        dev.ok(
            "POST",
            "/v1/groups/acme/demo/-/environments",
            &json!({"name": "hello", "env_type": "development"}).to_string(),
        );
        dev
    }

    fn ok(&self, method: &str, path: &str, body: &str) -> Value {
        let auth = format!("Bearer {}", self.token);
        let (status, v) = call(
            &self.url,
            method,
            path,
            &[("Authorization", &auth)],
            Some(body),
        );
        assert!(
            (200..300).contains(&status),
            "{method} {path}: {status} {v}"
        );
        v
    }

    /// The environment the `sortie` command runs with: this `sortie dev`, and a config
    /// file that does not exist (so no user's context leaks in).
    fn env(&self) -> Vec<(String, String)> {
        vec![
            ("SORTIE_API_URL".into(), self.url.clone()),
            ("SORTIE_TOKEN".into(), self.token.clone()),
            (
                "SORTIE_CONFIG".into(),
                self.dir.join("no-config.yaml").display().to_string(),
            ),
        ]
    }

    /// Runs `sortie ARGS` with no terminal, to its end.
    fn sortie(&self, args: &[&str]) -> Run {
        let output = Command::new(sortie_tests::sortie())
            .args(args)
            .envs(self.env())
            .env_remove("NO_COLOR")
            .current_dir(sortie_testkit::repo_root())
            .stdin(Stdio::null())
            .output()
            .expect("run sortie");
        Run(output)
    }
}

/// A finished `sortie` command.
struct Run(Output);

impl Run {
    fn code(&self) -> i32 {
        self.0.status.code().unwrap_or(-1)
    }
    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.0.stdout).into_owned()
    }
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.0.stderr).into_owned()
    }
    fn show(&self) -> String {
        format!(
            "exit {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.code(),
            self.stdout(),
            self.stderr()
        )
    }
}

fn state_bucket() -> String {
    let bucket = sortie_testkit::unique("state");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let s3 = sortie_testkit::s3_client(&sortie_testkit::sdk_config().await);
        s3.create_bucket().bucket(&bucket).send().await.unwrap();
    });
    bucket
}

fn hello() -> String {
    sortie_testkit::example_dir("hello").display().to_string()
}

/// The braille frames of the spinner.
const SPINNER: &[char] = &['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

fn assert_plain(text: &str, what: &str) {
    assert!(
        !text.contains('\x1b'),
        "{what} has an ANSI escape with no terminal:\n{text:?}"
    );
    assert!(
        !text.contains(SPINNER),
        "{what} has a spinner frame with no terminal:\n{text}"
    );
    assert!(
        !text.contains('\r'),
        "{what} redraws a line with no terminal:\n{text:?}"
    );
}

/// The id in the first data row of `run`'s table.
fn job_id(stdout: &str) -> String {
    let mut lines = stdout.lines();
    assert!(
        lines.next().unwrap_or_default().starts_with("ID "),
        "{stdout}"
    );
    lines
        .next()
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no job row in:\n{stdout}"))
        .to_string()
}

#[test]
fn run_apply_wait_streams_the_log_and_ends_with_the_summary_then_logs_and_list_show_the_job() {
    sortie_testkit::require_aws!();
    let dev = Dev::start();
    let run = dev.sortie(&[
        "run",
        "apply",
        "acme/demo/hello",
        "--source",
        &hello(),
        "--var",
        "greeting=hi from the CLI",
        "--wait",
    ]);
    assert_eq!(run.code(), 0, "{}", run.show());
    let (out, err) = (run.stdout(), run.stderr());
    assert_plain(&out, "stdout");
    assert_plain(&err, "stderr");
    let id = job_id(&out);
    // The log, in order, then the last line: the final state and the change summary.
    let init = out
        .find("Initializing the backend")
        .unwrap_or_else(|| panic!("{}", run.show()));
    let done = out.find("Apply complete!").unwrap();
    assert!(init < done, "{}", run.show());
    assert!(out.contains("message = hi from the CLI!"), "{}", run.show());
    let last = out.lines().last().unwrap();
    assert!(
        last.starts_with("succeeded  applied +0 ~0 -0  (apply ") && last.contains(&id),
        "last line: {last:?}\n{}",
        run.show()
    );

    // `job logs ID` prints the same log.
    let logs = dev.sortie(&["job", "logs", &id]);
    assert_eq!(logs.code(), 0, "{}", logs.show());
    assert!(logs.stdout().contains("Initializing the backend"));
    assert!(logs.stdout().contains("message = hi from the CLI!"));
    assert_plain(&logs.stdout(), "job logs");

    // `job logs -f` on an ended job prints the whole log and the end, and exits 0.
    let followed = dev.sortie(&["job", "logs", "-f", &id]);
    assert_eq!(followed.code(), 0, "{}", followed.show());
    assert!(followed.stdout().contains("Apply complete!"));
    assert!(followed
        .stdout()
        .lines()
        .last()
        .unwrap()
        .starts_with("succeeded  applied +0 ~0 -0"));

    // `jobs list ENV -o json` parses, and holds the job.
    let list = dev.sortie(&["jobs", "list", "acme/demo/hello", "-o", "json"]);
    assert_eq!(list.code(), 0, "{}", list.show());
    let page: Value = serde_json::from_str(&list.stdout())
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", list.show()));
    assert_eq!(page["jobs"][0]["id"], id.as_str(), "{page}");
    assert_eq!(page["jobs"][0]["state"], "succeeded");
    // ... and as a table.
    let table = dev.sortie(&["jobs", "list", "acme/demo/hello"]);
    assert_eq!(table.code(), 0, "{}", table.show());
    let header = table
        .stdout()
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    for column in [
        "ID",
        "OPERATION",
        "STATE",
        "REQUESTED BY",
        "CREATED",
        "SUMMARY",
    ] {
        assert!(header.contains(column), "{}", table.show());
    }
    assert!(table.stdout().contains(&id));

    // `job get ID -o json` is the job; `--wait -o json` keeps stdout one JSON document.
    let get = dev.sortie(&["job", "get", &id, "-o", "json"]);
    assert_eq!(get.code(), 0, "{}", get.show());
    let job: Value = serde_json::from_str(&get.stdout()).unwrap();
    assert_eq!(job["summary"], json!({"add": 0, "change": 0, "destroy": 0}));
    let plan = dev.sortie(&[
        "run",
        "plan",
        "acme/demo/hello",
        "--source",
        &hello(),
        "--wait",
        "-o",
        "json",
    ]);
    assert_eq!(plan.code(), 0, "{}", plan.show());
    let final_job: Value = serde_json::from_str(&plan.stdout())
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", plan.show()));
    assert_eq!(final_job["state"], "succeeded");
    assert!(
        plan.stderr().contains("Initializing the backend"),
        "{}",
        plan.show()
    );
    assert_plain(&plan.stderr(), "stderr of -o json");
}

#[test]
fn a_job_that_fails_exits_6_with_its_reason() {
    sortie_testkit::require_aws!();
    let dev = Dev::start();
    let broken = sortie_testkit::scratch_dir("broken-source").unwrap();
    std::fs::write(
        broken.join("main.tf"),
        "variable \"greeting\" {\n  default = \"oops\"\n\noutput \"x\" {{ value = \n",
    )
    .unwrap();
    let run = dev.sortie(&[
        "run",
        "plan",
        "acme/demo/hello",
        "--source",
        &broken.display().to_string(),
        "--wait",
    ]);
    assert_eq!(run.code(), 6, "{}", run.show());
    let (out, err) = (run.stdout(), run.stderr());
    assert_plain(&out, "stdout");
    assert_plain(&err, "stderr");
    let last = out.lines().last().unwrap_or_default();
    assert!(last.starts_with("failed  "), "{}", run.show());
    // The reason, as the job records it, on stderr.
    let id = job_id(&out);
    let job: Value =
        serde_json::from_str(&dev.sortie(&["job", "get", &id, "-o", "json"]).stdout()).unwrap();
    let reason = job["transitions"].as_array().unwrap().last().unwrap()["reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!reason.is_empty());
    assert!(
        err.contains(&format!("error: the job ended failed: {reason}")),
        "{}",
        run.show()
    );
    // terraform's own complaint is in the streamed log.
    assert!(out.to_lowercase().contains("error"), "{}", run.show());

    // An oversized inline source is refused before anything is sent.
    let big = sortie_testkit::scratch_dir("big-source").unwrap();
    std::fs::write(big.join("main.tf"), "#".repeat(200 * 1024)).unwrap();
    let refused = dev.sortie(&[
        "run",
        "plan",
        "acme/demo/hello",
        "--source",
        &big.display().to_string(),
    ]);
    assert_eq!(refused.code(), 2, "{}", refused.show());
    assert!(
        refused
            .stderr()
            .contains("over the 131072-byte (128 KiB) limit"),
        "{}",
        refused.show()
    );
}

/// What the reader thread saw on the emulated screen while the command ran.
#[derive(Default)]
struct Seen {
    /// A spinner line with the state `running` and an elapsed time.
    spinner_running: Option<String>,
    /// A screen with a live log line and the spinner under it.
    log_under_spinner: Option<String>,
}

fn spinner_line(screen: &str) -> Option<String> {
    screen
        .lines()
        .find(|l| {
            l.starts_with(SPINNER)
                && l.contains(" on acme/demo/hello: ")
                && l.trim_end().ends_with("s)")
        })
        .map(str::to_string)
}

#[test]
fn in_a_terminal_the_spinner_shows_state_and_elapsed_time_above_the_live_log() {
    sortie_testkit::require_aws!();
    use portable_pty::{native_pty_system, CommandBuilder, PtySize};

    // The job stays `running` a few seconds before and after terraform (hello alone takes
    // about a second), so the spinner is seen with its state, and with the log above it.
    let dev = Dev::start_with(|real, dir| {
        let wrapper = dir.join("slow-runner.sh");
        std::fs::write(
            &wrapper,
            format!(
                "#!/bin/sh\nsleep 2\n'{}' \"$@\"\ncode=$?\nsleep 3\nexit $code\n",
                real.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(
            &wrapper,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        wrapper
    });
    let pty = native_pty_system()
        .openpty(PtySize {
            rows: 40,
            cols: 120,
            pixel_width: 0,
            pixel_height: 0,
        })
        .unwrap();
    let mut cmd = CommandBuilder::new(sortie_tests::sortie());
    cmd.args([
        "run",
        "apply",
        "acme/demo/hello",
        "--source",
        &hello(),
        "--wait",
    ]);
    for (k, v) in dev.env() {
        cmd.env(k, v);
    }
    cmd.env("TERM", "xterm-256color");
    cmd.env_remove("NO_COLOR");
    cmd.cwd(sortie_testkit::repo_root());
    let mut child = pty.slave.spawn_command(cmd).unwrap();
    drop(pty.slave);
    let mut reader = pty.master.try_clone_reader().unwrap();
    let parser = Arc::new(Mutex::new(vt100::Parser::new(40, 120, 0)));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let (p, s) = (parser.clone(), seen.clone());
    let reading = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        loop {
            match reader.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let mut parser = p.lock().unwrap();
                    parser.process(&buf[..n]);
                    let screen = parser.screen().contents();
                    let mut seen = s.lock().unwrap();
                    if let Some(line) = spinner_line(&screen) {
                        if line.contains(": running (") && seen.spinner_running.is_none() {
                            seen.spinner_running = Some(line.clone());
                        }
                        let spinner_row = screen.lines().position(|l| l == line).unwrap_or(0);
                        let log_row = screen
                            .lines()
                            .position(|l| l.contains("Initializing the backend"));
                        if log_row.is_some_and(|r| r < spinner_row)
                            && seen.log_under_spinner.is_none()
                        {
                            seen.log_under_spinner = Some(screen.clone());
                        }
                    }
                }
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "sortie run did not end");
        std::thread::sleep(Duration::from_millis(100));
    };
    drop(pty.master);
    let _ = reading.join();
    let screen = parser.lock().unwrap().screen().contents();
    let seen = seen.lock().unwrap();
    assert!(status.success(), "exit {status:?}; screen:\n{screen}");
    let running = seen.spinner_running.as_deref().unwrap_or_else(|| {
        panic!("no spinner with `running` and the elapsed time; screen:\n{screen}")
    });
    assert!(running.contains("apply "), "{running}");
    assert!(
        seen.log_under_spinner.is_some(),
        "no live log line above the spinner while the job ran; final screen:\n{screen}"
    );
    // The end: the log, the summary and the state; the spinner is gone.
    assert!(screen.contains("Apply complete!"), "{screen}");
    let last = screen.lines().rev().find(|l| !l.trim().is_empty()).unwrap();
    assert!(
        last.starts_with("succeeded  applied +0 ~0 -0  (apply "),
        "last line {last:?}; screen:\n{screen}"
    );
    assert!(spinner_line(&screen).is_none(), "{screen}");
    // On a terminal the state is coloured (green). Rows, not `contents()` lines: a long
    // log line wraps over two rows.
    let parser = parser.lock().unwrap();
    let row = parser
        .screen()
        .rows(0, 120)
        .position(|r| r.starts_with("succeeded  applied +0 ~0 -0"))
        .and_then(|r| u16::try_from(r).ok())
        .unwrap();
    let cell = parser.screen().cell(row, 0).map(|c| c.fgcolor());
    assert_eq!(cell, Some(vt100::Color::Idx(2)), "succeeded is green");
}

/// The last `n` lines of `text`, oldest first.
fn last_lines(text: &str, n: usize) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].to_vec()
}

#[test]
fn a_reviewed_apply_stops_the_follow_awaiting_approval_then_approve_applies_and_discard_exits_6() {
    sortie_testkit::require_aws!();
    let dev = Dev::start();
    let created = dev.sortie(&[
        "create",
        "env",
        "acme/demo/reviewed",
        "--type",
        "production",
        "--approval",
        "required",
    ]);
    assert_eq!(created.code(), 0, "{}", created.show());

    // `--wait` follows the plan phase, then stops with exit 8 (it waits for a person): a
    // CI job must not wait for a person, nor take the wait for the apply's end.
    let run = dev.sortie(&[
        "run",
        "apply",
        "acme/demo/reviewed",
        "--source",
        &hello(),
        "--var",
        "greeting=reviewed",
        "--wait",
    ]);
    assert_eq!(run.code(), 8, "{}", run.show());
    let out = run.stdout();
    assert_plain(&out, "stdout");
    let id = job_id(&out);
    assert!(out.contains("Initializing the backend"), "{}", run.show());
    let end = last_lines(&out, 2);
    assert!(
        end[0].starts_with("awaiting_approval  ") && end[0].contains(&format!("(apply {id} on ")),
        "{}",
        run.show()
    );
    assert_eq!(
        end[1],
        format!("awaiting approval: sortie job approve {id}"),
        "{}",
        run.show()
    );

    // The job's details: its review, the deadline, the plan phase.
    let get = dev.sortie(&["job", "get", &id]);
    assert_eq!(get.code(), 0, "{}", get.show());
    for wanted in [
        "review:",
        "required, phase plan",
        "awaiting since:",
        "deadline:",
        "plan phase:",
    ] {
        assert!(
            get.stdout().contains(wanted),
            "no {wanted:?}: {}",
            get.show()
        );
    }
    // `job logs -f` on a waiting job stops at once too; with `-o json` the hint goes to
    // standard error and standard output stays the job.
    let followed = dev.sortie(&["job", "logs", "-f", &id, "-o", "json"]);
    assert_eq!(followed.code(), 8, "{}", followed.show());
    let job: Value = serde_json::from_str(&followed.stdout())
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", followed.show()));
    assert_eq!(job["state"], "awaiting_approval");
    assert!(
        followed
            .stderr()
            .contains(&format!("awaiting approval: sortie job approve {id}\n")),
        "{}",
        followed.show()
    );

    // Approved: queued to apply the saved plan, which the follow sees to its end.
    let approved = dev.sortie(&["job", "approve", &id, "--comment", "looks right"]);
    assert_eq!(approved.code(), 0, "{}", approved.show());
    assert!(
        approved.stdout().contains(&format!(
            "job {id} approved: queued to apply the saved plan"
        )),
        "{}",
        approved.show()
    );
    let applied = dev.sortie(&["job", "logs", "-f", &id]);
    assert_eq!(applied.code(), 0, "{}", applied.show());
    assert!(
        last_lines(&applied.stdout(), 1)[0].starts_with("succeeded  "),
        "{}",
        applied.show()
    );
    let get = dev.sortie(&["job", "get", &id]);
    assert!(
        get.stdout().contains("approved by ") && get.stdout().contains(": looks right"),
        "{}",
        get.show()
    );
    // Deciding again is a conflict.
    let again = dev.sortie(&["job", "approve", &id]);
    assert_eq!(again.code(), 4, "{}", again.show());
    assert!(
        again.stderr().contains("is not awaiting approval"),
        "{}",
        again.show()
    );

    // Its outputs, and the environment's (the latest successful apply).
    let outputs = dev.sortie(&["job", "outputs", &id]);
    assert_eq!(outputs.code(), 0, "{}", outputs.show());
    assert_eq!(
        outputs.stdout(),
        "NAME     VALUE\nmessage  \"reviewed!\"\n",
        "{}",
        outputs.show()
    );
    // The environment records its latest apply just after the job's end is written.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let env_outputs = loop {
        let answer = dev.sortie(&["env", "outputs", "acme/demo/reviewed"]);
        if answer.code() != 3 || std::time::Instant::now() > deadline {
            break answer;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(env_outputs.code(), 0, "{}", env_outputs.show());
    assert_eq!(
        env_outputs.stdout(),
        format!(
            "NAME     VALUE\nmessage  \"reviewed!\"\n(from apply job {id}, the latest successful apply of acme/demo/reviewed)\n"
        ),
        "{}",
        env_outputs.show()
    );
    let env = dev.sortie(&["get", "env", "acme/demo/reviewed"]);
    assert!(
        env.stdout()
            .contains(&format!("last apply:         job {id} at ")),
        "{}",
        env.show()
    );

    // A second apply, discarded: following it ends `discarded`, exit 6.
    let run = dev.sortie(&[
        "run",
        "apply",
        "acme/demo/reviewed",
        "--source",
        &hello(),
        "--wait",
    ]);
    assert_eq!(run.code(), 8, "{}", run.show());
    let second = job_id(&run.stdout());
    let discarded = dev.sortie(&["job", "discard", &second, "--comment", "not now"]);
    assert_eq!(discarded.code(), 0, "{}", discarded.show());
    assert!(
        discarded
            .stdout()
            .contains(&format!("job {second} discarded: nothing was applied")),
        "{}",
        discarded.show()
    );
    let ended = dev.sortie(&["job", "logs", "-f", &second]);
    assert_eq!(ended.code(), 6, "{}", ended.show());
    assert!(
        last_lines(&ended.stdout(), 1)[0].starts_with("discarded  "),
        "{}",
        ended.show()
    );
    assert!(
        ended.stderr().contains("error: the job ended discarded: "),
        "{}",
        ended.show()
    );
}

/// The moto requests made for job `id` since `since` (Unix seconds), by operation
/// (`s3express.GET`, `unsigned.GET`, ...): moto's timing records (scripts/moto_server.py).
fn moto_requests_for(id: &str, since: f64) -> std::collections::BTreeMap<String, usize> {
    let (status, body) = call(
        &sortie_testkit::endpoint(),
        "GET",
        &format!("/_sortie/moto-timing/events?since={since}"),
        &[],
        None,
    );
    assert_eq!(status, 200, "{body}");
    let mut counts = std::collections::BTreeMap::new();
    for event in body["events"].as_array().unwrap() {
        let names_job = event[3]
            .as_array()
            .is_some_and(|ids| ids.iter().any(|i| i.as_str() == Some(id)));
        if names_job {
            *counts
                .entry(event[2].as_str().unwrap().to_string())
                .or_insert(0) += 1;
        }
    }
    counts
}

/// `run apply --wait` of a job that prints a line a second for 20 s, with `sortie dev`'s
/// live bucket (a directory bucket on the S3 Express double): every line reaches the
/// terminal within 2 s of Terraform printing it, read from the live object between the
/// follower's rare calls of the API, and the log read afterwards is whole.
#[test]
fn a_followed_job_is_read_from_its_live_object_between_rare_api_calls() {
    sortie_testkit::require_aws!();
    let _ = sortie_testkit::terraform111_bin();
    let dev = common::launch("live", 1, Some(&common::runner_binary()));
    common::local_runner_on_s3(&dev, "tf111", ">= 1.5", &state_bucket());
    dev.ok(
        "POST",
        "/v1/groups/acme/demo/-/environments",
        &json!({"name": "ticks", "env_type": "development"}).to_string(),
    );
    let dir = sortie_testkit::scratch_dir("live-ticks").unwrap();
    std::fs::write(
        dir.join("main.tf"),
        "resource \"terraform_data\" \"ticks\" {\n  provisioner \"local-exec\" {\n    command = \"for i in $(seq 1 20); do echo tick $i at $(date +%s%3N); sleep 1; done\"\n  }\n}\n",
    )
    .unwrap();
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let mut child = Command::new(sortie_tests::sortie())
        .args(["run", "apply", "acme/demo/ticks", "--source"])
        .arg(&dir)
        .arg("--wait")
        .envs(dev.env())
        .env_remove("NO_COLOR")
        .current_dir(sortie_testkit::repo_root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Each line as it arrives, with when (Unix ms).
    let stdout = child.stdout.take().unwrap();
    let reading = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut lines = Vec::new();
        for line in std::io::BufReader::new(stdout).lines() {
            let at = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as u64;
            lines.push((at, line.unwrap()));
        }
        lines
    });
    let deadline = Instant::now() + Duration::from_secs(180);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "sortie run did not end");
        std::thread::sleep(Duration::from_millis(100));
    };
    let lines = reading.join().unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let shown: String = lines.iter().map(|(_, l)| format!("{l}\n")).collect();
    assert!(status.success(), "exit {status:?}\n{shown}\n{stderr}");
    // `terraform_data.ticks (local-exec): tick 3 at 1796077831230`
    let mut late: Vec<u64> = lines
        .iter()
        .filter_map(|(seen, line)| {
            let printed: u64 = line.split(" at ").nth(1)?.trim().parse().ok()?;
            line.contains("(local-exec): tick ")
                .then(|| seen.saturating_sub(printed))
        })
        .collect();
    assert_eq!(late.len(), 20, "every tick, once:\n{shown}");
    late.sort_unstable();
    let p99 = late[late.len() - 1];
    let id = job_id(&shown);
    let requests = moto_requests_for(&id, since);
    println!(
        "live follow through `sortie dev`: tick → terminal p50 {} ms, max {p99} ms; moto requests for the job: {requests:?}",
        late[late.len() / 2]
    );
    assert!(p99 <= 2000, "a tick took {p99} ms to show:\n{shown}");
    // The API read the live object for the follower (s3express.GET) once a call; the
    // follower read it directly (unsigned.GET, with the pilot's follow-marker reads)
    // every 500 ms in between.
    let api_reads = requests.get("s3express.GET").copied().unwrap_or(0);
    let direct = requests.get("unsigned.GET").copied().unwrap_or(0);
    assert!(
        (1..=8).contains(&api_reads),
        "the follower's calls of the API that read the live object: {requests:?}"
    );
    assert!(direct >= 25, "reads of the live object's URL: {requests:?}");
    // The log read afterwards, from the chunks alone, holds every tick.
    let log = dev.sortie(&["job", "logs", &id]);
    assert_eq!(log.code(), 0, "{}", log.show());
    for i in 1..=20 {
        assert!(
            log.stdout()
                .contains(&format!("(local-exec): tick {i} at ")),
            "tick {i} is not in the log:\n{}",
            log.stdout()
        );
    }
}
