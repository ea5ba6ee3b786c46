//! Jobs and their state machine.
//!
//! `queued → dispatching → running → succeeded | failed | canceled | timed_out`, and for a
//! reviewed apply or destroy `running → awaiting_approval → queued` (approved: a second
//! task applies the saved plan) or `→ discarded`.
//! A transition is checked here; an illegal one is an error value. The store
//! makes every transition a conditional write on the expected current state.
//!
//! Split by concept: `request` (what is asked: operation, variables, files), `source`
//! (where the configuration comes from), `state` (the state machine and its
//! transitions), `review` (a reviewed job's approval, phases and decision), [`history`]
//! (the transition history, folded); the [`Job`] record itself is here.

pub mod history;
mod request;
mod review;
mod source;
mod state;

pub use crate::changes::ChangeSummary;
pub use crate::vcs::origin::PullRequestRef;
pub use request::{
    a_or_an, file_path_problem, is_relative_safe_path, JobRequest, Operation, MAX_FILES_BYTES,
};
pub use review::{
    review_refusal, JobPhase, Review, ReviewDecision, ReviewRefusal, ReviewVerdict,
    DECISION_COMMENT_MAX,
};
pub use source::{Source, SHORT_SHA_LEN};
pub use state::{IllegalTransition, JobState, Transition, ALL_STATES};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ids::JobId;
use crate::names::{EnvPath, RunnerId};

/// A job: one operation on one environment, with its full transition history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Job {
    /// The job's id.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub id: JobId,
    /// The environment it runs against.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub environment: EnvPath,
    /// The runner linked to the environment when the job was submitted.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub runner_id: RunnerId,
    /// What was asked for.
    #[serde(flatten)]
    pub request: JobRequest,
    /// The subject of the principal who submitted it.
    pub requested_by: String,
    /// The current state.
    pub state: JobState,
    /// Every transition, oldest first; the first records the creation. Repeats in a row are
    /// folded, and a long history keeps its first and last entries
    /// ([`history::record_transition`]).
    pub transitions: Vec<Transition>,
    /// How many entries of a long history were dropped between its first and last ones.
    #[serde(default, skip_serializing_if = "state::is_zero")]
    pub transitions_dropped: u32,
    /// The runner's specification when the job was submitted: the job runs with it,
    /// whatever later updates change, and dispatch needs no second read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_spec: Option<crate::runner::RunnerSpec>,
    /// For an apply or destroy on an environment with `approval: required`, the policy taken
    /// at submit: the job plans, then awaits approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<Review>,
    /// True for a scheduled drift check (a plan with `-detailed-exitcode`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub drift_check: bool,
    /// The tool asked for at submit (the environment's, else the runner's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<crate::tool::ToolName>,
    /// The tool version asked for at submit (the environment's, else the runner's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_version: Option<String>,
    /// For a job a trigger submitted (by `sortie:trigger`): the upstream environment and
    /// the apply whose changed outputs started it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<crate::triggers::TriggerContext>,
    /// For a restore: the state version written back as the current state before the plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore: Option<crate::state_version::StateRestore>,
    /// The pull request that asked for the job, where its check run and comment go.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_request: Option<PullRequestRef>,
    /// A speculative plan (a pull request's): it takes no environment lock and joins no
    /// queue, runs terraform with `-lock=false`, and can never be applied. The one
    /// exception to one active job per environment, safe because it writes nothing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub speculative: bool,
}

impl Job {
    /// The phase the job's next task runs (`None`: one task does the whole operation).
    pub fn phase(&self) -> Option<JobPhase> {
        self.review.as_ref().map(|r| r.phase)
    }

