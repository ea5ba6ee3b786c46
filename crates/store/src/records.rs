//! The records the store reads and writes: the domain values with the attributes
//! only the store keeps (versions, the environment lock, job extras), and the
//! answers of its operations. Re-exported at the crate root.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sortie_core::agent_pool::{AgentHold, AgentPool, AgentStop};
use sortie_core::drift::{DriftSkipped, DriftStatus};
use sortie_core::{
    ChangeSummary, EnvPath, Environment, Job, JobId, JobState, Membership, Review, TaskRef,
    ToolUsed,
};

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
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EnvironmentRecord {
    /// The environment.
    #[serde(flatten)]
    pub environment: Environment,
    /// The job that holds the environment's lock, if any (absent, never NULL, so conditions can test it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub active_job: Option<JobId>,
    /// How many jobs wait for the lock.
    pub queued_count: u64,
    /// The last queue position handed out; the FIFO order of waiting jobs.
    #[serde(default)]
    pub queue_seq: u64,
    /// The latest drift check's result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<DriftStatus>,
    /// The latest drift check the schedule fired but that did not run, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_skipped: Option<DriftSkipped>,
    /// The latest successful apply: its outputs are the environment's outputs, and its
    /// request is what a drift check plans.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_apply: Option<LastApply>,
    /// When the drift schedule fires next (kept by the store from `drift_schedule`; the
    /// sweeper's `due_drift_checks` reads it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_drift_at: Option<DateTime<Utc>>,
    /// Who locked the environment, when and why: new jobs are refused while it is set
    /// (written only by `lock_environment` / `unlock_environment`; never bumps the version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<sortie_core::lock::EnvLock>,
    /// Set when its expiry's destroy succeeded: it refuses new jobs until extended
    /// (written only by `mark_destroyed`; never bumps the version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destroyed: Option<sortie_core::expiry::Destroyed>,
    /// When the environment was created (set once by `create_environment`; never by an
    /// update or a relink). Absent on records written before it existed: their creation is
    /// their runner link's time ([`EnvironmentRecord::created`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<DateTime<Utc>>,
}

impl EnvironmentRecord {
    /// When the environment was created: `created_at`, else (a record from before it was
    /// stored) its runner link's time.
    pub fn created(&self) -> DateTime<Utc> {
        self.created_at.unwrap_or(self.environment.runner.linked_at)
    }
}

/// An environment's latest successful apply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LastApply {
    /// The apply job.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub job_id: JobId,
    /// When it succeeded.
    pub at: DateTime<Utc>,
}

/// The first phase of a reviewed job, kept when it ends (the job's own task fields then
/// describe the apply phase).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PhaseRecord {
    /// The plan phase's task.
    #[serde(rename = "task_arn", default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub task: Option<TaskRef>,
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

/// How long an idempotency key binds, in seconds (24 hours). After that the key is
/// treated as absent on use, whether or not DynamoDB's TTL has deleted its item yet.
pub(crate) const IDEMPOTENCY_KEY_SECONDS: i64 = 24 * 60 * 60;

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
    /// The jobs, as stored (with their change summary, attempt and offer).
    pub jobs: Vec<JobRecord>,
    /// The ids of jobs on this page whose stored item could not be read: skipped (and
    /// logged), so one bad item never hides an environment's other jobs.
    pub unreadable: Vec<String>,
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
    /// The launched task's reference, once launched.
    pub task: Option<TaskRef>,
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
    /// Starts a new launch attempt: the attempt number goes up by one (the claim).
    pub next_attempt: bool,
    /// Counts one more Spot requeue.
    pub spot_requeue: bool,
    /// Forgets the task of the last attempt (its reference, start and timeout stop): a requeue.
    pub clear_task: bool,
    /// What the runner could not upload (replaces the list recorded before).
    pub upload_problems: Option<Vec<String>>,
    /// The review (phase and decision) to record.
    pub review: Option<Review>,
    /// The plan phase, kept when a reviewed job starts awaiting approval.
    pub plan_phase: Option<PhaseRecord>,
    /// The tool and version the runner reported.
    pub tool_used: Option<ToolUsed>,
    /// The state (serial and lineage) the runner reported the job ended with.
    pub state_written: Option<sortie_core::state_version::StateStamp>,
    /// For a move to `awaiting_approval`: when the approval times out (the sweeper's
    /// `approvals_due` list is ordered by it).
    pub approval_deadline: Option<DateTime<Utc>>,
    /// Forgets the change summary of the last phase (the approved apply starts afresh).
    pub clear_summary: bool,
    /// Where the apply phase's log starts (the plan phase's log ends there).
    pub apply_log_offset: Option<u64>,
    /// Offers a `dispatching` job to this agent pool: it joins the pool's list of jobs
    /// waiting for an agent ([`crate::JobStore::offered_jobs`]).
    pub offer_to: Option<String>,
    /// For the move `dispatching → running`: the claim of an offered job by an agent of this
    /// pool. The write also requires the job to be offered to this pool and not canceled, so
    /// two agents never claim one job, and a canceled job is never claimed.
    pub claim_from: Option<String>,
    /// The claiming agent (with the claim's first heartbeat).
    pub agent: Option<AgentHold>,
    /// A stop ordered for a claimed job, kept if one was ordered before (the first wins).
    pub agent_stop: Option<AgentStop>,
    /// For a move to `queued` after a refused launch: when its next launch is due. The
    /// sweeper's re-send of a lost send counts from then, not from the move, so a job
    /// waiting out its backoff is not sent early.
    pub retry_at: Option<DateTime<Utc>>,
    /// The result of checking the job's plan against its policy sets (the policy gate).
    pub policy: Option<sortie_core::policy::PolicyResult>,
    /// Counts one more try to end the job ([`JobRecord::end_tries`]; its first sets when
    /// they started being counted).
    pub end_try: bool,
    /// The last error of a try to end the job, as it will be quoted.
    pub end_error: Option<String>,
}

