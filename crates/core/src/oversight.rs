//! What to do about a launched (or launching) job: one pure decision.
//!
//! The engine gathers what it knows of a job ([`JobFacts`]) and what it observed of the
//! job's task ([`Seen`]), asks [`oversee`], and carries out the [`Oversight`]. Nothing here
//! calls AWS or reads a clock: the time is an argument, so property tests can cover every
//! state, observation and moment.
//!
//! The rules:
//!
//! - A `dispatching` job offered to an agent pool waits for an agent (a cancel ends it).
//! - A `dispatching` job younger than the dispatch lease is left alone. After the lease its
//!   task is looked up by `startedBy`: a task found is adopted; none found requeues the job
//!   as a new launch attempt (or ends it as canceled, when a cancel was asked for).
//! - A launch the platform refused is not decided here: its one policy is
//!   [`crate::retry::after_launch_refusal`] (tried again after a backoff while the refusal
//!   is retryable and the caps allow; otherwise the job fails, quoting the platform). A
//!   launch whose outcome is unknown (the call may have reached the platform) leaves the
//!   job `dispatching`: after the lease, the lookup by `startedBy` settles it, so an
//!   uncertain call never launches twice.
//! - A `running` job whose stop was asked for (cancel or timeout) is described on every
//!   sweep, and stopped again until its task is seen `STOPPED`.
//! - A `running` job past its runner's timeout is stopped from outside.
//! - A `running` job not heard from for the silence period is described: a stopped task
//!   finishes it (its event was lost), a task the platform no longer knows fails it. A job
//!   whose platform sends no task event ([`JobFacts::polled`], `eks`) is described on every
//!   sweep instead, and seeing it run writes nothing.
//! - A stopped task's outcome is [`task_outcome`], except that a cancel or a timeout Sortie
//!   asked for names the job's end. A plan interrupted on Spot is requeued at most
//!   [`MAX_SPOT_REQUEUES`] times; then it fails, saying so.
//! - A stop the platform refused for good ends the job as failed, quoting the platform.

use chrono::{DateTime, Duration, Utc};

use crate::ids::TaskRef;
use crate::job::{JobState, Operation};
use crate::outcome::{task_outcome, Outcome, TaskStop, CANCELED_BY, TIMED_OUT_AFTER};

/// A plan interrupted on Spot is requeued at most this many times.
pub const MAX_SPOT_REQUEUES: u32 = 3;

/// The clocks of the decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// A job `dispatching` this long is looked up by `startedBy`.
    pub dispatch_lease: Duration,
    /// A `running` job not heard from this long is described.
    pub silence: Duration,
}

/// What the decision reads of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFacts {
    /// Its state.
    pub state: JobState,
    /// Its operation.
    pub operation: Operation,
    /// When it entered its state.
    pub entered: DateTime<Utc>,
    /// When it was last heard from (its record's last change).
    pub last_heard: DateTime<Utc>,
    /// Its recorded task, if any.
    pub task: Option<TaskRef>,
    /// Its runner's timeout, in seconds.
    pub timeout_seconds: u32,
    /// Who asked for a cancel, if anyone.
    pub cancel_requested_by: Option<String>,
    /// True once Sortie stopped its task for exceeding the timeout.
    pub timeout_requested: bool,
    /// How many times a Spot interruption has requeued it.
    pub spot_requeues: u32,
    /// True when its platform sends no task event (`eks`, `agent`): a `running` job is
    /// described on every sweep, and a task seen running is not a write.
    pub polled: bool,
    /// True when the job is offered to an agent pool, waiting for an agent to claim it: it
    /// has no task to look for, so the dispatch lease does not apply (a cancel ends it).
    pub offered: bool,
}

/// What was observed of the job's task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// Nothing: the clock alone.
    Nothing,
    /// The result of looking the task up by `startedBy`.
    Found(Option<TaskRef>),
    /// The platform says the task has not stopped.
    Running,
    /// The task stopped (its event, or a describe).
    Stopped(TaskStop),
    /// The platform does not know the task.
    Missing,
    /// The launch call's outcome is unknown: it may have reached the platform.
    LaunchUncertain(String),
    /// A stop was refused for good; the platform's words.
    StopRefused(String),
}

/// What the engine must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Oversight {
    /// Nothing now.
    Wait,
    /// Look the job's task up by `startedBy`.
    Find,
    /// Ask the platform where the recorded task stands.
    Describe,
    /// Record this task as the job's (`dispatching → running`).
    Adopt(TaskRef),
    /// The task is alive: reset the silence clock.
    Heard,
    /// Ask the platform to stop the task, with this reason; `timeout` when the stop is for
    /// the runner's timeout (recorded once the platform accepted the stop).
    Stop {
        /// The reason the platform records (`sortie: …`).
        reason: String,
        /// True for a timeout stop.
        timeout: bool,
    },
    /// Launch again as a new attempt: back to `queued`, the task reference cleared.
    Requeue {
        /// Why, for the job's transitions.
        reason: String,
        /// True when a Spot interruption caused it (it counts toward the bound).
        spot: bool,
    },
    /// End the job.
    End(Outcome),
}

fn end(state: JobState, reason: impl Into<String>) -> Oversight {
    Oversight::End(Outcome {
        state,
        reason: reason.into(),
    })
}

