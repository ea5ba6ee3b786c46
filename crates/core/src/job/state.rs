//! A job's states and the transitions between them.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ids::JobId;

/// A job's lifecycle state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Waiting: for the environment's lock, or in the jobs queue.
    Queued,
    /// Claimed by a dispatcher that is launching it.
    Dispatching,
    /// Launched: a task or Kubernetes Job exists.
    Running,
    /// Finished with exit code 0.
    Succeeded,
    /// Finished unsuccessfully; the reason says why.
    Failed,
    /// Canceled by a user.
    Canceled,
    /// Stopped from outside after exceeding its runner's timeout.
    TimedOut,
    /// Its plan succeeded; it holds the environment's lock until a person approves the
    /// saved plan (a second task applies it) or discards it.
    AwaitingApproval,
    /// Its plan was discarded (by a person, or by the approval timeout): nothing applied.
    Discarded,
}

/// Every state, for tests and listings.
pub const ALL_STATES: [JobState; 9] = [
    JobState::Queued,
    JobState::Dispatching,
    JobState::Running,
    JobState::Succeeded,
    JobState::Failed,
    JobState::Canceled,
    JobState::TimedOut,
    JobState::AwaitingApproval,
    JobState::Discarded,
];

impl JobState {
    /// True for `succeeded`, `failed`, `canceled`, `timed_out` and `discarded`: nothing
    /// follows them.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Succeeded | Self::Failed | Self::Canceled | Self::TimedOut | Self::Discarded
        )
    }

    /// True while the job holds its environment's lock (`dispatching` or `running`).
    pub fn is_active(self) -> bool {
        matches!(self, Self::Dispatching | Self::Running)
    }

    /// The allowed transitions:
    ///
    /// - `queued → dispatching` (claimed) or `canceled`;
    /// - `dispatching → running` (launched), `queued` (retryable launch failure, lease
    ///   expired), `failed` (not retryable) or `canceled`;
    /// - `running → succeeded | failed | canceled | timed_out`, or `queued` (a plan
    ///   interrupted on Spot is requeued), or `awaiting_approval` (a reviewed job's plan
    ///   phase succeeded);
    /// - `awaiting_approval → queued` (approved), `discarded` or `canceled`.
    pub fn can_become(self, to: JobState) -> bool {
        use JobState::*;
        matches!(
            (self, to),
            (Queued, Dispatching)
                | (Queued, Canceled)
                | (Dispatching, Running)
                | (Dispatching, Queued)
                | (Dispatching, Failed)
                | (Dispatching, Canceled)
                | (Running, Succeeded)
                | (Running, Failed)
                | (Running, Canceled)
                | (Running, TimedOut)
                | (Running, Queued)
                | (Running, AwaitingApproval)
                | (AwaitingApproval, Queued)
                | (AwaitingApproval, Discarded)
                | (AwaitingApproval, Canceled)
        )
    }

    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Dispatching => "dispatching",
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Canceled => "canceled",
            Self::TimedOut => "timed_out",
            Self::AwaitingApproval => "awaiting_approval",
            Self::Discarded => "discarded",
        }
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One recorded transition: from, to, when and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Transition {
    /// The state before (`None` for the job's creation).
    pub from: Option<JobState>,
    /// The state after.
    pub to: JobState,
    /// When it happened.
    pub at: DateTime<Utc>,
    /// Why, in words.
    pub reason: String,
    /// How many times this same transition (same from, to and reason) happened in a row,
    /// folded into this one entry (see [`crate::retry::record_transition`]); 1 when once.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub count: u32,
    /// When it last happened, when folded (`count` > 1); `at` is the first time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_at: Option<DateTime<Utc>>,
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

pub(super) fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Transition {
    /// A transition that happened once.
    pub fn new(
        from: Option<JobState>,
        to: JobState,
        at: DateTime<Utc>,
        reason: impl Into<String>,
    ) -> Self {
        Self {
            from,
            to,
            at,
            reason: reason.into(),
            count: 1,
            last_at: None,
        }
    }

    /// When it last happened (`last_at` for a folded entry, else `at`).
    pub fn latest_at(&self) -> DateTime<Utc> {
        self.last_at.unwrap_or(self.at)
    }

    /// True when `other` is the same transition (same from, to and reason), whenever.
    pub fn same_as(&self, other: &Transition) -> bool {
        self.from == other.from && self.to == other.to && self.reason == other.reason
    }
}

/// A transition the state machine does not allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("job {job_id} cannot go from {from} to {to}")]
pub struct IllegalTransition {
    /// The job.
    pub job_id: JobId,
    /// Its current state.
    pub from: JobState,
    /// The state asked for.
    pub to: JobState,
}
