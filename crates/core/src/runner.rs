//! Runners: where a job runs (`runner_configuration`) and where its state lives
//! (`state_storage_configuration`), in the shape of a Humanitec canyon runner file.
//!
//! [`RunnerSpec::parse`] reads YAML or JSON and reports every problem at once,
//! each with its field path, including an incompatible runner/storage pairing.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::names::RunnerId;
use crate::problems::{index, parse_document, type_name, Fields, Problems};
use crate::ValidationError;

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
    "ecs-fargate + s3; eks + s3 or kubernetes; local + s3 or local";

/// A stored runner: its id (owner group plus name) and its specification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Runner {
    /// The runner's id, `<owner group>/<name>` (just `<name>` for a shared runner).
    pub id: RunnerId,
    /// What the runner is and where its state lives.
    #[serde(flatten)]
    pub spec: RunnerSpec,
}

/// A runner file: description, runner configuration and state storage configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunnerSpec {
    /// Free text shown to users.
    #[serde(default)]
    pub description: String,
    /// Where and how jobs run.
    pub runner_configuration: RunnerConfiguration,
    /// Where Terraform state lives.
    pub state_storage_configuration: StateStorageConfiguration,
}

/// Where and how a runner runs jobs, by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum RunnerConfiguration {
    /// One Fargate task per job, launched with ECS RunTask in the runner's account.
    EcsFargate(EcsFargateRunner),
    /// One Kubernetes Job per job on an EKS cluster.
    Eks(EksRunner),
    /// A child process on the host: for development, the demo and tests.
    Local(LocalRunner),
}

/// How Sortie reaches a target account: the role to assume and its ExternalId.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
pub struct EksJob {
    /// Namespace the Job is created in.
    pub namespace: String,
    /// Service account the pod runs as.
    pub service_account: String,
    /// Runner image.
    pub image: String,
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
    /// Secret references (Secrets Manager or SSM ARNs) by environment variable name.
    #[serde(default)]
    pub secrets: BTreeMap<String, String>,
}

/// A Kubernetes toleration.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
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
#[serde(deny_unknown_fields)]
pub struct Resources {
    /// Requests, such as `cpu: 500m`, `memory: 1Gi`.
    #[serde(default)]
    pub requests: BTreeMap<String, String>,
    /// Limits, such as `memory: 2Gi`.
    #[serde(default)]
    pub limits: BTreeMap<String, String>,
}

/// The `local` runner type: `sortie-runner` as a child process of the host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LocalRunner {
    /// Path of the `sortie-runner` binary; found next to the launcher or on PATH when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_binary: Option<String>,
    /// Plain environment variables for the runner process.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Job timeout in seconds, enforced by the launcher killing the process group.
    #[serde(default = "default_timeout")]
    pub timeout_seconds: u32,
}

/// Where Terraform state lives, by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct S3Storage {
    /// Bucket name.
    pub bucket: String,
    /// Prefix of every state key: the key is `<key_prefix><environment path>/terraform.tfstate`.
    #[serde(default)]
    pub key_prefix: String,
    /// Bucket region.
    pub region: String,
    /// KMS key for server-side encryption of the state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kms_key_id: Option<String>,
    /// Lock with an S3 lock file (Terraform ≥ 1.10, OpenTofu ≥ 1.10).
    #[serde(default)]
    pub use_lockfile: bool,
    /// Lock with a DynamoDB table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamodb_table: Option<String>,
    /// An S3 endpoint override, for a local AWS in development.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
}

impl S3Storage {
    /// The state object's key for an environment: `<key_prefix><environment path>/terraform.tfstate`.
    pub fn state_key(&self, environment: &crate::EnvPath) -> String {
        format!("{}{}/terraform.tfstate", self.key_prefix, environment)
    }
}

/// The `kubernetes` state storage type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubernetesStorage {
    /// Namespace holding the state secrets.
    pub namespace: String,
}

/// The `local` state storage type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalStorage {
    /// Directory holding one state file per environment.
    pub directory: String,
}

fn default_timeout() -> u32 {
    DEFAULT_TIMEOUT_SECONDS
}

