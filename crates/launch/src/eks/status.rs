//! Where a Kubernetes Job stands, as a [`TaskStatus`]. Pure: the Job and its pods are read
//! first.
//!
//! - A `Complete` condition: stopped, the runner exited 0.
//! - A `Failed` condition: stopped; the runner container's terminated state gives the exit
//!   code and reason (`OOMKilled` is named as an out-of-memory kill); without one, the
//!   condition's reason and message (`DeadlineExceeded`, ...) are quoted.
//! - Neither, but the runner container waits for a reason it will not leave on its own
//!   (`ImagePullBackOff`, `ErrImagePull`, `InvalidImageName`, `CreateContainerConfigError`,
//!   `CreateContainerError`): stopped, failed to start, quoting the reason and message.
//! - Neither, but the pod ended (`Succeeded` or `Failed` phase) before the Job controller
//!   said so: stopped, from the container's terminated state.
//! - Otherwise: running.

use k8s_openapi::api::batch::v1::Job as KubeJob;
use k8s_openapi::api::core::v1::{ContainerState, Pod};
use sortie_core::TaskStop;

use super::job::RUNNER_CONTAINER;
use crate::TaskStatus;

/// Waiting reasons a container does not leave without a change to the Job: the pod never
/// starts the runner.
pub const STUCK_REASONS: [&str; 5] = [
    "ImagePullBackOff",
    "ErrImagePull",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
];

fn condition<'a>(
    job: &'a KubeJob,
    kind: &str,
) -> Option<&'a k8s_openapi::api::batch::v1::JobCondition> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind && c.status == "True")
}

/// The runner container's state in the first pod that has one.
fn runner_state(pods: &[Pod]) -> Option<(&Pod, &ContainerState)> {
    pods.iter().find_map(|pod| {
        let status = pod.status.as_ref()?;
        let container = status
            .container_statuses
            .as_ref()?
            .iter()
            .find(|c| c.name == RUNNER_CONTAINER)?;
        Some((pod, container.state.as_ref()?))
    })
}

fn terminated_stop(state: &ContainerState) -> Option<TaskStop> {
    let t = state.terminated.as_ref()?;
    let reason = match (t.reason.as_deref(), t.message.as_deref()) {
        (Some(r), Some(m)) if !m.is_empty() => Some(format!("{r}: {m}")),
        (Some(r), _) => Some(r.to_string()),
        (None, Some(m)) => Some(m.to_string()),
        (None, None) => None,
    };
    Some(TaskStop {
        stop_code: Some("EssentialContainerExited".into()),
        stopped_reason: Some("the runner container terminated".into()),
        exit_code: Some(t.exit_code),
        container_reason: reason,
    })
}

/// Where the Job stands, from the Job and the pods labelled with its job id.
pub fn job_status(job: &KubeJob, pods: &[Pod]) -> TaskStatus {
    let state = runner_state(pods);
    if condition(job, "Complete").is_some() {
        return TaskStatus::Stopped(state.and_then(|(_, s)| terminated_stop(s)).unwrap_or(
            TaskStop {
                stop_code: Some("EssentialContainerExited".into()),
                stopped_reason: Some("the Job completed".into()),
                exit_code: Some(0),
                container_reason: None,
            },
        ));
    }
    if let Some(failed) = condition(job, "Failed") {
        if let Some(stop) = state.and_then(|(_, s)| terminated_stop(s)) {
            return TaskStatus::Stopped(stop);
        }
        let why = match (failed.reason.as_deref(), failed.message.as_deref()) {
            (Some(r), Some(m)) => format!("the Job failed: {r}: {m}"),
            (Some(r), None) => format!("the Job failed: {r}"),
            (None, Some(m)) => format!("the Job failed: {m}"),
            (None, None) => "the Job failed".to_string(),
        };
        let stuck = state.and_then(|(_, s)| s.waiting.as_ref());
        return TaskStatus::Stopped(match stuck {
            Some(w) => TaskStop {
                stop_code: Some("TaskFailedToStart".into()),
                stopped_reason: Some(format!(
                    "{why}; the runner container was waiting: {}",
                    waiting_words(w.reason.as_deref(), w.message.as_deref())
                )),
                exit_code: None,
                container_reason: None,
            },
            None => TaskStop {
                stop_code: Some("JobFailed".into()),
                stopped_reason: Some(why),
                exit_code: None,
                container_reason: None,
            },
        });
    }
    if let Some((pod, s)) = state {
        if let Some(w) = &s.waiting {
            if w.reason
                .as_deref()
                .is_some_and(|r| STUCK_REASONS.contains(&r))
            {
                return TaskStatus::Stopped(TaskStop {
                    stop_code: Some("TaskFailedToStart".into()),
                    stopped_reason: Some(waiting_words(w.reason.as_deref(), w.message.as_deref())),
                    exit_code: None,
                    container_reason: None,
                });
            }
        }
        let ended = pod
            .status
            .as_ref()
            .and_then(|st| st.phase.as_deref())
            .is_some_and(|p| p == "Succeeded" || p == "Failed");
        if ended {
            if let Some(stop) = terminated_stop(s) {
                return TaskStatus::Stopped(stop);
            }
        }
    }
    TaskStatus::Running
}

fn waiting_words(reason: Option<&str>, message: Option<&str>) -> String {
    match (reason, message) {
        (Some(r), Some(m)) if !m.is_empty() => format!("{r}: {m}"),
        (Some(r), _) => r.to_string(),
        (None, Some(m)) => m.to_string(),
        (None, None) => "no reason given".to_string(),
    }
}

/// True when the status was read from a pod that will never start: the Job is deleted so
/// that it does not hold a node or retry a pull until its deadline.
pub fn is_stuck(status: &TaskStatus) -> bool {
    matches!(status, TaskStatus::Stopped(stop) if stop.stop_code.as_deref() == Some("TaskFailedToStart"))
}
