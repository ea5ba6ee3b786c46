//! The `eks` launcher: one Kubernetes Job per Sortie job, on an EKS cluster in the runner's
//! account, as the runner's launcher role.
//!
//! - **Cluster access.** The launcher role is assumed exactly as for ECS (ExternalId,
//!   session tags). EKS `DescribeCluster`, through that role, gives the API endpoint and
//!   its CA, cached per (role, cluster) for the life of the Lambda container. Every call
//!   carries a fresh bearer token ([`token::bearer_token`]) and trusts only that CA.
//! - **Launch.** The Job is first looked up by its job id and attempt labels: a retried
//!   dispatch adopts the Job it already created. Otherwise [`job::build_job`] is created.
//!   A create whose answer is lost (a timeout, a 5xx) is uncertain: the job stays
//!   `dispatching`, and the sweeper's lookup by label settles it after the lease.
//! - **Describe.** The Job and its pods (by the job-id label) become a [`TaskStatus`]
//!   ([`status::job_status`]). A pod that can never start (`ImagePullBackOff`, ...) is
//!   reported stopped and its Job deleted.
//! - **Stop.** The Job is deleted with `propagationPolicy: Background` (its pod goes with
//!   it); a Job already gone is a stop done.
//! - **Completion.** Kubernetes sends no EventBridge event: the sweeper describes every
//!   running `eks` job on each pass ([`sortie_core::oversight::JobFacts::polled`]), and the
//!   pilot's own final callback ends the job at once. Whichever comes first wins.
//!
//! A [`TaskRef`] of this launcher is `<namespace>/<job name>`.

pub mod client;
pub mod job;
pub mod status;
pub mod token;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use aws_config::{Region, SdkConfig};
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_credential_types::Credentials;
use base64::Engine as _;
use http::Method;
use k8s_openapi::api::batch::v1::Job as KubeJob;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::List;
use serde_json::{json, Value};
use sortie_core::runner::{AwsAccess, EksRunner};
use sortie_core::{Job, RunnerConfiguration, TaskRef};

use crate::ecs::{from_sdk, launcher_session};
use crate::session::SessionScope;
use crate::{LaunchError, LaunchSpec, Launcher, TaskStatus};
use client::{query_value, KubeClient, KubeError};
use job::{ATTEMPT_LABEL, JOB_ID_LABEL};

/// Assumed credentials are refreshed this long before they expire.
const REFRESH_BEFORE_EXPIRY: Duration = Duration::from_secs(5 * 60);

/// One launcher-role session: its credentials, assumed once and cached until five minutes
/// before they expire; DescribeCluster and every token use them.
struct Session {
    provider: SharedCredentialsProvider,
    credentials: tokio::sync::Mutex<Option<Credentials>>,
}

/// Launches Kubernetes Jobs on runners' EKS clusters.
///
/// Sessions are kept per (launcher role, ExternalId, [`SessionScope`]), as in
/// [`crate::EcsLauncher`]: tagged and named with the organisation and the runner only, so a
/// session tagged for one tenant never launches another tenant's job and no session names
/// a job (the Kubernetes Job's labels do). Cluster endpoints and CAs are kept per (role,
/// region, cluster).
pub struct EksLauncher {
    base: SdkConfig,
    sessions: Mutex<HashMap<(String, String, SessionScope), Arc<Session>>>,
    clusters: tokio::sync::Mutex<HashMap<(String, String, String), KubeClient>>,
}

impl EksLauncher {
    /// A launcher whose base credentials (the ones that assume roles) come from `base`.
    pub fn new(base: SdkConfig) -> Self {
        Self {
            base,
            sessions: Mutex::new(HashMap::new()),
            clusters: tokio::sync::Mutex::new(HashMap::new()),
        }
    }

    fn runner(job: &Job) -> Result<&EksRunner, LaunchError> {
        match job.runner_spec.as_ref().map(|s| &s.runner_configuration) {
            Some(RunnerConfiguration::Eks(c)) => Ok(c),
            Some(other) => Err(LaunchError::Fatal(format!(
                "the EKS launcher cannot run a `{}` runner",
                other.type_name()
            ))),
            None => Err(LaunchError::Fatal(format!(
                "job {} has no runner configuration",
                job.id
            ))),
        }
    }

    async fn session(&self, access: &AwsAccess, job: &Job) -> Arc<Session> {
        let scope = SessionScope::of(job);
        let key = (
            access.role_arn.clone(),
            access.external_id.clone(),
            scope.clone(),
        );
        if let Some(s) = self.sessions.lock().expect("session cache lock").get(&key) {
            return s.clone();
        }
        let provider =
            launcher_session(&self.base, access, scope.session_name(), scope.tags()).await;
        let session = Arc::new(Session {
            provider: SharedCredentialsProvider::new(provider),
            credentials: tokio::sync::Mutex::new(None),
        });
        self.sessions
            .lock()
            .expect("session cache lock")
            .entry(key)
            .or_insert(session)
            .clone()
    }

