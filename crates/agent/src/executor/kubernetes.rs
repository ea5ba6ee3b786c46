//! Kubernetes mode (`--kubernetes`): one Kubernetes Job per claimed job, in the cluster the
//! agent runs in, with the agent's own service account.
//!
//! The Job is the `eks` launcher's ([`sortie_launch::eks::job::build_job`]), from the
//! agent runner's `kubernetes` block (its namespace, service account, image, ...) with the
//! runner's `env` under the block's own `env`. Its status is polled every 5 s as the
//! `eks` launcher describes a Job: the Job, then its pods by `job-name=<name>`, through
//! [`sortie_launch::eks::status::job_status`]. A pod that can never start is reported
//! stopped and its Job deleted. A stop deletes the Job with `propagationPolicy: Background`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use http::Method;
use k8s_openapi::api::batch::v1::Job as KubeJob;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::List;
use serde_json::{json, Value};
use sortie_core::protocol::agent::Claim;
use sortie_core::runner::{AwsAccess, EksRunner};
use sortie_core::{JobId, TaskRef};
use sortie_launch::eks::client::{query_value, KubeClient, KubeError};
use sortie_launch::eks::job::{build_job, ATTEMPT_LABEL, JOB_ID_LABEL};
use sortie_launch::eks::status::{is_stuck, job_status};
use sortie_launch::{LaunchSpec, TaskStatus};
use tokio::sync::oneshot;

use super::{agent_runner, Executor, RunExit, RunHandle, Started};
use crate::AgentError;

/// The exit reason of a job whose runner has no `kubernetes` block, on a `--kubernetes` agent.
pub const NO_KUBERNETES_BLOCK: &str =
    "the runner has no kubernetes block; this agent runs --kubernetes";
/// How often a running Job's status is read.
pub const POLL_INTERVAL: Duration = Duration::from_secs(5);

const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// Where the cluster's API is and how to trust and authenticate to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InCluster {
    /// `https://<host>:<port>`.
    pub endpoint: String,
    /// The cluster CA's PEM file.
    pub ca_file: PathBuf,
    /// The service account token's file, re-read on every call (it is rotated).
    pub token_file: PathBuf,
}

impl InCluster {
    /// The in-cluster configuration: `https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT`
    /// and the service account's CA and token files; `SORTIE_KUBE_ENDPOINT`,
    /// `SORTIE_KUBE_CA_FILE` and `SORTIE_KUBE_TOKEN_FILE` override each.
    pub fn from_env() -> Result<Self, AgentError> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let endpoint = match var("SORTIE_KUBE_ENDPOINT") {
            Some(e) => e,
            None => {
                let host = var("KUBERNETES_SERVICE_HOST").ok_or_else(|| {
                    AgentError::Config(
                        "--kubernetes needs to run in a Kubernetes pod (KUBERNETES_SERVICE_HOST is not set), or SORTIE_KUBE_ENDPOINT".into(),
                    )
                })?;
                let port = var("KUBERNETES_SERVICE_PORT").unwrap_or_else(|| "443".into());
                // An IPv6 service address needs brackets in a URL.
                if host.contains(':') && !host.starts_with('[') {
                    format!("https://[{host}]:{port}")
                } else {
                    format!("https://{host}:{port}")
                }
            }
        };
        let file = |name: &str, default: &str| {
            var(name)
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(SERVICE_ACCOUNT_DIR).join(default))
        };
        Ok(Self {
            endpoint,
            ca_file: file("SORTIE_KUBE_CA_FILE", "ca.crt"),
            token_file: file("SORTIE_KUBE_TOKEN_FILE", "token"),
        })
    }
}

/// The cluster's API, with a token read afresh for every call.
struct Cluster {
    client: KubeClient,
    token_file: PathBuf,
}

impl Cluster {
    async fn token(&self) -> Result<String, AgentError> {
        let text = tokio::fs::read_to_string(&self.token_file)
            .await
            .map_err(|e| {
                AgentError::Executor(format!(
                    "could not read the service account token {}: {e}",
                    self.token_file.display()
                ))
            })?;
        Ok(text.trim().to_string())
    }

