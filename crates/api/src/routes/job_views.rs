//! What the job routes add to a stored job: why it waits (read beside it, best effort), and
//! the nearest names a 404 of an environment or a job suggests to its caller.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sortie_core::suggest::did_you_mean;
use sortie_core::waiting::{waiting, LockHolder, WaitFacts};
use sortie_core::{can, Action, EnvPath, GroupPath, JobId, JobState};
use sortie_store::{JobRecord, StoreError};
use tracing::warn;

use crate::error::ApiError;
use crate::extract::Caller;
use crate::model::JobView;
use crate::AppState;

/// How many in-flight jobs a job id's 404 compares the id with.
const JOB_CANDIDATES: u32 = 100;

/// How many of its organisation's environments (the first by path) an environment's 404
/// compares the path with, when its own group has none.
const ORG_CANDIDATES: usize = 1_000;

/// What was read to explain waiting jobs, kept across the jobs of one answer (a list reads
/// its environment, its lock holder and a pool once).
#[derive(Default)]
pub(crate) struct WaitReads {
    /// Environment path → the job holding its lock.
    locks: HashMap<String, Option<JobId>>,
    /// Lock holder id → how it holds it.
    holders: HashMap<JobId, Option<LockHolder>>,
    /// Pool id → its last claim.
    pools: HashMap<String, Option<DateTime<Utc>>>,
}

impl WaitReads {
    /// Reads that know `job` holds environment `env`'s lock (it just took it).
    pub(crate) fn holding(env: &EnvPath, job: &JobId) -> Self {
        let mut reads = Self::default();
        reads.locks.insert(env.to_string(), Some(job.clone()));
        reads
    }

    /// The API's view of `record`, with why it waits when it does. A failed read leaves
    /// the reason less precise, never fails the answer.
    pub(crate) async fn view(&mut self, state: &AppState, record: JobRecord) -> JobView {
        let job = &record.job;
        let waits = !(job.state.is_terminal() || job.state == JobState::Running);
        if !waits {
            return JobView::from(record);
        }
        let mut holds_lock = false;
        let mut holder = None;
        if job.state == JobState::Queued {
            let lock = self.lock_of(state, &job.environment).await;
            holds_lock = lock.as_ref() == Some(&job.id);
            if let Some(id) = lock.filter(|id| id != &job.id) {
                holder = self.holder(state, &id).await;
            }
        }
        let offered_to = match job.state {
            JobState::Dispatching => record.offered_to.clone(),
            _ => None,
        };
        let pool_last_claim = match &offered_to {
            Some(pool) => self.last_claim(state, pool).await,
            None => None,
        };
        let reason = waiting(
            &WaitFacts {
                job,
                holds_lock,
                holder: holder.as_ref(),
                offered_to: offered_to.as_deref(),
                pool_last_claim,
            },
            Utc::now(),
        );
        let mut view = JobView::from(record);
        view.waiting = reason;
        view
    }

    async fn lock_of(&mut self, state: &AppState, env: &EnvPath) -> Option<JobId> {
        let key = env.to_string();
        if let Some(lock) = self.locks.get(&key) {
            return lock.clone();
        }
        let lock = match state.environments().get(env).await {
            Ok(e) => e.item.active_job,
            Err(e) => {
                warn!(environment = %env, error = %e, "waiting reason: environment not read");
                None
            }
        };
        self.locks.insert(key, lock.clone());
        lock
    }

    async fn holder(&mut self, state: &AppState, id: &JobId) -> Option<LockHolder> {
        if let Some(h) = self.holders.get(id) {
            return h.clone();
        }
        let h = match state.jobs.get(id).await {
            Ok(r) => Some(LockHolder::of(&r.job)),
            Err(e) => {
                warn!(job_id = %id, error = %e, "waiting reason: lock holder not read");
                None
            }
        };
        self.holders.insert(id.clone(), h.clone());
        h
    }

    async fn last_claim(&mut self, state: &AppState, pool: &str) -> Option<DateTime<Utc>> {
        if let Some(at) = self.pools.get(pool) {
            return *at;
        }
        let at = match state.pools().get(pool).await {
            Ok(p) => p.item.last_claim_at,
            Err(e) => {
                warn!(%pool, error = %e, "waiting reason: agent pool not read");
                None
            }
        };
        self.pools.insert(pool.to_string(), at);
        at
    }
}

