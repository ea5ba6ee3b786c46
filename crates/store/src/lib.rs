//! Sortie's repository: every concept in one DynamoDB table, behind the
//! [`Store`] trait, and the jobs queue behind [`JobQueue`].
//!
//! Every state change is a conditional write or a transaction. The keys and
//! the access pattern each serves are documented in `docs/ARCHITECTURE.md`.

mod artifacts;
mod dynamo;
mod error;
mod memory;
mod queue;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sortie_core::{
    EnvPath, Environment, GroupPath, Job, JobState, Membership, Runner, RunnerId, RunnerLink,
    RunnerRule,
};

pub use artifacts::{Artifacts, ObjectInfo, S3Artifacts};
pub use dynamo::DynamoStore;
pub use error::StoreError;
pub use memory::MemoryStore;
pub use queue::{JobMessage, JobQueue, SqsJobQueue};

/// A value with the version used for optimistic concurrency (the HTTP ETag).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Versioned<T> {
    /// The value.
    pub item: T,
    /// Starts at 1; every change adds 1.
    pub version: u64,
}

/// A stored membership with its id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MembershipRecord {
    /// The membership's id.
    pub id: String,
    /// The membership.
    #[serde(flatten)]
    pub membership: Membership,
    /// Who granted it.
    pub granted_by: String,
    /// When.
    pub granted_at: DateTime<Utc>,
}

/// An environment with its lock: the job holding it and how many wait.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvironmentRecord {
    /// The environment.
    #[serde(flatten)]
    pub environment: Environment,
    /// The job that holds the environment's lock, if any (absent, never NULL, so conditions can test it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_job: Option<String>,
    /// How many jobs wait for the lock.
    pub queued_count: u64,
    /// The last queue position handed out; the FIFO order of waiting jobs.
    #[serde(default)]
    pub queue_seq: u64,
}

/// What happened to a submitted job.
#[derive(Debug, Clone, PartialEq)]
pub struct Submitted {
    /// The job (the earlier one, when the idempotency key was seen before).
    pub job: Job,
    /// True when this submission took the environment's lock: the job must be sent to the queue.
    pub took_lock: bool,
    /// True when the idempotency key matched an earlier submission.
    pub replayed: bool,
}

/// An idempotency key and the hash of the request it was first used with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey {
    /// The client's key.
    pub key: String,
    /// SHA-256 of the request body, so a reused key with another body is refused.
    pub request_hash: String,
}

/// One page of jobs, newest first.
#[derive(Debug, Clone, PartialEq)]
pub struct JobPage {
    /// The jobs.
    pub jobs: Vec<Job>,
    /// An opaque cursor for the next page, if there is one.
    pub next: Option<String>,
}

/// What a release did with the environment's lock.
#[derive(Debug, Clone, PartialEq)]
pub enum Released {
    /// The lock was handed to the next queued job, which must now be sent.
    HandedTo(Box<Job>),
    /// No job waited: the environment is idle.
    Idle,
    /// The lock was not held by that job (already released, or never taken).
    NotHeld,
}

/// Extra attributes a job transition records with the state.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobUpdate {
    /// The task ARN or Kubernetes Job name, once launched.
    pub task_arn: Option<String>,
    /// SHA-256 of the job's callback token.
    pub token_hash: Option<String>,
    /// When the task was seen running.
    pub started_at: Option<DateTime<Utc>>,
    /// Who asked for a cancel.
    pub cancel_requested_by: Option<String>,
    /// When Sortie stopped the task for exceeding its timeout.
    pub timeout_requested_at: Option<DateTime<Utc>>,
    /// The change summary the runner reported.
    pub summary: Option<sortie_core::ChangeSummary>,
}

/// A job as stored, with the attributes that are not part of the domain job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    /// The job.
    #[serde(flatten)]
    pub job: Job,
    /// The task ARN or Kubernetes Job name, once launched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_arn: Option<String>,
    /// SHA-256 of the job's callback token (never the token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_hash: Option<String>,
    /// When the task was seen running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<Utc>>,
    /// Who asked for a cancel, while the stop is under way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel_requested_by: Option<String>,
    /// When Sortie stopped the task for exceeding its timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_requested_at: Option<DateTime<Utc>>,
    /// The change summary the runner reported (added, changed, destroyed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<sortie_core::ChangeSummary>,
    /// The last change.
    pub updated_at: DateTime<Utc>,
}

/// The repository for runners, rules, environments, jobs and memberships.
#[async_trait]
pub trait Store: Send + Sync {
    /// Creates a runner; `AlreadyExists` if its id is taken.
    async fn create_runner(&self, runner: &Runner) -> Result<Versioned<Runner>, StoreError>;
    /// Reads a runner.
    async fn get_runner(&self, id: &RunnerId) -> Result<Versioned<Runner>, StoreError>;
    /// Lists the runners owned by exactly this group.
    async fn list_runners(&self, group: &GroupPath) -> Result<Vec<Versioned<Runner>>, StoreError>;
    /// Replaces a runner's specification, checking the version when given.
    async fn update_runner(
        &self,
        runner: &Runner,
        expected: Option<u64>,
    ) -> Result<Versioned<Runner>, StoreError>;
    /// Deletes a runner; `InUse` listing the linked environments while any is linked.
    async fn delete_runner(&self, id: &RunnerId, expected: Option<u64>) -> Result<(), StoreError>;