    async fn call<T: serde::de::DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<T, KubeCallError> {
        let token = self.token().await.map_err(KubeCallError::Token)?;
        self.client
            .call(method, path, &token, body)
            .await
            .map_err(KubeCallError::Kube)
    }

    /// Where the Job `namespace/name` stands.
    async fn status(&self, namespace: &str, name: &str) -> Result<TaskStatus, AgentError> {
        let found: KubeJob = match self
            .call(
                Method::GET,
                &format!("/apis/batch/v1/namespaces/{namespace}/jobs/{name}"),
                None,
            )
            .await
        {
            Ok(job) => job,
            Err(KubeCallError::Kube(e)) if e.is_not_found() => return Ok(TaskStatus::Missing),
            Err(e) => return Err(e.into_agent("get Job")),
        };
        let pods: List<Pod> = self
            .call(
                Method::GET,
                &format!(
                    "/api/v1/namespaces/{namespace}/pods?labelSelector={}",
                    query_value(&format!("job-name={name}"))
                ),
                None,
            )
            .await
            .map_err(|e| e.into_agent("list pods"))?;
        Ok(job_status(&found, &pods.items))
    }

    /// Deletes the Job `namespace/name` and its pods; a Job already gone is fine.
    async fn delete(&self, namespace: &str, name: &str) -> Result<(), AgentError> {
        let options = json!({
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "propagationPolicy": "Background",
        });
        match self
            .call::<Value>(
                Method::DELETE,
                &format!("/apis/batch/v1/namespaces/{namespace}/jobs/{name}"),
                Some(&options),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(KubeCallError::Kube(e)) if e.is_not_found() => Ok(()),
            Err(e) => Err(e.into_agent("delete Job")),
        }
    }

    /// The Job of this job's attempt, if one exists (a create whose answer was lost).
    async fn find(
        &self,
        namespace: &str,
        job: &JobId,
        attempt: u32,
    ) -> Result<Option<KubeJob>, AgentError> {
        let selector = format!("{JOB_ID_LABEL}={job},{ATTEMPT_LABEL}={attempt}");
        let list: List<KubeJob> = self
            .call(
                Method::GET,
                &format!(
                    "/apis/batch/v1/namespaces/{namespace}/jobs?labelSelector={}",
                    query_value(&selector)
                ),
                None,
            )
            .await
            .map_err(|e| e.into_agent("list Jobs"))?;
        Ok(list.items.into_iter().next())
    }
}

enum KubeCallError {
    Token(AgentError),
    Kube(KubeError),
}

impl KubeCallError {
    fn into_agent(self, operation: &str) -> AgentError {
        match self {
            Self::Token(e) => e,
            Self::Kube(e) => AgentError::Executor(e.into_launch(operation, false).to_string()),
        }
    }
}

/// Runs each job as a Kubernetes Job in the agent's own cluster.
pub struct KubernetesExecutor {
    cluster: Arc<Cluster>,
    poll: Duration,
}

impl std::fmt::Debug for KubernetesExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubernetesExecutor")
            .field("endpoint", &self.cluster.client.endpoint())
            .finish_non_exhaustive()
    }
}

impl KubernetesExecutor {
    /// An executor for the cluster `access` describes (its CA is read now).
    pub fn new(access: &InCluster) -> Result<Self, AgentError> {
        let ca = std::fs::read(&access.ca_file).map_err(|e| {
            AgentError::Config(format!(
                "could not read the cluster CA {}: {e}",
                access.ca_file.display()
            ))
        })?;
        let client = KubeClient::new(&access.endpoint, &ca).map_err(AgentError::Config)?;
        Ok(Self {
            cluster: Arc::new(Cluster {
                client,
                token_file: access.token_file.clone(),
            }),
            poll: POLL_INTERVAL,
        })
    }

    /// The same, reading Job status every `poll` instead of every 5 s (for tests).
    pub fn with_poll_interval(mut self, poll: Duration) -> Self {
        self.poll = poll;
        self
    }
}

