//! Jobs from the command line: `run plan|apply|destroy ENV` (with `--wait` to follow the
//! job to its end), `jobs list ENV`, and `job get|cancel|approve|discard|logs|outputs ID`
//! (`logs -f` follows).
//!
//! Following polls the job and its log about once a second. On a terminal (stderr), a
//! spinner shows the job's state and elapsed time, suspended while log lines print; with
//! no terminal there is no spinner and no colour. The log goes to standard output with
//! `-o table`, and to standard error with `-o json|yaml`, so standard output stays one
//! parseable document (the final job). A job that ends other than `succeeded` (`failed`,
//! `canceled`, `timed_out`, `discarded`) is [`CliError::JobFailed`] (exit 6). A reviewed
//! job that reaches `awaiting_approval` stops the follow with exit 0: its plan summary,
//! then `awaiting approval: sortie job approve <id>` (waiting for a person would hold a CI
//! job for as long as the approval takes).

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::time::Duration;

use chrono::{DateTime, Utc};
use http::Method;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use serde_json::{json, Map, Value};
use sortie_api::model::{DecisionBody, JobView, LogsPage};
use sortie_core::{ChangeSummary, JobState};

use crate::args::{JobCommand, Operation, Output, Run};
use crate::client::Api;
use crate::exit::CliError;
use crate::output::{change_summary as summary, details, emit, table, when};

/// How often a followed job and its log are polled.
const POLL: Duration = Duration::from_secs(1);
/// How many polls in a row may fail with a server or network error before following
/// gives up (a restarting `sortie dev`, a throttled API).
const POLL_FAILURES: u32 = 5;

/// `run plan|apply|destroy ENV`: submits the job and prints it; with `--wait`, follows it
/// to its end.
pub async fn run(api: &Api, args: Run, out: Output) -> Result<(), CliError> {
    let body = job_request(&args)?;
    let path = format!("{}/-/jobs", crate::resources::env_url(&args.env));
    let mut headers = Vec::new();
    if let Some(key) = &args.idempotency_key {
        headers.push(("Idempotency-Key", key.as_str()));
    }
    let answer = api.send(Method::POST, &path, Some(&body), &headers).await?;
    let view = job_view(answer.body.clone())?;
    if !args.wait {
        emit(&answer.body, out, || submitted_table(&view))?;
        // On standard error, so `-o json` keeps standard output one document.
        eprintln!("Follow: sortie job logs -f {}", view.job.id);
        return Ok(());
    }
    if out == Output::Table {
        println!("{}", submitted_table(&view).trim_end());
    }
    finish(follow(api, &view, out).await?, out)
}

/// `jobs list ENV`: the environment's newest jobs.
pub async fn jobs_list(api: &Api, env: &str, out: Output) -> Result<(), CliError> {
    let page: Value = api
        .get(&format!(
            "{}/-/jobs?limit=50",
            crate::resources::env_url(env)
        ))
        .await?;
    let jobs = page["jobs"].as_array().cloned().unwrap_or_default();
    let more = page["next"].is_string();
    emit(&page, out, || {
        let rows = jobs
            .iter()
            .map(|j| {
                vec![
                    text(&j["id"]),
                    text(&j["operation"]),
                    text(&j["state"]),
                    text(&j["requested_by"]),
                    j["transitions"][0]["at"]
                        .as_str()
                        .and_then(|t| t.parse::<DateTime<Utc>>().ok())
                        .map(when)
                        .unwrap_or_else(|| "-".into()),
                    serde_json::from_value::<ChangeSummary>(j["summary"].clone())
                        .map(|s| summary(&s))
                        .unwrap_or_else(|_| "-".into()),
                    j["waiting"]["text"].as_str().unwrap_or("-").to_string(),
                ]
            })
            .collect();
        let mut t = table(
            &[
                "ID",
                "OPERATION",
                "STATE",
                "REQUESTED BY",
                "CREATED",
                "SUMMARY",
                "WAITING",
            ],
            rows,
        );
        if jobs.is_empty() {
            t = format!("no jobs in environment `{env}`\n");
        } else if more {
            t.push_str(&format!(
                "(the newest {} shown; `-o json` gives the cursor of the next page)\n",
                jobs.len()
            ));
        }
        t
    })
}

