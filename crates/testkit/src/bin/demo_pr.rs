//! `make demo-pr`: a pull request played through the GitHub double against `sortie dev`,
//! with the real pilot and real Terraform (1.11, `terraform_data`): connected and bound
//! with the `sortie` CLI as a user would, then opened, planned (a check per environment,
//! one comment), refused an apply before its approval, approved, applied before merge
//! (production), merged, and applied after merge (development). Each step prints what
//! GitHub would show: the checks and the comment.
//!
//! Run through `scripts/demo-pr.sh` (moto first, then this program with the built `sortie`
//! and `sortie-pilot`). Not a test: it asserts what a reader would check by eye, and
//! exits 1 with the `sortie dev` log when a step does not happen within 3 minutes.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use sortie_testkit::github::{send_webhook, CheckRunRecord, FileChange, GithubDouble, PullSpec};

const REPO: &str = "acme/infra";
const SECRET: &str = "demo-webhook-secret-0123456789abcdef";
const BASE: &str = "1111111111111111111111111111111111111111";
const HEAD: &str = "2222222222222222222222222222222222222222";
const MERGE: &str = "3333333333333333333333333333333333333333";
/// How long one step may take before the demo gives up.
const PATIENCE: Duration = Duration::from_secs(180);

fn main() {
    if let Err(e) = run() {
        eprintln!("demo-pr: {e}");
        std::process::exit(1);
    }
}

/// What the demo needs from its caller: the binaries and a scratch directory.
struct Paths {
    sortie: PathBuf,
    pilot: PathBuf,
    work: PathBuf,
}

impl Paths {
    fn from_args() -> Result<Self, String> {
        let args: Vec<String> = std::env::args().skip(1).collect();
        match args.as_slice() {
            [sortie, pilot, work] => Ok(Self {
                sortie: sortie.into(),
                pilot: pilot.into(),
                work: work.into(),
            }),
            _ => Err("usage: demo-pr SORTIE_BIN PILOT_BIN WORK_DIR".into()),
        }
    }
}

