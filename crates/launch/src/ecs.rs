//! The `ecs-fargate` launcher: ECS RunTask as the runner's launcher role.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use aws_config::identity::IdentityCache;
use aws_config::sts::AssumeRoleProvider;
use aws_config::{Region, SdkConfig};
use aws_sdk_ecs::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_ecs::types::{
    AssignPublicIp, AwsVpcConfiguration, CapacityProviderStrategyItem, ContainerOverride,
    DesiredStatus, KeyValuePair, NetworkConfiguration, PropagateTags, Secret, Tag, TaskOverride,
};
use sortie_core::runner::{AwsAccess, CapacityProvider, EcsFargateRunner};
use sortie_core::{Job, Operation, RunnerConfiguration, TaskRef, TaskStop};

use crate::session::{task_tags, SessionScope};
use crate::{started_by, LaunchError, LaunchSpec, Launcher, TaskStatus};

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

    /// The task definition to run: the runner's own when the job needs no secret, else one
    /// derived from it whose runner container carries every secret the job needs in its
    /// `secrets` (`valueFrom` = the ARN; ECS injects the values, Sortie never sees them):
    /// the runner's `secrets`, the job's `secret_refs` and a git source's
    /// `credentials_secret` (as [`GIT_CREDENTIALS`]).
    ///
    /// The derived family is `<base family>-sortie-<content hash>`: the hash covers the base
    /// revision, the container and the secret set, so one registration serves every job with
    /// the same set. It is looked up (DescribeTaskDefinition) before it is registered, so a
    /// new Lambda instance reuses what an earlier one registered, and cached in memory.
    async fn task_definition(
        &self,
        client: &aws_sdk_ecs::Client,
        c: &EcsFargateRunner,
        job: &Job,
    ) -> Result<String, LaunchError> {
        let wanted = container_secrets(c, job);
        if wanted.is_empty() {
            return Ok(c.task_definition.clone());
        }
        let text = serde_json::to_string(&wanted).unwrap_or_default();
        let cache_key = format!(
            "{}|{}|{}|{}",
            c.access.role_arn,
            c.task_definition,
            c.container_name,
            fingerprint(&text)
        );
        let mut cache = self.task_definitions.lock().await;
        if let Some(arn) = cache.get(&cache_key) {
            return Ok(arn.clone());
        }
        let base = client
            .describe_task_definition()
            .task_definition(&c.task_definition)
            .send()
            .await
            .map_err(|e| from_sdk("DescribeTaskDefinition", e))?;
        let td = base.task_definition.ok_or_else(|| {
            LaunchError::Fatal(format!(
                "task definition `{}` was not found",
                c.task_definition
            ))
        })?;
        let hash = fingerprint(&format!(
            "{}|{}|{text}",
            td.task_definition_arn
                .as_deref()
                .unwrap_or(&c.task_definition),
            c.container_name
        ));
        let family = derived_family(td.family.as_deref().unwrap_or("runner"), &hash);
        // Registered before, perhaps by another instance: reuse it.
        if let Some(arn) = active_revision(client, &family).await {
            cache.insert(cache_key, arn.clone());
            return Ok(arn);
        }
        let secrets: Vec<Secret> = wanted
            .iter()
            .map(|(name, arn)| {
                Secret::builder()
                    .name(name)
                    .value_from(arn)
                    .build()
                    .map_err(|e| LaunchError::Fatal(e.to_string()))
            })
            .collect::<Result<_, _>>()?;
        let mut containers = td.container_definitions.clone().unwrap_or_default();
        let runner = containers
            .iter_mut()
            .find(|cd| cd.name.as_deref() == Some(c.container_name.as_str()))
            .ok_or_else(|| {
                LaunchError::Fatal(format!(
                    "task definition `{}` has no container named `{}`",
                    c.task_definition, c.container_name
                ))
            })?;
        let mut all = runner.secrets.clone().unwrap_or_default();
        all.retain(|s| !wanted.contains_key(&s.name));
        all.extend(secrets);
        runner.secrets = Some(all);
        // A secret must never also be a plain variable of the same name.
        if let Some(env) = runner.environment.as_mut() {
            env.retain(|kv| !kv.name.as_ref().is_some_and(|n| wanted.contains_key(n)));
        }
        let mut refused: u32 = 0;
        let registered = loop {
            let sent = client
                .register_task_definition()
                .family(&family)
                .set_container_definitions(Some(containers.clone()))
                .set_cpu(td.cpu.clone())
                .set_memory(td.memory.clone())
                .set_network_mode(td.network_mode.clone())
                .set_requires_compatibilities(td.requires_compatibilities.clone())
                .set_execution_role_arn(td.execution_role_arn.clone())
                .set_task_role_arn(td.task_role_arn.clone())
                .set_volumes(td.volumes.clone())
                .set_runtime_platform(td.runtime_platform.clone())
                .set_ephemeral_storage(td.ephemeral_storage.clone())
                .send()
                .await;
            let err = match sent {
                Ok(registered) => {
                    break registered
                        .task_definition
                        .and_then(|t| t.task_definition_arn)
                }
                Err(e) => from_sdk("RegisterTaskDefinition", e),
            };
            // Another registration of this family is in progress (another Lambda instance,
            // another job with the same secrets): wait a little, then look again, since it
            // may have registered exactly the revision this job needs.
            if !is_concurrent_revision(&err.to_string()) || refused >= REGISTER_TRIES {
                return Err(err);
            }
            refused += 1;
            tokio::time::sleep(register_backoff(refused)).await;
            if let Some(arn) = active_revision(client, &family).await {
                break Some(arn);
            }
        };
        let arn = registered.ok_or_else(|| {
            LaunchError::Retryable("RegisterTaskDefinition returned no ARN".into())
        })?;
        cache.insert(cache_key, arn.clone());
        Ok(arn)
    }
}

