//! Runners: the runner file and its configuration types.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// A runner file: description, runner configuration and state storage configuration.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RunnerSpec {
    /// Free text shown to users.
    #[serde(default)]
    pub description: String,
    /// Where and how jobs run.
    pub runner_configuration: RunnerConfiguration,
    /// Where Terraform state lives.
    pub state_storage_configuration: StateStorageConfiguration,
    /// The tool its jobs run (`terraform` or `opentofu`); an environment's wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<super::ToolName>,
    /// The tool version its jobs run, exact (`1.0.3`) or a constraint (`~> 1.0`); an
    /// environment's wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_version: Option<String>,
}

/// A stored runner: its id (owner group plus name) and its specification.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Runner {
    /// The runner's id, `<owner group>/<name>` (just `<name>` for a shared runner).
    pub id: String,
    /// What the runner is and where its state lives.
    #[serde(flatten)]
    pub spec: RunnerSpec,
}

/// Where and how a runner runs jobs, by `type`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum RunnerConfiguration {
    /// One Fargate task per job, launched with ECS RunTask in the runner's account.
    EcsFargate(EcsFargateRunner),
    /// One Kubernetes Job per job on an EKS cluster.
    Eks(EksRunner),
    /// A child process on the host: for development, the demo and tests.
    Local(LocalRunner),
    /// Pulled by an agent of an agent pool (`sortie-agent`), where Sortie cannot reach.
    Agent(AgentRunner),
}

/// The `agent` runner type.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AgentRunner {
    /// The agent pool's id (`apool-…`), a pool of the runner's own group.
    pub pool: String,
    /// How many of this runner's jobs one agent runs at once (1 to 100, default 1).
    #[serde(default)]
    pub max_concurrent_jobs: Option<u32>,
    /// Plain environment variables for the runner.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Job timeout in seconds (60 to 86400, default 7200), delivered in the heartbeat
    /// answer and enforced by the sweeper.
    #[serde(default)]
    pub timeout_seconds: Option<u32>,
    /// The Kubernetes Job knobs, for agents started with `--kubernetes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<EksJob>,
}

/// How Sortie reaches a target account: the role to assume and its ExternalId.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AwsAccess {
    /// The launcher role Sortie assumes, `arn:aws:iam::<account>:role/<name>`.
    pub role_arn: String,
    /// The ExternalId the role's trust policy requires.
    pub external_id: String,
    /// The AWS region of the cluster.
    pub region: String,
}

/// Fargate capacity provider for a runner's plans.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
pub enum CapacityProvider {
    /// On-demand Fargate for every job.
    #[serde(rename = "FARGATE")]
    Fargate,
    /// Spot for `plan` jobs; `apply` and `destroy` always run on on-demand Fargate.
    #[serde(rename = "FARGATE_SPOT")]
    FargateSpot,
}

/// The `ecs-fargate` runner type.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EcsFargateRunner {
    /// The target account and region.
    #[serde(flatten)]
    pub access: AwsAccess,
    /// ECS cluster name or ARN.
    pub cluster: String,
    /// The runner's task definition (family, family:revision or ARN).
    pub task_definition: String,
    /// The container running `sortie-runner`.
    pub container_name: String,
    /// Subnet ids for the task's network interface.
    pub subnets: Vec<String>,
    /// Security group ids.
    pub security_groups: Vec<String>,
    /// Whether the task gets a public IP.
    #[serde(default)]
    pub assign_public_ip: bool,
    /// `FARGATE` or `FARGATE_SPOT` (plans only).
    #[serde(default)]
    pub capacity_provider: Option<CapacityProvider>,
    /// Task-level CPU override, set together with `memory`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u32>,
    /// Task-level memory override (MiB), set together with `cpu`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<u32>,
    /// A least-privilege role for the job's task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_role_arn: Option<String>,
    /// Plain environment variables.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Secret references (ARNs) by environment variable name.
    #[serde(default)]
    pub secrets: BTreeMap<String, String>,
    /// Job timeout in seconds (60 to 86400, default 7200).
    #[serde(default)]
    pub timeout_seconds: Option<u32>,
}

/// The `eks` runner type.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EksRunner {
    /// The target account and region.
    #[serde(flatten)]
    pub access: AwsAccess,
    /// EKS cluster name.
    pub cluster: String,
    /// The Kubernetes Job template knobs.
    pub job: EksJob,
    /// Job timeout in seconds, enforced from outside the pod.
    #[serde(default)]
    pub timeout_seconds: Option<u32>,
}

/// The Kubernetes Job knobs of an `eks` runner.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EksJob {
    /// Namespace the Job is created in.
    pub namespace: String,
    /// The pod's service account.
    pub service_account: String,
    /// The runner image (`ghcr.io/sortie-dev/sortie-runner:0.1.0` when absent).
    #[serde(default)]
    pub image: Option<String>,
    /// `Always`, `IfNotPresent` or `Never`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<String>,
    /// Names of Secrets in the namespace to pull the image with.
    #[serde(default)]
    pub image_pull_secrets: Vec<String>,
    /// Mount the service account's token in the pod (off by default).
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
    pub resources: Option<Resources>,
    /// A pod template overlay, merged over the generated one (free-form Kubernetes YAML).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub pod_template: Option<Value>,
    /// Seconds a finished Job is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<u32>,
    /// Kubernetes' own deadline for the Job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<u32>,
    /// Plain environment variables.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Kubernetes Secret keys, `<secret name>/<key>`, by environment variable name.
    #[serde(default)]
    pub secrets: BTreeMap<String, String>,
}

/// A Kubernetes toleration.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Toleration {
    /// Taint key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// `Exists` or `Equal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
    /// Taint value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Taint effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<String>,
    /// How long the pod tolerates the taint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

/// Container resource requests and limits.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Resources {
    /// Requests, such as `cpu: 500m`.
    #[serde(default)]
    pub requests: BTreeMap<String, String>,
    /// Limits.
    #[serde(default)]
    pub limits: BTreeMap<String, String>,
}

/// The `local` runner type: `sortie-runner` as a child process of the host.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LocalRunner {
    /// Path of the `sortie-runner` binary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_binary: Option<String>,
    /// Plain environment variables for the runner process.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Job timeout in seconds.
    #[serde(default)]
    pub timeout_seconds: Option<u32>,
}

/// Where Terraform state lives, by `type`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum StateStorageConfiguration {
    /// An S3 bucket.
    S3(S3Storage),
    /// Kubernetes secrets in a namespace (`eks` runners only).
    Kubernetes(KubernetesStorage),
    /// A directory on the host (`local` runners only).
    Local(LocalStorage),
}

/// The `s3` state storage type.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct S3Storage {
    /// Bucket name.
    pub bucket: String,
    /// Key prefix: empty or ending with `/`.
    #[serde(default)]
    pub key_prefix: String,
    /// Bucket region.
    pub region: String,
    /// KMS key for state encryption.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kms_key_id: Option<String>,
    /// Lock with an S3 lock file.
    #[serde(default)]
    pub use_lockfile: bool,
    /// Lock with a DynamoDB table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamodb_table: Option<String>,
    /// A custom S3 endpoint (local development).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
}

/// The `kubernetes` state storage type.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct KubernetesStorage {
    /// Namespace holding the state secrets; the runner's own namespace when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// The `local` state storage type.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LocalStorage {
    /// Directory holding one state file per environment.
    pub directory: String,
}