impl RunnerConfiguration {
    /// The type name, as written in `runner_configuration.type`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::EcsFargate(_) => "ecs-fargate",
            Self::Eks(_) => "eks",
            Self::Local(_) => "local",
        }
    }

    /// The job timeout in seconds.
    pub fn timeout_seconds(&self) -> u32 {
        match self {
            Self::EcsFargate(c) => c.timeout_seconds,
            Self::Eks(c) => c.timeout_seconds,
            Self::Local(c) => c.timeout_seconds,
        }
    }

    /// The target account access, for the types that launch in AWS.
    pub fn aws_access(&self) -> Option<&AwsAccess> {
        match self {
            Self::EcsFargate(c) => Some(&c.access),
            Self::Eks(c) => Some(&c.access),
            Self::Local(_) => None,
        }
    }
}

impl StateStorageConfiguration {
    /// The type name, as written in `state_storage_configuration.type`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::S3(_) => "s3",
            Self::Kubernetes(_) => "kubernetes",
            Self::Local(_) => "local",
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
    )
}

impl RunnerSpec {
    /// Parses a runner file (YAML or JSON) and validates it, reporting every problem.
    pub fn parse(text: &str) -> Result<Self, ValidationError> {
        Self::from_value(&parse_document(text)?)
    }

    /// Decodes and validates an already-parsed document, reporting every problem.
    pub fn from_value(value: &Value) -> Result<Self, ValidationError> {
        let mut p = Problems::default();
        let Some(mut top) = Fields::new(value, "", &mut p) else {
            return Err(ValidationError { problems: p.0 });
        };
        let description: String = top.optional("description", &mut p).unwrap_or_default();
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
                Ok(Self {
                    description,
                    runner_configuration,
                    state_storage_configuration,
                })
            }
            _ => Err(ValidationError { problems: p.0 }),
        }
    }
}

/// Reads the `type` field of a tagged block.
fn type_of(f: &mut Fields<'_>, allowed: &[&str], p: &mut Problems) -> Option<String> {
    let t: String = f.required("type", p)?;
    if allowed.contains(&t.as_str()) {
        Some(t)
    } else {
        p.push(
            f.path_of("type"),
            format!(
                "`{t}` is not a known type; known types: {}",
                allowed.join(", ")
            ),
        );
        None
    }
}

fn decode_runner(value: &Value, p: &mut Problems) -> Option<RunnerConfiguration> {
    let mut f = Fields::new(value, "runner_configuration", p)?;
    let Some(t) = type_of(&mut f, &["ecs-fargate", "eks", "local"], p) else {
        // Without a type the other fields cannot be checked; do not report them as unknown.
        return None;
    };
    let out = match t.as_str() {
        "ecs-fargate" => decode_ecs(&mut f, p).map(RunnerConfiguration::EcsFargate),
        "eks" => decode_eks(&mut f, p).map(RunnerConfiguration::Eks),
        _ => decode_local_runner(&mut f, p).map(RunnerConfiguration::Local),
    };
    f.finish(p);
    out
}

fn decode_access(f: &mut Fields<'_>, p: &mut Problems) -> Option<AwsAccess> {
    let role_arn = f.required_str("role_arn", p);
    if let Some(arn) = &role_arn {
        if !crate::arn::is_role_arn(arn) {
            p.push(
                f.path_of("role_arn"),
                format!(
                    "`{arn}` is not an IAM role ARN (arn:aws:iam::<12-digit account>:role/<name>)"
                ),
            );
        }
    }
    let external_id = f.required_str("external_id", p);
    if let Some(id) = &external_id {
        if id.len() < 2 || id.len() > 1224 {
            p.push(
                f.path_of("external_id"),
                "must be 2 to 1224 characters long",
            );
        }
    }
    let region = f.required_str("region", p);
    if let Some(r) = &region {
        if !crate::arn::is_region(r) {
            p.push(
                f.path_of("region"),
                format!("`{r}` is not an AWS region name such as eu-west-1"),
            );
        }
    }
    Some(AwsAccess {
        role_arn: role_arn?,
        external_id: external_id?,
        region: region?,
    })
}

fn decode_timeout(f: &mut Fields<'_>, p: &mut Problems) -> u32 {
    let t: u32 = f
        .optional("timeout_seconds", p)
        .unwrap_or(DEFAULT_TIMEOUT_SECONDS);
    if !(MIN_TIMEOUT_SECONDS..=MAX_TIMEOUT_SECONDS).contains(&t) {
        p.push(
            f.path_of("timeout_seconds"),
            format!("must be between {MIN_TIMEOUT_SECONDS} and {MAX_TIMEOUT_SECONDS} (24 h), but is {t}"),
        );
    }
    t
}

