//! The API's request and response bodies: serde types with OpenAPI schemas.
//!
//! Views wrap the store's records (whose serde shape is the wire format) and add
//! the fields the API computes. The embedded `sortie-core` and `sortie-store` types
//! carry their own schemas (their `openapi` feature, which this crate turns on).

pub mod agents;
mod audit;
mod jobs;
mod notifications;
mod uploads;

pub use audit::{AuditList, AuditRecordView};
pub use jobs::{JobListPage, JobView, LiveLogUrl, LogsPage, SensitiveVariables};
pub use notifications::{
    DeliveryAttempt, DeliveryList, Destination, DestinationBody, DestinationList, DestinationType,
};
pub use uploads::{LogUploadGrants, LogUploadRequest, UploadGrant, UploadProblems, UploadRequest};

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sortie_core::agent_pool::AgentHold;
use sortie_core::waiting::Waiting;
use sortie_core::{
    Approval, ChangeSummary, Considered, Criteria, DriftRemediation, Grantee, GroupPath, Job, Role,
    Runner, RunnerCheck, RunnerRule, Tally, TaskRef, ToolName, ToolUsed,
};
use sortie_store::{EnvironmentRecord, JobRecord, MembershipRecord, PhaseRecord, Versioned};
use utoipa::ToSchema;

/// A runner as the API shows it: the stored runner plus where it sits relative to
/// the group it was listed for.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RunnerView {
    /// The runner: id, description and configurations.
    #[serde(flatten)]
    pub runner: Runner,
    /// The owner group's path (`""` for a shared runner).
    pub group: String,
    /// The runner's name within its owner group.
    pub name: String,
    /// The version, also sent as the ETag.
    pub version: u64,
    /// True for a shared runner (owned by the root group).
    pub shared: bool,
    /// True when the owner is an ancestor of the group it was listed for.
    pub inherited: bool,
}

impl RunnerView {
    /// The view of `r` as seen from `listed_for`.
    pub fn new(r: Versioned<Runner>, listed_for: &GroupPath) -> Self {
        Self {
            group: r.item.id.group().as_str().to_string(),
            name: r.item.id.name().to_string(),
            version: r.version,
            shared: r.item.id.is_shared(),
            inherited: r.item.id.group() != listed_for,
            runner: r.item,
        }
    }
}

/// A group's runners, then inherited and shared ones.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RunnerList {
    /// The runners, each marked `inherited` and `shared`.
    pub runners: Vec<RunnerView>,
}

/// The rules of one scope.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RuleList {
    /// The rules.
    pub rules: Vec<RunnerRule>,
}

/// The body of `POST .../rules`: a rule to create at the scope in the URL.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RuleCreate {
    /// The rule's id, unique within its scope.
    #[schema(pattern = "^[a-z0-9][a-z0-9-]{0,62}$")]
    pub id: String,
    /// The scope; when given it must be the group in the URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// The runner it picks, visible at the scope.
    pub runner_id: String,
    /// Conditions on the environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub criteria: Option<Criteria>,
    /// Higher wins ties.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
}

/// The body of `PUT .../rules/{id}`: the rule's new content.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RuleUpdate {
    /// When given, it must be the id in the URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// When given, it must be the group in the URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// The runner it picks, visible at the scope.
    pub runner_id: String,
    /// Conditions on the environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub criteria: Option<Criteria>,
    /// Higher wins ties.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
}

/// An environment as the API shows it: the stored environment with its lock.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EnvironmentView {
    /// The environment, its linked runner and its lock.
    #[serde(flatten)]
    pub record: EnvironmentRecord,
    /// The environment's group.
    pub group: String,
    /// The environment's name within its group.
    pub name: String,
    /// The version, also sent as the ETag.
    pub version: u64,
    /// When it expires and where that end comes from (its own `expires_at` or `ttl`, or a
    /// group's default TTL, maybe extended): on a read of one environment; absent when it
    /// does not expire, and in lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiry: Option<sortie_core::expiry::Expiry>,
}

impl From<Versioned<EnvironmentRecord>> for EnvironmentView {
    fn from(e: Versioned<EnvironmentRecord>) -> Self {
        Self {
            group: e.item.environment.path.group().as_str().to_string(),
            name: e.item.environment.path.name().to_string(),
            version: e.version,
            record: e.item,
            expiry: None,
        }
    }
}

/// A group's environments.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EnvironmentList {
    /// The environments.
    pub environments: Vec<EnvironmentView>,
    /// Without `recursive`: how many environments the groups below hold, not listed here
    /// (absent for a recursive listing, and for the root group, which spans every
    /// organisation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_subgroups: Option<u64>,
    /// With `recursive`: true when the groups below held more than
    /// [`ENVIRONMENTS_UNDER_MAX`] environments, and only the first of them by path are listed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// At most this many environments are listed by a recursive environment list; a longer one