/// A job as stored, with the attributes that are not part of the domain job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    /// The job.
    #[serde(flatten)]
    pub job: Job,
    /// The launched task's platform-neutral reference (an ECS task ARN, a Kubernetes Job),
    /// once launched. Stored and served as `task_arn`, its historical name.
    #[serde(rename = "task_arn", default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskRef>,
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
    /// The launch attempt: 1 for the first claim, one more for each relaunch. RunTask's
    /// `clientToken` is `<job id>-<attempt>`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub attempt: u32,
    /// How many times a Spot interruption requeued the job.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub spot_requeues: u32,
    /// What the runner reported it could not upload (log chunks, the plan, the summary,
    /// the outputs); empty when everything arrived.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub upload_problems: Vec<String>,
    /// A reviewed job's plan phase, once it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_phase: Option<PhaseRecord>,
    /// The tool and exact version the runner reported it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_used: Option<ToolUsed>,
    /// The state (serial and lineage) the runner reported the job ended with, after an
    /// apply, a destroy or a restore: what matches a state version to its writer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_written: Option<sortie_core::state_version::StateStamp>,
    /// A reviewed job's apply phase: the byte offset in the job's one log where its lines
    /// start (the plan phase's lines are before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apply_log_offset: Option<u64>,
    /// The agent pool a `dispatching` job is offered to, while it waits for an agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered_to: Option<String>,
    /// The agent that claimed the job, its heartbeat and any stop ordered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentHold>,
    /// The result of checking the job's plan against its policy sets, once checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<sortie_core::policy::PolicyResult>,
    /// Tries to end the job that failed or never reported back
    /// ([`sortie_core::end_retry`]): bounded, then the job fails.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub end_tries: u32,
    /// When the first counted try to end the job was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_tries_since: Option<DateTime<Utc>>,
    /// The last error of a try to end the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_error: Option<String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl JobRecord {
    /// The record of a job just submitted: nothing launched yet.
    pub fn new(job: &Job) -> Self {
        Self {
            job: job.clone(),
            task: None,
            token_hash: None,
            started_at: None,
            cancel_requested_by: None,
            timeout_requested_at: None,
            summary: None,
            updated_at: job.transitions[0].at,
            attempt: 0,
            spot_requeues: 0,
            upload_problems: Vec::new(),
            plan_phase: None,
            tool_used: None,
            state_written: None,
            apply_log_offset: None,
            offered_to: None,
            agent: None,
            policy: None,
            end_tries: 0,
            end_tries_since: None,
            end_error: None,
        }
    }

    /// The tries to end this job recorded on it ([`sortie_core::end_retry`]).
    pub fn end_tries(&self) -> sortie_core::end_retry::EndTries {
        sortie_core::end_retry::EndTries {
            tries: self.end_tries,
            since: self.end_tries_since,
            error: self.end_error.clone(),
        }
    }

    /// True when this record, found by a transition to `to` that recorded the fresh token
    /// hash `token_hash` and failed its condition, shows that very transition already
    /// written: the state is `to` and the token hash is the one the write carried (a new
    /// random token each claim, so no other write holds it). That is the case of a write
    /// DynamoDB committed whose answer was lost, retried by the SDK against its own result.
    pub fn shows_own_write(&self, to: JobState, token_hash: Option<&str>) -> bool {
        token_hash.is_some() && self.job.state == to && self.token_hash.as_deref() == token_hash
    }
}