/// `job get|cancel|approve|discard|logs|outputs ID`.
pub async fn job(api: &Api, cmd: JobCommand, out: Output) -> Result<(), CliError> {
    match cmd {
        JobCommand::Get { id } => {
            let view: JobView = api.get(&format!("/v1/jobs/{id}")).await?;
            emit(&view, out, || job_table(&view))
        }
        JobCommand::Cancel { id } => {
            let answer = api
                .send(Method::POST, &format!("/v1/jobs/{id}/cancel"), None, &[])
                .await?;
            let view = job_view(answer.body.clone())?;
            emit(&answer.body, out, || {
                let note = if view.job.state.is_terminal() {
                    format!("job {} {}\n", view.job.id, view.job.state)
                } else {
                    format!(
                        "job {}: its task is being stopped; it ends `canceled` (follow it with `sortie job logs -f {}`)\n",
                        view.job.id, view.job.id
                    )
                };
                format!("{}{note}", submitted_table(&view))
            })
        }
        JobCommand::Approve { id, comment } => {
            decide(api, &id, Verdict::Approve, comment, out).await
        }
        JobCommand::Discard { id, comment } => {
            decide(api, &id, Verdict::Discard, comment, out).await
        }
        JobCommand::Outputs { id } => {
            let answer = api
                .send(Method::GET, &format!("/v1/jobs/{id}/outputs"), None, &[])
                .await?;
            crate::resources::show_outputs(&answer.body, out, false)
        }
        JobCommand::Logs { id, follow: false } => {
            let mut offset = 0;
            let mut data = String::new();
            let mut more;
            loop {
                let page: LogsPage = api
                    .get(&format!("/v1/jobs/{id}/logs?offset={offset}"))
                    .await?;
                offset = page.next_offset;
                more = page.more;
                if page.data.is_empty() {
                    break;
                }
                data.push_str(&page.data);
            }
            let page = LogsPage {
                offset: 0,
                next_offset: offset,
                data,
                more,
            };
            emit(&page, out, || page.data.clone())
        }
        JobCommand::Logs { id, follow: true } => {
            let view: JobView = api.get(&format!("/v1/jobs/{id}")).await?;
            finish(follow(api, &view, out).await?, out)
        }
    }
}

/// A decision on a job awaiting approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Approve,
    Discard,
}

/// `job approve|discard ID [--comment TEXT]`: the decision, then the job as it is now.
async fn decide(
    api: &Api,
    id: &str,
    verdict: Verdict,
    comment: Option<String>,
    out: Output,
) -> Result<(), CliError> {
    let verb = match verdict {
        Verdict::Approve => "approve",
        Verdict::Discard => "discard",
    };
    let body = serde_json::to_value(DecisionBody { comment })
        .map_err(|e| CliError::Other(format!("could not encode the decision: {e}")))?;
    let answer = api
        .send(
            Method::POST,
            &format!("/v1/jobs/{id}/{verb}"),
            Some(&body),
            &[],
        )
        .await
        .map_err(|e| match e {
            // The API answers 404 too when the caller may not deploy to the environment.
            CliError::NotFound(m) => CliError::NotFound(format!(
                "{m}\nhint: to {verb} a job you need the deployer role on its environment's group"
            )),
            other => other,
        })?;
    let view = job_view(answer.body.clone())?;
    emit(&answer.body, out, || {
        let id = &view.job.id;
        let note = match verdict {
            Verdict::Approve => format!(
                "job {id} approved: {} to apply the saved plan (follow it with `sortie job logs -f {id}`)\n",
                view.job.state
            ),
            Verdict::Discard => format!(
                "job {id} {}: nothing was applied, and {} is released\n",
                view.job.state, view.job.environment
            ),
        };
        format!("{}{note}", submitted_table(&view))
    })
}