/// says it was cut (`truncated`).
pub const ENVIRONMENTS_UNDER_MAX: usize = 10_000;

/// How an environment's runner was resolved: the winning rule, why it won, and counts of
/// the other rules by reason. With `?explain=full`, also each rule's fate, a page of
/// at most [`EXPLANATION_PAGE`] rules at a time.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ResolutionAnswer {
    /// The rule that won.
    pub rule: RunnerRule,
    /// Why it won, in words: its scope's depth, how many criteria it sets, its priority.
    pub why: String,
    /// Every other rule, counted by why it did not win.
    pub counts: Tally,
    /// With `?explain=full`: each rule's fate, in precedence order for those that matched,
    /// then the rest, from `explain_offset`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explanation: Option<Vec<Considered>>,
    /// The `explain_offset` of the next page of the explanation, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explanation_next: Option<usize>,
}

/// The most rules one page of a full explanation carries.
pub const EXPLANATION_PAGE: usize = 1000;

/// A created environment, with the rule resolution that linked its runner.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EnvironmentCreated {
    /// The environment.
    #[serde(flatten)]
    pub environment: EnvironmentView,
    /// Which rule won and why; the other rules counted, or explained with `?explain=full`.
    pub resolution: ResolutionAnswer,
}

/// The body of `POST .../environments`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EnvironmentCreate {
    /// The environment's name within the group in the URL.
    #[schema(pattern = "^[a-z0-9][a-z0-9-]{0,62}$")]
    pub name: String,
    /// Its type, such as `production`; rules may match on it.
    pub env_type: String,
    /// Labels; rules may match on them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// Tags; a rule's tags must be a subset of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeSet<String>>,
    /// `auto` (default) or `required`: whether an apply or destroy awaits approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<Approval>,
    /// How long a job may await approval, in seconds (300 to 2592000; default 86400).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 300, maximum = 2592000)]
    pub approval_timeout_seconds: Option<u32>,
    /// When true, the approver must not be the job's requester.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub four_eyes: Option<bool>,
    /// A 5-field cron expression in UTC for drift checks, at least 15 minutes apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_schedule: Option<String>,
    /// `off` (default) or `apply`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_remediation: Option<DriftRemediation>,
    /// `terraform` or `opentofu`; wins over the runner's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<ToolName>,
    /// An exact tool version (`1.0.3`) or a constraint (`~> 1.0`); wins over the runner's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_version: Option<String>,
    /// Upstream environment paths (same organisation): an apply of one whose outputs
    /// changed submits a job here. A cycle is refused, named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub triggers: Option<Vec<String>>,
    /// What a trigger submits: `plan` (default) or `apply`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger_operation: Option<sortie_core::triggers::TriggerOperation>,
    /// Upstream output names given to triggered jobs as `TF_VAR_<name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger_inputs: Option<Vec<String>>,
    /// A fixed end (RFC 3339): then `sortie:expiry` destroys it. Within the maximum TTL
    /// set on its groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
    /// A lifetime such as `72h` (`s`, `m`, `h`, `d`), at least 1 hour and at most the
    /// maximum TTL set on its groups; ignored while `expires_at` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<String>,
    /// Where `ttl` counts from: `created` (default) or `last_apply`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_from: Option<sortie_core::expiry::TtlFrom>,
    /// Its binding to a repository directory: pull requests that touch it are planned
    /// there (`null` in a patch removes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vcs: Option<sortie_core::vcs::VcsBinding>,
}

/// The body of `PATCH /v1/environments/{environment}`: any subset of the fields.
/// The runner link never changes here (see refresh-runner).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EnvironmentPatch {
    /// A new type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_type: Option<String>,
    /// New labels (replacing the old ones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// New tags (replacing the old ones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeSet<String>>,
    /// `null` clears a setting. `auto` (default) or `required`: whether an apply or destroy awaits approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<Approval>,
    /// How long a job may await approval, in seconds (300 to 2592000; default 86400).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 300, maximum = 2592000)]
    pub approval_timeout_seconds: Option<u32>,
    /// When true, the approver must not be the job's requester.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub four_eyes: Option<bool>,
    /// A 5-field cron expression in UTC for drift checks, at least 15 minutes apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_schedule: Option<String>,
    /// `off` (default) or `apply`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_remediation: Option<DriftRemediation>,
    /// `terraform` or `opentofu`; wins over the runner's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<ToolName>,
    /// An exact tool version (`1.0.3`) or a constraint (`~> 1.0`); wins over the runner's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_version: Option<String>,
    /// Upstream environment paths (same organisation): an apply of one whose outputs
    /// changed submits a job here. A cycle is refused, named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub triggers: Option<Vec<String>>,
    /// What a trigger submits: `plan` (default) or `apply`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger_operation: Option<sortie_core::triggers::TriggerOperation>,
    /// Upstream output names given to triggered jobs as `TF_VAR_<name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger_inputs: Option<Vec<String>>,
    /// A fixed end (RFC 3339): then `sortie:expiry` destroys it. Within the maximum TTL
    /// set on its groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
    /// A lifetime such as `72h` (`s`, `m`, `h`, `d`), at least 1 hour and at most the
    /// maximum TTL set on its groups; ignored while `expires_at` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<String>,
    /// Where `ttl` counts from: `created` (default) or `last_apply`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_from: Option<sortie_core::expiry::TtlFrom>,
    /// Its binding to a repository directory: pull requests that touch it are planned
    /// there (`null` in a patch removes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vcs: Option<sortie_core::vcs::VcsBinding>,
}