/// A pool token as stored: its id and the SHA-256 of the token (never the token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolToken {
    /// The token's id (shown in lists; the token itself is shown once, at creation).
    pub id: String,
    /// SHA-256 of the token, lower-case hex.
    pub hash: String,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// Who created it.
    pub created_by: String,
}

impl PoolToken {
    /// A new token for pool `pool`, made by `by`: the token (`sortie-pool-<pool>.<token
    /// id>.<secret>`, shown once) and its stored form (only its hash).
    pub fn mint(pool: &str, by: &str) -> (String, Self) {
        let id = format!("tok-{}", sortie_core::tokens::random_hex(5));
        let token = format!(
            "{}{pool}.{id}.{}",
            sortie_core::agent_pool::POOL_TOKEN_PREFIX,
            sortie_core::tokens::random_hex(32)
        );
        let stored = Self {
            id,
            hash: sortie_core::tokens::sha256_hex(token.as_bytes()),
            created_at: Utc::now(),
            created_by: by.to_string(),
        };
        (token, stored)
    }
}

/// An agent pool with its token hashes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentPoolRecord {
    /// The pool.
    #[serde(flatten)]
    pub pool: AgentPool,
    /// Its tokens' hashes: any of them authenticates an agent. Rotation is adding a token,
    /// moving the agents to it, and revoking the old one.
    #[serde(default)]
    pub tokens: Vec<PoolToken>,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// Who created it.
    pub created_by: String,
    /// When an agent of the pool last asked for work (a claim), written at most every
    /// [`sortie_core::waiting::CLAIM_RECORD_INTERVAL_SECONDS`] by
    /// [`crate::AgentPoolStore::record_pool_claim`]; absent until one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_claim_at: Option<DateTime<Utc>>,
}

impl AgentPoolRecord {
    /// True when `token` is one of the pool's tokens.
    pub fn accepts(&self, token: &str) -> bool {
        self.tokens
            .iter()
            .any(|t| sortie_core::tokens::token_matches(&t.hash, token))
    }
}

/// A stored job item that could not be decoded: what is known of it from its raw attributes.
#[derive(Debug, Clone, PartialEq)]
pub struct Unreadable {
    /// The item's key, `pk/sk`.
    pub key: String,
    /// The job's id, from its key.
    pub job_id: JobId,
    /// Its environment, when that attribute is still readable.
    pub environment: Option<EnvPath>,
    /// Why it could not be decoded.
    pub message: String,
}

/// A list read for the sweeper: the records that decoded, and the items that did not. One bad
/// item never hides the others. Dereferences to the readable records.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed<T> {
    /// The records that decoded.
    pub records: Vec<T>,
    /// The items that did not.
    pub unreadable: Vec<Unreadable>,
}

/// Where the sweep of the active jobs resumes, as stored: its cursor (`None`: from the
/// oldest) and the version its conditional write expects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepCursor {
    /// The cursor of the page the next pass starts with.
    pub cursor: Option<String>,
    /// Bumped by every write; 0 when never written.
    pub version: u64,
}

/// One page of a sweeper list: the records and unreadable items of the page, and an opaque
/// cursor for the next page (`None` at the end of the list).
#[derive(Debug, Clone)]
pub struct ListedPage<T> {
    /// The page's records, and the items that did not decode.
    pub listed: Listed<T>,
    /// Where the next page starts, if there is one.
    pub next: Option<String>,
}

impl<T> Default for Listed<T> {
    fn default() -> Self {
        Self {
            records: Vec::new(),
            unreadable: Vec::new(),
        }
    }
}

impl<T> std::ops::Deref for Listed<T> {
    type Target = Vec<T>;
    fn deref(&self) -> &Vec<T> {
        &self.records
    }
}

impl<T> IntoIterator for Listed<T> {
    type Item = T;
    type IntoIter = std::vec::IntoIter<T>;
    fn into_iter(self) -> Self::IntoIter {
        self.records.into_iter()
    }
}