fn decode_id_list(
    f: &mut Fields<'_>,
    field: &'static str,
    prefix: &str,
    p: &mut Problems,
) -> Option<Vec<String>> {
    let list: Vec<String> = f.required(field, p)?;
    let path = f.path_of(field);
    if list.is_empty() {
        p.push(&path, format!("must list at least one `{prefix}...` id"));
    }
    for (i, id) in list.iter().enumerate() {
        let rest = id.strip_prefix(prefix).unwrap_or("");
        if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_hexdigit()) {
            p.push(
                index(&path, i),
                format!("`{id}` is not an id of the form {prefix}<hex>"),
            );
        }
    }
    Some(list)
}

/// Checks environment variable names: `[A-Za-z_][A-Za-z0-9_]*`, and not Sortie's reserved prefix.
pub fn check_env_names<'a>(names: impl Iterator<Item = &'a String>, path: &str, p: &mut Problems) {
    for name in names {
        let b = name.as_bytes();
        let valid = !b.is_empty()
            && (b[0].is_ascii_alphabetic() || b[0] == b'_')
            && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_');
        if !valid {
            p.push(
                format!("{path}.{name}"),
                "is not a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*)",
            );
        } else if name.starts_with(RESERVED_ENV_PREFIX) {
            p.push(
                format!("{path}.{name}"),
                format!("names starting with {RESERVED_ENV_PREFIX} are reserved for Sortie"),
            );
        }
    }
}

fn decode_env(f: &mut Fields<'_>, p: &mut Problems) -> BTreeMap<String, String> {
    let env: BTreeMap<String, String> = f.optional("env", p).unwrap_or_default();
    check_env_names(env.keys(), &f.path_of("env"), p);
    env
}

/// Checks secret references: each must be a Secrets Manager secret or SSM parameter ARN.
pub fn check_secret_refs(secrets: &BTreeMap<String, String>, path: &str, p: &mut Problems) {
    check_env_names(secrets.keys(), path, p);
    for (name, reference) in secrets {
        if !crate::arn::is_secret_ref(reference) {
            p.push(
                format!("{path}.{name}"),
                "must be a reference, the ARN of a Secrets Manager secret or an SSM parameter, never a secret value",
            );
        }
    }
}

fn decode_secrets(f: &mut Fields<'_>, p: &mut Problems) -> BTreeMap<String, String> {
    let secrets: BTreeMap<String, String> = f.optional("secrets", p).unwrap_or_default();
    check_secret_refs(&secrets, &f.path_of("secrets"), p);
    secrets
}

/// Valid Fargate task CPU/memory pairs: memory (MiB) allowed for each CPU value.
fn fargate_memory_ok(cpu: u32, memory: u32) -> bool {
    let (lo, hi, step) = match cpu {
        256 => return matches!(memory, 512 | 1024 | 2048),
        512 => (1024, 4096, 1024),
        1024 => (2048, 8192, 1024),
        2048 => (4096, 16384, 1024),
        4096 => (8192, 30720, 1024),
        8192 => (16384, 61440, 4096),
        16384 => (32768, 122_880, 8192),
        _ => return false,
    };
    (lo..=hi).contains(&memory) && (memory - lo).is_multiple_of(step)
}

