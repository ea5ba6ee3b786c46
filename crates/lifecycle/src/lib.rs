//! The job lifecycle behind the `dispatch`, `task-events` and `sweeper` functions.
//!
//! [`Engine::dispatch`] claims a job with a conditional write, launches exactly one
//! task and records it. [`Engine::task_event`] turns a task's own state change into
//! the job's outcome, releases the environment and starts the next queued job.
//! [`Engine::sweep`] repairs everything an event or a crash can lose. No function
//! here knows Lambda: the handlers in `functions/` adapt events to these calls.

mod bus;
mod ecs_event;
mod engine;
pub mod wiring;

pub use bus::{completed_detail, Bus, EventBridgeBus, JOB_COMPLETED, SOURCE};
pub use ecs_event::{EcsContainer, EcsTaskStateChange};
pub use engine::{
    backoff_seconds, Engine, EventOutcome, RecordOutcome, SweepReport, SweepSettings,
};

/// The lifecycle's one error type.
#[derive(Debug, thiserror::Error)]
pub enum LifecycleError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] sortie_store::StoreError),
    /// Publishing to the bus failed.
    #[error("bus: {0}")]
    Bus(String),
    /// A launcher call failed.
    #[error(transparent)]
    Launch(#[from] sortie_launch::LaunchError),
}