/// The API's view of one job, with why it waits.
pub(crate) async fn job_view(state: &AppState, record: JobRecord) -> JobView {
    WaitReads::default().view(state, record).await
}

/// 404 for environment `path`, suggesting the nearest environments the caller may read: of
/// the same group, or (when that group has none) of the whole organisation.
pub(crate) async fn environment_not_found(
    state: &AppState,
    caller: &Caller,
    path: &EnvPath,
) -> ApiError {
    let what = format!("environment `{path}`");
    let near = match nearby_environments(state, caller, path).await {
        Ok(near) => near,
        Err(e) => {
            warn!(environment = %path, error = %e, "no suggestions for a missing environment");
            vec![]
        }
    };
    ApiError::not_found_near(what, near)
}

async fn nearby_environments(
    state: &AppState,
    caller: &Caller,
    path: &EnvPath,
) -> Result<Vec<String>, ApiError> {
    let principal = caller.in_org(state, Some(path.org())).await?;
    let mut envs = state.environments().list(path.group()).await?;
    if envs.is_empty() {
        // One bounded Query of the organisation's index (gsi4), never a Scan.
        let org = GroupPath::parse(path.org()).map_err(ApiError::from)?;
        envs = state
            .environments()
            .list_under(&org, ORG_CANDIDATES)
            .await?
            .environments;
    }
    let visible: Vec<String> = envs
        .iter()
        .map(|e| &e.item.environment.path)
        .filter(|p| can(&principal, Action::Read, p.group()))
        .map(ToString::to_string)
        .collect();
    Ok(did_you_mean(
        &path.to_string(),
        visible.iter().map(String::as_str),
    ))
}

/// Maps a store `NotFound` of environment `path` to [`environment_not_found`].
pub(crate) async fn or_environment_not_found<T>(
    state: &AppState,
    caller: &Caller,
    path: &EnvPath,
    result: Result<T, StoreError>,
) -> Result<T, ApiError> {
    match result {
        Ok(v) => Ok(v),
        Err(StoreError::NotFound {
            kind: "environment",
            ..
        }) => Err(environment_not_found(state, caller, path).await),
        Err(e) => Err(e.into()),
    }
}

/// 404 for job `id`, suggesting the nearest ids among the jobs in flight (`dispatching` or
/// `running`) and those awaiting approval (the one a mistyped `approve` meant), whose
/// environment the caller may read. Only those are compared, each through one bounded
/// Query of its index: a job list across every environment would be a scan per typo.
pub(crate) async fn job_not_found(state: &AppState, caller: &Caller, id: &JobId) -> ApiError {
    let what = format!("job `{id}`");
    let near = match nearby_jobs(state, caller, id).await {
        Ok(near) => near,
        Err(e) => {
            warn!(job_id = %id, error = %e, "no suggestions for a missing job");
            vec![]
        }
    };
    ApiError::not_found_near(what, near)
}

async fn nearby_jobs(
    state: &AppState,
    caller: &Caller,
    id: &JobId,
) -> Result<Vec<String>, ApiError> {
    let active = state.jobs.in_flight(JOB_CANDIDATES).await?;
    // Every deadline is before a century from now: the AWAITING index, earliest first.
    let awaiting = state
        .jobs
        .awaiting_approval(Utc::now() + chrono::Duration::days(36_500), JOB_CANDIDATES)
        .await?;
    // Each org's memberships are read once (and cached by the membership cache).
    let mut principals = HashMap::new();
    let mut visible = Vec::new();
    for record in active.iter().chain(awaiting.iter()) {
        let env = &record.job.environment;
        let org = env.org().to_string();
        if !principals.contains_key(&org) {
            let p = caller.in_org(state, Some(&org)).await?;
            principals.insert(org.clone(), p);
        }
        if can(&principals[&org], Action::Read, env.group()) {
            visible.push(record.job.id.as_str());
        }
    }
    Ok(did_you_mean(id.as_str(), visible))
}
