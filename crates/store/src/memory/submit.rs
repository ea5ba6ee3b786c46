//! Submitting a job in memory: under the environment lock (or joining its FIFO queue),
//! speculative without the lock, and once per idempotency key.

use chrono::Utc;
use sortie_core::Job;

use super::{pending_sk, Gsi3, JobEntry, MemoryStore, State};
use crate::{IdempotencyKey, JobRecord, StoreError, Submitted};

impl MemoryStore {
    /// A submit under an idempotency key: a key seen before (and not expired) answers the
    /// first job, else `write` writes the job and the key is kept for 24 hours.
    pub(super) fn submit_keyed(
        &self,
        job: &Job,
        idempotency: Option<&IdempotencyKey>,
        write: impl FnOnce(&mut State) -> Result<Submitted, StoreError>,
    ) -> Result<Submitted, StoreError> {
        let env = job.environment.to_string();
        let mut guard = self.lock();
        let st = &mut *guard;
        let now = Utc::now();
        if let Some(k) = idempotency {
            // An expired key binds no more: treated as absent, and overwritten below.
            let held = st
                .idempotency
                .get(&(env.clone(), k.key.clone()))
                .filter(|(_, _, expires_at)| *expires_at > now);
            if let Some((job_id, hash, _)) = held {
                if *hash != k.request_hash {
                    return Err(StoreError::IdempotencyMismatch {
                        key: k.key.clone(),
                        job_id: job_id.to_string(),
                    });
                }
                let earlier = st.jobs.get(job_id).ok_or_else(|| StoreError::NotFound {
                    kind: "job",
                    id: job_id.to_string(),
                })?;
                return Ok(Submitted {
                    job: earlier.record.job.clone(),
                    took_lock: false,
                    replayed: true,
                });
            }
        }
        let submitted = write(st)?;
        if let Some(k) = idempotency {
            st.idempotency.insert(
                (env, k.key.clone()),
                (
                    job.id.clone(),
                    k.request_hash.clone(),
                    now + chrono::Duration::seconds(crate::records::IDEMPOTENCY_KEY_SECONDS),
                ),
            );
        }
        Ok(submitted)
    }
}

/// A speculative job's write: the job, a pending send, on condition that the id is new and
/// the environment exists; the lock and the queue are not touched.
pub(super) fn submit_lockless(st: &mut State, job: &Job) -> Result<Submitted, StoreError> {
    let env = job.environment.to_string();
    if st.jobs.contains_key(&job.id) {
        return Err(StoreError::AlreadyExists {
            kind: "job",
            id: job.id.to_string(),
        });
    }
    if !st.envs.contains_key(&env) {
        return Err(StoreError::NotFound {
            kind: "environment",
            id: env,
        });
    }
    st.jobs.insert(
        job.id.clone(),
        JobEntry {
            record: JobRecord::new(job),
            gsi3: Some((Gsi3::Pending, pending_sk(job))),
            queue_pos: None,
            offer_sk: None,
        },
    );
    st.env_jobs.entry(env).or_default().insert(job.id.clone());
    st.audited();
    Ok(Submitted {
        job: job.clone(),
        took_lock: false,
        replayed: false,
    })
}

/// Writes `job` under the state's lock: it takes its environment's lock when free, else
/// joins the environment's FIFO queue when `queue_if_busy`, else writes nothing (`None`).
pub(super) fn submit_locked(
    st: &mut State,
    job: &Job,
    queue_if_busy: bool,
) -> Result<Option<Submitted>, StoreError> {
    let env = job.environment.to_string();
    if st.jobs.contains_key(&job.id) {
        return Err(StoreError::AlreadyExists {
            kind: "job",
            id: job.id.to_string(),
        });
    }
    // The lock and the freezes are conditions of the write, as in the table's transaction.
    let frozen = crate::locks::settings_groups(job.environment.group())
        .iter()
        .any(|g| {
            st.group_settings
                .get(g.as_str())
                .is_some_and(|s| s.freeze.is_some())
        });
    let entry = st.envs.get_mut(&env).ok_or_else(|| StoreError::NotFound {
        kind: "environment",
        id: env.clone(),
    })?;
    if let Some(destroyed) = entry.record.destroyed.clone() {
        return Err(StoreError::Destroyed {
            environment: env,
            destroyed,
        });
    }
    if frozen || entry.record.lock.is_some() {
        return Err(StoreError::Locked { environment: env });
    }
    let took_lock = entry.record.active_job.is_none();
    let (gsi3, queue_pos) = if took_lock {
        entry.record.active_job = Some(job.id.clone());
        (Some((Gsi3::Pending, pending_sk(job))), None)
    } else if queue_if_busy {
        // The position is the environment's next sequence number: FIFO in commit order.
        entry.record.queued_count += 1;
        entry.record.queue_seq += 1;
        let position = entry.record.queue_seq;
        st.queues
            .entry(env.clone())
            .or_default()
            .insert(position, job.id.clone());
        (None, Some(position))
    } else {
        return Ok(None);
    };
    st.jobs.insert(
        job.id.clone(),
        JobEntry {
            record: JobRecord::new(job),
            gsi3,
            queue_pos,
            offer_sk: None,
        },
    );
    st.env_jobs.entry(env).or_default().insert(job.id.clone());
    st.audited();
    Ok(Some(Submitted {
        job: job.clone(),
        took_lock,
        replayed: false,
    }))
}
