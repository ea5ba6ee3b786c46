//! OpenAPI schemas of the `sortie-core` domain types that API bodies embed.
//!
//! `sortie-core` has no HTTP types, so it does not derive `ToSchema`; these
//! types mirror its serde shapes field for field (names, tags, defaults and
//! skipped fields), and the view types in [`super`] point at them with
//! `#[schema(value_type = ...)]`. The API test suite validates every response
//! it receives against the document, so a mirror that drifts from core fails it.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
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
    /// The runner image.
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
    /// Secret references (ARNs) by environment variable name.
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
    /// Namespace holding the state secrets.
    pub namespace: String,
}

/// The `local` state storage type.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LocalStorage {
    /// Directory holding one state file per environment.
    pub directory: String,
}

/// Optional conditions a rule places on an environment. All that are set must hold.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct Criteria {
    /// The environment's type must equal this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_type: Option<String>,
    /// A glob over the environment's full path; `*` stays within one segment, `**` spans segments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_path: Option<String>,
    /// Every label here must be on the environment with the same value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Every tag here must be among the environment's tags.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub tags: BTreeSet<String>,
}

/// A runner rule: at `scope`, environments meeting `criteria` use `runner_id`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RunnerRule {
    /// The rule's id, unique within its scope.
    pub id: String,
    /// The group the rule applies in (and below); `""` is the root.
    pub scope: String,
    /// The runner it picks; visible at `scope`.
    pub runner_id: String,
    /// Conditions on the environment.
    #[serde(default)]
    pub criteria: Criteria,
    /// Breaks ties between rules of the same depth and criteria count; higher wins.
    #[serde(default)]
    pub priority: i32,
}

/// What happened to one rule in a resolution.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Verdict {
    /// This rule won.
    Won,
    /// It matched but lost to the winner at the first precedence step where they differ.
    Lost {
        /// The winning rule's id.
        to: String,
        /// The precedence step that decided it.
        because: String,
    },
    /// Its scope is not the environment's group or an ancestor of it.
    OutOfScope,
    /// Its runner is not visible at its scope.
    RunnerNotVisible,
    /// One of its criteria does not hold.
    NotMatched {
        /// The criterion that failed.
        reason: String,
    },
}

/// One rule's line in a resolution's explanation.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Considered {
    /// The rule's id.
    pub rule_id: String,
    /// The rule's scope.
    pub scope: String,
    /// The runner it names.
    pub runner_id: String,
    /// How many criteria it sets.
    pub criteria_count: usize,
    /// Its priority.
    pub priority: i32,
    /// What happened to it.
    #[serde(flatten)]
    pub verdict: Verdict,
}

/// A successful resolution: the winning rule, and the fate of every rule considered.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Resolution {
    /// The rule that won.
    pub rule: RunnerRule,
    /// Every rule given, in precedence order for those that matched, then the rest.
    pub explanation: Vec<Considered>,
}

/// The runner an environment is linked to, and how it got linked.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RunnerLink {
    /// The linked runner.
    pub runner_id: String,
    /// The rule that picked it.
    pub rule_id: String,
    /// Who linked it (created the environment or refreshed its runner).
    pub linked_by: String,
    /// When.
    pub linked_at: DateTime<Utc>,
}

/// What a job does to its environment.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    /// `terraform plan`.
    Plan,
    /// `terraform apply`.
    Apply,
    /// `terraform destroy`.
    Destroy,
}

/// A job's lifecycle state.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Waiting: for the environment's lock, or in the jobs queue.
    Queued,
    /// Claimed by a dispatcher that is launching it.
    Dispatching,
    /// Launched.
    Running,
    /// Finished with exit code 0.
    Succeeded,
    /// Finished unsuccessfully.
    Failed,
    /// Canceled by a user.
    Canceled,
    /// Stopped after exceeding its runner's timeout.
    TimedOut,
}

/// One recorded transition: from, to, when and why.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Transition {
    /// The state before (null for the job's creation).
    pub from: Option<JobState>,
    /// The state after.
    pub to: JobState,
    /// When it happened.
    pub at: DateTime<Utc>,
    /// Why, in words.
    pub reason: String,
}

/// Where a job's Terraform configuration comes from.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Source {
    /// A git repository.
    Git {
        /// Clone URL (`https://`, `ssh://`, `git@host:` or `file://`).
        url: String,
        /// Branch, tag or commit; the default branch when absent.
        #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
        git_ref: Option<String>,
        /// Directory inside the repository holding the configuration.
        #[serde(default)]
        path: String,
        /// A secret reference (ARN) for the clone credentials.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        credentials_secret: Option<String>,
    },
    /// A tar.gz archive in S3.
    S3 {
        /// Bucket.
        bucket: String,
        /// Object key.
        key: String,
        /// The archive's SHA-256, hex.
        sha256: String,
        /// Directory inside the archive holding the configuration.
        #[serde(default)]
        path: String,
    },
    /// No source: the configuration is made entirely of the job's `files`.
    Inline,
}

