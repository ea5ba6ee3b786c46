//! Runners: where a job runs (`runner_configuration`) and where its state lives
//! (`state_storage_configuration`), in the shape of a Humanitec canyon runner file.
//!
//! [`RunnerSpec::parse`] reads YAML or JSON and reports every problem at once,
//! each with its field path, including an incompatible runner/storage pairing.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::document::parse_any;
use crate::limits;
use crate::names::RunnerId;
use crate::problems::{Fields, Problems};
use crate::ValidationError;

mod decode;
mod eks;
pub mod identity;
mod storage;

pub use decode::{check_env_names, check_secret_refs, MAX_CONCURRENT_JOBS};
use decode::{decode_runner, decode_storage};
pub use storage::{KubernetesStorage, LocalStorage, S3Storage, StateStorageConfiguration};

/// Default job timeout: 2 hours.
pub const DEFAULT_TIMEOUT_SECONDS: u32 = 2 * 60 * 60;
/// Longest allowed job timeout: 24 hours.
pub const MAX_TIMEOUT_SECONDS: u32 = 24 * 60 * 60;
/// Shortest allowed job timeout: 1 minute.
pub const MIN_TIMEOUT_SECONDS: u32 = 60;
/// Environment variable names with this prefix are reserved for Sortie itself.
pub const RESERVED_ENV_PREFIX: &str = "SORTIE_";

/// The allowed runner/state-storage pairings, as stated in every mismatch message.
pub const COMPATIBILITY_MATRIX: &str =
    "ecs-fargate + s3; eks + s3 or kubernetes; local + s3 or local; agent + s3 or local";

/// A stored runner: its id (owner group plus name) and its specification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Runner {
    /// The runner's id, `<owner group>/<name>` (just `<name>` for a shared runner).
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub id: RunnerId,
    /// What the runner is and where its state lives.
    #[serde(flatten)]
    pub spec: RunnerSpec,
}

/// A runner file: description, runner configuration and state storage configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunnerSpec {
    /// Free text shown to users.
    #[serde(default)]
    pub description: String,
    /// Where and how jobs run.
    pub runner_configuration: RunnerConfiguration,
    /// Where Terraform state lives.
    pub state_storage_configuration: StateStorageConfiguration,
    /// The tool its jobs run (`terraform` or `opentofu`); an environment's `tool` wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<crate::tool::ToolName>,
    /// The tool version its jobs run: exact or a constraint; an environment's
    /// `tool_version` wins. (Not `version`: that is every resource's ETag version.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_version: Option<String>,
    /// The cloud identity its jobs get: a token per job and phase, signed by Sortie as an
    /// OIDC issuer, and the role (or workload identity) each cloud exchanges it for.
    /// Absent: Terraform acts with the runner's own credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<identity::RunnerIdentity>,
}

/// Where and how a runner runs jobs, by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum RunnerConfiguration {
    /// One Fargate task per job, launched with ECS RunTask in the runner's account.
    EcsFargate(EcsFargateRunner),
    /// One Kubernetes Job per job on an EKS cluster.
    Eks(EksRunner),
    /// A child process on the host: for development, the demo and tests.
    Local(LocalRunner),
    /// Pulled by an agent the customer runs (`sortie-agent`): for compute Sortie cannot reach.
    Agent(AgentRunner),
}

/// How Sortie reaches a target account: the role to assume and its ExternalId.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AwsAccess {
    /// The launcher role Sortie assumes, `arn:aws:iam::<account>:role/<name>`.
    pub role_arn: String,
    /// The ExternalId the role's trust policy requires.
    pub external_id: String,
    /// The AWS region of the cluster.
    pub region: String,
}

/// Fargate capacity provider for a runner's plans.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum CapacityProvider {
    /// On-demand Fargate for every job.
    #[default]
    #[serde(rename = "FARGATE")]
    Fargate,
    /// Spot for `plan` jobs; `apply` and `destroy` always run on on-demand Fargate.
    #[serde(rename = "FARGATE_SPOT")]
    FargateSpot,
}