/// The JSON body of `POST .../jobs` from `run`'s arguments.
fn job_request(args: &Run) -> Result<Value, CliError> {
    let mut variables = Map::new();
    for file in &args.var_files {
        variables.extend(var_file(file)?);
    }
    for var in &args.vars {
        let (name, value) = var
            .split_once('=')
            .ok_or_else(|| CliError::Usage(format!("--var `{var}`: expected NAME=VALUE")))?;
        if name.is_empty() {
            return Err(CliError::Usage(format!(
                "--var `{var}`: the variable name is empty"
            )));
        }
        let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.into()));
        variables.insert(name.to_string(), value);
    }
    let operation = match args.operation {
        Operation::Plan => "plan",
        Operation::Apply => "apply",
        Operation::Destroy => "destroy",
    };
    let mut body = json!({"operation": operation, "variables": variables});
    let sensitive = sensitive_variables(
        &args.sensitive_vars,
        |name| std::env::var(sortie_core::sensitive::env_name(name)).ok(),
        prompt_hidden,
    )?;
    if !sensitive.is_empty() {
        body["sensitive_variables"] = Value::Object(sensitive);
    }
    // No --source: the current folder's own files (and the local modules they call), marked
    // implicit so that the runner refuses a plan that destroys everything; never a destroy.
    let implicit = args.source.is_none();
    if implicit && args.operation == Operation::Destroy {
        return Err(CliError::Other(format!(
            "destroy needs an explicit --source: name the configuration whose resources to destroy (`sortie run destroy {} --source DIR`); without --source, sortie would send whatever the current folder holds",
            args.env
        )));
    }
    let source = args.source.as_deref().unwrap_or(".");
    if is_git(source) {
        body["source"] = git_source(source)?;
    } else {
        let dir = Path::new(source);
        let inline = crate::source::collect(dir, args.source.as_deref())?;
        if let Some(note) = inline.note(dir, implicit) {
            eprintln!("{note}");
        }
        body["source"] = if implicit {
            json!({"type": "inline", "implicit": true})
        } else {
            json!({"type": "inline"})
        };
        body["files"] = Value::Object(
            inline
                .files
                .into_iter()
                .map(|(k, v)| (k, Value::String(v)))
                .collect(),
        );
    }
    Ok(body)
}

/// The values of `--sensitive-var`: `name=value` as given, else `name` from `from_env`
/// (`TF_VAR_<name>`), else from `prompt` (a terminal only). A value never appears in an
/// error.
fn sensitive_variables(
    given: &[String],
    from_env: impl Fn(&str) -> Option<String>,
    prompt: impl Fn(&str) -> Option<String>,
) -> Result<Map<String, Value>, CliError> {
    let mut out = Map::new();
    for arg in given {
        let (name, value) = match arg.split_once('=') {
            Some((name, value)) => (name, Some(value.to_string())),
            None => (arg.as_str(), None),
        };
        if let Some(problem) = sortie_core::sensitive::name_problem(name) {
            return Err(CliError::Usage(format!(
                "--sensitive-var `{name}` {problem}"
            )));
        }
        let value = value
            .or_else(|| from_env(name))
            .or_else(|| prompt(name))
            .ok_or_else(|| {
                CliError::Usage(format!(
                    "--sensitive-var {name}: no value; set {} or give {name}=VALUE",
                    sortie_core::sensitive::env_name(name)
                ))
            })?;
        out.insert(name.to_string(), Value::String(value));
    }
    Ok(out)
}

/// Asks for `name`'s value on the terminal without echoing it; `None` when stdin is not a
/// terminal.
fn prompt_hidden(name: &str) -> Option<String> {
    if !std::io::stdin().is_terminal() {
        return None;
    }
    let stty = |arg: &str| {
        std::process::Command::new("stty")
            .arg(arg)
            .stdin(std::process::Stdio::inherit())
            .status()
            .is_ok_and(|s| s.success())
    };
    eprint!("{name} (sensitive, not echoed): ");
    let _ = std::io::stderr().flush();
    let hidden = stty("-echo");
    let mut line = String::new();
    let read = std::io::stdin().read_line(&mut line);
    if hidden {
        stty("echo");
    }
    eprintln!();
    read.ok()?;
    Some(line.trim_end_matches(['\r', '\n']).to_string())
}

