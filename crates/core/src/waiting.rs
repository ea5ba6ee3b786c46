//! Why a job that is not running waits: one structured reason and one line of text, the
//! same for `job get`, `jobs list` and `--wait`. Decided here from the job and what the API
//! reads cheaply beside it (the environment's lock holder, the agent pool's last claim);
//! time is passed in.
//!
//! Also how an agent pool's last claim is recorded and checked ([`claim_worth_recording`],
//! [`agent_seen_check`]).

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use crate::check::RunnerCheck;
use crate::ids::JobId;
use crate::job::{Job, JobState};
use crate::runner::RunnerConfiguration;

/// What a job waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum WaitingKind {
    /// Queued behind the job that holds the environment's lock.
    QueuedBehind,
    /// Holds the lock; its queue message is on its way to dispatch.
    Dispatch,
    /// Holds the lock; its launch was refused for a retryable reason and is tried again.
    Capacity,
    /// Offered to an agent pool; no agent has claimed it yet.
    Agent,
    /// Claimed by dispatch, which is launching its task.
    Launching,
    /// Its plan succeeded; a person must approve or discard it.
    Approval,
}

/// Why a job waits: the kind, one line of text, and the facts the text is made of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = WaitingReason))]
pub struct Waiting {
    /// What it waits for.
    pub kind: WaitingKind,
    /// The reason in one line, e.g. `queued behind 01m8… (awaiting approval since 12:03 UTC)`.
    pub text: String,
    /// Since when it waits for this.
    pub since: DateTime<Utc>,
    /// The job holding the environment's lock (`queued_behind`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub behind: Option<JobId>,
    /// That job's state (`queued_behind`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behind_state: Option<JobState>,
    /// The agent pool the job is offered to (`agent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// When an agent of that pool last asked for work (`agent`); absent when none ever did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_claim_at: Option<DateTime<Utc>>,
    /// How many launches in a row were refused (`capacity`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusals: Option<u32>,
    /// When the launch is tried again, about (`capacity`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_try_at: Option<DateTime<Utc>>,
}

/// The job holding an environment's lock, as the API read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockHolder {
    /// Its id.
    pub id: JobId,
    /// Its state.
    pub state: JobState,
    /// Since when it is in that state (for `awaiting_approval`, since it awaits).
    pub since: DateTime<Utc>,
}

impl LockHolder {
    /// The holder as `job` describes it: its state, and since when.
    pub fn of(job: &Job) -> Self {
        let since = match (
            job.state,
            job.review.as_ref().and_then(|r| r.awaiting_since),
        ) {
            (JobState::AwaitingApproval, Some(at)) => at,
            _ => state_since(job),
        };
        Self {
            id: job.id.clone(),
            state: job.state,
            since,
        }
    }
}

/// What the API read beside the job.
#[derive(Debug, Clone, Copy)]
pub struct WaitFacts<'a> {
    /// The job.
    pub job: &'a Job,
    /// True when the environment's lock is held by this job.
    pub holds_lock: bool,
    /// The job holding the lock, when another one does (and could be read).
    pub holder: Option<&'a LockHolder>,
    /// The agent pool a `dispatching` job is offered to.
    pub offered_to: Option<&'a str>,
    /// When an agent of that pool last asked for work.
    pub pool_last_claim: Option<DateTime<Utc>>,
}

/// The reason a launch was refused and will be retried, as dispatch records it on the
/// `dispatching → queued` transition (see `oversight::oversee`).
pub const LAUNCH_RETRY_PREFIX: &str = crate::retry::LAUNCH_RETRY_PREFIX;

pub use crate::retry::span;

/// An agent pool's last claim is written at most this often, to bound the writes of
/// agents that poll all the time.
pub const CLAIM_RECORD_INTERVAL_SECONDS: i64 = 30;

/// An agent that asked for work this recently is taken as polling now.
pub const AGENT_LIVE_SECONDS: i64 = 120;

/// True when a claim at `now` should be recorded on its pool: never recorded, or the last
/// record is at least [`CLAIM_RECORD_INTERVAL_SECONDS`] old.
pub fn claim_worth_recording(last: Option<DateTime<Utc>>, now: DateTime<Utc>) -> bool {
    last.is_none_or(|l| now - l >= Duration::seconds(CLAIM_RECORD_INTERVAL_SECONDS))
}

