//! An in-memory [`Store`] for fast unit tests and benchmarks.
//!
//! [`MemoryStore`] keeps every item behind one mutex and follows the semantics of
//! [`DynamoStore`](crate::DynamoStore) item for item: conditional creates
//! (`AlreadyExists`), versions (`VersionMismatch`), runner link counts (`InUse` listing
//! the linked environments), rule sets per scope, the environment lock (`active_job`)
//! with a FIFO queue ordered by the environment's queue sequence, idempotency keys,
//! transitions checked by [`JobState::can_become`] and by the expected current state,
//! and the sparse `gsi3` index behind [`Store::pending_sends`] and [`Store::active_jobs`]
//! (sort keys compared as the same strings DynamoDB compares).
//!
//! It is a twin, not the reference: the moto-backed tests in `crates/store/tests/dynamo.rs`
//! remain the source of truth for the store's behaviour. Differences that cannot be seen
//! through the trait: idempotency keys never expire (DynamoDB's TTL deletes them lazily,
//! after a day or more), and every call is atomic, so no retry loop is ever needed.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sortie_core::{
    EnvPath, Environment, GroupPath, Job, JobState, Membership, Runner, RunnerId, RunnerLink,
    RunnerRule, Transition,
};

use crate::{
    EnvironmentRecord, IdempotencyKey, JobPage, JobRecord, JobUpdate, MembershipRecord, Released,
    Store, StoreError, Submitted, Versioned,
};

/// The in-memory store. Cheap to create; every instance is an empty table.
#[derive(Debug, Default)]
pub struct MemoryStore {
    state: Mutex<State>,
}

/// Which partition of the sparse `gsi3` index a job is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gsi3 {
    /// Holds its environment's lock but is still `queued`: its send may be lost.
    Pending,
    /// `dispatching` or `running`.
    Active,
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
}

#[derive(Debug, Default)]
struct State {
    /// By (owner group, name): listing a group's runners is a range, in name order.
    runners: BTreeMap<(String, String), RunnerEntry>,
    /// By scope: the scope's rule set and its version.
    rules: HashMap<String, (u64, Vec<RunnerRule>)>,
    /// By environment path.
    envs: BTreeMap<String, EnvEntry>,
    /// By environment path: the waiting jobs by queue position.
    queues: HashMap<String, BTreeMap<u64, String>>,
    /// By job id.
    jobs: HashMap<String, JobEntry>,
    /// By environment path: the ids of its jobs (ids are time-ordered ULIDs).
    env_jobs: HashMap<String, BTreeSet<String>>,
    /// By (environment path, key): the job id and the request hash.
    idempotency: HashMap<(String, String), (String, String)>,
    /// By (org partition, `M#<group>#<id>`), as the table's membership items.
    memberships: BTreeMap<(String, String), MembershipRecord>,
}

fn runner_key(id: &RunnerId) -> (String, String) {
    (id.group().as_str().to_string(), id.name().to_string())
}

fn members_pk(org: Option<&str>) -> String {
    format!("MEMBERS#{}", org.unwrap_or_default())
}

