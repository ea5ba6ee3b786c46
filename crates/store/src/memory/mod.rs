//! An in-memory [`Store`](crate::Store) for fast unit tests and benchmarks.
//!
//! [`MemoryStore`] keeps every item behind one mutex and follows the semantics of
//! [`DynamoStore`](crate::DynamoStore) item for item: conditional creates
//! (`AlreadyExists`), versions (`VersionMismatch`), runner link counts (`InUse` listing
//! the linked environments), rule sets per scope, the environment lock (`active_job`)
//! with a FIFO queue ordered by the environment's queue sequence, idempotency keys,
//! transitions checked by [`JobState::can_become`](sortie_core::JobState::can_become) and by the expected current state,
//! and the sparse `gsi3` index behind [`JobStore::pending_sends`](crate::JobStore::pending_sends),
//! [`JobStore::active_jobs`](crate::JobStore::active_jobs), [`JobStore::ended_jobs`](crate::JobStore::ended_jobs),
//! [`JobStore::approvals_due`](crate::JobStore::approvals_due) and
//! [`EnvironmentStore::due_drift_checks`](crate::EnvironmentStore::due_drift_checks) (sort keys
//! compared as the same strings DynamoDB compares).
//!
//! It is a twin, not the reference: the contract suite in `crates/store/tests/contract`,
//! run against DynamoDB on moto, remains the source of truth for the store's behaviour. Differences that cannot be seen
//! through the trait: every call is atomic, so no retry loop is ever needed. (Idempotency
//! keys expire after 24 hours in both stores: checked on use, never left to a TTL.)
//!
//! This module holds [`MemoryStore`], its state and shared helpers; one module per
//! aggregate implements its trait.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard};

use chrono::{DateTime, Utc};
use sortie_core::{EnvPath, Job, JobId, Runner, RunnerId, RunnerRule};

use crate::{EnvironmentRecord, JobRecord, JobUpdate, MembershipRecord, StoreError};

mod audit;
mod environments;
mod expiry;
mod jobs;
mod locks;
mod memberships;
mod notifications;
mod policy_sets;
mod pools;
mod rules;
mod runners;
mod submit;
mod vcs;

/// The in-memory store. Cheap to create; every instance is an empty table.
#[derive(Debug, Default)]
pub struct MemoryStore {
    state: Mutex<State>,
    /// Where the audit trail is exported, when anywhere.
    archive: Option<std::sync::Arc<dyn crate::AuditArchive>>,
}

/// Which partition of the sparse `gsi3` index a job is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gsi3 {
    /// Holds its environment's lock but is still `queued`: its send may be lost.
    Pending,
    /// `dispatching` or `running`.
    Active,
    /// Terminal, its environment's release not yet confirmed by the sweeper.
    Ended,
    /// `awaiting_approval` (holding its lock), by approval deadline.
    Awaiting,
}

#[derive(Debug)]
struct RunnerEntry {
    runner: Runner,
    version: u64,
    link_count: u64,
}

#[derive(Debug)]
struct EnvEntry {
    record: EnvironmentRecord,
    version: u64,
}

#[derive(Debug)]
struct JobEntry {
    record: JobRecord,
    /// The `gsi3` partition and sort key (`<time>#<id>`), as DynamoDB stores them.
    gsi3: Option<(Gsi3, String)>,
    /// The job's position in its environment's queue, while it waits.
    queue_pos: Option<u64>,
    /// The sort key (`<time>#<id>`) of its offer to `record.offered_to`, as gsi2 keeps it.
    offer_sk: Option<String>,
}

#[derive(Debug, Default)]
struct State {
    /// Connections, bindings, deliveries and pull requests.
    vcs: vcs::VcsState,
    /// By (owner group, name): listing a group's runners is a range, in name order.
    runners: BTreeMap<(String, String), RunnerEntry>,
    /// By scope: the scope's rule set and its version.
    rules: HashMap<String, (u64, Vec<RunnerRule>)>,
    /// By organisation (`""` for the root): bumped by every rule change in it.
    rules_versions: HashMap<String, u64>,
    /// By organisation (`""` for the root): bumped by every policy-set change in it.
    policy_sets_versions: HashMap<String, u64>,
    /// By environment path.
    envs: BTreeMap<String, EnvEntry>,
    /// By environment path: the waiting jobs by queue position.
    queues: HashMap<String, BTreeMap<u64, JobId>>,
    /// By job id.
    jobs: HashMap<JobId, JobEntry>,
    /// By environment path: the ids of its jobs (ids are time-ordered ULIDs).
    env_jobs: HashMap<String, BTreeSet<JobId>>,
    /// By (environment path, key): the job id, the request hash and when the key expires.
    idempotency: HashMap<(String, String), (JobId, String, DateTime<Utc>)>,
    /// By (org partition, `M#<group>#<id>`), as the table's membership items.
    memberships: BTreeMap<(String, String), MembershipRecord>,
    /// By pool id: the pool and its version.
    pools: BTreeMap<String, (crate::AgentPoolRecord, u64)>,
    /// By group path: its settings (freeze, expiry limits), as the `SETTINGS` items.
    group_settings: BTreeMap<String, crate::GroupSettings>,
    /// By (group, name): the policy set and its version.
    policy_sets: BTreeMap<(String, String), (sortie_core::policy::PolicySet, u64)>,
    /// By environment path: its expiry due-list entry and the entry's version.
    expiries: BTreeMap<String, (crate::ExpiryEntry, u64)>,
    /// Where the sweep of the active jobs resumes, as the `SWEEP` item.
    sweep_cursor: crate::SweepCursor,
    /// Notification destinations, their sequences and histories.
    notifications: notifications::NotificationState,
    /// The audit trail.
    audit: audit::AuditState,
}

