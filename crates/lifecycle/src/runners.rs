//! The runner service: a runner's life (create, read, the ones a group sees, replace,
//! delete) and what `runner check` reads of Sortie's own records (when an agent of an
//! `agent` runner's pool last asked for work). The API checks who may act; this service
//! does it.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use sortie_core::waiting::{agent_seen_check, CHECK_AGENT_SEEN};
use sortie_core::{
    GroupPath, Runner, RunnerCheck, RunnerConfiguration, RunnerId, RunnerSpec, ValidationError,
};
use sortie_store::{Store, StoreError, Versioned};

/// Runners, over the store.
#[derive(Clone)]
pub struct Runners {
    /// The repository.
    pub store: Arc<dyn Store>,
}

/// Why a runner file was not stored.
#[derive(Debug, thiserror::Error)]
pub enum RunnerRefusal {
    /// The document is not a valid runner file.
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// One field names something that is not there (an agent pool of another group).
    #[error("{field}: {problem}")]
    Field {
        /// The field's path.
        field: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The store failed (a stale version is its `VersionMismatch`, a taken name its
    /// `AlreadyExists`).
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Runners {
    /// The service over `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }

    /// The runners `group` may use: its own, then each ancestor's (nearest first), the
    /// root group's shared ones last.
    pub async fn visible_from(
        &self,
        group: &GroupPath,
    ) -> Result<Vec<Versioned<Runner>>, StoreError> {
        let mut runners = vec![];
        for g in group.self_and_ancestors() {
            runners.extend(self.store.list_runners(&g).await?);
        }
        Ok(runners)
    }

    /// Creates runner `id` from a runner file.
    pub async fn create(
        &self,
        id: RunnerId,
        file: &serde_json::Value,
    ) -> Result<Versioned<Runner>, RunnerRefusal> {
        let spec = self.checked(&id, file).await?;
        Ok(self.store.create_runner(&Runner { id, spec }).await?)
    }

    /// Runner `id`.
    pub async fn get(&self, id: &RunnerId) -> Result<Versioned<Runner>, StoreError> {
        self.store.get_runner(id).await
    }

    /// Replaces runner `id`'s file, if it is still at `expected` (when given).
    pub async fn replace(
        &self,
        id: RunnerId,
        file: &serde_json::Value,
        expected: Option<u64>,
    ) -> Result<Versioned<Runner>, RunnerRefusal> {
        let spec = self.checked(&id, file).await?;
        Ok(self
            .store
            .update_runner(&Runner { id, spec }, expected)
            .await?)
    }

    /// Deletes runner `id`, if no environment is linked to it and it is still at
    /// `expected` (when given).
    pub async fn delete(&self, id: &RunnerId, expected: Option<u64>) -> Result<(), StoreError> {
        self.store.delete_runner(id, expected).await
    }

    /// The `agent_seen` line of an `agent` runner's check at `now` (`None` for any other
    /// runner): when an agent of its pool last asked for work, or that the pool is gone.
    pub async fn agent_seen(
        &self,
        runner: &Runner,
        now: DateTime<Utc>,
    ) -> Result<Option<RunnerCheck>, StoreError> {
        let RunnerConfiguration::Agent(agent) = &runner.spec.runner_configuration else {
            return Ok(None);
        };
        Ok(Some(match self.store.get_pool(&agent.pool).await {
            Ok(pool) => agent_seen_check(&agent.pool, pool.item.last_claim_at, now),
            Err(StoreError::NotFound { .. }) => RunnerCheck::failed(
                CHECK_AGENT_SEEN,
                format!("agent pool {} does not exist", agent.pool),
            ),
            Err(e) => return Err(e),
        }))
    }

    /// The runner file read and checked: valid, and an `agent` runner's pool is in the
    /// runner's own group.
    async fn checked(
        &self,
        id: &RunnerId,
        file: &serde_json::Value,
    ) -> Result<RunnerSpec, RunnerRefusal> {
        let spec = RunnerSpec::from_value(file)?;
        if let RunnerConfiguration::Agent(c) = &spec.runner_configuration {
            let group = id.group();
            match self.store.get_pool(&c.pool).await {
                Ok(p) if &p.item.pool.group == group => {}
                Ok(_) | Err(StoreError::NotFound { .. }) => {
                    return Err(RunnerRefusal::Field {
                        field: "runner_configuration.pool".into(),
                        problem: format!(
                            "no agent pool `{}` in group `{}`",
                            c.pool,
                            group.as_str()
                        ),
                    })
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(spec)
    }
}
