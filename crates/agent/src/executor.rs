//! How a claimed job's runner is run: the small [`Executor`] trait, with
//! [`LocalExecutor`] (a child process group, through `sortie_launch::LocalLauncher`) and
//! [`KubernetesExecutor`] (a Kubernetes Job in the agent's own cluster, built by the `eks`
//! launcher's `build_job`).

mod kubernetes;
mod local;

use async_trait::async_trait;
use sortie_core::protocol::agent::{Claim, EXIT_REASON_MAX};
use sortie_core::runner::AgentRunner;
use sortie_core::{Job, RunnerConfiguration, TaskRef, TaskStop};
use tokio::sync::oneshot;

use crate::AgentError;

pub use kubernetes::{InCluster, KubernetesExecutor, NO_KUBERNETES_BLOCK};
pub use local::LocalExecutor;

/// How a pilot ended, as the exit report carries it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunExit {
    /// The pilot's exit code; `None` when it was killed or never ran.
    pub exit_code: Option<i32>,
    /// The pilot's last `sortie-pilot: …` line, or why it ended.
    pub reason: Option<String>,
}

impl RunExit {
    /// From a launcher's view of a stopped task: the container's reason, else (for anything
    /// but a success) the task's stopped reason.
    pub fn from_stop(stop: &TaskStop) -> Self {
        let reason = stop.container_reason.clone().or_else(|| {
            (stop.exit_code != Some(0))
                .then(|| stop.stopped_reason.clone())
                .flatten()
        });
        Self {
            exit_code: stop.exit_code,
            reason: reason.map(|r| truncate_reason(&r)),
        }
    }
}

/// A started run: what [`Executor::stop`] and [`Executor::finished`] need.
#[derive(Debug, Clone)]
pub struct RunHandle {
    /// The job as it was launched.
    pub job: Job,
    /// The launcher's reference: a local task ARN, or `<namespace>/<Job name>`.
    pub task: TaskRef,
}

/// A started run and the news of its end.
#[derive(Debug)]
pub struct Started {
    /// The run.
    pub handle: RunHandle,
    /// Resolves once, when the runner has ended. Dropping it stops the watching.
    pub exited: oneshot::Receiver<RunExit>,
}

/// Runs claimed jobs.
#[async_trait]
pub trait Executor: Send + Sync {
    /// Starts the claim's runner. An error's message is the exit report's reason.
    async fn start(&self, claim: &Claim) -> Result<Started, AgentError>;
    /// Stops a run: SIGTERM to its process group, SIGKILL 10 s later; or deletes its
    /// Kubernetes Job. Its end is still reported on [`Started::exited`].
    async fn stop(&self, run: &RunHandle, reason: &str) -> Result<(), AgentError>;
    /// The run's exit was reported (or it was forgotten): its records may be settled.
    async fn finished(&self, _run: &RunHandle) {}
}

/// The claim's `agent` runner configuration.
pub fn agent_runner(job: &Job) -> Result<&AgentRunner, AgentError> {
    match job.runner_spec.as_ref().map(|s| &s.runner_configuration) {
        Some(RunnerConfiguration::Agent(c)) => Ok(c),
        Some(other) => Err(AgentError::Launch(format!(
            "the job's runner is an `{}` runner, not an `agent` runner",
            other.type_name()
        ))),
        None => Err(AgentError::Launch(
            "the job has no runner configuration".into(),
        )),
    }
}

/// `reason` cut to at most [`EXIT_REASON_MAX`] bytes (on a character boundary, ending with
/// `…` when cut).
pub fn truncate_reason(reason: &str) -> String {
    if reason.len() <= EXIT_REASON_MAX {
        return reason.to_string();
    }
    let mut end = EXIT_REASON_MAX - '…'.len_utf8();
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &reason[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_fit_the_exit_report() {
        assert_eq!(truncate_reason("short"), "short");
        let exact = "a".repeat(EXIT_REASON_MAX);
        assert_eq!(truncate_reason(&exact), exact);
        let long = "é".repeat(EXIT_REASON_MAX);
        let cut = truncate_reason(&long);
        assert!(cut.len() <= EXIT_REASON_MAX, "{}", cut.len());
        assert!(cut.ends_with('…'));
        assert!(cut.trim_end_matches('…').chars().all(|c| c == 'é'));
        let ascii = truncate_reason(&"x".repeat(5000));
        assert_eq!(ascii.len(), EXIT_REASON_MAX);
    }

    #[test]
    fn an_exit_takes_the_container_reason_else_the_stop_reason() {
        let stop = |code: Option<i32>, container: Option<&str>, stopped: &str| TaskStop {
            stop_code: None,
            stopped_reason: Some(stopped.into()),
            exit_code: code,
            container_reason: container.map(Into::into),
        };
        assert_eq!(
            RunExit::from_stop(&stop(Some(0), None, "Essential container in task exited")),
            RunExit {
                exit_code: Some(0),
                reason: None
            }
        );
        assert_eq!(
            RunExit::from_stop(&stop(Some(1), Some("plan failed"), "exited")).reason,
            Some("plan failed".into())
        );
        assert_eq!(
            RunExit::from_stop(&stop(None, None, "the Job failed: DeadlineExceeded")).reason,
            Some("the Job failed: DeadlineExceeded".into())
        );
    }
}