/// `sortie dev`, killed on drop.
struct Dev {
    child: Child,
    url: String,
    token: String,
    log: PathBuf,
}

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Dev {
    fn start(paths: &Paths) -> Result<Self, String> {
        let ready = paths.work.join("ready.json");
        let log = paths.work.join("sortie-dev.log");
        let out = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        // Names of its own on the shared local AWS (a test runs the demo beside others).
        let unique = sortie_testkit::unique;
        let child = Command::new(&paths.sortie)
            .arg("dev")
            .args(["--table", &unique("sortie-demo-pr")])
            .args(["--queue", &unique("demo-pr-jobs")])
            .args(["--bucket", &unique("demo-pr-artifacts")])
            .args(["--bus", &unique("demo-pr-bus")])
            .arg("--ready-file")
            .arg(&ready)
            .arg("--work-dir")
            .arg(&paths.work)
            .arg("--runner")
            .arg(&paths.pilot)
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", paths.sortie.display()))?;
        let mut dev = Self {
            child,
            url: String::new(),
            token: String::new(),
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(v) = std::fs::read_to_string(&ready)
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            {
                dev.url = v["url"].as_str().unwrap_or_default().to_string();
                dev.token = v["token"].as_str().unwrap_or_default().to_string();
                return Ok(dev);
            }
            if let Ok(Some(status)) = dev.child.try_wait() {
                return Err(format!("sortie dev exited ({status}):\n{}", dev.log_text()));
            }
            if Instant::now() > deadline {
                return Err(format!("sortie dev did not start:\n{}", dev.log_text()));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// The demo's world: the double, `sortie dev`, and the CLI pointed at it.
struct Demo {
    rt: tokio::runtime::Runtime,
    gh: GithubDouble,
    dev: Dev,
    paths: Paths,
}

fn heading(text: &str) {
    println!("\n\x1b[1m== {text}\x1b[0m");
}

fn tf(name: &str) -> String {
    format!(
        "resource \"terraform_data\" \"{name}\" {{\n  input = \"{name}\"\n}}\n\noutput \"name\" {{\n  value = terraform_data.{name}.output\n}}\n"
    )
}

/// A comment's Markdown as GitHub shows it, near enough for a terminal: no hidden marker,
/// a collapsed section as its one summary line (`▸ …`, its content indented).
fn shown(markdown: &str) -> String {
    let mut out = String::new();
    let mut depth = 0usize;
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        // Outside code, a backslash escapes punctuation and is not shown.
        let unescaped;
        let line = if fenced {
            line
        } else {
            unescaped = unescape(line);
            unescaped.as_str()
        };
        let trimmed = line.trim();
        if trimmed.starts_with("<!--") && trimmed.ends_with("-->") {
            continue;
        }
        let trimmed = match trimmed.strip_prefix("<details>") {
            Some(rest) => {
                depth += 1;
                if rest.trim().is_empty() {
                    continue;
                }
                rest.trim()
            }
            None => trimmed,
        };
        if trimmed == "</details>" {
            depth = depth.saturating_sub(1);
            continue;
        }
        let indent = "  ".repeat(depth.saturating_sub(1));
        if let Some(summary) = trimmed
            .strip_prefix("<summary>")
            .and_then(|s| s.strip_suffix("</summary>"))
        {
            out.push_str(&format!("{indent}▸ {summary}\n"));
        } else {
            let indent = "  ".repeat(depth);
            out.push_str(&format!("{indent}{line}\n"));
        }
    }
    out
}

/// `line` without Markdown's backslash escapes (`merged\\.` is shown `merged.`).
fn unescape(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match chars.peek() {
            Some(next) if c == '\\' && next.is_ascii_punctuation() => {
                out.push(*next);
                chars.next();
            }
            _ => out.push(c),
        }
    }
    out
}

impl Demo {
    /// `sortie ARGS` pointed at this demo's `sortie dev`, with no user's config file.
    fn cli(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.paths.sortie);
        command
            .args(args)
            .env("SORTIE_API_URL", &self.dev.url)
            .env("SORTIE_TOKEN", &self.dev.token)
            .env("SORTIE_CONFIG", self.paths.work.join("config.yaml"))
            .env("NO_COLOR", "1")
            .stdin(Stdio::null());
        command
    }

    /// Runs `sortie ARGS` as a user would, printing the command and what it printed.
    fn sortie(&self, args: &[&str]) -> Result<String, String> {
        let shown: Vec<String> = args
            .iter()
            .map(|a| a.replace(self.paths.work.to_str().unwrap_or_default(), "$WORK"))
            .collect();
        println!("$ sortie {}", shown.join(" "));
        let out = self.cli(args).output().map_err(|e| e.to_string())?;
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        print!("{stdout}");
        if !out.status.success() {
            return Err(format!(
                "`sortie {}` failed: {}",
                shown.join(" "),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(stdout)
    }

    /// Delivers a signed webhook as GitHub would.
    fn deliver(&self, event: &str, payload: &Value) -> Result<(), String> {
        let url = format!("{}/v1/vcs/github/acme/webhook", self.dev.url);
        let (status, body) = self.rt.block_on(send_webhook(&url, SECRET, event, payload));
        println!("  (GitHub delivers `{event}`: Sortie answers {status})");
        if status == 202 {
            Ok(())
        } else {
            Err(format!("the {event} delivery got {status}: {body}"))
        }
    }

    /// Waits until `done` holds, or fails with the `sortie dev` log's end.
    fn wait(&self, what: &str, mut done: impl FnMut() -> bool) -> Result<(), String> {
        let deadline = Instant::now() + PATIENCE;
        while !done() {
            if Instant::now() > deadline {
                let log = self.dev.log_text();
                let tail: Vec<&str> = log.lines().rev().take(40).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                return Err(format!(
                    "never {what} (within {} s); the end of sortie dev's log:\n{}",
                    PATIENCE.as_secs(),
                    tail.join("\n")
                ));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        Ok(())
    }

    fn checks_of(&self, sha: &str) -> Vec<CheckRunRecord> {
        let mut runs: Vec<CheckRunRecord> = self
            .gh
            .check_runs(REPO)
            .into_iter()
            .filter(|r| r.head_sha == sha)
            .collect();
        runs.sort_by(|a, b| a.name.cmp(&b.name).then(a.id.cmp(&b.id)));
        runs
    }

    fn print_checks(&self, sha: &str) {
        println!("Checks on {}:", &sha[..7]);
        for run in self.checks_of(sha) {
            let title = run
                .output
                .as_ref()
                .and_then(|o| o["title"].as_str())
                .unwrap_or_default()
                .to_string();
            let result = run.conclusion.clone().unwrap_or(run.status.clone());
            println!("  {:<24} {:<10} {title}", run.name, result);
        }
    }

    /// The sticky comment, as GitHub shows it.
    fn print_comment(&self, number: u64) {
        let comments = self.gh.comments(REPO, number);
        let sticky = comments.iter().find(|c| c.body.starts_with("<!-- sortie"));
        if let Some(c) = sticky {
            println!(
                "Sortie's one comment on #{number} (written {}):",
                match c.history.len() {
                    0 => "once".to_string(),
                    1 => "once and edited once".to_string(),
                    n => format!("once and edited {n} times"),
                }
            );
            println!("┌────────────────────────────────────────────────────────────");
            for line in shown(&c.body).lines() {
                println!("│ {line}");
            }
            println!("└────────────────────────────────────────────────────────────");
        }
    }

    /// The bot's replies to commands (its comments other than the sticky one).
    fn replies(&self, number: u64) -> Vec<String> {
        self.gh
            .comments(REPO, number)
            .into_iter()
            .filter(|c| c.author == self.gh.app_bot_login() && !c.body.starts_with("<!-- sortie"))
            .map(|c| c.body)
            .collect()
    }

    /// `login` comments `body` on the pull request, and GitHub delivers it.
    fn command(&self, number: u64, login: &str, body: &str) -> Result<(), String> {
        println!("{login} comments: {body}");
        let id = self.gh.add_user_comment(REPO, number, login, body);
        let payload = self
            .gh
            .payloads()
            .issue_comment(REPO, number, id, login, body);
        self.deliver("issue_comment", &payload)
    }

    /// The jobs of `env`, newest first, as the API lists them.
    fn jobs(&self, env: &str) -> Vec<Value> {
        let out = self.cli(&["-o", "json", "get", "jobs", env]).output();
        out.ok()
            .and_then(|o| serde_json::from_slice::<Value>(&o.stdout).ok())
            .map(|v| {
                v.get("jobs")
                    .cloned()
                    .unwrap_or(v)
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .unwrap_or_default()
    }
}

fn run() -> Result<(), String> {
    let paths = Paths::from_args()?;
    let _ = std::fs::remove_dir_all(&paths.work);
    std::fs::create_dir_all(&paths.work).map_err(|e| e.to_string())?;
    let rt = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;

    heading("GitHub (a double of its API on 127.0.0.1): the repository acme/infra");
    let gh = rt.block_on(GithubDouble::start());
    gh.install(REPO);
    let files = |version: &str| {
        vec![
            (
                "envs/dev/main.tf".to_string(),
                tf(&format!("dev_{version}")),
            ),
            (
                "envs/prod/main.tf".to_string(),
                tf(&format!("prod_{version}")),
            ),
            ("README.md".to_string(), "infra\n".to_string()),
        ]
    };
    for (sha, version) in [(BASE, "v1"), (HEAD, "v2"), (MERGE, "v2")] {
        let f = files(version);
        let refs: Vec<(&str, &[u8])> = f.iter().map(|(p, c)| (p.as_str(), c.as_bytes())).collect();
        gh.add_commit(REPO, sha, &refs);
    }
    gh.set_branch(REPO, "main", BASE);
    println!(
        "{REPO}: envs/dev and envs/prod, one terraform_data each; the App is installed (id {})",
        gh.app_id()
    );

    heading("sortie dev (API, dispatch, sweeper and the pull-request handler in one process)");
    let dev = Dev::start(&paths)?;
    println!("listening on {}", dev.url);
    let demo = Demo { rt, gh, dev, paths };

    heading("Setup, with the CLI: a runner, a rule, the connection, two bound environments");
    let bucket = sortie_testkit::unique("demo-pr-state");
    demo.rt.block_on(async {
        let s3 = sortie_testkit::s3_client(&sortie_testkit::sdk_config().await);
        s3.create_bucket()
            .bucket(&bucket)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| format!("creating the state bucket: {e}"))
    })?;
    let runner_file = demo.paths.work.join("runner.yaml");
    std::fs::write(
        &runner_file,
        format!(
            "tool_version: \">= 1.5\"\nrunner_configuration:\n  type: local\nstate_storage_configuration:\n  type: s3\n  bucket: {bucket}\n  key_prefix: sortie/\n  region: us-east-1\n  endpoint: {}\n",
            sortie_testkit::endpoint()
        ),
    )
    .map_err(|e| e.to_string())?;
    let key = demo.paths.work.join("app.pem");
    let secret = demo.paths.work.join("webhook-secret");
    std::fs::write(&key, demo.gh.app_private_key_pem()).map_err(|e| e.to_string())?;
    std::fs::write(&secret, format!("{SECRET}\n")).map_err(|e| e.to_string())?;
    let work = |p: &Path| p.to_str().unwrap_or_default().to_string();
    demo.sortie(&["create", "runner", "acme/local", "-f", &work(&runner_file)])?;
    demo.sortie(&[
        "create",
        "runner-rule",
        "--set",
        "scope=acme",
        "--set",
        "id=default",
        "--set",
        "runner_id=acme/local",
    ])?;
    let app_id = demo.gh.app_id().to_string();
    demo.sortie(&[
        "vcs",
        "connect",
        "github",
        "acme",
        "--app-id",
        &app_id,
        "--private-key-file",
        &work(&key),
        "--webhook-secret-file",
        &work(&secret),
        "--github-api-url",
        demo.gh.url(),
    ])?;
    let connection: Value = serde_json::from_str(&{
        let out = demo
            .cli(&["-o", "json", "vcs", "get", "github", "acme"])
            .output()
            .map_err(|e| e.to_string())?;
        String::from_utf8_lossy(&out.stdout).to_string()
    })
    .map_err(|e| format!("vcs get: {e}"))?;
    let issuer = connection["issuer"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    demo.sortie(&[
        "create",
        "env",
        "acme/dev",
        "--type",
        "development",
        "--repository",
        REPO,
        "--directory",
        "envs/dev",
    ])?;
    demo.sortie(&[
        "create",
        "env",
        "acme/prod",
        "--type",
        "production",
        "--repository",
        REPO,
        "--directory",
        "envs/prod",
        "--apply",
        "before-merge",
        "--require-approvals",
        "1",
    ])?;
    demo.sortie(&[
        "members",
        "grant",
        "--group",
        "acme",
        "--role",
        "deployer",
        "--subject",
        "octocat",
        "--issuer",
        &issuer,
    ])?;
    // The branch requires Sortie's own check on production: it must not block the apply.
    demo.gh
        .set_required_checks(REPO, "main", &["sortie: acme/prod"]);
    println!("(branch protection of main requires the check `sortie: acme/prod`)");

    heading("1. octocat opens pull request #1, changing envs/dev and envs/prod");
    let number = demo.gh.add_pull(
        REPO,
        PullSpec::new("octocat", HEAD)
            .file(FileChange::modified("envs/dev/main.tf"))
            .file(FileChange::modified("envs/prod/main.tf")),
    );
    let opened = demo.gh.payloads().pull_request(REPO, number, "opened");
    demo.deliver("pull_request", &opened)?;
    demo.wait("two completed plans", || {
        let runs = demo.checks_of(HEAD);
        runs.len() == 2 && runs.iter().all(|r| r.status == "completed")
    })?;
    demo.print_checks(HEAD);
    demo.print_comment(number);

    heading("2. octocat asks for production's apply before anyone approved");
    demo.command(number, "octocat", "/sortie apply acme/prod")?;
    demo.wait("a reply", || !demo.replies(number).is_empty())?;
    for reply in demo.replies(number) {
        println!("Sortie replies:\n  {}", reply.replace('\n', "\n  "));
    }

    heading("3. a reviewer approves; octocat asks again");
    let review = demo
        .gh
        .add_review(REPO, number, "reviewer", "APPROVED", HEAD);
    let approved = demo
        .gh
        .payloads()
        .pull_request_review(REPO, number, review, "submitted");
    demo.deliver("pull_request_review", &approved)?;
    demo.command(number, "octocat", "/sortie apply acme/prod")?;
    demo.wait("production's apply", || {
        demo.checks_of(HEAD).iter().any(|r| {
            r.name == "sortie: acme/prod"
                && r.status == "completed"
                && r.output
                    .as_ref()
                    .is_some_and(|o| o["title"].to_string().contains("applied"))
        })
    })?;
    demo.print_checks(HEAD);
    demo.print_comment(number);

    heading("4. the pull request is merged: development applies at the merge commit");
    demo.gh.close_pull(REPO, number, Some(MERGE));
    demo.gh.set_branch(REPO, "main", MERGE);
    let closed = demo.gh.payloads().pull_request(REPO, number, "closed");
    demo.deliver("pull_request", &closed)?;
    demo.wait(
        "development's apply after the merge, in the comment",
        || {
            let ended = demo.jobs("acme/dev").iter().any(|j| {
                j["operation"] == "apply"
                    && matches!(
                        j["state"].as_str(),
                        Some("succeeded" | "failed" | "cancelled")
                    )
            });
            ended
                && demo.gh.comments(REPO, number).iter().any(|c| {
                    c.body.starts_with("<!-- sortie") && c.body.contains("acme/dev: applied")
                })
        },
    )?;
    demo.print_comment(number);
    demo.sortie(&["get", "jobs", "acme/dev"])?;
    demo.sortie(&["get", "jobs", "acme/prod"])?;
    demo.sortie(&["env", "outputs", "acme/prod"])?;

    heading("Done");
    let calls = demo.gh.requests().len();
    println!(
        "{calls} GitHub API calls in all; one comment on #{number}; sortie dev's log: {}",
        demo.dev.log.display()
    );
    Ok(())
}