/// The `ecs-fargate` runner type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EcsFargateRunner {
    /// The target account and region.
    #[serde(flatten)]
    pub access: AwsAccess,
    /// ECS cluster name or ARN.
    pub cluster: String,
    /// Task definition family, `family:revision` or ARN.
    pub task_definition: String,
    /// The runner container's name in the task definition.
    pub container_name: String,
    /// Subnet ids for the task's ENI.
    pub subnets: Vec<String>,
    /// Security group ids for the task's ENI.
    pub security_groups: Vec<String>,
    /// Whether the task gets a public IP.
    #[serde(default)]
    pub assign_public_ip: bool,
    /// `FARGATE` or `FARGATE_SPOT` (Spot is used for plans only).
    #[serde(default)]
    pub capacity_provider: CapacityProvider,
    /// Task CPU override in CPU units (256, 512, 1024, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u32>,
    /// Task memory override in MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<u32>,
    /// A least-privilege task role per job, passed as the RunTask `taskRoleArn` override.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_role_arn: Option<String>,
    /// Plain environment variables for the runner container.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Secret references (Secrets Manager or SSM ARNs) by environment variable name.
    #[serde(default)]
    pub secrets: BTreeMap<String, String>,
    /// Job timeout in seconds, enforced from outside the container.
    #[serde(default = "default_timeout")]
    pub timeout_seconds: u32,
}

/// The `eks` runner type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EksRunner {
    /// The target account and region.
    #[serde(flatten)]
    pub access: AwsAccess,
    /// EKS cluster name.
    pub cluster: String,
    /// The Kubernetes Job template knobs.
    pub job: EksJob,
    /// Job timeout in seconds, enforced from outside the pod.
    #[serde(default = "default_timeout")]
    pub timeout_seconds: u32,
}

/// The Kubernetes Job knobs of an `eks` runner (Terrakube's ephemeral executor knobs).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EksJob {
    /// Namespace the Job is created in.
    pub namespace: String,
    /// Service account the pod runs as.
    pub service_account: String,
    /// Runner image ([`DEFAULT_EKS_IMAGE`] when absent).
    #[serde(default = "default_eks_image")]
    pub image: String,
    /// `Always`, `IfNotPresent` or `Never`; Kubernetes' default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<String>,
    /// Names of Secrets in the namespace to pull the image with.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<String>,
    /// Mount the service account's API token in the pod. Off unless asked for: the runner
    /// needs no Kubernetes API access, except for `kubernetes` state storage.
    #[serde(default)]
    pub automount_service_account_token: bool,
    /// Node selector labels.
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    /// Pod tolerations.
    #[serde(default)]
    pub tolerations: Vec<Toleration>,
    /// Pod annotations.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// Container resource requests and limits.
    #[serde(default)]
    pub resources: Resources,
    /// A partial PodTemplateSpec merged over the generated one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub pod_template: Option<Value>,
    /// Seconds after which a finished Job is garbage-collected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<u32>,
    /// Kubernetes' own deadline for the Job, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<u32>,
    /// Plain environment variables for the runner container.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Kubernetes Secret keys, `<secret name>/<key>`, by environment variable name: they
    /// reach the container as `valueFrom.secretKeyRef`, never as values.
    #[serde(default)]
    pub secrets: BTreeMap<String, String>,
}

/// The name of the container that runs the pilot in an `eks` runner's pod (and an agent's
/// Kubernetes Job): a `pod_template` changes it by naming this container.
pub const EKS_RUNNER_CONTAINER: &str = "sortie-runner";

impl RunnerConfiguration {
    /// The names of the environment variables this runner injects into the pilot's
    /// container as secrets, sorted and distinct: an `ecs-fargate` runner's `secrets`;
    /// an `eks` runner's (or an agent runner's `kubernetes` block's) `secrets` and every
    /// variable of its `pod_template`'s [`EKS_RUNNER_CONTAINER`] whose value comes from a
    /// `secretKeyRef`. Names only: the values never pass through Sortie.
    ///
    /// Not here, because the runner configuration does not hold them: the `secrets` of the
    /// ECS task definition's own container (registered outside Sortie), and the keys of a
    /// whole Secret a `pod_template` imports with `envFrom`.
    pub fn secret_env_names(&self) -> Vec<String> {
        let mut names: Vec<String> = match self {
            Self::EcsFargate(c) => c.secrets.keys().cloned().collect(),
            Self::Eks(c) => c.job.secret_env_names(),
            Self::Agent(c) => c
                .kubernetes
                .as_ref()
                .map(EksJob::secret_env_names)
                .unwrap_or_default(),
            Self::Local(_) => Vec::new(),
        };
        names.sort();
        names.dedup();
        names
    }
}