impl EcsLauncher {
    /// The hard memory limit (MiB) for the runner container of a task whose memory is
    /// overridden to `task_memory`: what the task definition's other containers leave
    /// ([`sortie_core::limits::runner_container_memory`]). Their reservations are read
    /// once (DescribeTaskDefinition) per role, task definition and container, and kept.
    async fn runner_memory(
        &self,
        client: &aws_sdk_ecs::Client,
        c: &EcsFargateRunner,
        task_memory: u32,
    ) -> Result<i32, LaunchError> {
        let key = format!(
            "{}|{}|{}",
            c.access.role_arn, c.task_definition, c.container_name
        );
        let known = self.container_memory.lock().await.get(&key).copied();
        let (others, reservation) = match known {
            Some(k) => k,
            None => {
                let out = client
                    .describe_task_definition()
                    .task_definition(&c.task_definition)
                    .send()
                    .await
                    .map_err(|e| from_sdk("DescribeTaskDefinition", e))?;
                let containers = out
                    .task_definition()
                    .map(|t| t.container_definitions())
                    .unwrap_or_default();
                let mib = |v: Option<i32>| v.map(|m| u32::try_from(m).unwrap_or(0));
                let is_runner = |cd: &&aws_sdk_ecs::types::ContainerDefinition| {
                    cd.name() == Some(c.container_name.as_str())
                };
                let others: u32 = containers
                    .iter()
                    .filter(|cd| !is_runner(cd))
                    .map(|cd| mib(cd.memory_reservation().or(cd.memory())).unwrap_or(0))
                    .sum();
                let reservation = containers
                    .iter()
                    .find(is_runner)
                    .and_then(|cd| mib(cd.memory_reservation()));
                self.container_memory
                    .lock()
                    .await
                    .insert(key, (others, reservation));
                (others, reservation)
            }
        };
        sortie_core::limits::runner_container_memory(task_memory, others, reservation)
            .map(|m| i32::try_from(m).unwrap_or(i32::MAX))
            .map_err(|why| {
                LaunchError::Fatal(format!(
                    "runner_configuration.memory: {why} (task definition `{}`)",
                    c.task_definition
                ))
            })
    }
}

/// How often a registration refused for a concurrent one is tried again in one launch
/// (then the launch is [`LaunchError::Retryable`], and the job's retry tries again).
const REGISTER_TRIES: u32 = 5;

/// The wait before registration try `n` (1, 2, ...): 250 ms doubling per try, up to 2 s,
/// plus up to 250 ms of jitter so that instances refused together do not retry together.
fn register_backoff(n: u32) -> Duration {
    let base = 250u64.saturating_mul(1 << n.saturating_sub(1).min(3));
    let jitter = u64::from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .subsec_nanos(),
    ) % 250;
    Duration::from_millis(base + jitter)
}