    /// The cluster's API client and a bearer token for it.
    async fn cluster(&self, c: &EksRunner, job: &Job) -> Result<(KubeClient, String), LaunchError> {
        let session = self.session(&c.access, job).await;
        let credentials = session_credentials(&session).await?;
        let key = (
            c.access.role_arn.clone(),
            c.access.region.clone(),
            c.cluster.clone(),
        );
        let client = {
            let mut clusters = self.clusters.lock().await;
            match clusters.get(&key) {
                Some(client) => client.clone(),
                None => {
                    let eks = self.eks_client(&c.access, credentials.clone());
                    let client = describe_cluster(&eks, &c.cluster).await?;
                    clusters.insert(key, client.clone());
                    client
                }
            }
        };
        let token = token::bearer_token(
            &credentials,
            &c.cluster,
            &c.access.region,
            SystemTime::now(),
        )?;
        Ok((client, token))
    }

    /// The Jobs of this Sortie job (of one attempt, if given), oldest first.
    async fn jobs_labelled(
        &self,
        c: &EksRunner,
        job: &Job,
        attempt: Option<u32>,
    ) -> Result<Vec<KubeJob>, LaunchError> {
        let (client, token) = self.cluster(c, job).await?;
        let mut selector = format!("{JOB_ID_LABEL}={}", job.id);
        if let Some(a) = attempt {
            selector.push_str(&format!(",{ATTEMPT_LABEL}={a}"));
        }
        let list: List<KubeJob> = client
            .call(
                Method::GET,
                &format!(
                    "/apis/batch/v1/namespaces/{}/jobs?labelSelector={}",
                    c.job.namespace,
                    query_value(&selector)
                ),
                &token,
                None,
            )
            .await
            .map_err(|e| e.into_launch("list Jobs", false))?;
        let mut items = list.items;
        items.sort_by_key(|j| {
            j.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(ATTEMPT_LABEL))
                .and_then(|a| a.parse::<u32>().ok())
                .unwrap_or(0)
        });
        Ok(items)
    }
}

impl EksLauncher {
    /// An EKS client in the runner's region with the session's (cached) credentials.
    fn eks_client(&self, access: &AwsAccess, credentials: Credentials) -> aws_sdk_eks::Client {
        aws_sdk_eks::Client::from_conf(
            aws_sdk_eks::config::Builder::from(&self.base)
                .region(Region::new(access.region.clone()))
                .credentials_provider(credentials)
                .build(),
        )
    }
}

/// The session's credentials, assumed again only when they are about to expire.
async fn session_credentials(session: &Session) -> Result<Credentials, LaunchError> {
    let mut cached = session.credentials.lock().await;
    if let Some(c) = cached.as_ref() {
        let fresh = c
            .expiry()
            .is_none_or(|e| e > SystemTime::now() + REFRESH_BEFORE_EXPIRY);
        if fresh {
            return Ok(c.clone());
        }
    }
    let credentials = session.provider.provide_credentials().await.map_err(|e| {
        let text = aws_sdk_eks::error::DisplayErrorContext(&e).to_string();
        if text.contains("AccessDenied")
            || text.contains("not authorized")
            || crate::ecs::never_heals(&text)
        {
            LaunchError::Fatal(format!("could not assume the runner's role: {text}"))
        } else {
            LaunchError::Retryable(format!("could not assume the runner's role: {text}"))
        }
    })?;
    *cached = Some(credentials.clone());
    Ok(credentials)
}

/// EKS DescribeCluster: the API endpoint and a client trusting only the cluster's CA.
pub(crate) async fn describe_cluster(
    eks: &aws_sdk_eks::Client,
    cluster: &str,
) -> Result<KubeClient, LaunchError> {
    let described = eks
        .describe_cluster()
        .name(cluster)
        .send()
        .await
        .map_err(|e| from_sdk("DescribeCluster", e))?;
    let cluster_info = described.cluster.ok_or_else(|| {
        LaunchError::Fatal(format!("DescribeCluster returned no cluster `{cluster}`"))
    })?;
    if let Some(status) = cluster_info.status.as_ref() {
        if status.as_str() != "ACTIVE" && status.as_str() != "UPDATING" {
            return Err(LaunchError::Retryable(format!(
                "EKS cluster `{cluster}` is {}, not ACTIVE",
                status.as_str()
            )));
        }
    }
    let endpoint = cluster_info.endpoint.ok_or_else(|| {
        LaunchError::Fatal(format!("EKS cluster `{cluster}` has no API endpoint"))
    })?;
    let ca = cluster_info
        .certificate_authority
        .and_then(|c| c.data)
        .ok_or_else(|| {
            LaunchError::Fatal(format!(
                "EKS cluster `{cluster}` has no certificate authority"
            ))
        })?;
    let pem = base64::engine::general_purpose::STANDARD
        .decode(ca.trim())
        .map_err(|e| {
            LaunchError::Fatal(format!(
                "EKS cluster `{cluster}`'s certificate authority is not base64: {e}"
            ))
        })?;
    KubeClient::new(&endpoint, &pem)
        .map_err(|e| LaunchError::Fatal(format!("EKS cluster `{cluster}`: {e}")))
}

