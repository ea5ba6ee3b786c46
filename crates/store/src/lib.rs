//! Sortie's repository: every concept in one DynamoDB table, behind one small
//! trait per aggregate, and the jobs queue behind [`JobQueue`].
//!
//! Each use case takes only the trait it needs: [`RunnerStore`], [`RuleStore`],
//! [`EnvironmentStore`], [`JobStore`] or [`MembershipStore`]. [`Store`] is all five
//! at once, for the wiring that holds one `Arc<dyn Store>`. Two implementations:
//! [`DynamoStore`] (the table) and [`MemoryStore`] (its in-memory twin), held to the
//! same contract by one test suite (`crates/store/tests/contract`).
//!
//! Every state change is a conditional write or a transaction. The keys and
//! the access pattern each serves are documented in
//! `docs/decisions/dynamodb-table.md`.

#![warn(missing_docs)]

mod artifacts;
pub mod audit;
mod cursor;
mod dynamo;
mod error;
mod expiry;
mod locks;
mod memory;
mod notifications;
pub mod on_behalf;
mod plan_data;
mod queue;
mod records;
mod sortkeys;
mod vcs;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sortie_core::drift::{DriftSkipped, DriftStatus};
use sortie_core::policy::PolicySet;
use sortie_core::{
    EnvPath, Environment, GroupPath, Job, JobId, JobState, Membership, Runner, RunnerId,
    RunnerLink, RunnerRule,
};

pub use artifacts::{
    directory_bucket_configuration, Artifacts, ObjectInfo, ObjectPage, PageFrom, PresignedPut,
    S3Artifacts, MAX_LIST_PAGE,
};
pub use audit::{
    AuditArchive, AuditPage, AuditRange, AuditRecord, AuditStore, Exported, MemoryAuditArchive,
    S3AuditArchive,
};
pub use dynamo::DynamoStore;
pub use error::StoreError;
pub use expiry::{ExpiryEntry, ExpiryPage, ExpiryStore, MAX_EXPIRY_PAGE};
pub use locks::{GroupSettings, LockOutcome, LockStore};
pub use memory::MemoryStore;
pub use notifications::{
    DeliveryRecord, DeliveryState, DestinationHealth, DestinationRecord, NotificationStore,
    HISTORY_LENGTH, KEPT_DETAIL_BYTES,
};
pub use plan_data::{read_plan_data, read_plan_data_within};
pub use queue::{
    DeliveryQueue, JobMessage, JobQueue, MemoryDeliveryQueue, MemoryPullQueue, PullQueue,
    SqsDeliveryQueue, SqsJobQueue, SqsPullQueue, DISPATCHED_HERE_ATTRIBUTE,
};
pub use records::{
    AgentPoolRecord, EnvironmentRecord, IdempotencyKey, JobPage, JobRecord, JobUpdate, LastApply,
    Listed, ListedPage, MembershipRecord, PhaseRecord, PoolToken, Released, Submitted, SweepCursor,
    Unreadable, Versioned,
};
pub use vcs::{VcsStore, DELIVERY_ID_MAX, MAX_BOUND_ENVIRONMENTS};

/// Runners: the compute and state storage a job runs with, owned by a group.
#[async_trait]
pub trait RunnerStore: Send + Sync {
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
}

/// Runner rules: stored one per item, versioned per scope (the rule-set version) and per
/// organisation.
#[async_trait]
pub trait RuleStore: Send + Sync {
    /// Creates a rule; `AlreadyExists` if its id is taken in its scope.
    async fn create_rule(&self, rule: &RunnerRule) -> Result<Versioned<RunnerRule>, StoreError>;
    /// Lists the rules of exactly this scope, with the scope's rule-set version.
    async fn list_rules(&self, scope: &GroupPath)
        -> Result<Versioned<Vec<RunnerRule>>, StoreError>;
    /// Every rule at this group and all its ancestors (one query per scope, run concurrently).
    async fn rules_for(&self, group: &GroupPath) -> Result<Vec<RunnerRule>, StoreError>;
    /// Replaces the rule with the same id in its scope, checking the scope's rule-set
    /// version when given; `NotFound` if there is no such rule. Returns the rule with the
    /// new rule-set version.
    async fn update_rule(
        &self,
        rule: &RunnerRule,
        expected: Option<u64>,
    ) -> Result<Versioned<RunnerRule>, StoreError>;
    /// Deletes a rule, checking the scope's rule-set version when given.
    async fn delete_rule(
        &self,
        scope: &GroupPath,
        id: &str,
        expected: Option<u64>,
    ) -> Result<(), StoreError>;
    /// A number that changes whenever a rule that can apply inside `org` changes: a rule of
    /// one of the org's scopes, or a root (shared) rule. `None` is the root alone. For caching
    /// compiled rule sets; it never goes down.
    async fn rules_version(&self, org: Option<&str>) -> Result<u64, StoreError>;
}