/// The `runner check` line of an `agent` runner's pool: passed when an agent asked for work
/// within [`AGENT_LIVE_SECONDS`] (plus the recording interval), failed when none ever did or
/// the last one is older, saying when.
pub fn agent_seen_check(
    pool: &str,
    last: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> RunnerCheck {
    match last {
        None => RunnerCheck::failed(
            CHECK_AGENT_SEEN,
            format!("no agent of pool {pool} has asked for work yet; its jobs wait until one runs (`sortie-agent`)"),
        ),
        Some(at) if now - at <= Duration::seconds(AGENT_LIVE_SECONDS + CLAIM_RECORD_INTERVAL_SECONDS) => {
            RunnerCheck::passed(
                CHECK_AGENT_SEEN,
                format!("an agent of pool {pool} asked for work {} ago ({})", span(now - at), clock(at, now)),
            )
        }
        Some(at) => RunnerCheck::failed(
            CHECK_AGENT_SEEN,
            format!(
                "pool {pool} last saw an agent {} ago ({}); none is polling now, so its jobs wait",
                span(now - at),
                clock(at, now)
            ),
        ),
    }
}

/// `agent` runners: an agent of the runner's pool asked for work recently.
pub const CHECK_AGENT_SEEN: &str = "agent_seen";

/// Why `facts.job` waits at `now`, or `None` when it does not (running or ended).
pub fn waiting(facts: &WaitFacts<'_>, now: DateTime<Utc>) -> Option<Waiting> {
    let job = facts.job;
    let since = state_since(job);
    let blank = |kind, text: String, since| Waiting {
        kind,
        text,
        since,
        behind: None,
        behind_state: None,
        pool: None,
        last_claim_at: None,
        refusals: None,
        next_try_at: None,
    };
    match job.state {
        JobState::Running => None,
        s if s.is_terminal() => None,
        JobState::AwaitingApproval => {
            let at = job
                .review
                .as_ref()
                .and_then(|r| r.awaiting_since)
                .unwrap_or(since);
            Some(blank(
                WaitingKind::Approval,
                format!(
                    "awaiting approval since {}: sortie job approve {}",
                    clock(at, now),
                    job.id
                ),
                at,
            ))
        }
        JobState::Dispatching => match facts.offered_to {
            Some(pool) => {
                let mut w = blank(
                    WaitingKind::Agent,
                    agent_text(pool, since, facts.pool_last_claim, now),
                    since,
                );
                w.pool = Some(pool.to_string());
                w.last_claim_at = facts.pool_last_claim;
                Some(w)
            }
            None => Some(blank(
                WaitingKind::Launching,
                format!("launching its task (since {})", clock(since, now)),
                since,
            )),
        },
        _ if !facts.holds_lock && !job.speculative => {
            let queued_at = job.transitions.last().map_or(since, |t| t.latest_at());
            let Some(holder) = facts.holder else {
                return Some(blank(
                    WaitingKind::QueuedBehind,
                    format!(
                        "queued for {} (since {})",
                        job.environment,
                        clock(queued_at, now)
                    ),
                    queued_at,
                ));
            };
            let mut w = blank(
                WaitingKind::QueuedBehind,
                format!(
                    "queued behind {} ({} since {})",
                    short_id(&holder.id),
                    holder.state.as_str().replace('_', " "),
                    clock(holder.since, now)
                ),
                queued_at,
            );
            w.behind = Some(holder.id.clone());
            w.behind_state = Some(holder.state);
            Some(w)
        }
        _ => match crate::retry::refusal_run(job) {
            Some(run) => {
                let (count, last_at) = (run.count, run.last_at);
                let delay = crate::retry::launch_retry_delay_seconds(
                    count,
                    crate::retry::jitter_seed(job.id.as_str(), count),
                );
                let next = last_at + Duration::seconds(i64::from(delay));
                let when = if next > now {
                    format!("next try in {}", span(next - now))
                } else {
                    "next try due now".to_string()
                };
                let mut w = blank(
                    WaitingKind::Capacity,
                    format!(
                        "waiting for capacity: {} refused {count} time{}, {when}",
                        launch_call(job),
                        if count == 1 { "" } else { "s" }
                    ),
                    run.first_at,
                );
                w.refusals = Some(count);
                w.next_try_at = Some(next);
                Some(w)
            }
            None => Some(blank(
                WaitingKind::Dispatch,
                format!("waiting for dispatch (queued since {})", clock(since, now)),
                since,
            )),
        },
    }
}

fn agent_text(
    pool: &str,
    offered: DateTime<Utc>,
    last: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> String {
    let head = format!(
        "waiting for an agent of pool {pool}: none has claimed for {}",
        span(now - offered)
    );
    match last {
        None => format!("{head} (no agent has ever asked for work)"),
        Some(at) if now - at <= Duration::seconds(AGENT_LIVE_SECONDS) => format!(
            "{head} (last claim {}; its agents are polling: busy, or at max_concurrent_jobs)",
            clock(at, now)
        ),
        Some(at) => format!("{head} (last claim {})", clock(at, now)),
    }
}

/// The platform call a launch makes, for the capacity reason.
fn launch_call(job: &Job) -> &'static str {
    match job.runner_spec.as_ref().map(|s| &s.runner_configuration) {
        Some(RunnerConfiguration::EcsFargate(_)) => "RunTask",
        Some(RunnerConfiguration::Eks(_)) => "the Kubernetes API",
        _ => "the launch",
    }
}

/// When the job entered its current state.
fn state_since(job: &Job) -> DateTime<Utc> {
    job.transitions
        .iter()
        .rev()
        .find(|t| t.to == job.state)
        .or(job.transitions.last())
        .map_or(DateTime::<Utc>::MIN_UTC, |t| t.latest_at())
}

/// A job id shortened for a sentence: its first 8 characters and `…`.
pub fn short_id(id: &JobId) -> String {
    let s = id.as_str();
    match s.char_indices().nth(8) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// A time of day with its zone (`12:03 UTC`); with the date when it is not `now`'s day.
pub fn clock(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    if at.date_naive() == now.date_naive() {
        at.format("%H:%M UTC").to_string()
    } else {
        at.format("%Y-%m-%d %H:%M UTC").to_string()
    }
}

#[cfg(test)]
mod tests;