fn pending_sk(job: &Job) -> String {
    format!("{}#{}", job.transitions[0].at.to_rfc3339(), job.id)
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
    if let Some(v) = update.task_arn {
        record.task_arn = Some(v);
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
}

/// The same opaque cursor as the DynamoDB store: the hex of `v1:<last job id>`.
fn encode_cursor(last_id: &str) -> String {
    format!("v1:{last_id}")
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn decode_cursor(cursor: &str) -> Option<String> {
    if !cursor.len().is_multiple_of(2) || cursor.len() > 200 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..cursor.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(cursor.get(i..i + 2)?, 16).ok())
        .collect();
    let text = String::from_utf8(bytes?).ok()?;
    let id = text.strip_prefix("v1:")?;
    (!id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric())).then(|| id.to_string())
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

#[async_trait]
impl Store for MemoryStore {
    async fn create_runner(&self, runner: &Runner) -> Result<Versioned<Runner>, StoreError> {
        let mut st = self.lock();
        let key = runner_key(&runner.id);
        if st.runners.contains_key(&key) {
            return Err(StoreError::AlreadyExists {
                kind: "runner",
                id: runner.id.to_string(),
            });
        }
        st.runners.insert(
            key,
            RunnerEntry {
                runner: runner.clone(),
                version: 1,
                link_count: 0,
            },
        );
        Ok(Versioned {
            item: runner.clone(),
            version: 1,
        })
    }

    async fn get_runner(&self, id: &RunnerId) -> Result<Versioned<Runner>, StoreError> {
        let st = self.lock();
        st.runners
            .get(&runner_key(id))
            .map(|r| Versioned {
                item: r.runner.clone(),
                version: r.version,
            })
            .ok_or_else(|| StoreError::NotFound {
                kind: "runner",
                id: id.to_string(),
            })
    }

    async fn list_runners(&self, group: &GroupPath) -> Result<Vec<Versioned<Runner>>, StoreError> {
        let st = self.lock();
        Ok(st
            .runners
            .iter()
            .filter(|((g, _), _)| g == group.as_str())
            .map(|(_, r)| Versioned {
                item: r.runner.clone(),
                version: r.version,
            })
            .collect())
    }

    async fn update_runner(
        &self,
        runner: &Runner,
        expected: Option<u64>,
    ) -> Result<Versioned<Runner>, StoreError> {
        let mut st = self.lock();
        let entry =
            st.runners
                .get_mut(&runner_key(&runner.id))
                .ok_or_else(|| StoreError::NotFound {
                    kind: "runner",
                    id: runner.id.to_string(),
                })?;
        version_check("runner", runner.id.to_string(), expected, entry.version)?;
        entry.version += 1;
        entry.runner = runner.clone();
        Ok(Versioned {
            item: runner.clone(),
            version: entry.version,
        })
    }

    async fn delete_runner(&self, id: &RunnerId, expected: Option<u64>) -> Result<(), StoreError> {
        let mut st = self.lock();
        let key = runner_key(id);
        let entry = st.runners.get(&key).ok_or_else(|| StoreError::NotFound {
            kind: "runner",
            id: id.to_string(),
        })?;
        version_check("runner", id.to_string(), expected, entry.version)?;
        if entry.link_count > 0 {
            return Err(StoreError::InUse {
                kind: "runner",
                id: id.to_string(),
                by: st.linked_envs(id),
            });
        }
        st.runners.remove(&key);
        Ok(())
    }

    async fn create_rule(&self, rule: &RunnerRule) -> Result<Versioned<RunnerRule>, StoreError> {
        let mut st = self.lock();
        let set = st
            .rules
            .entry(rule.scope.as_str().to_string())
            .or_insert_with(|| (0, vec![]));
        if set.1.iter().any(|r| r.id == rule.id) {
            return Err(StoreError::AlreadyExists {
                kind: "rule",
                id: format!("{}:{}", rule.scope.as_str(), rule.id),
            });
        }
        set.1.push(rule.clone());
        set.0 += 1;
        Ok(Versioned {
            item: rule.clone(),
            version: set.0,
        })
    }

    async fn list_rules(
        &self,
        scope: &GroupPath,
    ) -> Result<Versioned<Vec<RunnerRule>>, StoreError> {
        let st = self.lock();
        Ok(match st.rules.get(scope.as_str()) {
            Some((version, rules)) => Versioned {
                item: rules.clone(),
                version: *version,
            },
            None => Versioned {
                item: vec![],
                version: 0,
            },
        })
    }

    async fn rules_for(&self, group: &GroupPath) -> Result<Vec<RunnerRule>, StoreError> {
        let st = self.lock();
        Ok(group
            .self_and_ancestors()
            .iter()
            .filter_map(|g| st.rules.get(g.as_str()))
            .flat_map(|(_, rules)| rules.iter().cloned())
            .collect())
    }

    async fn update_rule(
        &self,
        rule: &RunnerRule,
        expected: Option<u64>,
    ) -> Result<Versioned<RunnerRule>, StoreError> {
        let rule_id = format!("{}:{}", rule.scope.as_str(), rule.id);
        let not_found = || StoreError::NotFound {
            kind: "rule",
            id: rule_id.clone(),
        };
        let mut st = self.lock();
        let set = st
            .rules
            .get_mut(rule.scope.as_str())
            .ok_or_else(not_found)?;
        version_check("rule", rule_id.clone(), expected, set.0)?;
        let slot = set
            .1
            .iter_mut()
            .find(|r| r.id == rule.id)
            .ok_or_else(not_found)?;
        *slot = rule.clone();
        set.0 += 1;
        Ok(Versioned {
            item: rule.clone(),
            version: set.0,
        })
    }

    async fn delete_rule(
        &self,
        scope: &GroupPath,
        id: &str,
        expected: Option<u64>,
    ) -> Result<(), StoreError> {
        let rule_id = format!("{}:{id}", scope.as_str());
        let mut st = self.lock();
        // Like the table's rule-set item, an emptied set stays, keeping its version.
        let set = st
            .rules
            .get_mut(scope.as_str())
            .ok_or_else(|| StoreError::NotFound {
                kind: "rule",
                id: rule_id.clone(),
            })?;
        version_check("rule", rule_id.clone(), expected, set.0)?;
        let before = set.1.len();
        set.1.retain(|r| r.id != id);
        if set.1.len() == before {
            return Err(StoreError::NotFound {
                kind: "rule",
                id: rule_id,
            });
        }
        set.0 += 1;
        Ok(())
    }

    async fn create_environment(
        &self,
        env: &Environment,
    ) -> Result<Versioned<EnvironmentRecord>, StoreError> {
        let mut st = self.lock();
        let path = env.path.to_string();
        if st.envs.contains_key(&path) {
            return Err(StoreError::AlreadyExists {
                kind: "environment",
                id: path,
            });
        }
        let runner = st
            .runners
            .get_mut(&runner_key(&env.runner.runner_id))
            .ok_or_else(|| StoreError::NotFound {
                kind: "runner",
                id: env.runner.runner_id.to_string(),
            })?;
        runner.link_count += 1;
        let record = EnvironmentRecord {
            environment: env.clone(),
            active_job: None,
            queued_count: 0,
            queue_seq: 0,
        };
        st.envs.insert(
            path,
            EnvEntry {
                record: record.clone(),
                version: 1,
            },
        );
        Ok(Versioned {
            item: record,
            version: 1,
        })
    }

    async fn get_environment(
        &self,
        path: &EnvPath,
    ) -> Result<Versioned<EnvironmentRecord>, StoreError> {
        let st = self.lock();
        st.envs
            .get(&path.to_string())
            .map(|e| Versioned {
                item: e.record.clone(),
                version: e.version,
            })
            .ok_or_else(|| StoreError::NotFound {
                kind: "environment",
                id: path.to_string(),
            })
    }

    async fn list_environments(
        &self,
        group: &GroupPath,
    ) -> Result<Vec<Versioned<EnvironmentRecord>>, StoreError> {
        let st = self.lock();
        let mut out: Vec<Versioned<EnvironmentRecord>> = st
            .envs
            .values()
            .filter(|e| e.record.environment.path.group() == group)
            .map(|e| Versioned {
                item: e.record.clone(),
                version: e.version,
            })
            .collect();
        out.sort_by(|a, b| {
            a.item
                .environment
                .path
                .name()
                .cmp(b.item.environment.path.name())
        });
        Ok(out)
    }

    async fn update_environment(
        &self,
        env: &Environment,
        expected: Option<u64>,
    ) -> Result<Versioned<EnvironmentRecord>, StoreError> {
        let id = env.path.to_string();
        let mut st = self.lock();
        let entry = st.envs.get_mut(&id).ok_or_else(|| StoreError::NotFound {
            kind: "environment",
            id: id.clone(),
        })?;
        version_check("environment", id, expected, entry.version)?;
        entry.version += 1;
        let e = &mut entry.record.environment;
        e.env_type = env.env_type.clone();
        e.labels = env.labels.clone();
        e.tags = env.tags.clone();
        Ok(Versioned {
            item: entry.record.clone(),
            version: entry.version,
        })
    }

    async fn relink_environment(
        &self,
        path: &EnvPath,
        link: &RunnerLink,
        expected: Option<u64>,
    ) -> Result<Versioned<EnvironmentRecord>, StoreError> {
        let id = path.to_string();
        let mut st = self.lock();
        let entry = st.envs.get(&id).ok_or_else(|| StoreError::NotFound {
            kind: "environment",
            id: id.clone(),
        })?;
        version_check("environment", id.clone(), expected, entry.version)?;
        let version = entry.version;
        let old = runner_key(&entry.record.environment.runner.runner_id);
        let new = runner_key(&link.runner_id);
        if old != new {
            if !st.runners.contains_key(&new) {
                return Err(StoreError::NotFound {
                    kind: "runner",
                    id: link.runner_id.to_string(),
                });
            }
            if !st.runners.contains_key(&old) {
                // The DynamoDB transaction fails on the old runner's condition and reports
                // it as a version conflict; do the same.
                return Err(StoreError::VersionMismatch {
                    kind: "environment",
                    id,
                    expected: version,
                    actual: version,
                });
            }
            if let Some(r) = st.runners.get_mut(&new) {
                r.link_count += 1;
            }
            if let Some(r) = st.runners.get_mut(&old) {
                r.link_count = r.link_count.saturating_sub(1);
            }
        }
        let entry = st
            .envs
            .get_mut(&id)
            .expect("read above, under the same lock");
        entry.record.environment.runner = link.clone();
        entry.version += 1;
        Ok(Versioned {
            item: entry.record.clone(),
            version: entry.version,
        })
    }

    async fn delete_environment(
        &self,
        path: &EnvPath,
        expected: Option<u64>,
    ) -> Result<(), StoreError> {
        let id = path.to_string();
        let mut st = self.lock();
        let entry = st.envs.get(&id).ok_or_else(|| StoreError::NotFound {
            kind: "environment",
            id: id.clone(),
        })?;
        version_check("environment", id.clone(), expected, entry.version)?;
        if entry.record.active_job.is_some() || entry.record.queued_count > 0 {
            return Err(StoreError::InUse {
                kind: "environment",
                id,
                by: entry.record.active_job.clone().into_iter().collect(),
            });
        }
        let runner = runner_key(&entry.record.environment.runner.runner_id);
        let version = entry.version;
        let Some(r) = st.runners.get_mut(&runner) else {
            // As in DynamoDB: the runner's condition fails and is reported as a conflict.
            return Err(StoreError::VersionMismatch {
                kind: "environment",
                id,
                expected: version,
                actual: version,
            });
        };
        r.link_count = r.link_count.saturating_sub(1);
        st.envs.remove(&id);
        st.queues.remove(&id);
        Ok(())
    }

    async fn submit_job(
        &self,
        job: &Job,
        idempotency: Option<&IdempotencyKey>,
    ) -> Result<Submitted, StoreError> {
        let env = job.environment.to_string();
        let mut guard = self.lock();
        let st = &mut *guard;
        if let Some(k) = idempotency {
            if let Some((job_id, hash)) = st.idempotency.get(&(env.clone(), k.key.clone())) {
                if *hash != k.request_hash {
                    return Err(StoreError::IdempotencyMismatch {
                        key: k.key.clone(),
                        job_id: job_id.clone(),
                    });
                }
                let earlier = st.jobs.get(job_id).ok_or_else(|| StoreError::NotFound {
                    kind: "job",
                    id: job_id.clone(),
                })?;
                return Ok(Submitted {
                    job: earlier.record.job.clone(),
                    took_lock: false,
                    replayed: true,
                });
            }
        }
        if st.jobs.contains_key(&job.id) {
            return Err(StoreError::AlreadyExists {
                kind: "job",
                id: job.id.clone(),
            });
        }
        let entry = st.envs.get_mut(&env).ok_or_else(|| StoreError::NotFound {
            kind: "environment",
            id: env.clone(),
        })?;
        let took_lock = entry.record.active_job.is_none();
        let (gsi3, queue_pos) = if took_lock {
            entry.record.active_job = Some(job.id.clone());
            (Some((Gsi3::Pending, pending_sk(job))), None)
        } else {
            // The position is the environment's next sequence number: FIFO in commit order.
            entry.record.queued_count += 1;
            entry.record.queue_seq += 1;
            let position = entry.record.queue_seq;
            st.queues
                .entry(env.clone())
                .or_default()
                .insert(position, job.id.clone());
            (None, Some(position))
        };
        st.jobs.insert(
            job.id.clone(),
            JobEntry {
                record: JobRecord {
                    job: job.clone(),
                    task_arn: None,
                    token_hash: None,
                    started_at: None,
                    cancel_requested_by: None,
                    timeout_requested_at: None,
                    summary: None,
                    updated_at: job.transitions[0].at,
                },
                gsi3,
                queue_pos,
            },
        );
        st.env_jobs
            .entry(env.clone())
            .or_default()
            .insert(job.id.clone());
        if let Some(k) = idempotency {
            st.idempotency.insert(
                (env, k.key.clone()),
                (job.id.clone(), k.request_hash.clone()),
            );
        }
        Ok(Submitted {
            job: job.clone(),
            took_lock,
            replayed: false,
        })
    }

    async fn get_job(&self, id: &str) -> Result<JobRecord, StoreError> {
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
                next: None,
            });
        };
        let limit = limit.clamp(1, 100) as usize;
        let mut newest_first = ids
            .iter()
            .rev()
            .filter(|id| after.as_ref().is_none_or(|a| id.as_str() < a.as_str()));
        let page: Vec<&String> = newest_first.by_ref().take(limit).collect();
        // A next page only when there is more, as moto answers (DynamoDB itself may also
        // return a cursor to an empty last page).
        let next = match (page.last(), newest_first.next()) {
            (Some(last), Some(_)) => Some(encode_cursor(last)),
            _ => None,
        };
        let jobs = page
            .into_iter()
            .filter_map(|id| st.jobs.get(id).map(|j| j.record.job.clone()))
            .collect();
        Ok(JobPage { jobs, next })
    }

    async fn transition_job(
        &self,
        id: &str,
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
        if entry.record.job.state != from {
            return Err(StoreError::StateConflict {
                job_id: id.to_string(),
                expected: from,
                actual: entry.record.job.state,
            });
        }
        let record = &mut entry.record;
        record.job.state = to;
        record.job.transitions.push(Transition {
            from: Some(from),
            to,
            at,
            reason: reason.to_string(),
        });
        record.updated_at = at;
        apply_update(record, update);
        // The sparse gsi3 index: PENDING while a lock holder waits to be sent (queued),
        // ACTIVE while launched (dispatching, running), absent once terminal.
        let sk = || format!("{}#{id}", at.to_rfc3339());
        entry.gsi3 = if to == JobState::Queued {
            Some((Gsi3::Pending, sk()))
        } else if to.is_active() {
            Some((Gsi3::Active, sk()))
        } else {
            None
        };
        Ok(entry.record.clone())
    }

    async fn cancel_waiting_job(
        &self,
        id: &str,
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
        Ok(record)
    }

    async fn release_environment(
        &self,
        env: &EnvPath,
        job_id: &str,
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
        id: &str,
        at: DateTime<Utc>,
        update: JobUpdate,
    ) -> Result<JobRecord, StoreError> {
        let mut st = self.lock();
        let entry = st.jobs.get_mut(id).ok_or_else(|| StoreError::NotFound {
            kind: "job",
            id: id.to_string(),
        })?;
        if !entry.record.job.state.is_active() {
            return Err(StoreError::StateConflict {
                job_id: id.to_string(),
                expected: JobState::Running,
                actual: entry.record.job.state,
            });
        }
        entry.record.updated_at = at;
        apply_update(&mut entry.record, update);
        Ok(entry.record.clone())
    }

    async fn active_jobs(&self, limit: u32) -> Result<Vec<JobRecord>, StoreError> {
        let st = self.lock();
        Ok(st
            .gsi3(Gsi3::Active, None, limit)
            .into_iter()
            .map(|j| j.record.clone())
            .collect())
    }

    async fn pending_sends(
        &self,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<Job>, StoreError> {
        let st = self.lock();
        let before = before.to_rfc3339();
        Ok(st
            .gsi3(Gsi3::Pending, Some(&before), limit)
            .into_iter()
            .map(|j| j.record.job.clone())
            .collect())
    }

    async fn put_membership(&self, record: &MembershipRecord) -> Result<(), StoreError> {
        let key = (
            members_pk(record.membership.group.org()),
            format!("M#{}#{}", record.membership.group.as_str(), record.id),
        );
        let mut st = self.lock();
        if st.memberships.contains_key(&key) {
            return Err(StoreError::AlreadyExists {
                kind: "membership",
                id: record.id.clone(),
            });
        }
        st.memberships.insert(key, record.clone());
        Ok(())
    }

    async fn delete_membership(&self, group: &GroupPath, id: &str) -> Result<(), StoreError> {
        let key = (
            members_pk(group.org()),
            format!("M#{}#{id}", group.as_str()),
        );
        let mut st = self.lock();
        st.memberships
            .remove(&key)
            .map(|_| ())
            .ok_or_else(|| StoreError::NotFound {
                kind: "membership",
                id: id.to_string(),
            })
    }

    async fn list_memberships(
        &self,
        group: &GroupPath,
    ) -> Result<Vec<MembershipRecord>, StoreError> {
        let pk = members_pk(group.org());
        let prefix = format!("M#{}#", group.as_str());
        let st = self.lock();
        Ok(st
            .memberships
            .iter()
            .filter(|((p, sk), _)| *p == pk && sk.starts_with(&prefix))
            .map(|(_, m)| m.clone())
            .collect())
    }

    async fn memberships_for(&self, org: Option<&str>) -> Result<Vec<Membership>, StoreError> {
        let mut pks = vec![members_pk(None)];
        if org.is_some() {
            pks.push(members_pk(org));
        }
        let st = self.lock();
        Ok(pks
            .iter()
            .flat_map(|pk| {
                st.memberships
                    .iter()
                    .filter(move |((p, _), _)| p == pk)
                    .map(|(_, m)| m.membership.clone())
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use chrono::Duration;
    use sortie_core::{JobRequest, RunnerSpec};

    use super::*;

    const ENV: &str = "acme/payments/prod";

    fn runner(id: &str) -> Runner {
        Runner {
            id: RunnerId::parse(id).unwrap(),
            spec: RunnerSpec::parse("runner_configuration: {type: local}\nstate_storage_configuration: {type: local, directory: /tmp/s}").unwrap(),
        }
    }

    fn environment(path: &str, runner: &str) -> Environment {
        Environment {
            path: EnvPath::parse(path).unwrap(),
            env_type: "development".into(),
            labels: BTreeMap::new(),
            tags: BTreeSet::new(),
            runner: RunnerLink {
                runner_id: RunnerId::parse(runner).unwrap(),
                rule_id: "r1".into(),
                linked_by: "alice".into(),
                linked_at: Utc::now(),
            },
        }
    }

    fn job(env: &str) -> Job {
        Job::new(
            crate::new_id(),
            EnvPath::parse(env).unwrap(),
            RunnerId::parse("acme/local").unwrap(),
            JobRequest::parse(r#"{"operation":"apply","files":{"main.tf":""}}"#).unwrap(),
            "alice".into(),
            Utc::now(),
        )
    }

    async fn store_with(paths: &[&str]) -> MemoryStore {
        let s = MemoryStore::new();
        s.create_runner(&runner("acme/local")).await.unwrap();
        for p in paths {
            s.create_environment(&environment(p, "acme/local"))
                .await
                .unwrap();
        }
        s
    }

    fn env() -> EnvPath {
        EnvPath::parse(ENV).unwrap()
    }

    async fn step(s: &MemoryStore, id: &str, from: JobState, to: JobState) -> JobRecord {
        s.transition_job(id, from, to, Utc::now(), "step", JobUpdate::default())
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn the_first_submit_takes_the_lock_and_the_rest_wait_in_fifo_order() {
        let s = store_with(&[ENV]).await;
        let jobs: Vec<Job> = (0..20).map(|_| job(ENV)).collect();
        let mut took = vec![];
        for j in &jobs {
            took.push(s.submit_job(j, None).await.unwrap().took_lock);
        }
        assert!(took[0] && took[1..].iter().all(|t| !t));
        let rec = s.get_environment(&env()).await.unwrap();
        assert_eq!(rec.item.active_job.as_deref(), Some(jobs[0].id.as_str()));
        assert_eq!((rec.item.queued_count, rec.item.queue_seq), (19, 19));
        assert_eq!(rec.version, 1, "the lock never bumps the version");
        assert!(matches!(
            s.delete_environment(&env(), None).await,
            Err(StoreError::InUse { by, .. }) if by == vec![jobs[0].id.clone()]
        ));

        let mut order = vec![jobs[0].id.clone()];
        let mut holder = jobs[0].id.clone();
        assert_eq!(
            s.release_environment(&env(), &jobs[5].id).await.unwrap(),
            Released::NotHeld,
            "only the holder releases"
        );
        while let Released::HandedTo(next) = s.release_environment(&env(), &holder).await.unwrap() {
            assert_eq!(
                s.release_environment(&env(), &holder).await.unwrap(),
                Released::NotHeld,
                "a second release is harmless"
            );
            holder = next.id.clone();
            order.push(next.id);
        }
        assert_eq!(order, jobs.iter().map(|j| j.id.clone()).collect::<Vec<_>>());
        let rec = s.get_environment(&env()).await.unwrap().item;
        assert_eq!((rec.active_job, rec.queued_count), (None, 0));
        s.delete_environment(&env(), Some(1)).await.unwrap();
    }

    #[tokio::test]
    async fn a_released_lock_is_taken_again_by_the_next_submit() {
        let s = store_with(&[ENV]).await;
        let a = job(ENV);
        assert!(s.submit_job(&a, None).await.unwrap().took_lock);
        assert_eq!(
            s.release_environment(&env(), &a.id).await.unwrap(),
            Released::Idle
        );
        assert!(s.submit_job(&job(ENV), None).await.unwrap().took_lock);
        assert!(matches!(
            s.submit_job(&job("acme/payments/ghost"), None).await,
            Err(StoreError::NotFound {
                kind: "environment",
                ..
            })
        ));
        assert!(matches!(
            s.submit_job(&a, None).await,
            Err(StoreError::AlreadyExists { kind: "job", .. })
        ));
    }

    #[tokio::test]
    async fn environments_lock_independently() {
        let s = store_with(&[ENV, "acme/payments/eu"]).await;
        assert!(s.submit_job(&job(ENV), None).await.unwrap().took_lock);
        assert!(
            s.submit_job(&job("acme/payments/eu"), None)
                .await
                .unwrap()
                .took_lock
        );
        assert!(!s.submit_job(&job(ENV), None).await.unwrap().took_lock);
    }

    #[tokio::test]
    async fn claim_is_one_conditional_transition_and_a_second_claim_conflicts() {
        let s = store_with(&[ENV]).await;
        let j = job(ENV);
        s.submit_job(&j, None).await.unwrap();
        let claimed = step(&s, &j.id, JobState::Queued, JobState::Dispatching).await;
        assert_eq!(claimed.job.state, JobState::Dispatching);
        match s
            .transition_job(
                &j.id,
                JobState::Queued,
                JobState::Dispatching,
                Utc::now(),
                "again",
                JobUpdate::default(),
            )
            .await
        {
            Err(StoreError::StateConflict {
                expected: JobState::Queued,
                actual: JobState::Dispatching,
                ..
            }) => {}
            other => panic!("{other:?}"),
        }
        // The state machine refuses an illegal transition before looking at the job.
        assert!(matches!(
            s.transition_job(
                &j.id,
                JobState::Running,
                JobState::Dispatching,
                Utc::now(),
                "x",
                JobUpdate::default()
            )
            .await,
            Err(StoreError::StateConflict {
                expected: JobState::Running,
                actual: JobState::Running,
                ..
            })
        ));
        let running = s
            .transition_job(
                &j.id,
                JobState::Dispatching,
                JobState::Running,
                Utc::now(),
                "launched",
                JobUpdate {
                    task_arn: Some("arn:task".into()),
                    token_hash: Some("0f".into()),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(running.task_arn.as_deref(), Some("arn:task"));
        let states: Vec<JobState> = running.job.transitions.iter().map(|t| t.to).collect();
        assert_eq!(
            states,
            vec![JobState::Queued, JobState::Dispatching, JobState::Running]
        );
        assert_eq!(s.get_job(&j.id).await.unwrap(), running);
        assert!(matches!(
            s.transition_job(
                "ghost",
                JobState::Queued,
                JobState::Dispatching,
                Utc::now(),
                "x",
                JobUpdate::default()
            )
            .await,
            Err(StoreError::NotFound { kind: "job", .. })
        ));
    }

    #[tokio::test]
    async fn racing_claims_on_one_job_succeed_exactly_once() {
        let s = std::sync::Arc::new(store_with(&[ENV]).await);
        let j = job(ENV);
        s.submit_job(&j, None).await.unwrap();
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let (s, id) = (s.clone(), j.id.clone());
                tokio::spawn(async move {
                    s.transition_job(
                        &id,
                        JobState::Queued,
                        JobState::Dispatching,
                        Utc::now(),
                        "claimed",
                        JobUpdate::default(),
                    )
                    .await
                    .is_ok()
                })
            })
            .collect();
        let mut wins = 0;
        for t in tasks {
            wins += usize::from(t.await.unwrap());
        }
        assert_eq!(wins, 1);
    }

    async fn pending_ids(s: &MemoryStore, before: DateTime<Utc>) -> Vec<String> {
        s.pending_sends(before, 10)
            .await
            .unwrap()
            .into_iter()
            .map(|j| j.id)
            .collect()
    }

    #[tokio::test]
    async fn pending_sends_and_active_jobs_follow_the_sparse_index() {
        let s = store_with(&[ENV]).await;
        let (a, b) = (job(ENV), job(ENV));
        s.submit_job(&a, None).await.unwrap();
        s.submit_job(&b, None).await.unwrap();
        let later = Utc::now() + Duration::seconds(1);
        assert_eq!(
            pending_ids(&s, later).await,
            vec![a.id.clone()],
            "only the lock holder"
        );
        assert!(s
            .pending_sends(a.transitions[0].at, 10)
            .await
            .unwrap()
            .is_empty());
        assert!(matches!(
            s.mark_job(&a.id, Utc::now(), JobUpdate::default()).await,
            Err(StoreError::StateConflict {
                actual: JobState::Queued,
                ..
            })
        ));
        step(&s, &a.id, JobState::Queued, JobState::Dispatching).await;
        assert!(pending_ids(&s, later).await.is_empty());
        let active: Vec<String> = s
            .active_jobs(10)
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.job.id)
            .collect();
        assert_eq!(active, vec![a.id.clone()]);
        let marked = s
            .mark_job(
                &a.id,
                Utc::now(),
                JobUpdate {
                    cancel_requested_by: Some("alice".into()),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(
            (marked.job.state, marked.cancel_requested_by.as_deref()),
            (JobState::Dispatching, Some("alice"))
        );
        // A retryable launch failure: a pending send again, no longer active.
        step(&s, &a.id, JobState::Dispatching, JobState::Queued).await;
        assert!(s.active_jobs(10).await.unwrap().is_empty());
        assert_eq!(pending_ids(&s, later).await, vec![a.id.clone()]);
        step(&s, &a.id, JobState::Queued, JobState::Dispatching).await;
        step(&s, &a.id, JobState::Dispatching, JobState::Running).await;
        step(&s, &a.id, JobState::Running, JobState::Succeeded).await;
        assert!(s.active_jobs(10).await.unwrap().is_empty(), "terminal");
        assert!(pending_ids(&s, later).await.is_empty());
        // The hand-over makes the next job a pending send.
        assert!(
            matches!(s.release_environment(&env(), &a.id).await.unwrap(), Released::HandedTo(n) if n.id == b.id)
        );
        assert_eq!(pending_ids(&s, later).await, vec![b.id.clone()]);
    }

    #[tokio::test]
    async fn a_waiting_job_is_canceled_and_leaves_the_queue_but_the_holder_is_not() {
        let s = store_with(&[ENV]).await;
        let (a, b, c) = (job(ENV), job(ENV), job(ENV));
        for j in [&a, &b, &c] {
            s.submit_job(j, None).await.unwrap();
        }
        let canceled = s
            .cancel_waiting_job(&b.id, Utc::now(), "canceled by alice")
            .await
            .unwrap();
        assert_eq!(canceled.job.state, JobState::Canceled);
        assert_eq!(s.get_job(&b.id).await.unwrap(), canceled);
        assert_eq!(
            s.get_environment(&env()).await.unwrap().item.queued_count,
            1
        );
        assert!(matches!(
            s.cancel_waiting_job(&b.id, Utc::now(), "again").await,
            Err(StoreError::StateConflict {
                actual: JobState::Canceled,
                ..
            })
        ));
        assert!(
            matches!(
                s.cancel_waiting_job(&a.id, Utc::now(), "holder").await,
                Err(StoreError::StateConflict {
                    actual: JobState::Queued,
                    ..
                })
            ),
            "the lock holder is not waiting"
        );
        assert!(
            matches!(s.release_environment(&env(), &a.id).await.unwrap(), Released::HandedTo(n) if n.id == c.id),
            "the canceled job never gets the lock"
        );
        assert_eq!(
            s.release_environment(&env(), &c.id).await.unwrap(),
            Released::Idle
        );
    }

    #[tokio::test]
    async fn idempotent_submits_replay_and_refuse_a_changed_request() {
        let s = store_with(&[ENV]).await;
        let key = |h: &str| IdempotencyKey {
            key: "deploy-42".into(),
            request_hash: h.into(),
        };
        let first = s.submit_job(&job(ENV), Some(&key("h1"))).await.unwrap();
        let retry = s.submit_job(&job(ENV), Some(&key("h1"))).await.unwrap();
        assert!(retry.replayed && !retry.took_lock);
        assert_eq!(retry.job.id, first.job.id);
        assert!(matches!(
            s.submit_job(&job(ENV), Some(&key("h2"))).await,
            Err(StoreError::IdempotencyMismatch { job_id, .. }) if job_id == first.job.id
        ));
        assert_eq!(s.list_jobs(&env(), 10, None).await.unwrap().jobs.len(), 1);
    }

    #[tokio::test]
    async fn jobs_page_newest_first() {
        let s = store_with(&[ENV]).await;
        let mut ids = vec![];
        for _ in 0..5 {
            let j = job(ENV);
            ids.push(j.id.clone());
            s.submit_job(&j, None).await.unwrap();
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        ids.reverse();
        let p1 = s.list_jobs(&env(), 2, None).await.unwrap();
        let p2 = s.list_jobs(&env(), 2, p1.next.as_deref()).await.unwrap();
        let p3 = s.list_jobs(&env(), 2, p2.next.as_deref()).await.unwrap();
        assert!(p3.next.is_none());
        let got: Vec<String> = [p1.jobs, p2.jobs, p3.jobs]
            .concat()
            .into_iter()
            .map(|j| j.id)
            .collect();
        assert_eq!(got, ids);
        assert!(matches!(
            s.list_jobs(&env(), 2, Some("zz")).await,
            Err(StoreError::NotFound { kind: "cursor", .. })
        ));
    }

    #[tokio::test]
    async fn runners_count_their_links_and_versions_guard_changes() {
        let s = store_with(&["acme/payments/a", "acme/payments/b"]).await;
        let id = RunnerId::parse("acme/local").unwrap();
        assert!(matches!(
            s.create_runner(&runner("acme/local")).await,
            Err(StoreError::AlreadyExists { kind: "runner", .. })
        ));
        assert!(matches!(
            s.delete_runner(&id, None).await,
            Err(StoreError::InUse { by, .. }) if by == vec!["acme/payments/a", "acme/payments/b"]
        ));
        assert!(matches!(
            s.update_runner(&runner("acme/local"), Some(7)).await,
            Err(StoreError::VersionMismatch {
                expected: 7,
                actual: 1,
                ..
            })
        ));
        assert_eq!(
            s.update_runner(&runner("acme/local"), Some(1))
                .await
                .unwrap()
                .version,
            2
        );
        s.create_runner(&runner("acme/other")).await.unwrap();
        let link = environment(ENV, "acme/other").runner;
        let a = EnvPath::parse("acme/payments/a").unwrap();
        assert!(matches!(
            s.relink_environment(&a, &link, Some(3)).await,
            Err(StoreError::VersionMismatch { .. })
        ));
        assert_eq!(
            s.relink_environment(&a, &link, Some(1))
                .await
                .unwrap()
                .version,
            2
        );
        s.delete_environment(&EnvPath::parse("acme/payments/b").unwrap(), None)
            .await
            .unwrap();
        s.delete_runner(&id, Some(2)).await.unwrap();
        assert!(matches!(
            s.delete_runner(&RunnerId::parse("acme/other").unwrap(), None)
                .await,
            Err(StoreError::InUse { by, .. }) if by == vec!["acme/payments/a"]
        ));
        let names: Vec<String> = s
            .list_runners(&GroupPath::parse("acme").unwrap())
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.item.id.to_string())
            .collect();
        assert_eq!(names, vec!["acme/other"]);
    }

    #[tokio::test]
    async fn rules_per_scope_and_over_ancestors() {
        let s = MemoryStore::new();
        let rule = |scope: &str, id: &str| RunnerRule {
            id: id.into(),
            scope: GroupPath::parse(scope).unwrap(),
            runner_id: RunnerId::parse("shared").unwrap(),
            criteria: Default::default(),
            priority: 0,
        };
        for (scope, id) in [
            ("", "root"),
            ("acme", "a"),
            ("acme/pay", "p"),
            ("globex", "g"),
        ] {
            s.create_rule(&rule(scope, id)).await.unwrap();
        }
        assert!(matches!(
            s.create_rule(&rule("acme", "a")).await,
            Err(StoreError::AlreadyExists { kind: "rule", .. })
        ));
        let acme = GroupPath::parse("acme").unwrap();
        s.create_rule(&rule("acme", "b")).await.unwrap();
        assert_eq!(s.list_rules(&acme).await.unwrap().version, 2);
        let mut ids: Vec<String> = s
            .rules_for(&GroupPath::parse("acme/pay/eu").unwrap())
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect();
        ids.sort();
        assert_eq!(ids, vec!["a", "b", "p", "root"]);
        assert!(matches!(
            s.delete_rule(&acme, "a", Some(1)).await,
            Err(StoreError::VersionMismatch { .. })
        ));
        s.delete_rule(&acme, "a", Some(2)).await.unwrap();
        assert!(matches!(
            s.delete_rule(&acme, "a", None).await,
            Err(StoreError::NotFound { kind: "rule", .. })
        ));
    }

    #[tokio::test]
    async fn memberships_are_per_group_and_per_org() {
        use sortie_core::{Grantee, Role};
        let s = MemoryStore::new();
        let m = |group: &str| MembershipRecord {
            id: crate::new_id(),
            membership: Membership {
                group: GroupPath::parse(group).unwrap(),
                role: Role::Viewer,
                grantee: Grantee::Subject {
                    subject: "alice".into(),
                    issuer: None,
                },
            },
            granted_by: "root".into(),
            granted_at: Utc::now(),
        };
        let a = m("acme/payments");
        for r in [&a, &m("acme"), &m("acme/pay"), &m("globex"), &m("")] {
            s.put_membership(r).await.unwrap();
        }
        assert!(matches!(
            s.put_membership(&a).await,
            Err(StoreError::AlreadyExists { .. })
        ));
        let pay = GroupPath::parse("acme/pay").unwrap();
        assert_eq!(s.list_memberships(&pay).await.unwrap().len(), 1);
        assert_eq!(s.memberships_for(Some("acme")).await.unwrap().len(), 4);
        assert_eq!(s.memberships_for(None).await.unwrap().len(), 1);
        let payments = GroupPath::parse("acme/payments").unwrap();
        s.delete_membership(&payments, &a.id).await.unwrap();
        assert!(matches!(
            s.delete_membership(&payments, &a.id).await,
            Err(StoreError::NotFound { .. })
        ));
    }
}