/// Reads a variables file: JSON (`.json`, `.tfvars.json`) or YAML, a mapping of names to
/// values.
fn var_file(path: &Path) -> Result<Map<String, Value>, CliError> {
    let shown = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::Usage(format!("--var-file {shown}: {e}")))?;
    let value: Value = if path.extension().is_some_and(|e| e == "json") {
        serde_json::from_str(&text)
            .map_err(|e| CliError::Usage(format!("--var-file {shown}: not JSON: {e}")))?
    } else {
        serde_norway::from_str(&text)
            .map_err(|e| CliError::Usage(format!("--var-file {shown}: not YAML or JSON: {e}")))?
    };
    match value {
        Value::Object(map) => Ok(map),
        Value::Null => Ok(Map::new()),
        _ => Err(CliError::Usage(format!(
            "--var-file {shown}: expected a mapping of variable names to values"
        ))),
    }
}

/// A git source: `git::` anything, or a URL (`https://`, `http://`, `ssh://`, `file://`,
/// `git@host:`).
fn is_git(source: &str) -> bool {
    source.starts_with("git::")
        || ["https://", "http://", "ssh://", "file://", "git@"]
            .iter()
            .any(|p| source.starts_with(p))
}

/// Turns Terraform's module-source form `git::URL//SUBDIR?ref=REF` into a git source.
fn git_source(source: &str) -> Result<Value, CliError> {
    let rest = source.strip_prefix("git::").unwrap_or(source);
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r, Some(q)),
        None => (rest, None),
    };
    let mut git_ref = None;
    for pair in query.into_iter().flat_map(|q| q.split('&')) {
        match pair.split_once('=') {
            Some(("ref", r)) if !r.is_empty() => git_ref = Some(r.to_string()),
            _ => {
                return Err(CliError::Usage(format!(
                    "--source {source}: `{pair}`: only `?ref=BRANCH|TAG|COMMIT` is understood"
                )))
            }
        }
    }
    // The subdirectory follows the first `//` after the scheme's `://`.
    let after_scheme = rest.find("://").map_or(0, |i| i + 3);
    let (url, path) = match rest[after_scheme..].find("//") {
        Some(i) => (
            &rest[..after_scheme + i],
            rest[after_scheme + i + 2..].trim_matches('/'),
        ),
        None => (rest, ""),
    };
    let mut git = json!({"type": "git", "url": url, "path": path});
    if let Some(r) = git_ref {
        git["ref"] = Value::String(r);
    }
    Ok(git)
}

fn job_view(body: Value) -> Result<JobView, CliError> {
    serde_json::from_value(body)
        .map_err(|e| CliError::Other(format!("the API answered a job this CLI cannot read: {e}")))
}

/// Follows a job to its end: the spinner, the log as it grows. Returns the final job.
async fn follow(api: &Api, start: &JobView, out: Output) -> Result<JobView, CliError> {
    let id = start.job.id.to_string();
    let to_stdout = out == Output::Table;
    let bar = spinner(start);
    let mut log = LogPrinter {
        bar: bar.as_ref(),
        to_stdout,
        pending: String::new(),
    };
    let mut offset = 0u64;
    let mut failures = 0;
    let mut said = None;
    if bar.is_none() {
        print_waiting(start, &mut said);
    }
    // Ctrl-C stops following, not the job (crate::interrupt).
    let mut interrupts = crate::interrupt::Interrupts::listen();
    let fin = loop {
        let polled = tokio::select! {
            polled = poll(api, &id, &mut offset, &mut log) => polled,
            () = interrupts.next() => Err(CliError::Interrupted),
        };
        match polled {
            Ok((view, more)) => {
                failures = 0;
                match &bar {
                    Some(bar) => bar.set_message(spinner_message(&view)),
                    None if more => print_waiting(&view, &mut said),
                    None => {}
                }
                if !more {
                    break view;
                }
            }
            Err(CliError::Server(e)) if failures + 1 < POLL_FAILURES => {
                failures += 1;
                if let Some(bar) = &bar {
                    bar.set_message(format!("{} (retrying: {e})", spinner_message(start)));
                }
            }
            Err(e) => {
                log.flush();
                if let Some(bar) = &bar {
                    bar.finish_and_clear();
                }
                if e == CliError::Interrupted {
                    return Err(crate::interrupt::stop_following(api, &id, &mut interrupts).await);
                }
                return Err(e);
            }
        }
        tokio::select! {
            () = tokio::time::sleep(POLL) => {}
            () = interrupts.next() => {
                log.flush();
                if let Some(bar) = &bar {
                    bar.finish_and_clear();
                }
                return Err(crate::interrupt::stop_following(api, &id, &mut interrupts).await);
            }
        }
    };
    log.flush();
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    Ok(fin)
}