/// `<namespace>/<name>` of a Job.
fn task_ref(job: &KubeJob, namespace: &str) -> Result<TaskRef, LaunchError> {
    let name = job
        .metadata
        .name
        .as_deref()
        .ok_or_else(|| LaunchError::Retryable("the created Job has no name".into()))?;
    Ok(TaskRef::new(format!("{namespace}/{name}")))
}

/// The namespace and name in a [`TaskRef`] of this launcher.
fn parse_ref(task: &TaskRef) -> Result<(&str, &str), LaunchError> {
    task.split_once('/')
        .filter(|(ns, name)| !ns.is_empty() && !name.is_empty() && !name.contains('/'))
        .ok_or_else(|| {
            LaunchError::Fatal(format!(
                "`{task}` is not a Kubernetes Job reference (`<namespace>/<name>`)"
            ))
        })
}

#[async_trait]
impl Launcher for EksLauncher {
    async fn launch(&self, spec: &LaunchSpec<'_>) -> Result<TaskRef, LaunchError> {
        let job = spec.job;
        let c = Self::runner(job)?;
        // Built first: a configuration that cannot make a Job fails before any call.
        let body = serde_json::to_value(job::build_job(c, spec)?)
            .map_err(|e| LaunchError::Fatal(format!("the Job could not be encoded: {e}")))?;
        // A retried dispatch of this attempt adopts the Job it already created.
        if let Some(existing) = self.jobs_labelled(c, job, Some(spec.attempt)).await?.last() {
            return task_ref(existing, &c.job.namespace);
        }
        let (client, token) = self.cluster(c, job).await?;
        let created: KubeJob = client
            .call(
                Method::POST,
                &format!("/apis/batch/v1/namespaces/{}/jobs", c.job.namespace),
                &token,
                Some(&body),
            )
            .await
            .map_err(|e| e.into_launch("create Job", true))?;
        task_ref(&created, &c.job.namespace)
    }

    async fn stop(&self, job: &Job, task: &TaskRef, reason: &str) -> Result<(), LaunchError> {
        let c = Self::runner(job)?;
        let (namespace, name) = parse_ref(task)?;
        let (client, token) = self.cluster(c, job).await?;
        let options = json!({
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "propagationPolicy": "Background",
        });
        match client
            .call::<Value>(
                Method::DELETE,
                &format!("/apis/batch/v1/namespaces/{namespace}/jobs/{name}"),
                &token,
                Some(&options),
            )
            .await
        {
            Ok(_) => {
                tracing::info!(task = %task, %reason, "deleted the Kubernetes Job");
                Ok(())
            }
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e.into_launch("delete Job", false)),
        }
    }

    async fn describe(&self, job: &Job, task: &TaskRef) -> Result<TaskStatus, LaunchError> {
        let c = Self::runner(job)?;
        let (namespace, name) = parse_ref(task)?;
        let (client, token) = self.cluster(c, job).await?;
        let found: KubeJob = match client
            .call(
                Method::GET,
                &format!("/apis/batch/v1/namespaces/{namespace}/jobs/{name}"),
                &token,
                None,
            )
            .await
        {
            Ok(j) => j,
            Err(e) if e.is_not_found() => return Ok(TaskStatus::Missing),
            Err(e) => return Err(e.into_launch("get Job", false)),
        };
        let selector = format!("{JOB_ID_LABEL}={}", job.id);
        let pods: List<Pod> = client
            .call(
                Method::GET,
                &format!(
                    "/api/v1/namespaces/{namespace}/pods?labelSelector={}",
                    query_value(&selector)
                ),
                &token,
                None,
            )
            .await
            .map_err(|e: KubeError| e.into_launch("list pods", false))?;
        let seen = status::job_status(&found, &pods.items);
        if status::is_stuck(&seen) {
            // A pod that cannot start would hold its node and retry until the deadline.
            if let Err(e) = self
                .stop(job, task, "sortie: the runner cannot start")
                .await
            {
                tracing::warn!(task = %task, error = %e, "could not delete a Job whose pod cannot start; the sweeper tries again");
            }
        }
        Ok(seen)
    }

    async fn find(&self, job: &Job) -> Result<Option<TaskRef>, LaunchError> {
        let c = Self::runner(job)?;
        self.jobs_labelled(c, job, None)
            .await?
            .last()
            .map(|j| task_ref(j, &c.job.namespace))
            .transpose()
    }
}
