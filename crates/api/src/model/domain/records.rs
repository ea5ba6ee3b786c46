//! Rules and resolutions, environments, jobs and memberships.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::{RunnerSpec, StateStorageConfiguration};

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

/// Counts of the rules that did not win, by the precedence step that ranked them lower.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ByStep {
    /// The winner's scope is deeper.
    pub deeper_scope: u32,
    /// Same scope; the winner sets more criteria.
    pub more_criteria: u32,
    /// Same scope and criteria count; the winner has the higher priority.
    pub higher_priority: u32,
    /// Same scope, criteria count and priority; the winner's rule id sorts first.
    pub rule_id: u32,
}

/// Counts of the rules that did not match, by the first criterion that fails.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ByCriterion {
    /// `env_type` differs.
    pub env_type: u32,
    /// The `env_path` glob does not match.
    pub env_path: u32,
    /// A label is missing or has another value.
    pub labels: u32,
    /// A tag is missing.
    pub tags: u32,
}

/// How many rules did not win, and why; every rule is counted once.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Tally {
    /// 1 if a rule won.
    pub won: u32,
    /// Rules ranked below the winner (their own criteria are not checked).
    pub outranked: ByStep,
    /// Rules above the winner, or of another `env_type`, whose criteria fail.
    pub not_matched: ByCriterion,
    /// Rules whose runner is not visible at their scope.
    pub runner_not_visible: u32,
    /// Rules outside the environment's group and its ancestors.
    pub out_of_scope: u32,
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
    /// Its plan succeeded; it holds the environment's lock until approved or discarded.
    AwaitingApproval,
    /// Its plan was discarded (by a person or the approval timeout); nothing applied.
    Discarded,
}

/// One recorded transition: from, to, when and why.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Transition {
    /// The state before (null for the job's creation).
    pub from: Option<JobState>,
    /// The state after.
    pub to: JobState,
    /// When it happened (the first time, when folded).
    pub at: DateTime<Utc>,
    /// Why, in words.
    pub reason: String,
    /// How many times this same transition happened in a row, folded into this entry
    /// (absent: once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    /// When it last happened, when folded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_at: Option<DateTime<Utc>>,
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
    Inline {
        /// True when the client chose the files without being told which (the CLI's `run`
        /// with no `--source`): a destroy is then refused, and the runner refuses to apply a
        /// plan that destroys every resource and creates none.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        implicit: bool,
    },
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
    /// Sensitive Terraform variables. On submit: each value by name, kept in Secrets
    /// Manager for the job's life and given to terraform as `TF_VAR_<name>`; never
    /// stored in the job, logged or returned. In a job: each name with `(sensitive)`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schema(value_type = BTreeMap<String, String>, format = Password, write_only)]
    pub sensitive_variables: BTreeMap<String, String>,
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
    /// Every transition so far: repeats in a row folded (`count`), and a long history kept
    /// as its first and last entries.
    pub transitions: Vec<Transition>,
    /// How many transitions of a long history were not kept (between its first and last).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transitions_dropped: Option<u32>,
    /// The runner's specification as it was at submit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_spec: Option<RunnerSpec>,
    /// For an apply or destroy on an environment with `approval: required`: the policy
    /// taken at submit, the phase, and the decision once made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<Review>,
    /// True for a scheduled drift check (requested by `sortie:drift`).
    #[serde(default)]
    pub drift_check: bool,
    /// The tool asked for at submit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<ToolName>,
    /// The tool version asked for at submit (exact or a constraint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_version: Option<String>,
}

/// A reviewed job's approval policy, phase and decision.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Review {
    /// When true, the approver must not be the requester.
    #[serde(default)]
    pub four_eyes: bool,
    /// How long the job may await approval, in seconds.
    pub timeout_seconds: u32,
    /// `plan` until approved, then `apply`.
    pub phase: JobPhase,
    /// When it started awaiting approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub awaiting_since: Option<DateTime<Utc>>,
    /// The decision, once made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
}

/// Approved or discarded.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReviewVerdict {
    /// The saved plan is applied.
    Approved,
    /// The saved plan is thrown away.
    Discarded,
}