fn decode_ecs(f: &mut Fields<'_>, p: &mut Problems) -> Option<EcsFargateRunner> {
    let access = decode_access(f, p);
    let cluster = f.required_str("cluster", p);
    let task_definition = f.required_str("task_definition", p);
    let container_name = f.required_str("container_name", p);
    let subnets = decode_id_list(f, "subnets", "subnet-", p);
    let security_groups = decode_id_list(f, "security_groups", "sg-", p);
    let assign_public_ip: bool = f.optional("assign_public_ip", p).unwrap_or(false);
    let capacity_provider = match f.optional::<String>("capacity_provider", p).as_deref() {
        None | Some("FARGATE") => CapacityProvider::Fargate,
        Some("FARGATE_SPOT") => CapacityProvider::FargateSpot,
        Some(other) => {
            p.push(
                f.path_of("capacity_provider"),
                format!("`{other}` is not FARGATE or FARGATE_SPOT"),
            );
            CapacityProvider::Fargate
        }
    };
    let cpu: Option<u32> = f.optional("cpu", p);
    let memory: Option<u32> = f.optional("memory", p);
    match (cpu, memory) {
        (Some(c), _) if ![256, 512, 1024, 2048, 4096, 8192, 16384].contains(&c) => {
            p.push(
                f.path_of("cpu"),
                format!("{c} is not a Fargate CPU value (256, 512, 1024, 2048, 4096, 8192, 16384)"),
            );
        }
        (Some(c), Some(m)) if !fargate_memory_ok(c, m) => {
            p.push(
                f.path_of("memory"),
                format!("{m} MiB is not a valid Fargate memory size for cpu {c}"),
            );
        }
        (None, Some(_)) | (Some(_), None) => {
            p.push(
                f.path_of("cpu"),
                "cpu and memory overrides must be set together",
            );
        }
        _ => {}
    }
    let task_role_arn: Option<String> = f.optional("task_role_arn", p);
    if let Some(arn) = &task_role_arn {
        if !crate::arn::is_role_arn(arn) {
            p.push(
                f.path_of("task_role_arn"),
                format!("`{arn}` is not an IAM role ARN"),
            );
        }
    }
    let env = decode_env(f, p);
    let secrets = decode_secrets(f, p);
    let timeout_seconds = decode_timeout(f, p);
    Some(EcsFargateRunner {
        access: access?,
        cluster: cluster?,
        task_definition: task_definition?,
        container_name: container_name?,
        subnets: subnets?,
        security_groups: security_groups?,
        assign_public_ip,
        capacity_provider,
        cpu,
        memory,
        task_role_arn,
        env,
        secrets,
        timeout_seconds,
    })
}

fn decode_eks(f: &mut Fields<'_>, p: &mut Problems) -> Option<EksRunner> {
    let access = decode_access(f, p);
    let cluster = f.required_str("cluster", p);
    let job = match f.raw("job") {
        Some(v) => decode_eks_job(v, &f.path_of("job"), p),
        None => {
            p.push(f.path_of("job"), "is required");
            None
        }
    };
    let timeout_seconds = decode_timeout(f, p);
    Some(EksRunner {
        access: access?,
        cluster: cluster?,
        job: job?,
        timeout_seconds,
    })
}

fn check_k8s_name(f: &Fields<'_>, field: &str, value: &Option<String>, p: &mut Problems) {
    if let Some(v) = value {
        if crate::names::check_segment(v).is_err() {
            p.push(
                f.path_of(field),
                format!("`{v}` is not a Kubernetes DNS label ([a-z0-9][a-z0-9-]*, at most 63)"),
            );
        }
    }
}

fn decode_eks_job(value: &Value, path: &str, p: &mut Problems) -> Option<EksJob> {
    let mut f = Fields::new(value, path, p)?;
    let namespace = f.required_str("namespace", p);
    check_k8s_name(&f, "namespace", &namespace, p);
    let service_account = f.required_str("service_account", p);
    check_k8s_name(&f, "service_account", &service_account, p);
    let image = f.required_str("image", p);
    let node_selector = f.optional("node_selector", p).unwrap_or_default();
    let tolerations: Vec<Toleration> = f.optional("tolerations", p).unwrap_or_default();
    for (i, t) in tolerations.iter().enumerate() {
        let tpath = index(&f.path_of("tolerations"), i);
        match t.operator.as_deref() {
            None | Some("Equal") | Some("Exists") => {}
            Some(o) => p.push(
                format!("{tpath}.operator"),
                format!("`{o}` is not Equal or Exists"),
            ),
        }
        if t.operator.as_deref() == Some("Exists") && t.value.is_some() {
            p.push(
                format!("{tpath}.value"),
                "must be empty when operator is Exists",
            );
        }
        match t.effect.as_deref() {
            None | Some("NoSchedule") | Some("PreferNoSchedule") | Some("NoExecute") => {}
            Some(e) => p.push(
                format!("{tpath}.effect"),
                format!("`{e}` is not NoSchedule, PreferNoSchedule or NoExecute"),
            ),
        }
    }
    let annotations = f.optional("annotations", p).unwrap_or_default();
    let resources = f.optional("resources", p).unwrap_or_default();
    let pod_template = match f.raw("pod_template") {
        None => None,
        Some(v @ Value::Object(_)) => Some(v.clone()),
        // The Humanitec drivers take pod_template as a YAML string: accept that too.
        Some(Value::String(s)) => match serde_norway::from_str::<Value>(s) {
            Ok(v @ Value::Object(_)) => Some(v),
            _ => {
                p.push(
                    f.path_of("pod_template"),
                    "must be a mapping (a partial PodTemplateSpec), or YAML text of one",
                );
                None
            }
        },
        Some(other) => {
            p.push(
                f.path_of("pod_template"),
                format!("must be a mapping, but is {}", type_name(other)),
            );
            None
        }
    };
    let ttl_seconds_after_finished = f.optional("ttl_seconds_after_finished", p);
    let active_deadline_seconds: Option<u32> = f.optional("active_deadline_seconds", p);
    if active_deadline_seconds == Some(0) {
        p.push(
            f.path_of("active_deadline_seconds"),
            "must be greater than 0",
        );
    }
    let env = decode_env(&mut f, p);
    let secrets = decode_secrets(&mut f, p);
    f.finish(p);
    Some(EksJob {
        namespace: namespace?,
        service_account: service_account?,
        image: image?,
        node_selector,
        tolerations,
        annotations,
        resources,
        pod_template,
        ttl_seconds_after_finished,
        active_deadline_seconds,
        env,
        secrets,
    })
}