/// One poll: the job, then its log from `offset` to the first gap. Returns the job and
/// whether more may come (the job had not ended when the log was read).
async fn poll(
    api: &Api,
    id: &str,
    offset: &mut u64,
    log: &mut LogPrinter<'_>,
) -> Result<(JobView, bool), CliError> {
    let mut view: JobView = api.get(&format!("/v1/jobs/{id}")).await?;
    loop {
        let page: LogsPage = api
            .get(&format!("/v1/jobs/{id}/logs?offset={offset}"))
            .await?;
        *offset = page.next_offset;
        log.push(&page.data);
        if !page.more {
            if !view.job.state.is_terminal() {
                // It ended between the two reads.
                view = api.get(&format!("/v1/jobs/{id}")).await?;
            }
            return Ok((view, false));
        }
        if page.data.is_empty() {
            // A job awaiting approval has a whole log (its plan task ended) and waits for
            // a person: following stops there.
            return Ok((view.clone(), view.job.state != JobState::AwaitingApproval));
        }
    }
}

/// Prints the final line (state, change summary, elapsed) and turns an unsuccessful end
/// into [`CliError::JobFailed`]. A job awaiting approval is a stop, not a failure: its plan
/// summary, then the command that approves it.
fn finish(view: JobView, out: Output) -> Result<(), CliError> {
    let state = view.job.state;
    let awaiting = state == JobState::AwaitingApproval;
    let plan_summary = view.plan_phase.as_ref().and_then(|p| p.summary.as_ref());
    let summary_text = if awaiting {
        plan_summary.or(view.summary.as_ref())
    } else {
        view.summary.as_ref()
    }
    .map(summary)
    .unwrap_or_else(|| "(no change summary)".into());
    let took = match (view.job.transitions.first(), view.job.transitions.last()) {
        (Some(a), Some(b)) => duration(b.at - a.at),
        _ => "-".into(),
    };
    let rest = format!(
        "{summary_text}  ({} {} on {}, {took})",
        view.job.request.operation.as_str(),
        view.job.id,
        view.job.environment
    );
    let hint = awaiting.then(|| format!("awaiting approval: sortie job approve {}", view.job.id));
    if out == Output::Table {
        let colour = std::io::stdout().is_terminal();
        println!("{}  {rest}", paint(state, colour));
        if let Some(hint) = &hint {
            println!("{hint}");
        }
    } else {
        let colour = std::io::stderr().is_terminal();
        eprintln!("{}  {rest}", paint(state, colour));
        if let Some(hint) = &hint {
            eprintln!("{hint}");
        }
        emit(&view, out, String::new)?;
    }
    if state == JobState::Succeeded || awaiting {
        return Ok(());
    }
    let reason = view
        .job
        .transitions
        .last()
        .map(|t| t.reason.clone())
        .unwrap_or_default();
    Err(CliError::JobFailed {
        state: state.to_string(),
        reason,
    })
}

/// The spinner, only when standard error is a terminal.
fn spinner(view: &JobView) -> Option<ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let since = view
        .job
        .transitions
        .first()
        .map(|t| (Utc::now() - t.at).to_std().unwrap_or_default())
        .unwrap_or_default();
    let style = ProgressStyle::with_template("{spinner} {msg} ({took})")
        .unwrap_or_else(|_| ProgressStyle::default_spinner())
        .with_key(
            "took",
            |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                let secs = state.elapsed().as_secs();
                let _ = if secs < 60 {
                    write!(w, "{secs}s")
                } else {
                    write!(w, "{}m{:02}s", secs / 60, secs % 60)
                };
            },
        )
        .tick_chars("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏ ");
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr())
        .with_style(style)
        .with_elapsed(since);
    bar.set_message(spinner_message(view));
    bar.enable_steady_tick(Duration::from_millis(100));
    Some(bar)
}