/// Reads the Job's status every `poll` until it stops (or the receiver is dropped).
async fn watch(
    cluster: Arc<Cluster>,
    namespace: String,
    name: String,
    poll: Duration,
    mut exited: oneshot::Sender<RunExit>,
) {
    loop {
        tokio::select! {
            _ = exited.closed() => return,
            _ = tokio::time::sleep(poll) => {}
        }
        match cluster.status(&namespace, &name).await {
            Ok(TaskStatus::Running) => {}
            Ok(TaskStatus::Stopped(stop)) => {
                if is_stuck(&TaskStatus::Stopped(stop.clone())) {
                    // A pod that cannot start would hold its node until the deadline.
                    if let Err(e) = cluster.delete(&namespace, &name).await {
                        tracing::warn!(job = %name, error = %e, "could not delete a Job whose pod cannot start");
                    }
                }
                let _ = exited.send(RunExit::from_stop(&stop));
                return;
            }
            Ok(TaskStatus::Missing) => {
                let _ = exited.send(RunExit {
                    exit_code: None,
                    reason: Some(format!("the Kubernetes Job {namespace}/{name} was deleted")),
                });
                return;
            }
            Err(e) => {
                tracing::warn!(job = %name, error = %e, "could not read the Kubernetes Job's status; trying again");
            }
        }
    }
}

#[async_trait]
impl Executor for KubernetesExecutor {
    async fn start(&self, claim: &Claim) -> Result<Started, AgentError> {
        let runner = agent_runner(&claim.job)?;
        let Some(mut kube) = runner.kubernetes.clone() else {
            return Err(AgentError::Launch(NO_KUBERNETES_BLOCK.into()));
        };
        // The runner's env, under the kubernetes block's own (which wins).
        let mut env = runner.env.clone();
        env.append(&mut kube.env);
        kube.env = env;
        let eks = EksRunner {
            access: AwsAccess {
                role_arn: String::new(),
                external_id: String::new(),
                region: String::new(),
            },
            cluster: "in-cluster".into(),
            job: kube,
            timeout_seconds: runner.timeout_seconds,
        };
        let spec = LaunchSpec {
            job: &claim.job,
            token: &claim.job_token,
            api_url: &claim.api_url,
            attempt: claim.attempt,
        };
        let body = build_job(&eks, &spec)
            .map_err(|e| AgentError::Launch(e.to_string()))
            .and_then(|j| {
                serde_json::to_value(j).map_err(|e| {
                    AgentError::Launch(format!("the Kubernetes Job could not be encoded: {e}"))
                })
            })?;
        let namespace = eks.job.namespace.clone();
        let created: KubeJob = match self
            .cluster
            .call(
                Method::POST,
                &format!("/apis/batch/v1/namespaces/{namespace}/jobs"),
                Some(&body),
            )
            .await
        {
            Ok(job) => job,
            // The create may have happened: adopt its Job if it did.
            Err(KubeCallError::Kube(e @ KubeError::Unknown(_))) => self
                .cluster
                .find(&namespace, &claim.job_id, claim.attempt)
                .await
                .ok()
                .flatten()
                .ok_or_else(|| AgentError::Launch(e.into_launch("create Job", true).to_string()))?,
            Err(KubeCallError::Kube(e)) => {
                return Err(AgentError::Launch(
                    e.into_launch("create Job", true).to_string(),
                ))
            }
            Err(KubeCallError::Token(e)) => return Err(AgentError::Launch(e.to_string())),
        };
        let name = created
            .metadata
            .name
            .ok_or_else(|| AgentError::Launch("the created Kubernetes Job has no name".into()))?;
        let (sender, exited) = oneshot::channel();
        tokio::spawn(watch(
            Arc::clone(&self.cluster),
            namespace.clone(),
            name.clone(),
            self.poll,
            sender,
        ));
        Ok(Started {
            handle: RunHandle {
                job: claim.job.clone(),
                task: TaskRef::new(format!("{namespace}/{name}")),
            },
            exited,
        })
    }

    async fn stop(&self, run: &RunHandle, reason: &str) -> Result<(), AgentError> {
        let (namespace, name) = run.task.split_once('/').ok_or_else(|| {
            AgentError::Executor(format!("`{}` is not a Kubernetes Job reference", run.task))
        })?;
        self.cluster.delete(namespace, name).await?;
        tracing::info!(task = %run.task, %reason, "deleted the Kubernetes Job");
        Ok(())
    }
}