/// A decision on a reviewed job.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Decision {
    /// Approved or discarded.
    pub verdict: ReviewVerdict,
    /// Who decided (`sortie:approval-timeout` for the timeout).
    pub by: String,
    /// When.
    pub at: DateTime<Utc>,
    /// The decider's comment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// A reviewed job's plan phase, kept when it ended.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PhaseRecord {
    /// The plan phase's task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_arn: Option<String>,
    /// Its launch attempt.
    #[serde(default)]
    pub attempt: u32,
    /// When its task was seen running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<Utc>>,
    /// When it ended.
    pub ended_at: DateTime<Utc>,
    /// The plan's change summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<ChangeSummary>,
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
    /// A drift check's `-detailed-exitcode` verdict: true when the plan has changes
    /// (resources or outputs). Absent for every other job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_changes: Option<bool>,
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
    /// The names of the job's sensitive variables; their values are fetched from
    /// `GET /v1/jobs/{id}/sensitive-variables`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sensitive_variables: Vec<String>,
    /// Where the state lives.
    pub state_storage: StateStorageConfiguration,
    /// The state object's key, for `s3` state storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_key: Option<String>,
    /// True when the runner must report its exit (`POST /v1/jobs/{id}/events`) before it
    /// ends (`eks` runners).
    #[serde(default)]
    pub report_exit: bool,
    /// The phase of a reviewed apply or destroy this task runs; absent when one task does
    /// the whole operation (plan to a file, then apply that file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<JobPhase>,
    /// For the `apply` phase: a presigned GET URL of the saved plan to apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved_plan_url: Option<String>,
    /// A drift check: plan with `-detailed-exitcode`.
    #[serde(default)]
    pub detailed_exitcode: bool,
    /// The tool asked for; any when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<ToolName>,
    /// The version asked for: exact (`1.0.3`) or a constraint (`~> 1.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Where this task's log starts: a second phase continues the first phase's log.
    #[serde(default)]
    pub log_offset: u64,
}

/// The phase of a reviewed (`approval: required`) apply or destroy.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum JobPhase {
    /// The plan, saved to `plan.tfplan`; the job then awaits approval.
    Plan,
    /// The apply of that saved plan, after approval.
    Apply,
}

/// Terraform or OpenTofu.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ToolName {
    /// HashiCorp Terraform.
    Terraform,
    /// OpenTofu.
    Opentofu,
}

/// The tool and exact version a job ran with, as its runner reported.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolUsed {
    /// `terraform` or `opentofu`.
    pub tool: ToolName,
    /// The exact version, `major.minor.patch`.
    pub version: String,
}

/// The runner's final callback: how it is about to exit.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunnerExit {
    /// The runner's exit code: 0 for success.
    pub exit_code: i32,
    /// Why it failed, one line of at most 1024 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
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
    /// `auto` (default: an apply applies the plan it just made) or `required` (it awaits
    /// approval between its plan and its apply).
    #[serde(default)]
    pub approval: Option<Approval>,
    /// How long a job may await approval before it is discarded, in seconds (default 86400).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_timeout_seconds: Option<u32>,
    /// When true, the approver must not be the job's requester.
    #[serde(default)]
    pub four_eyes: bool,
    /// A 5-field cron expression in UTC for drift checks, at least 15 minutes apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_schedule: Option<String>,
    /// `off` (default) or `apply`: what a detected drift does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_remediation: Option<DriftRemediation>,
    /// The tool its jobs run; wins over the runner's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<ToolName>,
    /// The tool version its jobs run (exact or a constraint); wins over the runner's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_version: Option<String>,
    /// The latest drift check's result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<DriftStatus>,
    /// The latest drift check the schedule fired but skipped, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_skipped: Option<DriftSkipped>,
    /// The latest successful apply (its outputs are the environment's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_apply: Option<LastApply>,
    /// When the drift schedule fires next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_drift_at: Option<DateTime<Utc>>,
}

/// Whether an apply or destroy awaits approval.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Approval {
    /// Plan and apply that plan at once.
    Auto,
    /// Plan, then await approval.
    Required,
}

/// What a detected drift does.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DriftRemediation {
    /// Report only.
    Off,
    /// Submit an apply (subject to the approval setting).
    Apply,
}

/// A drift check's verdict.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DriftVerdict {
    /// No changes.
    InSync,
    /// Changes: the infrastructure or the state moved.
    Drifted,
    /// The check failed, timed out or was canceled.
    Error,
}

/// The latest drift check of an environment.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DriftStatus {
    /// `in_sync`, `drifted` or `error`.
    pub status: DriftVerdict,
    /// When the check ended.
    pub checked_at: DateTime<Utc>,
    /// The check's plan job.
    pub job_id: String,
    /// The plan's counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<ChangeSummary>,
    /// Why the check failed, for `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The apply submitted to remediate the drift.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remediation_job_id: Option<String>,
}

/// A drift check that was skipped.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DriftSkipped {
    /// When.
    pub at: DateTime<Utc>,
    /// Why.
    pub reason: String,
}

/// An environment's latest successful apply.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LastApply {
    /// The apply job.
    pub job_id: String,
    /// When it succeeded.
    pub at: DateTime<Utc>,
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