    /// A new job in `queued`, with its creation recorded.
    pub fn new(
        id: impl Into<JobId>,
        environment: EnvPath,
        runner_id: RunnerId,
        request: JobRequest,
        requested_by: String,
        at: DateTime<Utc>,
    ) -> Self {
        let reason = format!("submitted by {requested_by}");
        Self {
            id: id.into(),
            environment,
            runner_id,
            request,
            requested_by,
            state: JobState::Queued,
            transitions: vec![Transition::new(None, JobState::Queued, at, reason)],
            transitions_dropped: 0,
            runner_spec: None,
            review: None,
            drift_check: false,
            tool: None,
            tool_version: None,
            trigger: None,
            restore: None,
            pull_request: None,
            speculative: false,
        }
    }

    /// A new `queued` job on `env` with everything taken at submit: the runner's
    /// specification, the review policy (when the environment's `approval` is `required`
    /// and the operation writes state), and the tool and version (the environment's, else
    /// the runner's).
    pub fn for_environment(
        id: impl Into<JobId>,
        env: &crate::environment::Environment,
        runner: crate::runner::RunnerSpec,
        request: JobRequest,
        requested_by: String,
        at: DateTime<Utc>,
    ) -> Self {
        let settings = &env.settings;
        let mut job = Self::new(
            id,
            env.path.clone(),
            env.runner.runner_id.clone(),
            request,
            requested_by,
            at,
        );
        if settings.approval == crate::environment::Approval::Required
            && job.request.operation.writes_state()
        {
            job.review = Some(Review {
                four_eyes: settings.four_eyes,
                timeout_seconds: settings
                    .approval_timeout_seconds
                    .unwrap_or(crate::environment::APPROVAL_TIMEOUT_DEFAULT_SECONDS),
                phase: JobPhase::Plan,
                awaiting_since: None,
                decision: None,
                policy_only: false,
            });
        }
        job.tool = settings.tool.or(runner.tool);
        job.tool_version = settings
            .tool_version
            .clone()
            .or_else(|| runner.tool_version.clone());
        job.runner_spec = Some(runner);
        job
    }

    /// Moves the job to `to`, recording when and why, or returns the illegal transition unchanged.
    pub fn transition(
        &mut self,
        to: JobState,
        at: DateTime<Utc>,
        reason: impl Into<String>,
    ) -> Result<&Transition, IllegalTransition> {
        if !self.state.can_become(to) {
            return Err(IllegalTransition {
                job_id: self.id.clone(),
                from: self.state,
                to,
            });
        }
        let t = Transition::new(Some(self.state), to, at, reason);
        history::record_transition(&mut self.transitions, &mut self.transitions_dropped, t);
        self.state = to;
        Ok(self.transitions.last().expect("just recorded"))
    }

    /// True when the job's apply phase, once approved, waits for its pull request's
    /// requirements to be checked again (a pull request's apply or destroy before its
    /// merge; an apply after the merge is past them): the approval is recorded and the job
    /// stays `awaiting_approval` until the pull requests' handler starts the apply phase or
    /// discards it.
    pub fn checked_again_before_apply(&self) -> bool {
        self.pull_request.as_ref().is_some_and(|p| !p.merged)
            && self.request.operation.writes_state()
    }

    /// True when the job was approved and waits for its pull request's requirements to be
    /// checked again before its apply phase starts.
    pub fn approved_awaiting_pull_request(&self) -> bool {
        self.state == JobState::AwaitingApproval
            && self.checked_again_before_apply()
            && self
                .review
                .as_ref()
                .and_then(|r| r.decision.as_ref())
                .is_some_and(|d| d.verdict == ReviewVerdict::Approved)
    }

    /// The reason of the latest transition.
    pub fn reason(&self) -> &str {
        self.transitions
            .last()
            .map(|t| t.reason.as_str())
            .unwrap_or_default()
    }
}

impl crate::triggers::TriggerOperation {
    /// The operation a trigger's job runs (here, beside [`Operation`], so that `triggers`
    /// needs nothing of `job`).
    pub fn operation(self) -> Operation {
        match self {
            Self::Plan => Operation::Plan,
            Self::Apply => Operation::Apply,
        }
    }
}
