//! The `ecs-fargate` launcher: ECS RunTask as the runner's launcher role.
//!
//! - this module: the launcher, its cached sessions, RunTask and the task's environment,
//!   StopTask, DescribeTasks and the lookup by `startedBy`;
//! - `task_definition`: the task definition a job runs (derived with its secrets) and the
//!   runner container's memory;
//! - `errors`: AWS errors as [`LaunchError`]s, retryable or not.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use aws_config::identity::IdentityCache;
use aws_config::sts::AssumeRoleProvider;
use aws_config::{Region, SdkConfig};
use aws_sdk_ecs::types::{
    AssignPublicIp, AwsVpcConfiguration, CapacityProviderStrategyItem, ContainerOverride,
    DesiredStatus, KeyValuePair, NetworkConfiguration, PropagateTags, Tag, TaskOverride,
};
use sortie_core::runner::{AwsAccess, CapacityProvider, EcsFargateRunner};
use sortie_core::{Job, Operation, RunnerConfiguration, TaskRef, TaskStop};

use crate::session::{task_tags, SessionScope};
use crate::{started_by, LaunchError, LaunchSpec, Launcher, TaskStatus};

mod errors;
mod task_definition;

pub use errors::classify;
use errors::is_expired_token;
pub(crate) use errors::{from_sdk, never_heals};
pub use task_definition::{container_secrets, git_credentials_secret, GIT_CREDENTIALS};

/// How long an assumed session lasts: the shortest STS allows.
const SESSION: Duration = Duration::from_secs(15 * 60);
/// Assumed credentials are refreshed this long before they expire.
const REFRESH_BEFORE_EXPIRY: Duration = Duration::from_secs(5 * 60);

/// A hook that adjusts every ECS client's configuration (tests add interceptors with it).
pub type EcsCustomizer =
    Arc<dyn Fn(aws_sdk_ecs::config::Builder) -> aws_sdk_ecs::config::Builder + Send + Sync>;

/// Launches Fargate tasks in runners' accounts.
///
/// One ECS client per (launcher role, ExternalId, [`SessionScope`]: organisation and
/// runner), kept for the life of the Lambda container. Each client's credentials come
/// from [`AssumeRoleProvider`] (ExternalId, session name `sortie-<org>@<runner>`, session
/// tags `sortie:org` and `sortie:runner`), cached by the client's identity cache until
/// five minutes before they expire. The key is the session's tags, so a session tagged
/// for one tenant never launches another tenant's job, and no session names a job: each
/// task carries its own job's tags ([`task_tags`]).
pub struct EcsLauncher {
    base: SdkConfig,
    customize: Option<EcsCustomizer>,
    clients: Mutex<HashMap<(String, String, SessionScope), aws_sdk_ecs::Client>>,
    task_definitions: tokio::sync::Mutex<HashMap<String, String>>,
    /// Per (role, task definition, container): the memory the task definition's other
    /// containers reserve, and the runner container's own reservation.
    container_memory: tokio::sync::Mutex<HashMap<String, (u32, Option<u32>)>>,
}

impl EcsLauncher {
    /// A launcher whose base credentials (the ones that assume roles) come from `base`.
    pub fn new(base: SdkConfig) -> Self {
        Self {
            base,
            customize: None,
            clients: Mutex::new(HashMap::new()),
            task_definitions: tokio::sync::Mutex::new(HashMap::new()),
            container_memory: tokio::sync::Mutex::new(HashMap::new()),
        }
    }

    /// Adjusts every ECS client this launcher builds.
    pub fn with_customizer(mut self, customize: EcsCustomizer) -> Self {
        self.customize = Some(customize);
        self
    }

    fn runner(job: &Job) -> Result<&EcsFargateRunner, LaunchError> {
        match job.runner_spec.as_ref().map(|s| &s.runner_configuration) {
            Some(RunnerConfiguration::EcsFargate(c)) => Ok(c),
            Some(other) => Err(LaunchError::Fatal(format!(
                "the ECS launcher cannot run a `{}` runner",
                other.type_name()
            ))),
            None => Err(LaunchError::Fatal(format!(
                "job {} has no runner configuration",
                job.id
            ))),
        }
    }