/// Policy sets: one item per set under its group, each with its own version.
#[async_trait]
pub trait PolicySetStore: Send + Sync {
    /// Creates a set in `group`; `AlreadyExists` if its name is taken there.
    async fn create_policy_set(
        &self,
        group: &GroupPath,
        set: &PolicySet,
    ) -> Result<Versioned<PolicySet>, StoreError>;
    /// Reads one set.
    async fn get_policy_set(
        &self,
        group: &GroupPath,
        name: &str,
    ) -> Result<Versioned<PolicySet>, StoreError>;
    /// The sets of exactly this group, by name.
    async fn list_policy_sets(
        &self,
        group: &GroupPath,
    ) -> Result<Vec<Versioned<PolicySet>>, StoreError>;
    /// Replaces the set of the same name, checking its version when given.
    async fn update_policy_set(
        &self,
        group: &GroupPath,
        set: &PolicySet,
        expected: Option<u64>,
    ) -> Result<Versioned<PolicySet>, StoreError>;
    /// Deletes a set, checking its version when given.
    async fn delete_policy_set(
        &self,
        group: &GroupPath,
        name: &str,
        expected: Option<u64>,
    ) -> Result<(), StoreError>;
    /// A number that changes whenever a policy set that can apply inside `org` is created,
    /// updated or deleted: a set of one of the org's groups, or of the root. `None` is the
    /// root alone. For caching listings; it never goes down.
    async fn policy_sets_version(&self, org: Option<&str>) -> Result<u64, StoreError>;
    /// Every set of `group` and of each of its ancestors (the root first), with the group
    /// that holds it: one listing per level, at most the depth of a group plus one, all
    /// at once (a plan's end waits for them: one round trip, not one per level).
    async fn policy_sets_for(
        &self,
        group: &GroupPath,
    ) -> Result<Vec<(GroupPath, Versioned<PolicySet>)>, StoreError> {
        let mut levels = group.self_and_ancestors();
        levels.reverse();
        let listed =
            futures_util::future::try_join_all(levels.iter().map(|g| self.list_policy_sets(g)))
                .await?;
        Ok(levels
            .into_iter()
            .zip(listed)
            .flat_map(|(g, sets)| sets.into_iter().map(move |set| (g.clone(), set)))
            .collect())
    }
}

/// The environments under a group, by path, as far as one bounded listing reads them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EnvironmentsUnder {
    /// The environments, by path: the first `limit` when the listing was cut.
    pub environments: Vec<Versioned<EnvironmentRecord>>,
    /// True when the group held more than the listing's limit (never a silent cut).
    pub truncated: bool,
}

/// The refusal of a listing under the root group, which spans every organisation.
pub(crate) fn root_listing_refused() -> StoreError {
    StoreError::Invalid {
        path: "group".into(),
        problem: "the root group spans every organisation; list one organisation's \
                  environments (such as `acme`) instead"
            .into(),
    }
}

/// The organisation and the path prefix (`<group>/`) of the environments under `group`:
/// its own and its descendants', never a sibling whose name starts alike (`acme/pay` is
/// not a prefix of `acme/payments/...`). The root group is refused.
pub(crate) fn environments_under(group: &GroupPath) -> Result<(&str, String), StoreError> {
    match group.org() {
        Some(org) => Ok((org, format!("{}/", group.as_str()))),
        None => Err(root_listing_refused()),
    }
}