fn runner_key(id: &RunnerId) -> (String, String) {
    (id.group().as_str().to_string(), id.name().to_string())
}

fn members_pk(org: Option<&str>) -> String {
    format!("MEMBERS#{}", org.unwrap_or_default())
}

fn pending_sk(job: &Job) -> String {
    crate::sortkeys::job_sk(job.transitions[0].at, &job.id)
}

fn version_check(
    kind: &'static str,
    id: String,
    expected: Option<u64>,
    actual: u64,
) -> Result<(), StoreError> {
    match expected {
        Some(e) if e != actual => Err(StoreError::VersionMismatch {
            kind,
            id,
            expected: e,
            actual,
        }),
        _ => Ok(()),
    }
}

fn apply_update(record: &mut JobRecord, update: JobUpdate) {
    if let Some(v) = update.task {
        record.task = Some(v);
    }
    if let Some(v) = update.token_hash {
        record.token_hash = Some(v);
    }
    if let Some(v) = update.started_at {
        record.started_at = Some(v);
    }
    if let Some(v) = update.cancel_requested_by {
        record.cancel_requested_by = Some(v);
    }
    if let Some(v) = update.timeout_requested_at {
        record.timeout_requested_at = Some(v);
    }
    if let Some(v) = update.summary {
        record.summary = Some(v);
    }
    if update.next_attempt {
        record.attempt += 1;
    }
    if update.spot_requeue {
        record.spot_requeues += 1;
    }
    if update.end_try {
        record.end_tries += 1;
        record.end_tries_since.get_or_insert(record.updated_at);
    }
    if let Some(v) = update.end_error {
        record.end_error = Some(v);
    }
    if update.clear_task {
        record.task = None;
        record.started_at = None;
        record.timeout_requested_at = None;
        record.agent = None;
    }
    if let Some(v) = update.agent {
        record.agent = Some(v);
    }
    if let Some(v) = update.agent_stop {
        if let Some(hold) = record.agent.as_mut() {
            hold.stop.get_or_insert(v);
        }
    }
    if let Some(v) = update.upload_problems {
        record.upload_problems = v;
    }
    if let Some(v) = update.review {
        record.job.review = Some(v);
    }
    if let Some(v) = update.plan_phase {
        record.plan_phase = Some(v);
    }
    if let Some(v) = update.tool_used {
        record.tool_used = Some(v);
    }
    if let Some(v) = update.state_written {
        record.state_written = Some(v);
    }
    if let Some(v) = update.apply_log_offset {
        record.apply_log_offset = Some(v);
    }
    if let Some(v) = update.policy {
        record.policy = Some(v);
    }
    // A summary given with it is the new one (set above), as in the table's update.
    if update.clear_summary && update.summary.is_none() {
        record.summary = None;
    }
}

fn lock_kept_changing() -> StoreError {
    StoreError::Aws {
        service: "dynamodb",
        message: "environment lock kept changing; try again".into(),
        retryable: true,
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets when an idempotency key stops binding: tests back-date a key with it, as
    /// [`crate::DynamoStore::expire_idempotency_key_at`] does. `NotFound` if the key is not held.
    pub fn expire_idempotency_key_at(
        &self,
        env: &EnvPath,
        key: &str,
        expires_at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let mut st = self.lock();
        match st.idempotency.get_mut(&(env.to_string(), key.to_string())) {
            Some(held) => {
                held.2 = expires_at;
                Ok(())
            }
            None => Err(StoreError::NotFound {
                kind: "idempotency key",
                id: key.to_string(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every operation validates before it mutates, so a panic elsewhere never leaves
        // half a change behind: a poisoned lock still guards consistent data.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl State {
    fn linked_envs(&self, runner: &RunnerId) -> Vec<String> {
        // Already sorted: the map is ordered by path.
        self.envs
            .iter()
            .filter(|(_, e)| &e.record.environment.runner.runner_id == runner)
            .map(|(path, _)| path.clone())
            .collect()
    }

    fn bump_rules_version(&mut self, scope: &sortie_core::GroupPath) {
        *self
            .rules_versions
            .entry(scope.org().unwrap_or_default().to_string())
            .or_insert(0) += 1;
    }

    fn gsi3(&self, index: Gsi3, below: Option<&str>, limit: u32) -> Vec<&JobEntry> {
        let mut found: Vec<(&str, &JobEntry)> = self
            .jobs
            .values()
            .filter_map(|j| match &j.gsi3 {
                Some((i, sk)) if *i == index && below.is_none_or(|b| sk.as_str() < b) => {
                    Some((sk.as_str(), j))
                }
                _ => None,
            })
            .collect();
        found.sort_by(|a, b| a.0.cmp(b.0));
        found
            .into_iter()
            .take(limit.clamp(1, 1000) as usize)
            .map(|(_, j)| j)
            .collect()
    }
}