impl EksJob {
    /// The runner container's variables that come from Kubernetes Secrets: `secrets`, and
    /// the `pod_template`'s `valueFrom.secretKeyRef` variables of [`EKS_RUNNER_CONTAINER`].
    fn secret_env_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.secrets.keys().cloned().collect();
        let containers = self
            .pod_template
            .as_ref()
            .and_then(|t| t.pointer("/spec/containers"))
            .and_then(Value::as_array);
        for container in containers.into_iter().flatten() {
            if container.get("name").and_then(Value::as_str) != Some(EKS_RUNNER_CONTAINER) {
                continue;
            }
            let env = container.get("env").and_then(Value::as_array);
            names.extend(env.into_iter().flatten().filter_map(|var| {
                var.pointer("/valueFrom/secretKeyRef")?;
                var.get("name").and_then(Value::as_str).map(String::from)
            }));
        }
        names
    }
}

/// The runner image of an `eks` runner that names none.
pub const DEFAULT_EKS_IMAGE: &str = "ghcr.io/sortie-dev/sortie-runner:0.1.0";

fn default_eks_image() -> String {
    DEFAULT_EKS_IMAGE.to_string()
}

/// A Kubernetes Secret key reference, `<secret name>/<key>`: the secret's name is a DNS
/// subdomain, the key at most 253 of `[-._a-zA-Z0-9]`. `None` when `text` is not one.
pub fn k8s_secret_key_ref(text: &str) -> Option<(&str, &str)> {
    let (name, key) = text.split_once('/')?;
    let key_ok = !key.is_empty()
        && key.len() <= limits::DNS_SUBDOMAIN_MAX
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    (limits::is_dns_subdomain(name) && key_ok).then_some((name, key))
}

/// A Kubernetes toleration.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Toleration {
    /// Taint key (empty with `Exists` matches every taint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// `Equal` (default) or `Exists`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
    /// Taint value for `Equal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`; empty matches all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<String>,
    /// How long a `NoExecute` toleration lasts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

/// Container resource requests and limits, as Kubernetes quantities.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Resources {
    /// Requests, such as `cpu: 500m`, `memory: 1Gi`.
    #[serde(default)]
    pub requests: BTreeMap<String, String>,
    /// Limits, such as `memory: 2Gi`.
    #[serde(default)]
    pub limits: BTreeMap<String, String>,
}

/// The `local` runner type: `sortie-pilot` as a child process of the host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LocalRunner {
    /// Path of the `sortie-pilot` binary; found next to the launcher or on PATH when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_binary: Option<String>,
    /// Plain environment variables for the runner process.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Job timeout in seconds, enforced by the launcher killing the process group.
    #[serde(default = "default_timeout")]
    pub timeout_seconds: u32,
}

/// The `agent` runner type: jobs are offered to an agent pool and pulled by its agents,
/// which run `sortie-pilot` as a local process group or as a Kubernetes Job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentRunner {
    /// The agent pool's id (`apool-…`), a pool of the runner's own group.
    pub pool: String,
    /// How many of this runner's jobs one agent runs at once.
    #[serde(default = "one")]
    pub max_concurrent_jobs: u32,
    /// Plain environment variables for the runner process (or container).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Job timeout in seconds: the heartbeat answer tells the agent to stop the job, and
    /// the sweeper ends it if the agent never confirms.
    #[serde(default = "default_timeout")]
    pub timeout_seconds: u32,
    /// The Kubernetes Job knobs, for agents started with `--kubernetes` (the `eks` runner's
    /// `job` block: the namespace and service account the agent creates Jobs with).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<EksJob>,
}

fn one() -> u32 {
    1
}

fn default_timeout() -> u32 {
    DEFAULT_TIMEOUT_SECONDS
}

impl EcsFargateRunner {
    /// Checks that a task event's cluster is this runner's: the same account as the launcher
    /// role, the runner's region, and the runner's cluster (by name or ARN). `Err` says what
    /// differs, so `task-events` can refuse and log an event from anywhere else.
    pub fn owns_cluster(&self, cluster_arn: &str) -> Result<(), String> {
        let arn = crate::arn::parse(cluster_arn)
            .filter(|a| a.service == "ecs")
            .ok_or_else(|| format!("`{cluster_arn}` is not an ECS cluster ARN"))?;
        let account = crate::arn::parse(&self.access.role_arn)
            .map(|a| a.account)
            .unwrap_or_default();
        if arn.account != account {
            return Err(format!(
                "the event's account {} is not the runner's account {account}",
                arn.account
            ));
        }
        if arn.region != self.access.region {
            return Err(format!(
                "the event's region {} is not the runner's region {}",
                arn.region, self.access.region
            ));
        }
        let name = arn
            .resource
            .strip_prefix("cluster/")
            .unwrap_or(arn.resource);
        if self.cluster != name && self.cluster != cluster_arn {
            return Err(format!(
                "the event's cluster {name} is not the runner's cluster {}",
                self.cluster
            ));
        }
        Ok(())
    }
}