    /// Creates a rule; `AlreadyExists` if its id is taken in its scope.
    async fn create_rule(&self, rule: &RunnerRule) -> Result<Versioned<RunnerRule>, StoreError>;
    /// Lists the rules of exactly this scope, with the scope's rule-set version.
    async fn list_rules(&self, scope: &GroupPath)
        -> Result<Versioned<Vec<RunnerRule>>, StoreError>;
    /// Every rule at this group and all its ancestors, in one read.
    async fn rules_for(&self, group: &GroupPath) -> Result<Vec<RunnerRule>, StoreError>;
    /// Deletes a rule, checking the scope's rule-set version when given.
    async fn delete_rule(
        &self,
        scope: &GroupPath,
        id: &str,
        expected: Option<u64>,
    ) -> Result<(), StoreError>;
    /// Replaces the rule with `rule`'s scope and id, checking the scope's rule-set version
    /// when given (like [`Store::delete_rule`]); `NotFound` if there is no such rule.
    async fn update_rule(
        &self,
        rule: &RunnerRule,
        expected: Option<u64>,
    ) -> Result<Versioned<RunnerRule>, StoreError>;

    /// Creates an environment linked to its runner (which must exist).
    async fn create_environment(
        &self,
        env: &Environment,
    ) -> Result<Versioned<EnvironmentRecord>, StoreError>;
    /// Reads an environment.
    async fn get_environment(
        &self,
        path: &EnvPath,
    ) -> Result<Versioned<EnvironmentRecord>, StoreError>;
    /// Lists the environments of exactly this group.
    async fn list_environments(
        &self,
        group: &GroupPath,
    ) -> Result<Vec<Versioned<EnvironmentRecord>>, StoreError>;
    /// Changes labels, tags and env_type (never the link), checking the version when given.
    async fn update_environment(
        &self,
        env: &Environment,
        expected: Option<u64>,
    ) -> Result<Versioned<EnvironmentRecord>, StoreError>;
    /// Relinks an environment to another runner, checking the version when given.
    async fn relink_environment(
        &self,
        path: &EnvPath,
        link: &RunnerLink,
        expected: Option<u64>,
    ) -> Result<Versioned<EnvironmentRecord>, StoreError>;
    /// Deletes an environment; `InUse` while a job holds or waits for its lock.
    async fn delete_environment(
        &self,
        path: &EnvPath,
        expected: Option<u64>,
    ) -> Result<(), StoreError>;

    /// Writes a new `queued` job. In the same transaction it takes the environment's
    /// lock when free, or joins the environment's FIFO queue.
    async fn submit_job(
        &self,
        job: &Job,
        idempotency: Option<&IdempotencyKey>,
    ) -> Result<Submitted, StoreError>;
    /// Reads a job.
    async fn get_job(&self, id: &str) -> Result<JobRecord, StoreError>;
    /// Lists an environment's jobs, newest first.
    async fn list_jobs(
        &self,
        env: &EnvPath,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<JobPage, StoreError>;
    /// Moves a job from `from` to `to` with a conditional write, recording time, reason and extras.
    async fn transition_job(
        &self,
        id: &str,
        from: JobState,
        to: JobState,
        at: DateTime<Utc>,
        reason: &str,
        update: JobUpdate,
    ) -> Result<JobRecord, StoreError>;
    /// Cancels a job that waits in its environment's queue (not holding the lock).
    async fn cancel_waiting_job(
        &self,
        id: &str,
        at: DateTime<Utc>,
        reason: &str,
    ) -> Result<JobRecord, StoreError>;
    /// Releases the environment's lock held by `job_id`, handing it to the next queued job.
    async fn release_environment(
        &self,
        env: &EnvPath,
        job_id: &str,
    ) -> Result<Released, StoreError>;
    /// Records attributes of a launched (`dispatching` or `running`) job without changing its
    /// state, such as a cancel or timeout request; `StateConflict` if the job is not launched.
    async fn mark_job(
        &self,
        id: &str,
        at: DateTime<Utc>,
        update: JobUpdate,
    ) -> Result<JobRecord, StoreError>;
    /// Launched jobs (`dispatching` or `running`), longest in that state first, at most `limit`.
    async fn active_jobs(&self, limit: u32) -> Result<Vec<JobRecord>, StoreError>;
    /// Jobs that hold their environment's lock but are still `queued`, created before `before`:
    /// their send may have been lost.
    async fn pending_sends(
        &self,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<Job>, StoreError>;

    /// Grants a membership.
    async fn put_membership(&self, record: &MembershipRecord) -> Result<(), StoreError>;
    /// Revokes a membership by id on a group.
    async fn delete_membership(&self, group: &GroupPath, id: &str) -> Result<(), StoreError>;
    /// Lists the memberships granted on exactly this group.
    async fn list_memberships(
        &self,
        group: &GroupPath,
    ) -> Result<Vec<MembershipRecord>, StoreError>;
    /// Every membership that could apply inside `org`: the org's and the root's.
    async fn memberships_for(&self, org: Option<&str>) -> Result<Vec<Membership>, StoreError>;
}

/// A new, time-ordered, lower-case id (a ULID) for jobs and memberships.
pub fn new_id() -> String {
    ulid::Ulid::new().to_string().to_lowercase()
}

/// SHA-256 of bytes, lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