/// Environments: their runner link and their lock (the active job and the FIFO queue).
#[async_trait]
pub trait EnvironmentStore: Send + Sync {
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
    /// Lists the environments of this group and of every group below it, by path, the first
    /// `limit` of them; [`EnvironmentsUnder::truncated`] says when there were more. DynamoDB
    /// answers it with a Query of the organisation's gsi4 partition (`ORG#<org>`, sort keys
    /// beginning `ENV#<group>/`), paged until `limit` + 1 are read: it reads only this
    /// organisation's environments below the group, never another tenant's. The root group
    /// spans every organisation and is refused (`Invalid`).
    async fn list_environments_under(
        &self,
        group: &GroupPath,
        limit: usize,
    ) -> Result<EnvironmentsUnder, StoreError>;
    /// Counts the environments of this group and of every group below it: the same gsi4
    /// Query as [`EnvironmentStore::list_environments_under`] with `Select: COUNT`, paged to
    /// the end. The root group is refused (`Invalid`).
    async fn count_environments_under(&self, group: &GroupPath) -> Result<u64, StoreError>;
    /// Changes labels, tags, env_type and the settings (never the link), checking the version
    /// when given. Create and update keep `next_drift_at` (and its gsi3 `DRIFT` entry) in step
    /// with `drift_schedule`: its next fire time after now, or absent without a schedule. An
    /// update that leaves `drift_schedule` as it was leaves `next_drift_at` too (an unrelated
    /// edit never skips a due check, nor races [`EnvironmentStore::advance_drift`]).
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
    /// Environments whose drift check is due (`next_drift_at` at or before `now`), earliest
    /// first (then by path), at most `limit`: one Query of the sparse gsi3 `DRIFT` partition, so it costs
    /// nothing while nothing is due. Unreadable items are logged and skipped.
    async fn due_drift_checks(
        &self,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<EnvironmentRecord>, StoreError>;
    /// Moves a fired drift schedule on: `next_drift_at = next` (removed, with its gsi3 entry,
    /// when `None`) on condition that it is still `fired`, recording `skipped` when given.
    /// `Ok(false)` when another sweep moved it first (then this one must not run the check);
    /// `NotFound` when the environment is gone. Never bumps the version.
    async fn advance_drift(
        &self,
        path: &EnvPath,
        fired: DateTime<Utc>,
        next: Option<DateTime<Utc>>,
        skipped: Option<&DriftSkipped>,
    ) -> Result<bool, StoreError>;
    /// Records a drift check's result on the environment (`drift`); `NotFound` when the
    /// environment is gone. Never bumps the version.
    async fn record_drift(&self, path: &EnvPath, status: &DriftStatus) -> Result<(), StoreError>;
    /// Records the environment's latest successful apply, unless a later one is recorded (then
    /// `Ok(())`, the later one kept); `NotFound` when the environment is gone. Never bumps the
    /// version.
    ///
    /// Later means a later [`LastApply::at`] (when the apply succeeded), not a greater job id:
    /// applies to one environment run one at a time under its lock, so their success times
    /// follow the order in which they wrote the state, while job ids follow submit order and
    /// two ids made in one millisecond are not ordered. An `at` equal to the recorded one
    /// keeps the recorded apply.
    async fn record_last_apply(&self, path: &EnvPath, last: &LastApply) -> Result<(), StoreError>;
    /// Forgets the environment's latest apply after a successful destroy at `at`, unless an
    /// apply later than `at` is recorded: a destroyed environment has no outputs, and its
    /// drift checks are skipped until the next apply. `NotFound` when the environment is
    /// gone. Never bumps the version.
    async fn forget_last_apply(&self, path: &EnvPath, at: DateTime<Utc>) -> Result<(), StoreError>;
}

/// Jobs: submission under the environment lock, conditional transitions, the sweeper's lists.
#[async_trait]
pub trait JobStore: Send + Sync {
    /// Writes a new `queued` job. In the same transaction it takes the environment's
    /// lock when free, or joins the environment's FIFO queue.
    async fn submit_job(
        &self,
        job: &Job,
        idempotency: Option<&IdempotencyKey>,
    ) -> Result<Submitted, StoreError>;
    /// Writes a new `queued` job only when its environment is idle, taking the lock in the
    /// same transaction; `None` (nothing written) when the environment is busy. For drift
    /// checks, which are skipped rather than queued. No idempotency key; `AlreadyExists` when
    /// the job id is taken, `NotFound` when the environment is missing.
    async fn submit_if_idle(&self, job: &Job) -> Result<Option<Submitted>, StoreError>;
    /// Writes a new `queued` speculative job (a pull request's plan) without touching the
    /// environment's lock or queue: it is a pending send at once, like a job that took the
    /// lock, and `took_lock` is false. The environment must exist (`NotFound`); a person's
    /// lock or a freeze does not stop it, as it writes no state. A key seen before answers
    /// the first submit's job (`replayed`), as for [`JobStore::submit_job`].
    async fn submit_speculative(
        &self,
        job: &Job,
        idempotency: Option<&IdempotencyKey>,
    ) -> Result<Submitted, StoreError>;
    /// Reads a job.
    async fn get_job(&self, id: &JobId) -> Result<JobRecord, StoreError>;
    /// Lists an environment's jobs, newest first.
    async fn list_jobs(
        &self,
        env: &EnvPath,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<JobPage, StoreError>;
    /// Moves a job from `from` to `to` with a conditional write, recording time, reason and extras.
    /// A move to `awaiting_approval` puts the job on the [`JobStore::approvals_due`] list, by
    /// [`JobUpdate::approval_deadline`] (`at` when not given); any other move takes it off.
    async fn transition_job(
        &self,
        id: &JobId,
        from: JobState,
        to: JobState,
        at: DateTime<Utc>,
        reason: &str,
        update: JobUpdate,
    ) -> Result<JobRecord, StoreError>;
    /// Cancels a job that waits in its environment's queue (not holding the lock).
    async fn cancel_waiting_job(
        &self,
        id: &JobId,
        at: DateTime<Utc>,
        reason: &str,
    ) -> Result<JobRecord, StoreError>;
    /// Releases the environment's lock held by `job_id`, handing it to the next queued job.
    async fn release_environment(
        &self,
        env: &EnvPath,
        job_id: &JobId,
    ) -> Result<Released, StoreError>;
    /// Records attributes of a launched (`dispatching` or `running`) job without changing its
    /// state, such as a cancel or timeout request; `StateConflict` if the job is not launched.
    async fn mark_job(
        &self,
        id: &JobId,
        at: DateTime<Utc>,
        update: JobUpdate,
    ) -> Result<JobRecord, StoreError>;
    /// Records an approval of a job `awaiting_approval` that does not start its apply phase
    /// yet (its `review` with the decision), without changing its state: a pull request's
    /// apply waits there until its requirements are checked again. `StateConflict` when the
    /// job is not awaiting approval or its review already has a decision: one decision only.
    async fn decide_awaiting_job(
        &self,
        id: &JobId,
        at: DateTime<Utc>,
        update: JobUpdate,
    ) -> Result<JobRecord, StoreError>;
    /// Launched jobs (`dispatching` or `running`), longest in that state first, at most `limit`;
    /// items that cannot be decoded are returned apart, never failing the list. The first
    /// page of [`JobStore::active_jobs_page`].
    async fn active_jobs(&self, limit: u32) -> Result<Listed<JobRecord>, StoreError> {
        Ok(self.active_jobs_page(None, limit).await?.listed)
    }
    /// One page of the launched jobs, longest in that state first, at most `limit` (clamped
    /// to 1..=1000), starting after `cursor` (the `next` of the page before; `None` for the
    /// first page). The sweeper pages to the end. A cursor that is not one of ours is
    /// `NotFound` (kind `cursor`).
    async fn active_jobs_page(
        &self,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<ListedPage<JobRecord>, StoreError>;
    /// Jobs that ended before `before` whose environment lock the sweeper has not yet seen
    /// released, oldest first, at most `limit`: a crash between a job's end and its release
    /// leaves its environment locked, and no event will come to repair it.
    async fn ended_jobs(
        &self,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<Listed<JobRecord>, StoreError>;
    /// Jobs `awaiting_approval` whose approval deadline is before `before`, earliest
    /// deadline first, at most `limit`; items that cannot be decoded are returned apart.
    async fn approvals_due(
        &self,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<Listed<JobRecord>, StoreError>;
    /// Takes an ended job off the `ended_jobs` list (its environment is not held by it).
    async fn settle_ended_job(&self, id: &JobId) -> Result<(), StoreError>;
    /// Where the sweep of the active jobs resumes ([`SweepCursor`]): kept in the table, so
    /// that a pass that dies (out of memory or time) is resumed where it was, not from the
    /// oldest job again.
    async fn sweep_cursor(&self) -> Result<SweepCursor, StoreError>;
    /// Records `cursor` as where the next pass resumes, on condition that the stored cursor
    /// is still at `expected` version (`VersionMismatch` if another pass moved it); returns
    /// the new version.
    async fn save_sweep_cursor(
        &self,
        cursor: Option<&str>,
        expected: u64,
    ) -> Result<u64, StoreError>;
    /// Jobs that hold their environment's lock but are still `queued`, created before `before`:
    /// their send may have been lost. Items that cannot be decoded are returned apart.
    async fn pending_sends(
        &self,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<Listed<Job>, StoreError>;
    /// The jobs offered to an agent pool and not yet claimed, longest offered first, at most
    /// `limit`: one Query of the sparse gsi2 `POOL#<pool>` partition, so an idle pool costs
    /// a read of nothing. Items that cannot be decoded are returned apart.
    async fn offered_jobs(&self, pool: &str, limit: u32) -> Result<Listed<JobRecord>, StoreError>;
    /// Records an agent's heartbeat for the claimed job whose task is `task`: one conditional
    /// write (`running`, with that task). `StateConflict` when the job is not `running` or is
    /// held by another claim; `NotFound` when there is no such job. Never changes
    /// `updated_at` (a heartbeat is not a change).
    async fn heartbeat_job(
        &self,
        id: &JobId,
        task: &sortie_core::TaskRef,
        at: DateTime<Utc>,
    ) -> Result<JobRecord, StoreError>;
    /// Ends a job whose item cannot be decoded: rewrites its state to `failed` with a
    /// transition giving `reason`, and takes it out of the sweeper's lists and its
    /// environment's queue. Does not release the lock (the caller does, through
    /// [`JobStore::release_environment`]). Returns the record when it now reads back.
    async fn fail_unreadable_job(
        &self,
        job: &Unreadable,
        at: DateTime<Utc>,
        reason: &str,
    ) -> Result<Option<JobRecord>, StoreError>;
}

/// Memberships: roles granted on groups, loaded per organisation for authorisation.
#[async_trait]
pub trait MembershipStore: Send + Sync {
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
    /// The organisations in which `subject` holds a membership granted to it by subject
    /// (`Grantee::Subject`, for any issuer or for `issuer`), distinct and sorted, at most
    /// [`ORGANISATIONS_MAX`]. Read from the membership index written with each grant;
    /// root-group grants and claim-pattern grants are not listed (the latter cannot be: a
    /// pattern names no subject).
    async fn organisations_of(
        &self,
        subject: &str,
        issuer: Option<&str>,
    ) -> Result<Vec<String>, StoreError>;
}

/// The most organisations [`MembershipStore::organisations_of`] returns.
pub const ORGANISATIONS_MAX: usize = 1_000;

/// Agent pools: a group's agents, their token hashes and their OIDC trust.
#[async_trait]
pub trait AgentPoolStore: Send + Sync {
    /// Creates a pool; `AlreadyExists` if its id is taken.
    async fn create_pool(
        &self,
        pool: &AgentPoolRecord,
    ) -> Result<Versioned<AgentPoolRecord>, StoreError>;
    /// Reads a pool.
    async fn get_pool(&self, id: &str) -> Result<Versioned<AgentPoolRecord>, StoreError>;
    /// Lists the pools owned by exactly this group.
    async fn list_pools(
        &self,
        group: &GroupPath,
    ) -> Result<Vec<Versioned<AgentPoolRecord>>, StoreError>;
    /// Replaces a pool (description, OIDC trust, tokens), checking the version when given
    /// (a token rotation always gives it: two rotations never lose a token).
    async fn update_pool(
        &self,
        pool: &AgentPoolRecord,
        expected: Option<u64>,
    ) -> Result<Versioned<AgentPoolRecord>, StoreError>;
    /// Deletes a pool, checking the version when given.
    async fn delete_pool(&self, id: &str, expected: Option<u64>) -> Result<(), StoreError>;
    /// Records that an agent of pool `id` asked for work at `at`: sets its `last_claim_at`
    /// unless a later one is recorded, without changing the pool's version (a claim is not an
    /// edit, and never makes a person's `If-Match` stale). `NotFound` when the pool is gone.
    async fn record_pool_claim(&self, id: &str, at: DateTime<Utc>) -> Result<(), StoreError>;
}

/// The whole repository: runners, rules, environments, jobs, memberships and agent pools.
///
/// Implemented for every type that implements the ten aggregate traits, so
/// `Arc<dyn Store>` reaches every operation.
pub trait Store:
    RunnerStore
    + RuleStore
    + EnvironmentStore
    + JobStore
    + MembershipStore
    + AgentPoolStore
    + LockStore
    + PolicySetStore
    + ExpiryStore
    + VcsStore
    + NotificationStore
    + AuditStore
{
}

impl<T> Store for T where
    T: RunnerStore
        + RuleStore
        + EnvironmentStore
        + JobStore
        + MembershipStore
        + AgentPoolStore
        + LockStore
        + PolicySetStore
        + ExpiryStore
        + VcsStore
        + NotificationStore
        + AuditStore
        + ?Sized
{
}