impl RunnerConfiguration {
    /// The type name, as written in `runner_configuration.type`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::EcsFargate(_) => "ecs-fargate",
            Self::Eks(_) => "eks",
            Self::Local(_) => "local",
            Self::Agent(_) => "agent",
        }
    }

    /// The job timeout in seconds.
    pub fn timeout_seconds(&self) -> u32 {
        match self {
            Self::EcsFargate(c) => c.timeout_seconds,
            Self::Eks(c) => c.timeout_seconds,
            Self::Local(c) => c.timeout_seconds,
            Self::Agent(c) => c.timeout_seconds,
        }
    }

    /// The target account access, for the types that launch in AWS.
    pub fn aws_access(&self) -> Option<&AwsAccess> {
        match self {
            Self::EcsFargate(c) => Some(&c.access),
            Self::Eks(c) => Some(&c.access),
            Self::Local(_) | Self::Agent(_) => None,
        }
    }
}

/// True when a runner type may use a state storage type (see [`COMPATIBILITY_MATRIX`]).
pub fn compatible(runner_type: &str, storage_type: &str) -> bool {
    matches!(
        (runner_type, storage_type),
        ("ecs-fargate", "s3")
            | ("eks", "s3")
            | ("eks", "kubernetes")
            | ("local", "s3")
            | ("local", "local")
            | ("agent", "s3")
            | ("agent", "local")
    )
}

impl RunnerSpec {
    /// Parses a runner file (YAML or JSON) and validates it, reporting every problem.
    pub fn parse(text: &str) -> Result<Self, ValidationError> {
        Self::from_value(&parse_any(text)?)
    }

    /// Decodes and validates an already-parsed document, reporting every problem.
    pub fn from_value(value: &Value) -> Result<Self, ValidationError> {
        let mut p = Problems::default();
        let Some(mut top) = Fields::new(value, "", &mut p) else {
            return Err(ValidationError { problems: p.0 });
        };
        let description: String = top.optional("description", &mut p).unwrap_or_default();
        let tool: Option<crate::tool::ToolName> = top.optional("tool", &mut p);
        let tool_version: Option<String> = top.optional("tool_version", &mut p);
        if let Some(problem) = tool_version
            .as_deref()
            .and_then(crate::tool::version_problem)
        {
            p.push("tool_version", problem);
        }
        let identity: Option<identity::RunnerIdentity> = top.optional("identity", &mut p);
        if let Err(e) = identity.as_ref().map_or(Ok(()), |i| i.validate("identity")) {
            for problem in e.problems {
                p.push(problem.path, problem.problem);
            }
        }
        let runner = match top.raw("runner_configuration") {
            Some(v) => decode_runner(v, &mut p),
            None => {
                p.push("runner_configuration", "is required");
                None
            }
        };
        let storage = match top.raw("state_storage_configuration") {
            Some(v) => decode_storage(v, &mut p),
            None => {
                p.push("state_storage_configuration", "is required");
                None
            }
        };
        top.finish(&mut p);
        if let (Some(r), Some(s)) = (&runner, &storage) {
            if !compatible(r.type_name(), s.type_name()) {
                p.push(
                    "state_storage_configuration.type",
                    format!(
                        "`{}` state storage cannot be used by a `{}` runner; allowed pairings: {COMPATIBILITY_MATRIX}",
                        s.type_name(),
                        r.type_name()
                    ),
                );
            }
        }
        match (runner, storage) {
            (Some(runner_configuration), Some(state_storage_configuration)) if p.is_empty() => {
                let spec = Self {
                    description,
                    runner_configuration,
                    state_storage_configuration,
                    tool,
                    tool_version,
                    identity,
                };
                let size = spec.item_size();
                if size > limits::RUNNER_SPEC_ITEM_MAX {
                    p.push(
                        "",
                        format!(
                            "the runner takes about {size} bytes in DynamoDB; at most {} are allowed, so that a job carrying it fits DynamoDB's {}-byte item",
                            limits::RUNNER_SPEC_ITEM_MAX,
                            limits::DYNAMODB_ITEM_MAX
                        ),
                    );
                }
                p.finish(spec)
            }
            _ => Err(ValidationError { problems: p.0 }),
        }
    }
}

impl RunnerSpec {
    /// The estimated DynamoDB size of this specification as stored (see
    /// [`limits::dynamodb_item_size`]).
    pub fn item_size(&self) -> usize {
        serde_json::to_value(self)
            .map(|v| limits::dynamodb_item_size(&v))
            .unwrap_or(usize::MAX)
    }
}

#[cfg(test)]
mod tests;
