//! A reviewed (`approval: required`) apply or destroy: its policy, its two phases and the
//! decision that ends the wait.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{Job, JobState};

/// The phase of a reviewed (`approval: required`) apply or destroy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum JobPhase {
    /// Plan (`-destroy` for a destroy) to `plan.tfplan` and upload it; then the job awaits
    /// approval.
    Plan,
    /// Apply the saved plan, after approval.
    Apply,
}

impl JobPhase {
    /// The lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Plan => "plan",
            Self::Apply => "apply",
        }
    }
}

/// A reviewed job's approval policy (taken at submit) and, once made, the decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Review {
    /// When true, the approver must not be the requester.
    #[serde(default)]
    pub four_eyes: bool,
    /// How long the job may await approval, in seconds.
    pub timeout_seconds: u32,
    /// Which phase the job is in: `plan` until approved, then `apply`.
    pub phase: JobPhase,
    /// When it started awaiting approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub awaiting_since: Option<DateTime<Utc>>,
    /// The decision, once made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<ReviewDecision>,
    /// True when the job is reviewed only because policy sets apply to its environment
    /// (its approval is `auto`): a plan that passes the policy gate is approved at once by
    /// [`crate::policy::gate::POLICY_PRINCIPAL`]; one the gate holds awaits a person.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub policy_only: bool,
}

/// Approved or discarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ReviewVerdict {
    /// The saved plan is applied.
    Approved,
    /// The saved plan is thrown away.
    Discarded,
}

/// A decision on a reviewed job: who, when, what and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReviewDecision {
    /// Approved or discarded.
    pub verdict: ReviewVerdict,
    /// The subject of who decided (`sortie:approval-timeout` for the timeout).
    pub by: String,
    /// When.
    pub at: DateTime<Utc>,
    /// The decider's comment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// True when the approval overrode a review-level policy deny (which needs the
    /// `manage` role).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub overrode_policy: bool,
}

/// The longest decision comment, in bytes.
pub const DECISION_COMMENT_MAX: usize = 1024;

/// Why `by` may not approve or discard `job` now, or `None`: the job must be
/// `awaiting_approval` (else [`ReviewRefusal::NotAwaiting`]), an approval must be the
/// first decision ([`ReviewRefusal::AlreadyApproved`]: a pull request's apply, approved,
/// waits there for its requirements), and under `four_eyes` an approval must not come
/// from the requester ([`ReviewRefusal::OwnJob`]).
pub fn review_refusal(job: &Job, by: &str, verdict: ReviewVerdict) -> Option<ReviewRefusal> {
    if job.state != JobState::AwaitingApproval {
        return Some(ReviewRefusal::NotAwaiting(job.state));
    }
    let decided = job.review.as_ref().is_some_and(|r| r.decision.is_some());
    if decided && verdict == ReviewVerdict::Approved {
        return Some(ReviewRefusal::AlreadyApproved);
    }
    let four_eyes = job.review.as_ref().is_some_and(|r| r.four_eyes);
    if four_eyes && verdict == ReviewVerdict::Approved && job.requested_by == by {
        return Some(ReviewRefusal::OwnJob);
    }
    None
}

/// Why a decision is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReviewRefusal {
    /// The job is not awaiting approval; its state.
    NotAwaiting(JobState),
    /// Four eyes: the requester may not approve their own job.
    OwnJob,
    /// Approved already: its apply phase waits for its pull request's requirements to be
    /// checked again (it can still be discarded).
    AlreadyApproved,
}
