//! Launchers: one task per job, behind the [`Launcher`] trait.
//!
//! [`EcsLauncher`] runs a Fargate task with ECS RunTask in the runner's account,
//! as the runner's launcher role. Every launcher also stops, describes and finds
//! (by `startedBy = sortie/<job id>`) the tasks it started, so the sweeper can
//! adopt orphans and resolve lost completion events.

pub mod check;
mod ecs;
pub mod eks;
pub mod job_secrets;
pub mod kms;
mod local;
pub mod secrets;
pub mod session;
pub mod state_history;

use async_trait::async_trait;
use sortie_core::{Job, TaskRef, TaskStop};

pub use check::{AwsRunnerChecker, RunnerChecker, StaticRunnerChecker};
pub use ecs::{classify, client_token, EcsCustomizer, EcsLauncher};
pub use eks::EksLauncher;
pub use job_secrets::{
    AwsJobSecrets, JobSecrets, ListedSecret, MemoryJobSecrets, SecretPage, ThrottleRetry,
};
pub use local::{LocalLauncher, LOCAL_CONTAINER};
pub use secrets::{AwsSecretValues, SecretValues, StaticSecretValues};

/// What every `startedBy` Sortie sets begins with. ECS allows only letters, digits, `-`,
/// `/` and `_` in `startedBy` (at most 36), so the separator is `/`, not the `:` of the
/// design's first draft (`docs/design.md`, "Departures from the first draft").
pub const STARTED_BY_PREFIX: &str = "sortie/";

/// The `startedBy` of a job's task: `sortie/<job id>` (33 characters for a ULID).
pub fn started_by(job_id: &str) -> String {
    format!("{STARTED_BY_PREFIX}{job_id}")
}

/// The job id in a `startedBy`, if it is Sortie's.
pub fn job_id_of(started_by: &str) -> Option<&str> {
    started_by
        .strip_prefix(STARTED_BY_PREFIX)
        .filter(|id| !id.is_empty())
}

/// What a launcher needs to start a job's task.
#[derive(Debug, Clone)]
pub struct LaunchSpec<'a> {
    /// The job, with its runner snapshot.
    pub job: &'a Job,
    /// The job's callback token: scoped to this job, passed to the runner only.
    pub token: &'a str,
    /// The API URL the pilot calls back.
    pub api_url: &'a str,
    /// The launch attempt (1 for the first): part of RunTask's `clientToken`.
    pub attempt: u32,
}

/// A launch or control call that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaunchError {
    /// Worth retrying with backoff: throttling, capacity, `RESOURCE:*`, 5xx, transport.
    #[error("{0}")]
    Retryable(String),
    /// Never worth retrying: access denied, invalid configuration, a missing cluster or image.
    #[error("{0}")]
    Fatal(String),
    /// The call's outcome is unknown (a timeout, a dropped connection, a server error): it may
    /// have reached the platform. A launch is never retried blindly after this: the job's task
    /// is looked up by `startedBy` first.
    #[error("{0}")]
    Uncertain(String),
}

impl LaunchError {
    /// True for [`LaunchError::Retryable`] and [`LaunchError::Uncertain`]: worth calling again.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Retryable(_) | Self::Uncertain(_))
    }
}

/// Where a launched task stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskStatus {
    /// Not stopped yet (pending, provisioning or running).
    Running,
    /// Stopped, with what is known about why.
    Stopped(TaskStop),
    /// The platform does not know the task (it never existed, or it expired).
    Missing,
}

/// Starts, stops, describes and finds a job's task.
#[async_trait]
pub trait Launcher: Send + Sync {
    /// Starts the job's task; returns its id (an ECS task ARN).
    async fn launch(&self, spec: &LaunchSpec<'_>) -> Result<TaskRef, LaunchError>;
    /// Asks the platform to stop the task, with a reason it records.
    async fn stop(&self, job: &Job, task: &TaskRef, reason: &str) -> Result<(), LaunchError>;
    /// Where the task stands.
    async fn describe(&self, job: &Job, task: &TaskRef) -> Result<TaskStatus, LaunchError>;
    /// The task started for this job, found by `startedBy`, if any.
    async fn find(&self, job: &Job) -> Result<Option<TaskRef>, LaunchError>;
}

/// Routes each job to the launcher for its runner's type.
#[derive(Clone, Default)]
pub struct ByRunnerType {
    /// For `ecs-fargate` runners.
    pub ecs: Option<std::sync::Arc<dyn Launcher>>,
    /// For `eks` runners.
    pub eks: Option<std::sync::Arc<dyn Launcher>>,
    /// For `local` runners (`sortie dev` only).
    pub local: Option<std::sync::Arc<dyn Launcher>>,
}

impl ByRunnerType {
    fn pick(&self, job: &Job) -> Result<&std::sync::Arc<dyn Launcher>, LaunchError> {
        let kind = job
            .runner_spec
            .as_ref()
            .map(|s| s.runner_configuration.type_name())
            .unwrap_or("unknown");
        let chosen = match kind {
            "ecs-fargate" => self.ecs.as_ref(),
            "eks" => self.eks.as_ref(),
            "local" => self.local.as_ref(),
            _ => None,
        };
        chosen.ok_or_else(|| LaunchError::Fatal(check::no_launcher(kind)))
    }
}

#[async_trait]
impl Launcher for ByRunnerType {
    async fn launch(&self, spec: &LaunchSpec<'_>) -> Result<TaskRef, LaunchError> {
        self.pick(spec.job)?.launch(spec).await
    }
    async fn stop(&self, job: &Job, task: &TaskRef, reason: &str) -> Result<(), LaunchError> {
        self.pick(job)?.stop(job, task, reason).await
    }
    async fn describe(&self, job: &Job, task: &TaskRef) -> Result<TaskStatus, LaunchError> {
        self.pick(job)?.describe(job, task).await
    }
    async fn find(&self, job: &Job) -> Result<Option<TaskRef>, LaunchError> {
        self.pick(job)?.find(job).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn started_by_is_a_value_ecs_accepts_and_names_the_job() {
        // A job id is a lower-case ULID: 26 characters.
        let id = "01jnx6v4k2m8q9r3s5t7w0y1za";
        let value = started_by(id);
        assert!(
            sortie_core::limits::is_ecs_started_by(&value),
            "ECS allows only letters, digits, `-`, `/` and `_`, at most 36: {value}"
        );
        assert_eq!(job_id_of(&value), Some(id));
        assert_eq!(job_id_of("ecs-svc/1234"), None);
        assert_eq!(job_id_of(STARTED_BY_PREFIX), None);
    }
}