fn decode_local_runner(f: &mut Fields<'_>, p: &mut Problems) -> Option<LocalRunner> {
    let runner_binary = f.optional("runner_binary", p);
    let env = decode_env(f, p);
    let timeout_seconds = decode_timeout(f, p);
    Some(LocalRunner {
        runner_binary,
        env,
        timeout_seconds,
    })
}

fn decode_storage(value: &Value, p: &mut Problems) -> Option<StateStorageConfiguration> {
    let mut f = Fields::new(value, "state_storage_configuration", p)?;
    let t = type_of(&mut f, &["s3", "kubernetes", "local"], p)?;
    let out = match t.as_str() {
        "s3" => decode_s3(&mut f, p).map(StateStorageConfiguration::S3),
        "kubernetes" => {
            let namespace = f.required_str("namespace", p);
            check_k8s_name(&f, "namespace", &namespace, p);
            namespace.map(|namespace| {
                StateStorageConfiguration::Kubernetes(KubernetesStorage { namespace })
            })
        }
        _ => f
            .required_str("directory", p)
            .map(|directory| StateStorageConfiguration::Local(LocalStorage { directory })),
    };
    f.finish(p);
    out
}

fn decode_s3(f: &mut Fields<'_>, p: &mut Problems) -> Option<S3Storage> {
    let bucket = f.required_str("bucket", p);
    if let Some(b) = &bucket {
        if !crate::arn::is_bucket_name(b) {
            p.push(
                f.path_of("bucket"),
                format!("`{b}` is not a valid S3 bucket name"),
            );
        }
    }
    let key_prefix: String = f.optional("key_prefix", p).unwrap_or_default();
    if key_prefix.starts_with('/') || (!key_prefix.is_empty() && !key_prefix.ends_with('/')) {
        p.push(
            f.path_of("key_prefix"),
            "must not start with `/`, and must end with `/` when set",
        );
    }
    let region = f.required_str("region", p);
    if let Some(r) = &region {
        if !crate::arn::is_region(r) {
            p.push(
                f.path_of("region"),
                format!("`{r}` is not an AWS region name such as eu-west-1"),
            );
        }
    }
    let kms_key_id: Option<String> = f.optional("kms_key_id", p);
    if let Some(k) = &kms_key_id {
        if !(k.starts_with("arn:") || k.starts_with("alias/")) {
            p.push(
                f.path_of("kms_key_id"),
                "must be a KMS key ARN or an alias/<name>",
            );
        }
    }
    let use_lockfile = f.optional("use_lockfile", p).unwrap_or(false);
    let dynamodb_table = f.optional("dynamodb_table", p);
    let endpoint: Option<String> = f.optional("endpoint", p);
    if let Some(e) = &endpoint {
        if !(e.starts_with("http://") || e.starts_with("https://")) {
            p.push(f.path_of("endpoint"), "must be an http:// or https:// URL");
        }
    }
    Some(S3Storage {
        bucket: bucket?,
        key_prefix,
        region: region?,
        kms_key_id,
        use_lockfile,
        dynamodb_table,
        endpoint,
    })
}