/// The answer of `runner check`: every check, in order. Nothing was launched or written.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RunnerCheckReport {
    /// The runner checked.
    pub runner_id: String,
    /// The organisation the checks were made for (the `sortie:org` session tag).
    pub org: String,
    /// True when every check passed.
    pub passed: bool,
    /// The checks, in the order they were made.
    pub checks: Vec<RunnerCheck>,
}

/// The answer of refresh-runner: the runner picked now, and the explanation.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RefreshRunnerAnswer {
    /// True when nothing was changed.
    pub dry_run: bool,
    /// The runner linked before.
    pub previous_runner_id: String,
    /// The runner the rules pick now.
    pub runner_id: String,
    /// True when the rules pick another runner than the linked one.
    pub changed: bool,
    /// Which rule won and why; the other rules counted, or explained with `?explain=full`.
    pub resolution: ResolutionAnswer,
    /// The relinked environment (absent on a dry run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<EnvironmentView>,
}

/// The memberships granted on one group.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MembershipList {
    /// The memberships.
    pub memberships: Vec<MembershipRecord>,
}

/// The body of `POST .../memberships`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MembershipGrant {
    /// The role to grant.
    pub role: Role,
    /// Who gets it.
    pub grantee: Grantee,
}

/// The answer of `GET /v1/health`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Health {
    /// Always `ok`.
    pub status: String,
}

/// The answer of `GET /v1/whoami`: who the caller is and the roles it holds.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Whoami {
    /// The subject (`sub`) the API authenticated.
    pub subject: String,
    /// The token's issuer (`iss`).
    pub issuer: String,
    /// The organisation whose memberships were read besides the root group's (`?org=`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub org: Option<String>,
    /// The memberships that apply to the caller, on the root group and in `org`.
    pub memberships: Vec<CallerMembership>,
    /// The organisations in which the caller's subject is granted a role (for any issuer or
    /// for this one), sorted, at most 1,000: what to open after sign-in. Roles that come
    /// through a claim pattern (`grantee.claim`, such as a group claim) are not listed, since
    /// a pattern names no subject to look up; nor are root-group roles (see `memberships`),
    /// with which a system administrator may open any organisation. Grants made before this
    /// field existed are listed once re-granted.
    #[serde(default)]
    pub organisations: Vec<String>,
}

/// One role the caller holds, as `GET /v1/whoami` lists it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CallerMembership {
    /// The group the role is granted on (and inherited below); empty for the root group.
    pub group: String,
    /// The role.
    pub role: Role,
}

/// The answer of `GET /v1/openapi.json`: an OpenAPI 3.1 document.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct OpenApiDocument {
    /// The OpenAPI version.
    pub openapi: String,
    /// Title, version and description (free-form OpenAPI object).
    #[schema(value_type = Object)]
    pub info: Value,
    /// The operations by path template (free-form OpenAPI objects).
    #[schema(value_type = BTreeMap<String, Object>)]
    pub paths: BTreeMap<String, Value>,
    /// Schemas and security schemes (free-form OpenAPI object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub components: Option<Value>,
}

/// The body of `POST /v1/jobs/{id}/approve` and `/discard` (optional).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DecisionBody {
    /// Why, in the decider's words (at most 1024 bytes), recorded on the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// One output of an apply: its value, or only `sensitive: true` (the value is never stored).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct OutputValue {
    /// True for an output marked sensitive: no value.
    #[serde(default)]
    pub sensitive: bool,
    /// The value (any JSON), absent when sensitive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<serde_json::Value>,
    /// Terraform's type of the value, when it printed one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r#type: Option<serde_json::Value>,
}

/// The outputs of a successful apply.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct OutputsView {
    /// The apply job they come from.
    pub job_id: String,
    /// The environment.
    pub environment: String,
    /// Each output by name.
    pub outputs: BTreeMap<String, OutputValue>,
}

/// The policy sets of one group.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PolicySetList {
    /// The sets, by name, each with its version.
    pub policy_sets: Vec<PolicySetEntry>,
}

/// One listed set and its version (its ETag).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PolicySetEntry {
    /// The set's version, as its ETag carries it.
    pub version: u64,
    /// The set.
    pub set: sortie_core::policy::PolicySet,
}
