//! Local mode: `sortie-pilot` as a child process group, through
//! `sortie_launch::LocalLauncher` (its `sh` supervisor, its own process group, its
//! STOPPED events), exactly as `sortie dev` runs a `local` runner's job.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::Value;
use sortie_core::protocol::agent::Claim;
use sortie_core::runner::LocalRunner;
use sortie_core::{RunnerConfiguration, TaskStop};
use sortie_launch::{AwsSecretValues, LaunchSpec, Launcher, LocalLauncher, SecretValues};
use tokio::sync::{mpsc, oneshot, OnceCell};

use super::{agent_runner, Executor, RunExit, RunHandle, Started};
use crate::config::find_executable;
use crate::AgentError;

/// Where each run's end goes: the waiting job, or kept until it registers (an exit may be
/// reported before `launch` returns).
#[derive(Default)]
struct Routes {
    waiting: HashMap<String, oneshot::Sender<RunExit>>,
    early: HashMap<String, RunExit>,
    /// Runs forgotten before their end (no longer held): their exit is dropped.
    forgotten: std::collections::HashSet<String>,
}

/// Runs each job's `sortie-pilot` as a child process group of the agent. The child
/// inherits the agent's environment (`PATH`, AWS credentials for S3 state), then the
/// runner's `env`, then `SORTIE_API_URL`, `SORTIE_JOB_ID` and `SORTIE_JOB_TOKEN`.
pub struct LocalExecutor {
    launcher: LocalLauncher,
    runner_binary: PathBuf,
    routes: Arc<Mutex<Routes>>,
}

impl LocalExecutor {
    /// An executor running `runner_binary`, with per-job logs (`<job id>.log`) and launch
    /// records in `work_dir`. Must be called within a tokio runtime (it spawns the task that
    /// routes the runners' exits).
    pub fn new(runner_binary: PathBuf, work_dir: PathBuf) -> Self {
        let (events, received) = mpsc::unbounded_channel();
        let launcher = LocalLauncher::new(runner_binary.clone(), work_dir, events)
            .with_secrets(Arc::new(LazyAwsSecrets::default()));
        let routes = Arc::new(Mutex::new(Routes::default()));
        tokio::spawn(route_exits(received, Arc::clone(&routes)));
        Self {
            launcher,
            runner_binary,
            routes,
        }
    }
}

/// Sends every STOPPED event's exit to the run waiting for it.
async fn route_exits(mut events: mpsc::UnboundedReceiver<Value>, routes: Arc<Mutex<Routes>>) {
    while let Some(detail) = events.recv().await {
        let Some((task, stop)) = stopped(&detail) else {
            continue;
        };
        let exit = RunExit::from_stop(&stop);
        let mut routes = routes.lock().expect("routes lock");
        if routes.forgotten.remove(&task) {
            continue;
        }
        match routes.waiting.remove(&task) {
            Some(waiter) => {
                let _ = waiter.send(exit);
            }
            None => {
                routes.early.insert(task, exit);
            }
        }
    }
}

/// The task ARN and stop of an ECS-shaped STOPPED event detail.
fn stopped(detail: &Value) -> Option<(String, TaskStop)> {
    if detail.get("lastStatus").and_then(Value::as_str) != Some("STOPPED") {
        return None;
    }
    let task = detail.get("taskArn")?.as_str()?.to_string();
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
    let container = detail.get("containers").and_then(|c| c.get(0));
    Some((
        task,
        TaskStop {
            stop_code: text(detail.get("stopCode")),
            stopped_reason: text(detail.get("stoppedReason")),
            exit_code: container
                .and_then(|c| c.get("exitCode"))
                .and_then(Value::as_i64)
                .and_then(|c| i32::try_from(c).ok()),
            container_reason: text(container.and_then(|c| c.get("reason"))),
        },
    ))
}

#[async_trait]
impl Executor for LocalExecutor {
    async fn start(&self, claim: &Claim) -> Result<Started, AgentError> {
        let runner = agent_runner(&claim.job)?;
        let binary = find_executable(&self.runner_binary).ok_or_else(|| {
            AgentError::Launch(format!(
                "the agent's pilot binary `{}` was not found or is not executable (--runner-binary)",
                self.runner_binary.display()
            ))
        })?;
        let mut job = claim.job.clone();
        if let Some(spec) = job.runner_spec.as_mut() {
            spec.runner_configuration = RunnerConfiguration::Local(LocalRunner {
                runner_binary: Some(binary.display().to_string()),
                env: runner.env.clone(),
                timeout_seconds: runner.timeout_seconds,
            });
        }
        let spec = LaunchSpec {
            job: &job,
            token: &claim.job_token,
            api_url: &claim.api_url,
            attempt: claim.attempt,
        };
        let task = self
            .launcher
            .launch(&spec)
            .await
            .map_err(|e| AgentError::Launch(format!("could not start the runner: {e}")))?;
        let (sender, exited) = oneshot::channel();
        {
            let mut routes = self.routes.lock().expect("routes lock");
            match routes.early.remove(task.as_str()) {
                Some(exit) => {
                    let _ = sender.send(exit);
                }
                None => {
                    routes.waiting.insert(task.to_string(), sender);
                }
            }
        }
        Ok(Started {
            handle: RunHandle { job, task },
            exited,
        })
    }

    async fn stop(&self, run: &RunHandle, reason: &str) -> Result<(), AgentError> {
        self.launcher
            .stop(&run.job, &run.task, reason)
            .await
            .map_err(|e| AgentError::Executor(format!("could not stop the runner: {e}")))
    }

    async fn finished(&self, run: &RunHandle) {
        self.launcher.acknowledge(&run.task).await;
        let mut routes = self.routes.lock().expect("routes lock");
        if routes.waiting.remove(run.task.as_str()).is_some() {
            // Still running (a job no longer held): its end is of no interest.
            routes.forgotten.insert(run.task.to_string());
        }
        routes.early.remove(run.task.as_str());
    }
}

/// Secrets Manager and SSM with the agent's own AWS credentials, configured at the first
/// job that has secret references (an agent outside AWS never loads an AWS configuration).
#[derive(Default)]
struct LazyAwsSecrets {
    inner: OnceCell<AwsSecretValues>,
}

#[async_trait]
impl SecretValues for LazyAwsSecrets {
    async fn value(&self, arn: &str) -> Result<String, String> {
        let secrets = self
            .inner
            .get_or_init(|| async {
                let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
                AwsSecretValues::new(&config)
            })
            .await;
        secrets.value(arn).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_stopped_event_gives_the_exit_code_and_the_runner_reason() {
        let detail = json!({
            "taskArn": "arn:sortie:local:task/local/j-1",
            "lastStatus": "STOPPED",
            "stopCode": "EssentialContainerExited",
            "stoppedReason": "Essential container in task exited",
            "containers": [{"name": "runner", "lastStatus": "STOPPED", "exitCode": 1, "reason": "terraform plan failed"}],
        });
        let (task, stop) = stopped(&detail).unwrap();
        assert_eq!(task, "arn:sortie:local:task/local/j-1");
        assert_eq!(
            RunExit::from_stop(&stop),
            RunExit {
                exit_code: Some(1),
                reason: Some("terraform plan failed".into())
            }
        );
        assert!(stopped(&json!({"taskArn": "x", "lastStatus": "RUNNING"})).is_none());
    }
}