fn stop_reason(facts: &JobFacts) -> Option<(String, bool)> {
    if let Some(by) = &facts.cancel_requested_by {
        return Some((format!("{CANCELED_BY}{by}"), false));
    }
    facts
        .timeout_requested
        .then(|| (format!("{TIMED_OUT_AFTER}{}s", facts.timeout_seconds), true))
}

fn past_timeout(facts: &JobFacts, now: DateTime<Utc>) -> bool {
    now - facts.entered > Duration::seconds(i64::from(facts.timeout_seconds))
}

/// The outcome of a stopped task, with the stops Sortie asked for and the Spot bound.
fn stopped(facts: &JobFacts, stop: &TaskStop) -> Oversight {
    let outcome = task_outcome(facts.operation, stop);
    if let Some(by) = &facts.cancel_requested_by {
        if outcome.state != JobState::Succeeded {
            return end(JobState::Canceled, format!("canceled by {by}"));
        }
    } else if facts.timeout_requested && outcome.state == JobState::Failed {
        return end(
            JobState::TimedOut,
            format!("timed out after {}s", facts.timeout_seconds),
        );
    }
    if outcome.state == JobState::Queued {
        if facts.spot_requeues >= MAX_SPOT_REQUEUES {
            return end(
                JobState::Failed,
                format!(
                    "interrupted on Spot {} times; not requeued again (at most {MAX_SPOT_REQUEUES} requeues): {}",
                    facts.spot_requeues + 1,
                    outcome.reason
                ),
            );
        }
        return Oversight::Requeue {
            reason: outcome.reason,
            spot: true,
        };
    }
    Oversight::End(outcome)
}

/// Decides what to do about a job, given what was seen of its task, at `now`.
///
/// A [`Seen::Stopped`] task of a `dispatching` job is decided as if the job were running:
/// the engine adopts the task first (`dispatching → running`), then ends or requeues it.
pub fn oversee(facts: &JobFacts, seen: &Seen, now: DateTime<Utc>, timing: Timing) -> Oversight {
    let task = facts
        .task
        .as_ref()
        .map(|t| t.as_str().to_string())
        .unwrap_or_else(|| "(none recorded)".into());
    match (facts.state, seen) {
        (s, _) if !s.is_active() => Oversight::Wait,
        (_, Seen::Stopped(stop)) => stopped(facts, stop),
        (_, Seen::StopRefused(error)) => {
            let what = match stop_reason(facts) {
                Some((_, true)) => format!("its timeout of {}s", facts.timeout_seconds),
                _ => match &facts.cancel_requested_by {
                    Some(by) => format!("the cancel by {by}"),
                    None => "a stop".into(),
                },
            };
            end(
                JobState::Failed,
                format!("sortie could not stop task {task} for {what}: \"{error}\""),
            )
        }
        (JobState::Dispatching, Seen::Nothing) if facts.offered => {
            match &facts.cancel_requested_by {
                Some(by) => end(JobState::Canceled, format!("canceled by {by}")),
                None => Oversight::Wait,
            }
        }
        (JobState::Dispatching, Seen::Nothing) => {
            if now - facts.entered < timing.dispatch_lease {
                Oversight::Wait
            } else {
                Oversight::Find
            }
        }
        (JobState::Dispatching, Seen::Found(Some(found))) => Oversight::Adopt(found.clone()),
        (JobState::Dispatching, Seen::Found(None)) => match &facts.cancel_requested_by {
            Some(by) => end(JobState::Canceled, format!("canceled by {by}")),
            None => Oversight::Requeue {
                reason: "no task after the dispatch lease; launching again".into(),
                spot: false,
            },
        },
        // An uncertain launch (and anything else seen while dispatching) waits for the
        // lookup by `startedBy` after the lease.
        (JobState::Dispatching, _) => Oversight::Wait,
        (JobState::Running, Seen::Nothing) => {
            if stop_reason(facts).is_some() {
                Oversight::Describe
            } else if past_timeout(facts, now) {
                Oversight::Stop {
                    reason: format!("{TIMED_OUT_AFTER}{}s", facts.timeout_seconds),
                    timeout: true,
                }
            } else if facts.polled || now - facts.last_heard >= timing.silence {
                Oversight::Describe
            } else {
                Oversight::Wait
            }
        }
        (JobState::Running, Seen::Running) => match stop_reason(facts) {
            Some((reason, timeout)) => Oversight::Stop { reason, timeout },
            None if past_timeout(facts, now) => Oversight::Stop {
                reason: format!("{TIMED_OUT_AFTER}{}s", facts.timeout_seconds),
                timeout: true,
            },
            None if facts.polled => Oversight::Wait,
            None => Oversight::Heard,
        },
        (JobState::Running, Seen::Missing) => match stop_reason(facts) {
            Some((_, false)) => end(
                JobState::Canceled,
                format!(
                    "canceled by {}",
                    facts.cancel_requested_by.as_deref().unwrap_or_default()
                ),
            ),
            Some((_, true)) => end(
                JobState::TimedOut,
                format!("timed out after {}s", facts.timeout_seconds),
            ),
            None => end(
                JobState::Failed,
                format!("task {task} vanished: the platform no longer knows it"),
            ),
        },
        _ => Oversight::Wait,
    }
}
