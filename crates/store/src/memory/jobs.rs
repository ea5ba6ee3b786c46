//! Jobs: the [`JobStore`] calls (submission is in `submit`), transitions, and the sparse
//! gsi3 index.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sortie_core::{EnvPath, Job, JobId, JobState, Transition};

use super::submit::{submit_locked, submit_lockless};
use super::{apply_update, lock_kept_changing, pending_sk, Gsi3, JobEntry, MemoryStore};
use crate::cursor::{decode_cursor, decode_gsi3_cursor, encode_cursor, encode_gsi3_cursor};
use crate::sortkeys::{job_sk, sort_time};
use crate::{
    IdempotencyKey, JobPage, JobRecord, JobStore, JobUpdate, Listed, ListedPage, Released,
    StoreError, Submitted, Unreadable,
};

#[async_trait]
impl JobStore for MemoryStore {
    async fn submit_job(
        &self,
        job: &Job,
        idempotency: Option<&IdempotencyKey>,
    ) -> Result<Submitted, StoreError> {
        self.submit_keyed(job, idempotency, |st| {
            Ok(submit_locked(st, job, true)?.expect("a queueing submit always writes"))
        })
    }

    async fn submit_speculative(
        &self,
        job: &Job,
        idempotency: Option<&IdempotencyKey>,
    ) -> Result<Submitted, StoreError> {
        self.submit_keyed(job, idempotency, |st| submit_lockless(st, job))
    }

    async fn submit_if_idle(&self, job: &Job) -> Result<Option<Submitted>, StoreError> {
        submit_locked(&mut self.lock(), job, false)
    }

    async fn get_job(&self, id: &JobId) -> Result<JobRecord, StoreError> {
        let st = self.lock();
        st.jobs
            .get(id)
            .map(|j| j.record.clone())
            .ok_or_else(|| StoreError::NotFound {
                kind: "job",
                id: id.to_string(),
            })
    }