/// The ARN of the ACTIVE latest revision of `family`, if there is one.
async fn active_revision(client: &aws_sdk_ecs::Client, family: &str) -> Option<String> {
    client
        .describe_task_definition()
        .task_definition(family)
        .send()
        .await
        .ok()?
        .task_definition
        .filter(|t| t.status.as_ref().is_some_and(|s| s.as_str() == "ACTIVE"))
        .and_then(|t| t.task_definition_arn)
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

/// The container secret through which a git source's `credentials_secret` arrives
/// (the runner reads it as `SORTIE_GIT_CREDENTIALS`).
pub const GIT_CREDENTIALS: &str = "SORTIE_GIT_CREDENTIALS";

/// Every secret the runner container of `job` needs, by environment variable name: the
/// job's `secret_refs`, then the runner's `secrets` (which win a name given twice: the
/// runner's owner decides its environment), then the git credential.
pub fn container_secrets(c: &EcsFargateRunner, job: &Job) -> BTreeMap<String, String> {
    let mut all = job.request.secret_refs.clone();
    all.extend(c.secrets.iter().map(|(k, v)| (k.clone(), v.clone())));
    if let Some(arn) = git_credentials_secret(job) {
        all.insert(GIT_CREDENTIALS.to_string(), arn.to_string());
    }
    all
}

/// A git source's `credentials_secret`, if the job has one.
pub fn git_credentials_secret(job: &Job) -> Option<&str> {
    match &job.request.source {
        sortie_core::Source::Git {
            credentials_secret: Some(arn),
            ..
        } => Some(arn.as_str()),
        _ => None,
    }
}

/// 16 hexadecimal digits of the SHA-256 of `text`.
fn fingerprint(text: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes())
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The most characters a task definition family may have (RegisterTaskDefinition `family`:
/// "Up to 255 letters (uppercase and lowercase), numbers, underscores, and hyphens").
const FAMILY_MAX: usize = 255;

/// `<base>-sortie-<hash>`, within ECS's family rules: other characters become `-` and the
/// base is shortened so the whole stays within [`FAMILY_MAX`].
pub fn derived_family(base: &str, hash: &str) -> String {
    let suffix = format!("-sortie-{hash}");
    let clean: String = base
        .chars()
        .map(|ch| {
            if ch.is_ascii_alphanumeric() || ch == '-' || ch == '_' {
                ch
            } else {
                '-'
            }
        })
        .take(FAMILY_MAX.saturating_sub(suffix.len()))
        .collect();
    format!("{clean}{suffix}")
}

/// Classifies an AWS error for a launch: retry only what is safe to retry.
pub fn classify(operation: &str, code: &str, message: &str, status: u16) -> LaunchError {
    let text = format!("{operation} failed: {code}: {message}");
    let lower = message.to_ascii_lowercase();
    let retryable = status >= 500
        || code.contains("Throttl")
        || code == "RequestLimitExceeded"
        || code == "ServerException"
        || code == "ServiceUnavailable"
        || code.starts_with("RESOURCE:")
        || lower.contains("capacity is unavailable")
        || lower.contains("rate exceeded")
        || is_concurrent_revision(&lower)
        || lower.contains("throttl");
    if retryable {
        LaunchError::Retryable(text)
    } else {
        LaunchError::Fatal(text)
    }
}

/// True for ECS's refusal of concurrent new revisions of one task definition family
/// (`ClientException: Too many concurrent attempts to create a new revision of the
/// specified family.`): another registration of the family is in progress, so this one is
/// worth trying again, after a look at what that one registered.
fn is_concurrent_revision(message: &str) -> bool {
    message
        .to_ascii_lowercase()
        .contains("too many concurrent attempts to create a new revision")
}

/// An SDK error as a [`LaunchError`], in AWS's words (`<operation> failed: <code>: <message>`).
pub(crate) fn from_sdk<E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static>(
    operation: &str,
    err: SdkError<E>,
) -> LaunchError {
    match &err {
        SdkError::ServiceError(se) => {
            let status = se.raw().status().as_u16();
            let code = se.err().code().unwrap_or("Unknown");
            let message = se.err().message().unwrap_or_default();
            if operation == "RunTask" && status >= 500 {
                // ECS answered with a server error: the task may have been started.
                return LaunchError::Uncertain(format!("{operation} failed: {code}: {message}"));
            }
            classify(operation, code, message, status)
        }
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            let text = aws_sdk_ecs::error::DisplayErrorContext(&err).to_string();
            // A failed AssumeRole surfaces here: access denied, and a refusal that never
            // heals, are final; anything else transient.
            if text.contains("AccessDenied")
                || text.contains("not authorized")
                || never_heals(&text)
            {
                let what = if is_identity_failure(&text) {
                    "could not assume the runner's role: "
                } else {
                    ""
                };
                LaunchError::Fatal(format!("{operation} failed: {what}{text}"))
            } else if operation == "RunTask" && !is_identity_failure(&text) {
                // The request may have reached ECS: only a lookup by `startedBy` can tell.
                LaunchError::Uncertain(format!("{operation} failed: {text}"))
            } else {
                LaunchError::Retryable(format!("{operation} failed: {text}"))
            }
        }
        _ => {
            let text = aws_sdk_ecs::error::DisplayErrorContext(&err).to_string();
            if text.contains("AccessDenied")
                || text.contains("not authorized")
                || text.contains("ExternalId")
                || never_heals(&text)
            {
                LaunchError::Fatal(format!(
                    "{operation} failed: could not assume the runner's role: {text}"
                ))
            } else {
                LaunchError::Retryable(format!("{operation} failed: {text}"))
            }
        }
    }
}

/// True for an STS refusal that no retry heals (issue 25 item 1): STS disabled in the
/// region (`RegionDisabledException`), or the control plane's own key refused
/// (`InvalidClientTokenId`). ECS's `ClusterNotFoundException` and
/// `InvalidParameterException` are 400s, so [`classify`] already calls them fatal.
pub(crate) fn never_heals(text: &str) -> bool {
    text.contains("RegionDisabledException") || text.contains("InvalidClientTokenId")
}

/// True for a refusal because the session's token expired (`ExpiredToken`,
/// `ExpiredTokenException`): a fresh session heals it once.
fn is_expired_token(e: &LaunchError) -> bool {
    e.to_string().contains("ExpiredToken")
}

/// True when the error happened while getting the runner role's credentials: the request
/// itself was never sent.
fn is_identity_failure(text: &str) -> bool {
    text.contains("AssumeRole") || text.contains("credentials") || text.contains("identity")
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
        sortie_core::job_env::builtin(job)
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

    #[test]
    fn derived_families_keep_within_ecs_rules() {
        let hash = fingerprint("x");
        assert_eq!(hash.len(), 16);
        assert_eq!(
            derived_family("runner", &hash),
            format!("runner-sortie-{hash}")
        );
        let long = derived_family(&"a.b".repeat(200), &hash);
        assert_eq!(long.len(), 255);
        assert!(long
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
        assert!(long.ends_with(&format!("-sortie-{hash}")));
    }

    #[test]
    fn a_concurrent_registration_of_the_family_is_retried() {
        let refused = classify(
            "RegisterTaskDefinition",
            "ClientException",
            "Too many concurrent attempts to create a new revision of the specified family.",
            400,
        );
        assert!(refused.is_retryable(), "{refused}");
        assert!(register_backoff(1) >= Duration::from_millis(250));
        assert!(register_backoff(9) < Duration::from_millis(2250));
    }

    #[test]
    fn retry_only_what_is_safe_to_retry() {
        assert!(classify("RunTask", "ThrottlingException", "Rate exceeded", 400).is_retryable());
        assert!(classify("RunTask", "RESOURCE:MEMORY", "", 200).is_retryable());
        assert!(classify(
            "RunTask",
            "ClientException",
            "Capacity is unavailable at this time. Please try again later",
            400
        )
        .is_retryable());
        assert!(classify("RunTask", "ServerException", "internal", 500).is_retryable());
        let denied = classify(
            "RunTask",
            "AccessDeniedException",
            "User is not authorized to perform ecs:RunTask",
            400,
        );
        assert!(!denied.is_retryable());
        assert_eq!(
            denied.to_string(),
            "RunTask failed: AccessDeniedException: User is not authorized to perform ecs:RunTask"
        );
        assert!(!classify(
            "RunTask",
            "ClusterNotFoundException",
            "Cluster not found.",
            400
        )
        .is_retryable());
        assert!(
            !classify("RunTask", "InvalidParameterException", "bad subnet", 400).is_retryable()
        );
        assert!(!classify(
            "RunTask",
            "ClientException",
            "Unable to find task definition",
            400
        )
        .is_retryable());
    }

    #[test]
    fn refusals_that_never_heal_are_fatal_and_throttling_stays_retryable() {
        // Issue 25 item 1: an unknown cluster and an invalid parameter are fatal at once.
        for (code, message) in [
            ("ClusterNotFoundException", "Cluster not found."),
            (
                "InvalidParameterException",
                "No Container Instances were found in your cluster.",
            ),
        ] {
            let e = classify("RunTask", code, message, 400);
            assert!(!e.is_retryable(), "{e}");
        }
        for (code, message, status) in [
            ("ThrottlingException", "Rate exceeded", 400),
            ("ServerException", "Service unavailable", 500),
            (
                "ClientException",
                "Capacity is unavailable at this time.",
                400,
            ),
        ] {
            let e = classify("RunTask", code, message, status);
            assert!(e.is_retryable(), "{e}");
        }
        // STS's refusals, as the credential provider words them, never heal.
        assert!(never_heals(
            "service error: RegionDisabledException: STS is not activated in this region"
        ));
        assert!(never_heals(
            "InvalidClientTokenId: The security token included in the request is invalid"
        ));
        assert!(!never_heals("ThrottlingException: Rate exceeded"));
    }
}