fn spinner_message(view: &JobView) -> String {
    let waiting = view
        .waiting
        .as_ref()
        .map(|w| format!(": {}", w.text))
        .unwrap_or_default();
    format!(
        "{} {} on {}: {}{waiting}",
        view.job.request.operation.as_str(),
        view.job.id,
        view.job.environment,
        view.job.state
    )
}

/// Without a spinner (no terminal): why the job waits, on standard error, each time the
/// kind of reason changes (not each time its seconds count on).
fn print_waiting(view: &JobView, last: &mut Option<String>) {
    let Some(w) = &view.waiting else {
        *last = None;
        return;
    };
    let key = format!("{:?}:{:?}:{:?}", w.kind, w.behind, w.behind_state);
    if last.as_deref() != Some(key.as_str()) {
        eprintln!("waiting: {}", w.text);
        *last = Some(key);
    }
}

/// Prints a log as it grows, whole lines at a time, with the spinner suspended.
struct LogPrinter<'a> {
    bar: Option<&'a ProgressBar>,
    to_stdout: bool,
    pending: String,
}

impl LogPrinter<'_> {
    fn push(&mut self, data: &str) {
        self.pending.push_str(data);
        if let Some(end) = self.pending.rfind('\n') {
            let lines: String = self.pending.drain(..=end).collect();
            self.write(&lines);
        }
    }

    fn flush(&mut self) {
        if !self.pending.is_empty() {
            let mut rest = std::mem::take(&mut self.pending);
            rest.push('\n');
            self.write(&rest);
        }
    }

    fn write(&self, text: &str) {
        let print = || {
            // A closed pipe (`| head`) is not worth failing the follow for.
            if self.to_stdout {
                let mut o = std::io::stdout().lock();
                let _ = o.write_all(text.as_bytes());
                let _ = o.flush();
            } else {
                let mut e = std::io::stderr().lock();
                let _ = e.write_all(text.as_bytes());
                let _ = e.flush();
            }
        };
        match self.bar {
            Some(bar) => bar.suspend(print),
            None => print(),
        }
    }
}

fn paint(state: JobState, colour: bool) -> String {
    let code = match state {
        JobState::Succeeded => "32",
        JobState::Failed | JobState::TimedOut => "31",
        JobState::Canceled | JobState::Discarded => "33",
        JobState::AwaitingApproval => "36",
        _ => "",
    };
    if colour && !code.is_empty() {
        format!("\x1b[1;{code}m{state}\x1b[0m")
    } else {
        state.to_string()
    }
}

fn duration(d: chrono::TimeDelta) -> String {
    let ms = d.num_milliseconds().max(0);
    if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60)
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

fn submitted_table(view: &JobView) -> String {
    table(
        &["ID", "ENVIRONMENT", "OPERATION", "STATE"],
        vec![vec![
            view.job.id.to_string(),
            view.job.environment.to_string(),
            view.job.request.operation.as_str().into(),
            view.job.state.to_string(),
        ]],
    )
}

fn job_table(view: &JobView) -> String {
    let job = &view.job;
    let head = table(
        &[
            "ID",
            "ENVIRONMENT",
            "OPERATION",
            "STATE",
            "REQUESTED BY",
            "CREATED",
            "SUMMARY",
        ],
        vec![vec![
            job.id.to_string(),
            job.environment.to_string(),
            job.request.operation.as_str().into(),
            job.state.to_string(),
            job.requested_by.clone(),
            job.transitions
                .first()
                .map(|t| when(t.at))
                .unwrap_or_else(|| "-".into()),
            view.summary
                .as_ref()
                .map(summary)
                .unwrap_or_else(|| "-".into()),
        ]],
    );
    let transitions = table(&["FROM", "TO", "AT", "REASON"], transition_rows(job, when));
    let more = job_details(view);
    if more.is_empty() {
        return format!("{}\n\n{}", head.trim_end(), transitions);
    }
    format!("{}\n\n{}\n{}", head.trim_end(), details(&more), transitions)
}

