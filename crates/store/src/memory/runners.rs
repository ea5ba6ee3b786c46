//! Runners, keyed by (owner group, name), with their link counts.

use async_trait::async_trait;
use sortie_core::{GroupPath, Runner, RunnerId};

use super::{runner_key, version_check, MemoryStore, RunnerEntry};
use crate::{RunnerStore, StoreError, Versioned};

#[async_trait]
impl RunnerStore for MemoryStore {
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
        st.audited();
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
        let version = entry.version;
        st.audited();
        Ok(Versioned {
            item: runner.clone(),
            version,
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
        st.audited();
        Ok(())
    }
}