/// What a client submits: the job's specification.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct JobRequest {
    /// Plan, apply or destroy.
    pub operation: Operation,
    /// Where the configuration comes from; `inline` when absent.
    #[serde(default)]
    pub source: Option<Source>,
    /// Terraform variables, written to `terraform.tfvars.json` (any JSON values).
    #[serde(default)]
    pub variables: BTreeMap<String, Value>,
    /// Extra files by relative path, written over the source.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// Secret references (ARNs) by environment variable name.
    #[serde(default)]
    pub secret_refs: BTreeMap<String, String>,
}

/// A job: one operation on one environment, with its transitions.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Job {
    /// The job's id (a ULID).
    pub id: String,
    /// The environment it runs on.
    pub environment: String,
    /// The runner it runs with.
    pub runner_id: String,
    /// What it runs.
    #[serde(flatten)]
    pub request: JobRequest,
    /// The principal who submitted it.
    pub requested_by: String,
    /// Its current state.
    pub state: JobState,
    /// Every transition so far.
    pub transitions: Vec<Transition>,
    /// The runner's specification as it was at submit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_spec: Option<RunnerSpec>,
}

/// What a plan, apply or destroy changed, reported by the runner.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
pub struct ChangeSummary {
    /// Resources to add (or added).
    pub add: u32,
    /// Resources to change (or changed).
    pub change: u32,
    /// Resources to destroy (or destroyed).
    pub destroy: u32,
}

/// An S3 location for a job's logs or artifacts.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ArtifactLocation {
    /// Bucket.
    pub bucket: String,
    /// Key prefix.
    pub prefix: String,
    /// Region.
    pub region: String,
}

/// What a runner fetches with its job token.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct JobSpec {
    /// The job.
    pub job_id: String,
    /// Its environment.
    pub environment: String,
    /// Plan, apply or destroy.
    pub operation: Operation,
    /// Where the configuration comes from.
    pub source: Source,
    /// Terraform variables (any JSON values).
    #[serde(default)]
    pub variables: BTreeMap<String, Value>,
    /// Extra files by relative path.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// Secret references (ARNs) by environment variable name.
    #[serde(default)]
    pub secret_refs: BTreeMap<String, String>,
    /// Where the state lives.
    pub state_storage: StateStorageConfiguration,
    /// The state object's key, for `s3` state storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_key: Option<String>,
    /// Where to write log chunks.
    pub logs: ArtifactLocation,
    /// Where to write the plan and the summary.
    pub artifacts: ArtifactLocation,
}

/// A role on a group.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Reads.
    Viewer,
    /// Reads, submits and cancels jobs.
    Deployer,
    /// Also manages runners, rules and environments.
    Maintainer,
    /// Also administers memberships.
    Owner,
}

/// Who a membership is for.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Grantee {
    /// One subject (`sub`), optionally only from one issuer.
    Subject {
        /// The exact `sub`.
        subject: String,
        /// The token issuer; any issuer when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        issuer: Option<String>,
    },
    /// Every principal whose claim matches a glob.
    ClaimPattern {
        /// The claim's name.
        claim: String,
        /// A glob over the claim's string value; `*` matches any run of characters, `/` included.
        pattern: String,
        /// The token issuer; any issuer when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        issuer: Option<String>,
    },
}

/// An environment with its linked runner and its lock.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EnvironmentRecord {
    /// The environment's path, `<group>/<name>`.
    pub path: String,
    /// Its type.
    pub env_type: String,
    /// Its labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Its tags.
    #[serde(default)]
    pub tags: BTreeSet<String>,
    /// The runner it is linked to.
    pub runner: RunnerLink,
    /// The job that holds the environment's lock, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_job: Option<String>,
    /// How many jobs wait for the lock.
    pub queued_count: u64,
    /// The last queue position handed out.
    #[serde(default)]
    pub queue_seq: u64,
}

/// A membership with its id: a role on a group for a grantee.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MembershipRecord {
    /// The membership's id.
    pub id: String,
    /// The group the role is granted on (and inherited below).
    pub group: String,
    /// The role.
    pub role: Role,
    /// Who gets it.
    pub grantee: Grantee,
    /// Who granted it.
    pub granted_by: String,
    /// When.
    pub granted_at: DateTime<Utc>,
}
