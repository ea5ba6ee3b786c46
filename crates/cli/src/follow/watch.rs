//! Following a job to its end: polling the job and its log, the spinner on a terminal,
//! the log lines as they come, and the final answer.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use chrono::Utc;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use sortie_api::model::{JobView, LiveLogUrl, LogsPage};
use sortie_client::endpoints;
use sortie_core::policy::PolicyStatus;
use sortie_core::protocol::logs::{
    page_cut, LiveLog, LiveRead, FOLLOWER_API_EVERY, LIVE_READ_BYTES,
};
use sortie_core::JobState;

use crate::args::Output;
use crate::client::Api;
use crate::exit::CliError;
use crate::output::{change_summary as summary, emit};

/// How often a followed job's log is read: with the pilot writing every second while
/// followed, a line is seen within about 1.5 s (`docs/decisions/logs-and-artifacts.md`).
/// Between calls of the API ([`FOLLOWER_API_EVERY`]) the reads go straight to the live
/// object, when the API hands out its URL.
pub(super) const POLL: Duration = Duration::from_millis(500);

/// How often the job itself is read while its log comes from the live object (the
/// spinner's state; the log says when it ends, and the live object when the pilot did).
const JOB_EVERY: Duration = Duration::from_secs(30);

/// How many polls in a row may fail with a server or network error before following
/// gives up (a restarting `sortie dev`, a throttled API).
pub(super) const POLL_FAILURES: u32 = 5;

/// The live object's URL, as the API last handed it out, and until when it is used.
struct Live {
    url: String,
    until: Instant,
}

impl Live {
    fn from(url: Option<LiveLogUrl>) -> Option<Self> {
        let url = url?;
        let left = (url.expires_at - Utc::now()).to_std().ok()?;
        // A URL about to end is not used: the API's next answer brings a fresh one.
        let left = left.checked_sub(Duration::from_secs(15))?;
        Some(Self {
            url: url.url,
            until: Instant::now() + left,
        })
    }
}

/// What one read of the live object says.
#[derive(Debug, PartialEq, Eq)]
enum LiveStep {
    /// Read (what was new is printed, or nothing was): the next read may go there too.
    Read,
    /// Ask the API: the bytes before the live object's start are in the chunks only, the
    /// pilot has shipped its last byte, or the URL no longer works.
    AskApi,
    /// The URL does not work (ended, refused): ask the API for a fresh one.
    Failed,
}

/// Reads the live object from `offset` and prints what it holds past it. A character
/// split at the object's end waits for the next read.
async fn read_live(api: &Api, live: &Live, offset: &mut u64, log: &mut LogPrinter<'_>) -> LiveStep {
    // The job's own code could write a huge object through the pilot's URL: a ranged read.
    let body = match api.get_presigned(&live.url, LIVE_READ_BYTES).await {
        Ok(Some(body)) => body,
        // Not written yet: the pilot writes it within a second of seeing the follower.
        Ok(None) => return LiveStep::Read,
        Err(_) => return LiveStep::Failed,
    };
    let Some(object) = LiveLog::decode(&body) else {
        return LiveStep::Failed;
    };
    if object.ended {
        return LiveStep::AskApi;
    }
    match object.from_offset(*offset) {
        LiveRead::Bytes(bytes) => {
            let cut = page_cut(bytes, usize::MAX, false);
            log.push(&String::from_utf8_lossy(&bytes[..cut]));
            *offset += cut as u64;
            LiveStep::Read
        }
        LiveRead::Nothing => LiveStep::Read,
        LiveRead::Gap => LiveStep::AskApi,
    }
}