    async fn list_jobs(
        &self,
        env: &EnvPath,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<JobPage, StoreError> {
        let after = match cursor {
            Some(c) => Some(decode_cursor(c).ok_or_else(|| StoreError::NotFound {
                kind: "cursor",
                id: c.to_string(),
            })?),
            None => None,
        };
        let st = self.lock();
        let Some(ids) = st.env_jobs.get(&env.to_string()) else {
            return Ok(JobPage {
                jobs: vec![],
                unreadable: vec![],
                next: None,
            });
        };
        let limit = limit.clamp(1, 100) as usize;
        let mut newest_first = ids
            .iter()
            .rev()
            .filter(|id| after.as_ref().is_none_or(|a| id.as_str() < a.as_str()));
        let page: Vec<&JobId> = newest_first.by_ref().take(limit).collect();
        // A next page only when there is more, as moto answers (DynamoDB itself may also
        // return a cursor to an empty last page).
        let next = match (page.last(), newest_first.next()) {
            (Some(last), Some(_)) => Some(encode_cursor(last)),
            _ => None,
        };
        let jobs = page
            .into_iter()
            .filter_map(|id| st.jobs.get(id).map(|j| j.record.clone()))
            .collect();
        Ok(JobPage {
            jobs,
            unreadable: vec![],
            next,
        })
    }

    async fn transition_job(
        &self,
        id: &JobId,
        from: JobState,
        to: JobState,
        at: DateTime<Utc>,
        reason: &str,
        update: JobUpdate,
    ) -> Result<JobRecord, StoreError> {
        if !from.can_become(to) {
            return Err(StoreError::StateConflict {
                job_id: id.to_string(),
                expected: from,
                actual: from,
            });
        }
        let mut st = self.lock();
        let entry = st.jobs.get_mut(id).ok_or_else(|| StoreError::NotFound {
            kind: "job",
            id: id.to_string(),
        })?;
        let claim_refused = update.claim_from.as_ref().is_some_and(|pool| {
            entry.record.offered_to.as_ref() != Some(pool)
                || entry.record.cancel_requested_by.is_some()
        });
        if entry.record.job.state != from || claim_refused {
            // As DynamoStore: our own earlier write (its answer lost, in DynamoDB) succeeded.
            if entry
                .record
                .shows_own_write(to, update.token_hash.as_deref())
            {
                return Ok(entry.record.clone());
            }
            return Err(StoreError::StateConflict {
                job_id: id.to_string(),
                expected: from,
                actual: entry.record.job.state,
            });
        }
        if from == JobState::Dispatching {
            entry.record.offered_to = None;
            entry.offer_sk = None;
        }
        let record = &mut entry.record;
        record.job.state = to;
        sortie_core::retry::record_transition(
            &mut record.job.transitions,
            &mut record.job.transitions_dropped,
            Transition::new(Some(from), to, at, reason),
        );
        record.updated_at = at;
        let deadline = update.approval_deadline.unwrap_or(at);
        let pending_since = update.retry_at.unwrap_or(at);
        apply_update(record, update);
        // The sparse gsi3 index: PENDING while a lock holder waits to be sent (queued),
        // ACTIVE while launched (dispatching, running), AWAITING while it awaits approval (by
        // deadline), ENDED once terminal until settled.
        entry.gsi3 = Some(if to == JobState::Queued {
            (Gsi3::Pending, job_sk(pending_since, id))
        } else if to.is_active() {
            (Gsi3::Active, job_sk(at, id))
        } else if to == JobState::AwaitingApproval {
            (Gsi3::Awaiting, job_sk(deadline, id))
        } else {
            (Gsi3::Ended, job_sk(at, id))
        });
        let out = entry.record.clone();
        st.audited();
        Ok(out)
    }

    async fn cancel_waiting_job(
        &self,
        id: &JobId,
        at: DateTime<Utc>,
        reason: &str,
    ) -> Result<JobRecord, StoreError> {
        let mut guard = self.lock();
        let st = &mut *guard;
        let entry = st.jobs.get_mut(id).ok_or_else(|| StoreError::NotFound {
            kind: "job",
            id: id.to_string(),
        })?;
        let mut record = entry.record.clone();
        record
            .job
            .transition(JobState::Canceled, at, reason)
            .map_err(|e| StoreError::StateConflict {
                job_id: id.to_string(),
                expected: JobState::Queued,
                actual: e.from,
            })?;
        let conflict = |actual| StoreError::StateConflict {
            job_id: id.to_string(),
            expected: JobState::Queued,
            actual,
        };
        // Not waiting in a queue: it holds its environment's lock (or never queued).
        let Some(position) = entry.queue_pos else {
            return Err(conflict(entry.record.job.state));
        };
        let env = record.job.environment.to_string();
        let in_queue = st
            .queues
            .get(&env)
            .is_some_and(|q| q.contains_key(&position));
        let counted = st.envs.get(&env).is_some_and(|e| e.record.queued_count > 0);
        if entry.record.job.state != JobState::Queued || !in_queue || !counted {
            return Err(conflict(entry.record.job.state));
        }
        if let Some(q) = st.queues.get_mut(&env) {
            q.remove(&position);
        }
        if let Some(e) = st.envs.get_mut(&env) {
            e.record.queued_count -= 1;
        }
        record.updated_at = at;
        entry.record = record.clone();
        entry.queue_pos = None;
        st.audited();
        Ok(record)
    }

    async fn release_environment(
        &self,
        env: &EnvPath,
        job_id: &JobId,
    ) -> Result<Released, StoreError> {
        let path = env.to_string();
        let mut guard = self.lock();
        let st = &mut *guard;
        let Some(entry) = st.envs.get_mut(&path) else {
            return Ok(Released::NotHeld);
        };
        if entry.record.active_job.as_deref() != Some(job_id) {
            return Ok(Released::NotHeld);
        }
        let next = st
            .queues
            .get(&path)
            .and_then(|q| q.first_key_value())
            .map(|(position, id)| (*position, id.clone()));
        let Some((position, next_id)) = next else {
            entry.record.active_job = None;
            return Ok(Released::Idle);
        };
        let Some(next_job) = st.jobs.get_mut(&next_id) else {
            return Err(StoreError::Corrupt {
                key: format!("QUEUE#{path}/{next_id}"),
                message: "queued job item is missing".into(),
            });
        };
        if next_job.record.job.state != JobState::Queued {
            // DynamoDB's hand-over transaction keeps failing on this condition until its
            // retries run out.
            return Err(lock_kept_changing());
        }
        entry.record.active_job = Some(next_id);
        entry.record.queued_count = entry.record.queued_count.saturating_sub(1);
        if let Some(q) = st.queues.get_mut(&path) {
            q.remove(&position);
        }
        next_job.gsi3 = Some((Gsi3::Pending, pending_sk(&next_job.record.job)));
        next_job.queue_pos = None;
        Ok(Released::HandedTo(Box::new(next_job.record.job.clone())))
    }

    async fn mark_job(
        &self,
        id: &JobId,
        at: DateTime<Utc>,
        update: JobUpdate,
    ) -> Result<JobRecord, StoreError> {
        let offer = update.offer_to.clone();
        let allowed = |r: &JobRecord| {
            r.job.state.is_active()
                && (offer.is_none() || (r.job.state == JobState::Dispatching && r.task.is_none()))
        };
        self.update_in_place(id, JobState::Running, allowed, at, |entry| {
            if let Some(pool) = &update.offer_to {
                entry.record.offered_to = Some(pool.clone());
                entry.offer_sk = Some(job_sk(at, id));
            }
            apply_update(&mut entry.record, update);
        })
    }

    async fn decide_awaiting_job(
        &self,
        id: &JobId,
        at: DateTime<Utc>,
        update: JobUpdate,
    ) -> Result<JobRecord, StoreError> {
        let undecided = |r: &JobRecord| {
            r.job.state == JobState::AwaitingApproval
                && r.job.review.as_ref().is_none_or(|rv| rv.decision.is_none())
        };
        self.update_in_place(id, JobState::AwaitingApproval, undecided, at, |entry| {
            apply_update(&mut entry.record, update)
        })
    }

    async fn offered_jobs(&self, pool: &str, limit: u32) -> Result<Listed<JobRecord>, StoreError> {
        let st = self.lock();
        let mut found: Vec<(&String, &JobEntry)> = st
            .jobs
            .values()
            .filter(|j| j.record.offered_to.as_deref() == Some(pool))
            .filter_map(|j| j.offer_sk.as_ref().map(|sk| (sk, j)))
            .collect();
        found.sort_by(|a, b| a.0.cmp(b.0));
        Ok(Listed {
            records: found
                .into_iter()
                .take(limit.clamp(1, 100) as usize)
                .map(|(_, j)| j.record.clone())
                .collect(),
            unreadable: Vec::new(),
        })
    }

    async fn heartbeat_job(
        &self,
        id: &JobId,
        task: &sortie_core::TaskRef,
        at: DateTime<Utc>,
    ) -> Result<JobRecord, StoreError> {
        let mut st = self.lock();
        let entry = st.jobs.get_mut(id).ok_or_else(|| StoreError::NotFound {
            kind: "job",
            id: id.to_string(),
        })?;
        let record = &mut entry.record;
        match record.agent.as_mut() {
            Some(hold)
                if record.job.state == JobState::Running && record.task.as_ref() == Some(task) =>
            {
                hold.heartbeat_at = at;
                Ok(record.clone())
            }
            _ => Err(StoreError::StateConflict {
                job_id: id.to_string(),
                expected: JobState::Running,
                actual: record.job.state,
            }),
        }
    }

    async fn active_jobs_page(
        &self,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<ListedPage<JobRecord>, StoreError> {
        let after = match cursor {
            Some(c) => Some(
                decode_gsi3_cursor(c)
                    .ok_or(StoreError::NotFound {
                        kind: "cursor",
                        id: c.to_string(),
                    })?
                    .0,
            ),
            None => None,
        };
        let st = self.lock();
        let mut found: Vec<(&str, &JobEntry)> = st
            .jobs
            .values()
            .filter_map(|j| match &j.gsi3 {
                Some((Gsi3::Active, sk)) if after.as_deref().is_none_or(|a| sk.as_str() > a) => {
                    Some((sk.as_str(), j))
                }
                _ => None,
            })
            .collect();
        found.sort_by(|a, b| a.0.cmp(b.0));
        let limit = limit.clamp(1, 1000) as usize;
        let next = (found.len() > limit).then(|| encode_gsi3_cursor(found[limit - 1].0));
        Ok(ListedPage {
            listed: Listed {
                records: found
                    .into_iter()
                    .take(limit)
                    .map(|(_, j)| j.record.clone())
                    .collect(),
                unreadable: vec![],
            },
            next,
        })
    }

    async fn pending_sends(
        &self,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<Listed<Job>, StoreError> {
        Ok(self.listed_before(Gsi3::Pending, before, limit, |j| j.record.job.clone()))
    }

    async fn ended_jobs(
        &self,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<Listed<JobRecord>, StoreError> {
        Ok(self.listed_before(Gsi3::Ended, before, limit, |j| j.record.clone()))
    }

    async fn approvals_due(
        &self,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<Listed<JobRecord>, StoreError> {
        Ok(self.listed_before(Gsi3::Awaiting, before, limit, |j| j.record.clone()))
    }

    async fn settle_ended_job(&self, id: &JobId) -> Result<(), StoreError> {
        let mut st = self.lock();
        if let Some(entry) = st.jobs.get_mut(id) {
            if matches!(entry.gsi3, Some((Gsi3::Ended, _))) {
                entry.gsi3 = None;
            }
        }
        Ok(())
    }

    async fn sweep_cursor(&self) -> Result<crate::SweepCursor, StoreError> {
        Ok(self.lock().sweep_cursor.clone())
    }

    async fn save_sweep_cursor(
        &self,
        cursor: Option<&str>,
        expected: u64,
    ) -> Result<u64, StoreError> {
        let mut st = self.lock();
        let stored = &mut st.sweep_cursor;
        if stored.version != expected {
            return Err(StoreError::VersionMismatch {
                kind: "sweep cursor",
                id: "SWEEP".into(),
                expected,
                actual: stored.version,
            });
        }
        stored.cursor = cursor.map(str::to_string);
        stored.version += 1;
        Ok(stored.version)
    }

    /// Every item in memory is readable; this fails the job as the table's twin does (state
    /// `failed` with `reason`, out of the sweeper's lists and out of its queue).
    async fn fail_unreadable_job(
        &self,
        job: &Unreadable,
        at: DateTime<Utc>,
        reason: &str,
    ) -> Result<Option<JobRecord>, StoreError> {
        let mut guard = self.lock();
        let st = &mut *guard;
        let entry = st
            .jobs
            .get_mut(&job.job_id)
            .ok_or_else(|| StoreError::NotFound {
                kind: "job",
                id: job.job_id.to_string(),
            })?;
        if !entry.record.job.state.is_terminal() {
            let from = entry.record.job.state;
            entry.record.job.state = JobState::Failed;
            sortie_core::retry::record_transition(
                &mut entry.record.job.transitions,
                &mut entry.record.job.transitions_dropped,
                Transition::new(Some(from), JobState::Failed, at, reason),
            );
            entry.record.updated_at = at;
        }
        entry.gsi3 = None;
        if let Some(pos) = entry.queue_pos.take() {
            let env = entry.record.job.environment.to_string();
            if let Some(q) = st.queues.get_mut(&env) {
                if q.remove(&pos).is_some() {
                    if let Some(e) = st.envs.get_mut(&env) {
                        e.record.queued_count = e.record.queued_count.saturating_sub(1);
                    }
                }
            }
        }
        Ok(st.jobs.get(&job.job_id).map(|e| e.record.clone()))
    }
}

impl MemoryStore {
    /// A change of a job that keeps its state (a mark, a decision): `change` applied and
    /// `updated_at` set when `allowed` holds of its record, else the job's `StateConflict`
    /// against `expected` (or `NotFound`).
    fn update_in_place(
        &self,
        id: &JobId,
        expected: JobState,
        allowed: impl FnOnce(&JobRecord) -> bool,
        at: DateTime<Utc>,
        change: impl FnOnce(&mut JobEntry),
    ) -> Result<JobRecord, StoreError> {
        let mut st = self.lock();
        let entry = st.jobs.get_mut(id).ok_or_else(|| StoreError::NotFound {
            kind: "job",
            id: id.to_string(),
        })?;
        if !allowed(&entry.record) {
            return Err(StoreError::StateConflict {
                job_id: id.to_string(),
                expected,
                actual: entry.record.job.state,
            });
        }
        entry.record.updated_at = at;
        change(entry);
        let out = entry.record.clone();
        st.audited();
        Ok(out)
    }
}

impl MemoryStore {
    /// The jobs of gsi3 partition `partition` before `before`, as the table's Query lists
    /// them, each mapped by `map`.
    fn listed_before<T>(
        &self,
        partition: Gsi3,
        before: DateTime<Utc>,
        limit: u32,
        map: impl Fn(&JobEntry) -> T,
    ) -> Listed<T> {
        let st = self.lock();
        Listed {
            records: st
                .gsi3(partition, Some(&sort_time(before)), limit)
                .into_iter()
                .map(map)
                .collect(),
            unreadable: vec![],
        }
    }
}
