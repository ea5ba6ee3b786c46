//! The `detail` of EventBridge's `aws.ecs` "ECS Task State Change" event, typed from
//! AWS's documented shape (aws_lambda_events has no struct for it). Only the fields
//! Sortie reads are declared; the rest are ignored.

use serde::{Deserialize, Serialize};
use sortie_core::TaskStop;

/// One container of the task.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EcsContainer {
    /// The container's name in the task definition.
    #[serde(default)]
    pub name: String,
    /// Its exit code, once it exited.
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// Why it stopped, such as `OutOfMemoryError: Container killed due to memory usage`.
    #[serde(default)]
    pub reason: Option<String>,
    /// `PENDING`, `RUNNING` or `STOPPED`.
    #[serde(default)]
    pub last_status: Option<String>,
}

/// The `detail` of an "ECS Task State Change" event.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EcsTaskStateChange {
    /// The task's ARN.
    #[serde(default)]
    pub task_arn: String,
    /// The cluster's ARN.
    #[serde(default)]
    pub cluster_arn: String,
    /// `PROVISIONING`, `PENDING`, `ACTIVATING`, `RUNNING`, `DEACTIVATING`, `STOPPING`, `DEPROVISIONING`, `STOPPED`.
    #[serde(default)]
    pub last_status: String,
    /// The status ECS is moving the task to.
    #[serde(default)]
    pub desired_status: Option<String>,
    /// Who started the task: `sortie/<job id>` for Sortie's.
    #[serde(default)]
    pub started_by: Option<String>,
    /// Why the task stopped, as a code.
    #[serde(default)]
    pub stop_code: Option<String>,
    /// Why the task stopped, in words.
    #[serde(default)]
    pub stopped_reason: Option<String>,
    /// The task's containers.
    #[serde(default)]
    pub containers: Vec<EcsContainer>,
    /// The capacity provider (`FARGATE` or `FARGATE_SPOT`).
    #[serde(default)]
    pub capacity_provider_name: Option<String>,
}

impl EcsTaskStateChange {
    /// What the outcome mapping needs, reading the exit code of `container` (the runner).
    /// With no container of that name, the only container's is used.
    pub fn task_stop(&self, container: Option<&str>) -> TaskStop {
        let c = match container {
            Some(name) => self.containers.iter().find(|c| c.name == name),
            None => None,
        }
        .or_else(|| {
            if self.containers.len() == 1 {
                self.containers.first()
            } else {
                None
            }
        });
        TaskStop {
            stop_code: self.stop_code.clone(),
            stopped_reason: self.stopped_reason.clone(),
            exit_code: c.and_then(|c| c.exit_code),
            container_reason: c.and_then(|c| c.reason.clone()),
        }
    }
}