/// A value's serde name (`approved`, `terraform`).
fn word<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => "?".into(),
    }
}

/// What a job has beyond its row: the tool, the review and its decision, the plan phase.
/// Empty for a plain job.
fn job_details(view: &JobView) -> Vec<(&'static str, String)> {
    let job = &view.job;
    let mut d = Vec::new();
    if let Some(w) = &view.waiting {
        d.push(("waiting", w.text.clone()));
    }
    let asked: Vec<String> = job
        .tool
        .iter()
        .map(word)
        .chain(job.tool_version.clone())
        .collect();
    if !asked.is_empty() {
        d.push(("tool asked", asked.join(" ")));
    }
    if let Some(used) = &view.tool_used {
        d.push((
            "tool used",
            format!("{} {}", word(&used.tool), used.version),
        ));
    }
    // Sensitive variables by name only: the API never answers a value.
    for name in job.request.sensitive_variables.keys() {
        d.push((
            "variable",
            format!("{name} = {}", sortie_core::sensitive::SHOWN),
        ));
    }
    if job.drift_check {
        d.push((
            "drift check",
            "yes (a scheduled plan of the last apply)".into(),
        ));
    }
    if let Some(review) = &job.review {
        let four_eyes = if review.four_eyes {
            ", four eyes (the requester may not approve)"
        } else {
            ""
        };
        d.push((
            "review",
            format!("required, phase {}{four_eyes}", review.phase.as_str()),
        ));
        if let Some(since) = review.awaiting_since {
            d.push(("awaiting since", when(since)));
            if review.decision.is_none() {
                let deadline = since + chrono::Duration::seconds(i64::from(review.timeout_seconds));
                d.push((
                    "deadline",
                    format!("{} (then discarded, unless decided before)", when(deadline)),
                ));
            }
        }
        if let Some(decision) = &review.decision {
            let comment = decision
                .comment
                .as_ref()
                .map(|c| format!(": {c}"))
                .unwrap_or_default();
            d.push((
                "decision",
                format!(
                    "{} by {} at {}{comment}",
                    word(&decision.verdict),
                    decision.by,
                    when(decision.at)
                ),
            ));
        }
    }
    if let Some(plan) = &view.plan_phase {
        d.push((
            "plan phase",
            format!(
                "{} (attempt {}, ended {})",
                plan.summary
                    .as_ref()
                    .map(summary)
                    .unwrap_or_else(|| "(no change summary)".into()),
                plan.attempt,
                when(plan.ended_at)
            ),
        ));
    }
    d
}

