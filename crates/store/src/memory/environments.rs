//! Environments, their runner links and their lock.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sortie_core::drift::{DriftSkipped, DriftStatus};
use sortie_core::{EnvPath, Environment, GroupPath, RunnerLink};

use super::{runner_key, version_check, EnvEntry, MemoryStore};
use crate::sortkeys::{drift_due_bound, drift_sk, next_drift};
use crate::{
    environments_under, EnvironmentRecord, EnvironmentStore, EnvironmentsUnder, LastApply,
    StoreError, Versioned,
};

fn not_found(path: &EnvPath) -> StoreError {
    StoreError::NotFound {
        kind: "environment",
        id: path.to_string(),
    }
}

#[async_trait]
impl EnvironmentStore for MemoryStore {
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
            drift: None,
            drift_skipped: None,
            last_apply: None,
            next_drift_at: next_drift(&env.settings, Utc::now()),
            lock: None,
            destroyed: None,
            created_at: Some(Utc::now()),
        };
        st.envs.insert(
            path,
            EnvEntry {
                record: record.clone(),
                version: 1,
            },
        );
        let out = Versioned {
            item: record,
            version: 1,
        };
        st.audited();
        Ok(out)
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

    async fn list_environments_under(
        &self,
        group: &GroupPath,
        limit: usize,
    ) -> Result<EnvironmentsUnder, StoreError> {
        let (org, prefix) = environments_under(group)?;
        let st = self.lock();
        // As the table's gsi4 holds them: the organisation's, by path.
        let mut all: Vec<(String, Versioned<EnvironmentRecord>)> = st
            .envs
            .values()
            .filter(|e| e.record.environment.path.org() == org)
            .map(|e| (e.record.environment.path.to_string(), e))
            .filter(|(path, _)| path.starts_with(&prefix))
            .map(|(path, e)| {
                (
                    path,
                    Versioned {
                        item: e.record.clone(),
                        version: e.version,
                    },
                )
            })
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        let truncated = all.len() > limit;
        all.truncate(limit);
        Ok(EnvironmentsUnder {
            environments: all.into_iter().map(|(_, e)| e).collect(),
            truncated,
        })
    }

    async fn count_environments_under(&self, group: &GroupPath) -> Result<u64, StoreError> {
        let (org, prefix) = environments_under(group)?;
        let st = self.lock();
        let n = st
            .envs
            .values()
            .map(|e| &e.record.environment.path)
            .filter(|p| p.org() == org && p.to_string().starts_with(&prefix))
            .count();
        Ok(n as u64)
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
        // The next drift check moves only when the schedule changes, as in the table.
        if entry.record.environment.settings.drift_schedule != env.settings.drift_schedule {
            entry.record.next_drift_at = next_drift(&env.settings, Utc::now());
        }
        let e = &mut entry.record.environment;
        e.env_type = env.env_type.clone();
        e.labels = env.labels.clone();
        e.tags = env.tags.clone();
        e.settings = env.settings.clone();
        let out = Versioned {
            item: entry.record.clone(),
            version: entry.version,
        };
        st.audited();
        Ok(out)
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
        let out = Versioned {
            item: entry.record.clone(),
            version: entry.version,
        };
        st.audited();
        Ok(out)
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
                by: entry
                    .record
                    .active_job
                    .iter()
                    .map(|j| j.to_string())
                    .collect(),
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
        st.audited();
        Ok(())
    }

    async fn due_drift_checks(
        &self,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<EnvironmentRecord>, StoreError> {
        let st = self.lock();
        let bound = drift_due_bound(now);
        let mut due: Vec<(String, &EnvEntry)> = st
            .envs
            .values()
            .filter_map(|e| {
                let next = e.record.next_drift_at?;
                let sk = drift_sk(next, &e.record.environment.path);
                (sk < bound).then_some((sk, e))
            })
            .collect();
        due.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(due
            .into_iter()
            .take(limit.clamp(1, 1000) as usize)
            .map(|(_, e)| e.record.clone())
            .collect())
    }

    async fn advance_drift(
        &self,
        path: &EnvPath,
        fired: DateTime<Utc>,
        next: Option<DateTime<Utc>>,
        skipped: Option<&DriftSkipped>,
    ) -> Result<bool, StoreError> {
        let mut st = self.lock();
        let entry = st
            .envs
            .get_mut(&path.to_string())
            .ok_or_else(|| not_found(path))?;
        if entry.record.next_drift_at != Some(fired) {
            return Ok(false);
        }
        entry.record.next_drift_at = next;
        if let Some(skipped) = skipped {
            entry.record.drift_skipped = Some(skipped.clone());
        }
        Ok(true)
    }

    async fn record_drift(&self, path: &EnvPath, status: &DriftStatus) -> Result<(), StoreError> {
        let mut st = self.lock();
        let entry = st
            .envs
            .get_mut(&path.to_string())
            .ok_or_else(|| not_found(path))?;
        entry.record.drift = Some(status.clone());
        Ok(())
    }

    /// Compared as times, as the table does.
    async fn forget_last_apply(&self, path: &EnvPath, at: DateTime<Utc>) -> Result<(), StoreError> {
        let mut st = self.lock();
        let last = &mut env_entry(&mut st.envs, path)?.record.last_apply;
        if last.as_ref().is_some_and(|recorded| recorded.at < at) {
            *last = None;
        }
        Ok(())
    }

    /// Later means a later `at` (see the trait), compared as times, as the table does.
    async fn record_last_apply(&self, path: &EnvPath, last: &LastApply) -> Result<(), StoreError> {
        let mut st = self.lock();
        let recorded = &mut env_entry(&mut st.envs, path)?.record.last_apply;
        if recorded.as_ref().is_none_or(|r| r.at < last.at) {
            *recorded = Some(last.clone());
        }
        Ok(())
    }
}

/// The environment's entry, or `NotFound`.
fn env_entry<'a>(
    envs: &'a mut std::collections::BTreeMap<String, EnvEntry>,
    path: &EnvPath,
) -> Result<&'a mut EnvEntry, StoreError> {
    envs.get_mut(&path.to_string())
        .ok_or_else(|| not_found(path))
}