/// Follows a job to its end: the spinner, the log as it grows. Returns the final job.
pub(super) async fn follow(api: &Api, start: &JobView, out: Output) -> Result<JobView, CliError> {
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
    let mut live: Option<Live> = None;
    let mut last_view = start.clone();
    let mut last_api: Option<Instant> = None;
    let mut last_job: Option<Instant> = None;
    // Ctrl-C stops following, not the job (crate::interrupt).
    let mut interrupts = crate::interrupt::Interrupts::listen();
    let fin = loop {
        // Between calls of the API, the live object, while the job runs (queued, waiting
        // or dispatching, its state is what the follower shows: the API every poll); the
        // API when it is due or needed.
        let mut fresh_job = false;
        let mut ask_api = true;
        let running = last_view.job.state == JobState::Running;
        if let Some(current) = live
            .as_ref()
            .filter(|l| running && Instant::now() < l.until)
        {
            if last_api.is_some_and(|at| at.elapsed() < FOLLOWER_API_EVERY) {
                let step = tokio::select! {
                    step = read_live(api, current, &mut offset, &mut log) => step,
                    () = interrupts.next() => {
                        log.flush();
                        if let Some(bar) = &bar {
                            bar.finish_and_clear();
                        }
                        return Err(crate::interrupt::stop_following(api, &id, &mut interrupts).await);
                    }
                };
                match step {
                    LiveStep::Read => ask_api = false,
                    LiveStep::AskApi => fresh_job = true,
                    LiveStep::Failed => live = None,
                }
            }
        }
        if ask_api {
            let cached = (live.is_some()
                && running
                && !fresh_job
                && last_job.is_some_and(|at| at.elapsed() < JOB_EVERY))
            .then(|| last_view.clone());
            let polled = tokio::select! {
                polled = poll(api, &id, &mut offset, &mut log, cached) => polled,
                () = interrupts.next() => Err(CliError::Interrupted),
            };
            last_api = Some(Instant::now());
            match polled {
                Ok(polled) => {
                    failures = 0;
                    if polled.fetched_job {
                        last_job = Some(Instant::now());
                    }
                    live = Live::from(polled.live);
                    last_view = polled.view;
                    match &bar {
                        Some(bar) => bar.set_message(spinner_message(&last_view)),
                        None if polled.more => print_waiting(&last_view, &mut said),
                        None => {}
                    }
                    if !polled.more {
                        break last_view;
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
                        return Err(
                            crate::interrupt::stop_following(api, &id, &mut interrupts).await
                        );
                    }
                    return Err(e);
                }
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

/// What one poll of the API found.
pub(super) struct Polled {
    /// The job.
    pub view: JobView,
    /// Whether more may come (the job had not ended when the log was read).
    pub more: bool,
    /// The live object's URL, when the API handed one out.
    pub live: Option<LiveLogUrl>,
    /// Whether the job was read now (not taken from `cached`).
    pub fetched_job: bool,
}

/// One poll: the job (unless `cached` stands in for it: read again when the log says it
/// ended), then its log from `offset` to the first gap.
pub(super) async fn poll(
    api: &Api,
    id: &str,
    offset: &mut u64,
    log: &mut LogPrinter<'_>,
    cached: Option<JobView>,
) -> Result<Polled, CliError> {
    let mut fetched_job = cached.is_none();
    let mut view: JobView = match cached {
        Some(view) => view,
        None => api.get(&endpoints::get_job(id)).await?,
    };
    loop {
        let from = offset.to_string();
        let page: LogsPage = api
            .get(&endpoints::get_job_logs(id).query([("offset", Some(from.as_str()))]))
            .await?;
        *offset = page.next_offset;
        log.push(&page.data);
        if !page.more {
            if !view.job.state.is_terminal() {
                // It ended between the two reads (or the job was not read this time).
                view = api.get(&endpoints::get_job(id)).await?;
                fetched_job = true;
            }
            return Ok(Polled {
                view,
                more: false,
                live: None,
                fetched_job,
            });
        }
        if page.data.is_empty() {
            // A job awaiting a person's approval has a whole log (its plan task ended):
            // following stops there. One the policy gate is approving goes on.
            let more = !awaits_a_person(&view);
            return Ok(Polled {
                view,
                more,
                live: page.live,
                fetched_job,
            });
        }
    }
}

/// Whether a job waits for a person: awaiting approval, with no decision yet, and not
/// reviewed only for the policy gate on its way through it (approval `auto`: the gate has
/// not recorded its check yet, or the plan passed and the gate's approval is being
/// written). An approved job that still awaits (a pull request's, until its requirements
/// are read again) waits for no person either.
pub(super) fn awaits_a_person(view: &JobView) -> bool {
    if view.job.state != JobState::AwaitingApproval {
        return false;
    }
    let Some(review) = &view.job.review else {
        return true;
    };
    if review.decision.is_some() {
        return false;
    }
    if !review.policy_only {
        return true;
    }
    view.policy.as_ref().is_some_and(|result| {
        !matches!(
            sortie_core::policy::gate::verdict(result),
            sortie_core::policy::gate::GateVerdict::Proceed
        )
    })
}

/// The final line after the state: the change summary (the plan's, for a job awaiting
/// approval), the policy gate's word when it said more than "passed", and which job this
/// was and how long it took: `applied +2 ~0 -0  policy warned  (apply ID on ENV, 12s)`.
fn end_of_line(view: &JobView, awaiting: bool) -> String {
    let plan_summary = view.plan_phase.as_ref().and_then(|p| p.summary.as_ref());
    let summary_text = if awaiting {
        plan_summary.or(view.summary.as_ref())
    } else {
        view.summary.as_ref()
    }
    .map(|s| {
        // Whose counts these are: an apply's that ended, or a plan's (a plan job, or an
        // apply that was denied, discarded, failed or is still waiting): a denied destroy
        // reads `planned +0 ~0 -1`, never as if something was destroyed.
        let applied = view.job.state == JobState::Succeeded
            && view.job.request.operation != sortie_core::Operation::Plan;
        format!(
            "{} {}",
            if applied { "applied" } else { "planned" },
            summary(s)
        )
    })
    .unwrap_or_else(|| "(no change summary)".into());
    let took = match (view.job.transitions.first(), view.job.transitions.last()) {
        (Some(a), Some(b)) => duration(b.at - a.at),
        _ => "-".into(),
    };
    // What the policy gate said, when it said more than "passed".
    let policy = match view.policy.as_ref().map(|p| p.status) {
        Some(PolicyStatus::Warned) => "  policy warned",
        Some(PolicyStatus::Denied) => "  policy denied",
        Some(PolicyStatus::Unavailable) => "  policy unavailable",
        Some(PolicyStatus::Passed) | None => "",
    };
    format!(
        "{summary_text}{policy}  ({} {} on {}, {took})",
        view.job.request.operation.as_str(),
        view.job.id,
        view.job.environment
    )
}

/// Prints the final line (state, change summary, elapsed) and turns an unsuccessful end
/// into [`CliError::JobFailed`]. A job awaiting approval is a stop, not a failure: its plan
/// summary, then the command that approves it.
pub(super) fn finish(view: JobView, out: Output) -> Result<(), CliError> {
    let state = view.job.state;
    let awaiting = state == JobState::AwaitingApproval;
    let rest = end_of_line(&view, awaiting);
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
    if state == JobState::Succeeded {
        return Ok(());
    }
    if awaiting {
        return Err(CliError::AwaitingApproval);
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
pub(super) fn spinner(view: &JobView) -> Option<ProgressBar> {
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

pub(super) fn spinner_message(view: &JobView) -> String {
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
pub(super) fn print_waiting(view: &JobView, last: &mut Option<String>) {
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
pub(super) struct LogPrinter<'a> {
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

pub(super) fn paint(state: JobState, colour: bool) -> String {
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

pub(super) fn duration(d: chrono::TimeDelta) -> String {
    let ms = d.num_milliseconds().max(0);
    if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60)
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use serde_json::json;
    use sortie_api::model::JobView;
    use sortie_core::job::{
        Job, JobPhase, JobRequest, JobState, Review, ReviewDecision, ReviewVerdict,
    };
    use sortie_core::{EnvPath, RunnerId};

    use super::{awaits_a_person, end_of_line, Live};

    #[test]
    fn a_live_url_is_used_until_fifteen_seconds_before_it_ends() {
        let url = |secs: i64| {
            Live::from(Some(sortie_api::model::LiveLogUrl {
                url: "http://127.0.0.1:1/b--use1-az4--x-s3/logs/j/live?X-Amz-S3session-Token=t"
                    .into(),
                expires_at: Utc::now() + chrono::Duration::seconds(secs),
            }))
        };
        assert!(url(-5).is_none(), "an ended URL");
        assert!(url(10).is_none(), "one about to end");
        let live = url(240).expect("four minutes left");
        let left = live.until - std::time::Instant::now();
        assert!(
            left > std::time::Duration::from_secs(220)
                && left <= std::time::Duration::from_secs(225)
        );
        assert!(Live::from(None).is_none());
    }

    /// A job awaiting approval: reviewed only for the gate when `policy_only`, with the
    /// gate's check as `policy` (`Some(true)`: a set warned), decided when `decided`.
    fn view(policy_only: bool, policy: Option<bool>, decided: bool) -> JobView {
        let mut job = Job::new(
            "01jobjobjobjobjobjobjobjob",
            EnvPath::parse("acme/web/prod").unwrap(),
            RunnerId::parse("acme/local").unwrap(),
            JobRequest::parse(r#"{"operation": "apply", "source": {"type": "git", "url": "https://github.com/acme/infra.git"}}"#)
                .unwrap(),
            "alice".into(),
            Utc::now(),
        );
        job.state = JobState::AwaitingApproval;
        job.review = Some(Review {
            four_eyes: false,
            timeout_seconds: 3600,
            phase: JobPhase::Plan,
            awaiting_since: Some(Utc::now()),
            decision: decided.then(|| ReviewDecision {
                verdict: ReviewVerdict::Approved,
                by: "bob".into(),
                at: Utc::now(),
                comment: None,
                overrode_policy: false,
            }),
            policy_only,
        });
        let mut value = serde_json::to_value(&job).unwrap();
        value["updated_at"] = json!(Utc::now());
        if let Some(warns) = policy {
            value["policy"] = json!({
                "status": if warns { "warned" } else { "passed" },
                "checked_at": Utc::now(),
                "sets": [{
                    "set": "tags", "group": "acme", "enforcement": "mandatory",
                    "deny": [], "warn": if warns { vec!["add a team tag"] } else { vec![] },
                }],
            });
        }
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn only_a_wait_for_a_person_stops_a_follow() {
        // Approval `required`: a person, gate or not.
        assert!(awaits_a_person(&view(false, None, false)));
        assert!(awaits_a_person(&view(false, Some(false), false)));
        // Approval `auto`, on its way through the gate: not checked yet, or passed and
        // being approved by the gate.
        assert!(!awaits_a_person(&view(true, None, false)));
        assert!(!awaits_a_person(&view(true, Some(false), false)));
        // Approval `auto`, held by the gate (a warning): a person.
        assert!(awaits_a_person(&view(true, Some(true), false)));
        // Decided, still awaiting (a pull request's apply until its requirements hold).
        assert!(!awaits_a_person(&view(false, None, true)));
    }

    #[test]
    fn the_final_line_says_whether_its_counts_were_applied_or_only_planned() {
        // A denied destroy read `failed +0 ~0 -1`, as if something was destroyed.
        let with = |state: JobState, operation: &str| {
            let mut v = view(false, None, false);
            v.job.state = state;
            v.job.request.operation = serde_json::from_value(json!(operation)).unwrap();
            v.summary =
                Some(serde_json::from_value(json!({"add": 0, "change": 0, "destroy": 1})).unwrap());
            end_of_line(&v, false)
        };
        for (state, operation, starts) in [
            (JobState::Failed, "destroy", "planned +0 ~0 -1  (destroy "),
            (
                JobState::Succeeded,
                "destroy",
                "applied +0 ~0 -1  (destroy ",
            ),
            (JobState::Succeeded, "plan", "planned +0 ~0 -1  (plan "),
            (JobState::Canceled, "apply", "planned +0 ~0 -1  (apply "),
        ] {
            let line = with(state, operation);
            assert!(line.starts_with(starts), "{state:?} {operation}: {line}");
        }
    }

    #[test]
    fn the_final_line_says_when_the_policy_gate_warned() {
        let warned = end_of_line(&view(true, Some(true), false), true);
        assert!(warned.contains("  policy warned  (apply "), "{warned}");
        let passed = end_of_line(&view(true, Some(false), false), true);
        assert!(!passed.contains("policy"), "{passed}");
        let unchecked = end_of_line(&view(false, None, false), true);
        assert!(
            unchecked.starts_with("(no change summary)  (apply "),
            "{unchecked}"
        );
    }
}