/// The rows of a job's history: a folded entry shows its last time and `(xN since <first>)`,
/// and the entries a long history dropped show as one row after the first ones kept.
fn transition_rows(
    job: &sortie_core::Job,
    when: impl Fn(chrono::DateTime<chrono::Utc>) -> String,
) -> Vec<Vec<String>> {
    let mut rows: Vec<Vec<String>> = job
        .transitions
        .iter()
        .map(|t| {
            let reason = if t.count > 1 {
                format!("{} (x{} since {})", t.reason, t.count, when(t.at))
            } else {
                t.reason.clone()
            };
            vec![
                t.from.map_or_else(|| "-".into(), |f| f.to_string()),
                t.to.to_string(),
                when(t.latest_at()),
                reason,
            ]
        })
        .collect();
    if job.transitions_dropped > 0 {
        let at = sortie_core::retry::HISTORY_KEEP_FIRST.min(rows.len());
        rows.insert(
            at,
            vec![
                "…".into(),
                "…".into(),
                "".into(),
                format!("{} transitions not kept", job.transitions_dropped),
            ],
        );
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_terraform_style_git_source_splits_into_url_path_and_ref() {
        assert_eq!(
            git_source("git::https://example.com/acme/infra.git//stacks/app?ref=v1.2").unwrap(),
            json!({"type": "git", "url": "https://example.com/acme/infra.git", "path": "stacks/app", "ref": "v1.2"})
        );
        assert_eq!(
            git_source("https://example.com/acme/infra.git").unwrap(),
            json!({"type": "git", "url": "https://example.com/acme/infra.git", "path": ""})
        );
        assert_eq!(
            git_source("git@example.com:acme/infra.git//app").unwrap(),
            json!({"type": "git", "url": "git@example.com:acme/infra.git", "path": "app"})
        );
        assert!(git_source("git::https://h/r.git?depth=1").is_err());
        assert!(is_git("git::file:///tmp/r") && !is_git("./infra"));
    }

    #[test]
    fn vars_are_json_when_they_parse_and_strings_otherwise() {
        let args = Run {
            operation: Operation::Plan,
            env: "acme/x".into(),
            source: Some("git::https://h/r.git".into()),
            vars: vec![
                "n=3".into(),
                "s=hi there".into(),
                "l=[1,2]".into(),
                "b=true".into(),
                "e=".into(),
            ],
            var_files: vec![],
            sensitive_vars: vec![],
            wait: false,
            idempotency_key: None,
        };
        let body = job_request(&args).unwrap();
        assert_eq!(
            body["variables"],
            json!({"n": 3, "s": "hi there", "l": [1, 2], "b": true, "e": ""})
        );
        assert_eq!(body["operation"], "plan");
    }

    #[test]
    fn without_source_a_destroy_is_refused_and_so_is_a_folder_without_tf_files() {
        let dir = std::env::temp_dir().join(format!("sortie-implicit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("main.tf"), "output \"x\" { value = 1 }\n").unwrap();
        let run = |operation, source: Option<String>| Run {
            operation,
            env: "acme/x".into(),
            source,
            vars: vec![],
            var_files: vec![],
            sensitive_vars: vec![],
            wait: false,
            idempotency_key: None,
        };
        let e = job_request(&run(Operation::Destroy, None)).unwrap_err();
        assert_eq!(e.exit_code(), 1);
        assert!(
            e.to_string()
                .starts_with("destroy needs an explicit --source: "),
            "{e}"
        );
        let shown = dir.display().to_string();
        let explicit = job_request(&run(Operation::Destroy, Some(shown.clone()))).unwrap();
        assert_eq!(explicit["source"], json!({"type": "inline"}));
        assert_eq!(explicit["files"]["main.tf"], "output \"x\" { value = 1 }\n");
        let git = job_request(&run(
            Operation::Destroy,
            Some("git::https://h/r.git".into()),
        ));
        assert_eq!(git.unwrap()["source"]["type"], "git");
        // The implicit source is the current directory: the crate's, which has no .tf file.
        let e = job_request(&run(Operation::Apply, None)).unwrap_err();
        assert_eq!(e.exit_code(), 1);
        assert!(
            e.to_string()
                .starts_with("no .tf file in the current folder"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn sensitive_vars_come_from_the_argument_the_environment_or_a_prompt() {
        let env = |name: &str| (name == "from_env").then(|| "env-value".to_string());
        let asked = |name: &str| (name == "asked").then(|| "typed".to_string());
        let got = sensitive_variables(
            &["a=b=c".into(), "from_env".into(), "asked".into()],
            env,
            asked,
        )
        .unwrap();
        assert_eq!(
            Value::Object(got),
            json!({"a": "b=c", "from_env": "env-value", "asked": "typed"})
        );
        let e = sensitive_variables(&["missing".into()], env, asked).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--sensitive-var missing: no value; set TF_VAR_missing or give missing=VALUE"
        );
        let e = sensitive_variables(&["9x=hunter2".into()], env, asked).unwrap_err();
        assert!(e.to_string().starts_with("--sensitive-var `9x` "), "{e}");
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }

    #[test]
    fn var_files_read_json_and_yaml() {
        let dir = std::env::temp_dir().join(format!("sortie-varfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a.tfvars.json"), r#"{"x": 1}"#).unwrap();
        std::fs::write(dir.join("b.yaml"), "y: [a, b]\n").unwrap();
        assert_eq!(var_file(&dir.join("a.tfvars.json")).unwrap()["x"], 1);
        assert_eq!(
            var_file(&dir.join("b.yaml")).unwrap()["y"],
            json!(["a", "b"])
        );
        std::fs::write(dir.join("c.yaml"), "- 1\n").unwrap();
        assert!(var_file(&dir.join("c.yaml")).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
