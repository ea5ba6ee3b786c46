//! The engine: dispatch, the end of a task, cancel and the sweep.
//!
//! - [`dispatch`](Engine::dispatch) (`dispatch.rs`) claims a job and launches (or offers)
//!   it; a refused launch follows the one retry policy (`retry.rs`).
//! - [`task_event`](Engine::task_event) (`events.rs`) turns a task's state change into a
//!   decided step.
//! - `steps.rs` carries out a decided step ([`sortie_core::oversight::Oversight`]); an end goes
//!   through the one end of a job ([`JobService::end`]), then drift remediation
//!   ([`JobService::remediate_drift`]).
//! - [`sweep`](Engine::sweep) (`sweep.rs`, with its settings and report in `sweep_pass.rs`)
//!   repairs what an event or a crash lost.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use sortie_core::outcome::CANCELED_BY;
use sortie_core::oversight::{oversee, JobFacts, Oversight, Seen, Timing};
use sortie_core::{JobId, JobState, RunnerConfiguration, TaskRef, TaskStop};
use sortie_launch::{job_id_of, LaunchError, LaunchSpec, Launcher, TaskStatus};
use sortie_store::{JobMessage, JobRecord, JobUpdate, StoreError, Unreadable};
use tracing::{info, warn, Instrument};

use crate::{EcsTaskStateChange, EndCause, JobService, LifecycleError};

mod audit_sweep;
mod dispatch;
mod events;
mod expiry_sweep;
mod retry;
pub(crate) mod secret_sweep;
mod steps;
mod sweep;
mod sweep_pass;

pub use audit_sweep::{AUDIT_EXPORTS, AUDIT_SEALS};
pub use retry::redelivery_delay_seconds;
pub use sweep_pass::{SweepReport, SweepResume, SweepSettings};

/// What to do with one queue message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageDisposition {
    /// Handled (or a harmless duplicate): delete the message.
    Done,
    /// Try again after `delay_seconds` (a batch item failure with a longer visibility timeout).
    Retry {
        /// The delay before the next delivery ([`redelivery_delay_seconds`]; a launch's
        /// backoff when its requeue could not be sent).
        delay_seconds: i32,
        /// Why.
        reason: String,
    },
    /// The message can never succeed: let it reach the dead-letter queue.
    Poison(String),
}

/// What a task event did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventEffect {
    /// The job moved to this state.
    Moved(JobState),
    /// Nothing to do: an unknown task, a duplicate, an out-of-order or intermediate event.
    Ignored(&'static str),
}

/// The lifecycle's dependencies.
pub struct Engine {
    /// Submit, cancel, complete and release-and-next, shared with the API.
    pub jobs: JobService,
    /// Starts and controls tasks.
    pub launcher: Arc<dyn Launcher>,
    /// The API URL runners call back.
    pub api_url: String,
    /// Sweep timing.
    pub settings: SweepSettings,
}

/// A new job token: 32 random bytes, hex (only its hash is stored).
pub(crate) fn new_token() -> String {
    sortie_core::tokens::random_hex(32)
}

/// When `record`'s job last entered `state` (its last change when no transition says).
pub(crate) fn when_entered(record: &JobRecord, state: JobState) -> DateTime<Utc> {
    record
        .job
        .transitions
        .iter()
        .rev()
        .find(|t| t.to == state)
        .map(|t| t.at)
        .unwrap_or(record.updated_at)
}

/// What the decision reads of a job record.
pub(crate) fn facts(record: &JobRecord) -> JobFacts {
    JobFacts {
        state: record.job.state,
        // What this task does: a reviewed job's plan phase is a plan (it writes no state, so
        // a Spot interruption requeues it like any plan), whatever the job's operation.
        operation: if record.job.phase() == Some(sortie_core::job::JobPhase::Plan) {
            sortie_core::Operation::Plan
        } else {
            record.job.request.operation
        },
        entered: when_entered(record, record.job.state),
        last_heard: record.updated_at,
        task: record.task.clone(),
        timeout_seconds: record
            .job
            .runner_spec
            .as_ref()
            .map(|s| s.runner_configuration.timeout_seconds())
            .unwrap_or(sortie_core::runner::DEFAULT_TIMEOUT_SECONDS),
        cancel_requested_by: record.cancel_requested_by.clone(),
        timeout_requested: record.timeout_requested_at.is_some(),
        spot_requeues: record.spot_requeues,
        polled: matches!(
            record
                .job
                .runner_spec
                .as_ref()
                .map(|s| &s.runner_configuration),
            Some(RunnerConfiguration::Eks(_) | RunnerConfiguration::Agent(_))
        ),
        offered: record.offered_to.is_some(),
    }
}

/// The job's `agent` runner, if its runner is one: its jobs are offered, not launched.
pub(crate) fn agent_runner(job: &sortie_core::Job) -> Option<&sortie_core::runner::AgentRunner> {
    match job.runner_spec.as_ref().map(|s| &s.runner_configuration) {
        Some(RunnerConfiguration::Agent(c)) => Some(c),
        _ => None,
    }
}

fn container_name(record: &JobRecord) -> Option<String> {
    match record
        .job
        .runner_spec
        .as_ref()
        .map(|s| &s.runner_configuration)
    {
        Some(RunnerConfiguration::EcsFargate(c)) => Some(c.container_name.clone()),
        _ => None,
    }
}
