//! The job lifecycle behind the `dispatch`, `task-events` and `sweeper` functions.
//!
//! [`Engine::dispatch`] claims a job with a conditional write, launches exactly one
//! task and records it. [`Engine::task_event`] turns a task's own state change into
//! the job's outcome, releases the environment and starts the next queued job.
//! [`Engine::sweep`] repairs everything an event or a crash can lose. No function
//! here knows Lambda: the handlers in `functions/` adapt events to these calls.

mod agent_pools;
mod agents;
mod audit;
mod bus;
mod deliveries;
mod ecs_event;
mod end;
#[cfg(test)]
mod end_bound_tests;
mod engine;
#[cfg(test)]
mod env_life_tests;
mod environments;
pub mod expiry;
#[cfg(test)]
mod expiry_tests;
mod group_cache;
pub mod issuer;
mod job_artifacts;
mod job_spec;
mod jobs;
mod locks;
mod logs;
mod memberships;
mod notifications;
pub mod notify_queue;
pub mod notify_worker;
mod policy_gate;
mod policy_listing;
mod policy_sets;
pub mod pull_requests;
mod reads;
mod remediation;
mod rules;
mod rules_cache;
mod runners;
#[cfg(test)]
mod secret_sweep_tests;
mod state_history;
mod submit;
#[cfg(test)]
mod sweep_crash_tests;
#[cfg(test)]
mod testing;
pub mod triggers;

pub use agent_pools::{AgentAuth, AgentPools, MintedToken, OidcCheck, PoolTokenRefusal};
pub use agents::{AgentRefusal, CLAIM_POLL};
pub use bus::{
    ended_detail, Bus, EventBridgeBus, ENVIRONMENT_DRIFTED, ENVIRONMENT_EXPIRING,
    ENVIRONMENT_EXPIRY_FAILED, ENVIRONMENT_EXPIRY_WAITING, JOB_APPROVED, JOB_AWAITING_APPROVAL,
    JOB_COMPLETED_ALIAS, JOB_DISPATCHED, JOB_ENDED, JOB_POLICY_CHECKED, SOURCE,
};
pub use deliveries::{delivery_id, Attempted, Event, PendingDelivery, Sender, NOTIFICATION_TEST};
pub use ecs_event::{EcsContainer, EcsTaskStateChange};
pub use end::{EndCause, EndReport};
pub use engine::{
    redelivery_delay_seconds, Engine, EventEffect, MessageDisposition, SweepReport, SweepResume,
    SweepSettings, AUDIT_EXPORTS, AUDIT_SEALS,
};
pub use environments::{EnvironmentRefusal, Environments, Refreshed, Resolved};
pub use issuer::{Issuer, IssuerConfig, IssuerError};
pub use job_artifacts::{read_outputs, JobArtifacts, OutputsError};
pub use job_spec::{SpecParts, SpecRefusal};
pub use jobs::{Cancellation, JobService, APPROVAL_TIMEOUT_PRINCIPAL};
pub use locks::LockRefusal;
pub use logs::{LiveUrl, LogGrants, LogPage, Logs};
pub use memberships::{MembershipRefusal, Memberships};
pub use notifications::{
    NotificationRefusal, Notifications, WithSecret, MAX_DESTINATIONS_PER_GROUP,
    SIGNING_SECRET_PREFIX,
};
pub use policy_gate::PolicyGate;
pub use policy_listing::PolicyListingCache;
pub use policy_sets::{PolicySetRefusal, PolicySets};
pub use reads::AuditTrail;
pub use rules::{RuleRefusal, Rules};
pub use rules_cache::RuleIndexCache;
pub use runners::{RunnerRefusal, Runners};
pub use state_history::{HistoryRefusal, StateVersionInfo, StateVersionList};
pub use submit::{JobOrder, SubmitError, WriteMode};

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

impl LifecycleError {
    /// A stable class for the error, reported as Lambda's `errorType` so alarms and log
    /// queries can tell a transient failure (retried by the event source) from a defect.
    pub fn class(&self) -> &'static str {
        use sortie_launch::LaunchError;
        use sortie_store::StoreError;
        match self {
            LifecycleError::Store(StoreError::Aws {
                retryable: true, ..
            }) => "Sortie.StoreUnavailable",
            LifecycleError::Store(StoreError::Corrupt { .. }) => "Sortie.StoreCorrupt",
            LifecycleError::Store(_) => "Sortie.StoreError",
            LifecycleError::Bus(_) => "Sortie.BusError",
            LifecycleError::Launch(LaunchError::Retryable(_) | LaunchError::Uncertain(_)) => {
                "Sortie.LaunchRetryable"
            }
            LifecycleError::Launch(LaunchError::Fatal(_)) => "Sortie.LaunchFatal",
        }
    }
}