    async fn client(&self, c: &EcsFargateRunner, job: &Job) -> aws_sdk_ecs::Client {
        let scope = SessionScope::of(job);
        let key = (
            c.access.role_arn.clone(),
            c.access.external_id.clone(),
            scope.clone(),
        );
        if let Some(client) = self.clients.lock().expect("client cache lock").get(&key) {
            return client.clone();
        }
        let provider =
            launcher_session(&self.base, &c.access, scope.session_name(), scope.tags()).await;
        let mut conf = aws_sdk_ecs::config::Builder::from(&self.base)
            .region(Region::new(c.access.region.clone()))
            .credentials_provider(provider)
            .identity_cache(
                IdentityCache::lazy()
                    .buffer_time(REFRESH_BEFORE_EXPIRY)
                    .build(),
            );
        if let Some(customize) = &self.customize {
            conf = customize(conf);
        }
        let client = aws_sdk_ecs::Client::from_conf(conf.build());
        self.clients
            .lock()
            .expect("client cache lock")
            .entry(key)
            .or_insert(client)
            .clone()
    }
}

/// Credentials of the runner's launcher role, assumed with its ExternalId, the shortest
/// session STS allows, `session_name` and the session `tags` (a launch's come from
/// [`SessionScope`]): the one way Sortie assumes a launcher role, for launches and for
/// `runner check`.
pub(crate) async fn launcher_session(
    base: &SdkConfig,
    access: &AwsAccess,
    session_name: String,
    tags: Vec<(&'static str, String)>,
) -> AssumeRoleProvider {
    AssumeRoleProvider::builder(access.role_arn.clone())
        .external_id(access.external_id.clone())
        .session_name(session_name)
        .session_length(SESSION)
        .tags(tags)
        .region(Region::new(access.region.clone()))
        .configure(base)
        .build()
        .await
}

/// RunTask's idempotency token for one launch attempt: `<job id>-<attempt>` (ECS allows
/// up to 64 ASCII characters). A retry of the same attempt (the SDK's own retries) reuses
/// it, so ECS answers with the task it already started; a new attempt gets a new token,
/// so ECS never answers a relaunch with `ConflictException`.
pub fn client_token(job: &Job, attempt: u32) -> String {
    format!("{}-{attempt}", job.id)
}

/// The runner container's environment: Sortie's variables, then the runner's own. Secrets
/// are never here: they are the derived task definition's `secrets` ([`container_secrets`]).
fn environment(spec: &LaunchSpec<'_>, c: &EcsFargateRunner) -> Vec<KeyValuePair> {
    let job = spec.job;
    let mut env = vec![
        ("SORTIE_JOB_ID".to_string(), job.id.to_string()),
        ("SORTIE_JOB_TOKEN".to_string(), spec.token.to_string()),
        ("SORTIE_API_URL".to_string(), spec.api_url.to_string()),
    ];
    // The job's built-in variables; a runner's `env` cannot name them (`SORTIE_` is reserved).
    env.extend(
        sortie_core::container_env::builtin(job)
            .into_iter()
            .map(|(k, v)| (k.to_string(), v)),
    );
    env.extend(c.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    let secrets = container_secrets(c, job);
    env.retain(|(name, _)| !secrets.contains_key(name));
    env.into_iter()
        .map(|(k, v)| KeyValuePair::builder().name(k).value(v).build())
        .collect()
}

impl EcsLauncher {
    /// Forgets the cached client (and so its session) of `job`'s runner: the next call
    /// assumes the role again.
    fn forget_session(&self, c: &EcsFargateRunner, job: &Job) {
        let key = (
            c.access.role_arn.clone(),
            c.access.external_id.clone(),
            SessionScope::of(job),
        );
        self.clients.lock().expect("client cache lock").remove(&key);
    }

    /// One launch through the cached session (see [`Launcher::launch`]).
    async fn launch_once(&self, spec: &LaunchSpec<'_>) -> Result<TaskRef, LaunchError> {
        let job = spec.job;
        let c = Self::runner(job)?;
        let client = self.client(c, job).await;
        let task_definition = self.task_definition(&client, c, job).await?;
        // The runner's memory is the container's hard limit too, not only the task's.
        let container_memory = match c.memory {
            Some(task_memory) => Some(self.runner_memory(&client, c, task_memory).await?),
            None => None,
        };
        let capacity = match (c.capacity_provider, job.request.operation) {
            (CapacityProvider::FargateSpot, Operation::Plan) => "FARGATE_SPOT",
            _ => "FARGATE",
        };
        let vpc = AwsVpcConfiguration::builder()
            .set_subnets(Some(c.subnets.clone()))
            .set_security_groups(Some(c.security_groups.clone()))
            .assign_public_ip(if c.assign_public_ip {
                AssignPublicIp::Enabled
            } else {
                AssignPublicIp::Disabled
            })
            .build()
            .map_err(|e| LaunchError::Fatal(e.to_string()))?;
        let overrides = TaskOverride::builder()
            .container_overrides(
                ContainerOverride::builder()
                    .name(&c.container_name)
                    .set_memory(container_memory)
                    .set_environment(Some(environment(spec, c)))
                    .build(),
            )
            .set_cpu(c.cpu.map(|v| v.to_string()))
            .set_memory(c.memory.map(|v| v.to_string()))
            .set_task_role_arn(c.task_role_arn.clone())
            .build();
        // The job's own tags: the cached session it runs under names no job.
        let tags = task_tags(job)
            .into_iter()
            .map(|(k, v)| Tag::builder().key(k).value(v).build())
            .collect();
        let out = client
            .run_task()
            .cluster(&c.cluster)
            .task_definition(task_definition)
            .count(1)
            .started_by(started_by(&job.id))
            .client_token(client_token(job, spec.attempt))
            .capacity_provider_strategy(
                CapacityProviderStrategyItem::builder()
                    .capacity_provider(capacity)
                    .weight(1)
                    .build()
                    .map_err(|e| LaunchError::Fatal(e.to_string()))?,
            )
            .network_configuration(
                NetworkConfiguration::builder()
                    .awsvpc_configuration(vpc)
                    .build(),
            )
            .overrides(overrides)
            .set_tags(Some(tags))
            .propagate_tags(PropagateTags::TaskDefinition)
            .enable_ecs_managed_tags(true)
            .send()
            .await
            .map_err(|e| from_sdk("RunTask", e))?;
        if let Some(arn) = out.tasks().first().and_then(|t| t.task_arn.clone()) {
            return Ok(TaskRef::new(arn));
        }
        // RunTask answers 200 with `failures` for capacity and placement problems.
        let failure = out.failures().first();
        let reason = failure
            .and_then(|f| f.reason.clone())
            .unwrap_or_else(|| "no task and no failure returned".into());
        let detail = failure.and_then(|f| f.detail.clone()).unwrap_or_default();
        Err(classify("RunTask", &reason, &detail, 200))
    }
}

#[async_trait]
impl Launcher for EcsLauncher {
    /// Launches through the cached session. An expired token is answered once by a fresh
    /// session (the same `clientToken`, so ECS starts at most one task); expired again, the
    /// refusal is final.
    async fn launch(&self, spec: &LaunchSpec<'_>) -> Result<TaskRef, LaunchError> {
        match self.launch_once(spec).await {
            Err(e) if is_expired_token(&e) => {
                let c = Self::runner(spec.job)?;
                tracing::warn!(error = %e, "expired token: assuming the runner's role again");
                self.forget_session(c, spec.job);
                self.launch_once(spec).await.map_err(|e| match e {
                    e if is_expired_token(&e) => LaunchError::Fatal(format!(
                        "{} (expired again after one refresh of the session)",
                        e
                    )),
                    e => e,
                })
            }
            other => other,
        }
    }

    async fn stop(&self, job: &Job, task: &TaskRef, reason: &str) -> Result<(), LaunchError> {
        let c = Self::runner(job)?;
        let client = self.client(c, job).await;
        match client
            .stop_task()
            .cluster(&c.cluster)
            .task(task.as_str())
            .reason(sortie_core::limits::stop_reason(reason))
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => Err(from_sdk("StopTask", e)),
        }
    }

    async fn describe(&self, job: &Job, task: &TaskRef) -> Result<TaskStatus, LaunchError> {
        let c = Self::runner(job)?;
        let client = self.client(c, job).await;
        let out = client
            .describe_tasks()
            .cluster(&c.cluster)
            .tasks(task.as_str())
            .send()
            .await
            .map_err(|e| from_sdk("DescribeTasks", e))?;
        let Some(t) = out.tasks().first() else {
            return Ok(TaskStatus::Missing);
        };
        if t.last_status.as_deref() != Some("STOPPED") {
            return Ok(TaskStatus::Running);
        }
        let container = t
            .containers()
            .iter()
            .find(|x| x.name.as_deref() == Some(c.container_name.as_str()));
        Ok(TaskStatus::Stopped(TaskStop {
            stop_code: t.stop_code.as_ref().map(|s| s.as_str().to_string()),
            stopped_reason: t.stopped_reason.clone(),
            exit_code: container.and_then(|x| x.exit_code),
            container_reason: container.and_then(|x| x.reason.clone()),
        }))
    }

    async fn find(&self, job: &Job) -> Result<Option<TaskRef>, LaunchError> {
        let c = Self::runner(job)?;
        let client = self.client(c, job).await;
        // ECS: "When you specify startedBy as the filter, it must be the only
        // filter that you use" (ListTasks). So no desiredStatus: every page of
        // the job's tasks (bounded), then DescribeTasks says which one runs.
        let mut arns: Vec<String> = Vec::new();
        let mut next: Option<String> = None;
        for _ in 0..LIST_TASKS_MAX_PAGES {
            let out = client
                .list_tasks()
                .cluster(&c.cluster)
                .started_by(started_by(&job.id))
                .set_next_token(next.take())
                .send()
                .await
                .map_err(|e| from_sdk("ListTasks", e))?;
            arns.extend(out.task_arns().iter().cloned());
            next = out
                .next_token()
                .filter(|t| !t.is_empty())
                .map(str::to_string);
            if next.is_none() {
                break;
            }
        }
        if arns.is_empty() {
            return Ok(None);
        }
        let mut desired: Vec<(String, Option<String>)> = Vec::new();
        for chunk in arns.chunks(DESCRIBE_TASKS_MAX) {
            let out = client
                .describe_tasks()
                .cluster(&c.cluster)
                .set_tasks(Some(chunk.to_vec()))
                .send()
                .await
                .map_err(|e| from_sdk("DescribeTasks", e))?;
            desired.extend(
                out.tasks()
                    .iter()
                    .filter_map(|t| Some((t.task_arn.clone()?, t.desired_status.clone()))),
            );
        }
        Ok(pick_found(&arns, &desired).map(TaskRef::new))
    }
}

/// How many pages of ListTasks `find` reads at most (100 tasks a page).
const LIST_TASKS_MAX_PAGES: usize = 10;
/// DescribeTasks takes at most 100 tasks a call.
const DESCRIBE_TASKS_MAX: usize = 100;

/// The task `find` reports among a job's `listed` tasks: one whose desired
/// status (from DescribeTasks) is RUNNING, else the first one listed.
fn pick_found(listed: &[String], desired: &[(String, Option<String>)]) -> Option<String> {
    let running = DesiredStatus::Running.as_str();
    desired
        .iter()
        .find(|(arn, status)| status.as_deref() == Some(running) && listed.contains(arn))
        .map(|(arn, _)| arn.clone())
        .or_else(|| listed.first().cloned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_prefers_the_running_task_then_the_first_listed() {
        let listed = vec!["a".to_string(), "b".to_string()];
        let stopped = Some("STOPPED".to_string());
        let running = Some("RUNNING".to_string());
        assert_eq!(
            pick_found(
                &listed,
                &[("a".into(), stopped.clone()), ("b".into(), running)]
            ),
            Some("b".into())
        );
        assert_eq!(
            pick_found(
                &listed,
                &[("a".into(), stopped.clone()), ("b".into(), stopped)]
            ),
            Some("a".into())
        );
        assert_eq!(pick_found(&listed, &[]), Some("a".into()));
        assert_eq!(pick_found(&[], &[]), None);
    }

    #[test]
    fn the_container_override_holds_sortie_s_and_the_job_s_built_in_variables_then_the_runner_s() {
        let mut job = Job::new(
            "01jnx6v4k2m8q9r3s5t7w0y1za",
            sortie_core::EnvPath::parse("acme/web/prod").unwrap(),
            sortie_core::RunnerId::parse("acme/fargate").unwrap(),
            sortie_core::JobRequest::parse(r#"{"operation":"plan","files":{"main.tf":""}}"#)
                .unwrap(),
            "alice@example.com".into(),
            chrono::Utc::now(),
        );
        job.runner_spec = Some(
            sortie_core::RunnerSpec::parse(
                "runner_configuration:\n  type: ecs-fargate\n  role_arn: arn:aws:iam::123456789012:role/launcher\n  external_id: ext-123456\n  region: eu-west-1\n  cluster: c\n  task_definition: runner\n  container_name: runner\n  subnets: [subnet-0123abcd]\n  security_groups: [sg-0123abcd]\n  env: {TF_LOG: INFO}\nstate_storage_configuration:\n  type: s3\n  bucket: state\n  region: eu-west-1\n",
            )
            .unwrap(),
        );
        let c = EcsLauncher::runner(&job).unwrap();
        let spec = LaunchSpec {
            job: &job,
            token: "job-token-1",
            api_url: "https://api.sortie.example",
            attempt: 1,
        };
        let env: Vec<(String, String)> = environment(&spec, c)
            .into_iter()
            .map(|kv| (kv.name.unwrap(), kv.value.unwrap()))
            .collect();
        let want: Vec<(String, String)> = [
            ("SORTIE_JOB_ID", "01jnx6v4k2m8q9r3s5t7w0y1za"),
            ("SORTIE_JOB_TOKEN", "job-token-1"),
            ("SORTIE_API_URL", "https://api.sortie.example"),
            ("SORTIE_GROUP", "acme/web"),
            ("SORTIE_ENVIRONMENT", "acme/web/prod"),
            ("SORTIE_OPERATION", "plan"),
            ("SORTIE_REQUESTED_BY", "alice@example.com"),
            ("TF_LOG", "INFO"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(env, want);
    }
}
