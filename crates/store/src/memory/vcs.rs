//! Pull requests in memory, keyed as the table's items.

use std::collections::{BTreeMap, BTreeSet};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sortie_core::vcs::connection::VcsConnection;
use sortie_core::vcs::pull::PullRequestRecord;
use sortie_core::vcs::reconcile::OpenPulls;
use sortie_core::vcs::VcsProvider;
use sortie_core::EnvPath;

use super::MemoryStore;
use crate::vcs::{pull_id, repository_key, MAX_BOUND_ENVIRONMENTS};
use crate::{StoreError, VcsStore, Versioned};

/// The pull-request part of the in-memory table.
#[derive(Debug, Default)]
pub(super) struct VcsState {
    connections: BTreeMap<(String, &'static str), VcsConnection>,
    deliveries: BTreeMap<(&'static str, String), DateTime<Utc>>,
    bindings: BTreeMap<(&'static str, String), BTreeSet<String>>,
    pulls: BTreeMap<(&'static str, String, u64), Versioned<PullRequestRecord>>,
    open: BTreeMap<(String, &'static str, String, String), OpenPulls>,
}

#[async_trait]
impl VcsStore for MemoryStore {
    async fn put_connection(&self, connection: &VcsConnection) -> Result<(), StoreError> {
        let mut st = self.lock();
        st.vcs.connections.insert(
            (connection.org.clone(), connection.provider.as_str()),
            connection.clone(),
        );
        st.audited();
        Ok(())
    }

    async fn get_connection(
        &self,
        org: &str,
        provider: VcsProvider,
    ) -> Result<VcsConnection, StoreError> {
        self.lock()
            .vcs
            .connections
            .get(&(org.to_string(), provider.as_str()))
            .cloned()
            .ok_or_else(|| not_found(org, provider))
    }

    async fn delete_connection(&self, org: &str, provider: VcsProvider) -> Result<(), StoreError> {
        let mut st = self.lock();
        st.vcs
            .connections
            .remove(&(org.to_string(), provider.as_str()))
            .ok_or_else(|| not_found(org, provider))?;
        st.audited();
        Ok(())
    }

    async fn claim_delivery(
        &self,
        provider: VcsProvider,
        delivery: &str,
        expires_at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let mut st = self.lock();
        let key = (provider.as_str(), delivery.to_string());
        if st
            .vcs
            .deliveries
            .get(&key)
            .is_some_and(|at| *at > Utc::now())
        {
            return Ok(false);
        }
        st.vcs.deliveries.insert(key, expires_at);
        Ok(true)
    }

    async fn forget_delivery(
        &self,
        provider: VcsProvider,
        delivery: &str,
    ) -> Result<(), StoreError> {
        self.lock()
            .vcs
            .deliveries
            .remove(&(provider.as_str(), delivery.to_string()));
        Ok(())
    }

    async fn index_binding(
        &self,
        provider: VcsProvider,
        repository: &str,
        env: &EnvPath,
    ) -> Result<(), StoreError> {
        self.lock()
            .vcs
            .bindings
            .entry((provider.as_str(), repository_key(repository)))
            .or_default()
            .insert(env.to_string());
        Ok(())
    }

    async fn unindex_binding(
        &self,
        provider: VcsProvider,
        repository: &str,
        env: &EnvPath,
    ) -> Result<(), StoreError> {
        if let Some(envs) = self
            .lock()
            .vcs
            .bindings
            .get_mut(&(provider.as_str(), repository_key(repository)))
        {
            envs.remove(&env.to_string());
        }
        Ok(())
    }

    async fn bound_environments(
        &self,
        provider: VcsProvider,
        repository: &str,
    ) -> Result<Vec<EnvPath>, StoreError> {
        let st = self.lock();
        let Some(envs) = st
            .vcs
            .bindings
            .get(&(provider.as_str(), repository_key(repository)))
        else {
            return Ok(vec![]);
        };
        Ok(envs
            .iter()
            .filter_map(|e| EnvPath::parse(e).ok())
            .take(MAX_BOUND_ENVIRONMENTS)
            .collect())
    }

    async fn connected_organisations(
        &self,
        provider: VcsProvider,
    ) -> Result<Vec<String>, StoreError> {
        Ok(self
            .lock()
            .vcs
            .connections
            .keys()
            .filter(|(_, p)| *p == provider.as_str())
            .map(|(org, _)| org.clone())
            .collect())
    }

    async fn bound_environments_of(
        &self,
        org: &str,
        provider: VcsProvider,
    ) -> Result<Vec<EnvPath>, StoreError> {
        let st = self.lock();
        let mut out: Vec<EnvPath> = st
            .vcs
            .bindings
            .iter()
            .filter(|((p, _), _)| *p == provider.as_str())
            .flat_map(|(_, envs)| envs.iter())
            .filter_map(|e| EnvPath::parse(e).ok())
            .filter(|e| e.org() == org)
            .collect();
        out.sort();
        out.dedup();
        out.truncate(MAX_BOUND_ENVIRONMENTS);
        Ok(out)
    }

    async fn get_open_pulls(
        &self,
        org: &str,
        provider: VcsProvider,
        repository: &str,
        base: &str,
    ) -> Result<OpenPulls, StoreError> {
        Ok(self
            .lock()
            .vcs
            .open
            .get(&(
                org.to_string(),
                provider.as_str(),
                repository_key(repository),
                base.to_string(),
            ))
            .cloned()
            .unwrap_or_default())
    }

    async fn put_open_pulls(
        &self,
        org: &str,
        provider: VcsProvider,
        repository: &str,
        base: &str,
        open: &OpenPulls,
    ) -> Result<(), StoreError> {
        self.lock().vcs.open.insert(
            (
                org.to_string(),
                provider.as_str(),
                repository_key(repository),
                base.to_string(),
            ),
            open.clone(),
        );
        Ok(())
    }

    async fn get_pull_request(
        &self,
        provider: VcsProvider,
        repository: &str,
        number: u64,
    ) -> Result<Option<Versioned<PullRequestRecord>>, StoreError> {
        Ok(self
            .lock()
            .vcs
            .pulls
            .get(&(provider.as_str(), repository_key(repository), number))
            .cloned())
    }

    async fn put_pull_request(
        &self,
        record: &PullRequestRecord,
        expected: Option<u64>,
    ) -> Result<u64, StoreError> {
        let mut st = self.lock();
        let key = (
            record.provider.as_str(),
            repository_key(&record.repository),
            record.number,
        );
        let id = pull_id(&record.repository, record.number);
        let actual = st.vcs.pulls.get(&key).map(|v| v.version);
        match (actual, expected) {
            (None, None) => {}
            (Some(_), None) => {
                return Err(StoreError::AlreadyExists {
                    kind: "pull request",
                    id,
                })
            }
            (Some(a), Some(e)) if a == e => {}
            (a, Some(e)) => {
                return Err(StoreError::VersionMismatch {
                    kind: "pull request",
                    id,
                    expected: e,
                    actual: a.unwrap_or(0),
                })
            }
        }
        let version = actual.unwrap_or(0) + 1;
        st.vcs.pulls.insert(
            key,
            Versioned {
                item: record.clone(),
                version,
            },
        );
        Ok(version)
    }
}

fn not_found(org: &str, provider: VcsProvider) -> StoreError {
    StoreError::NotFound {
        kind: "connection",
        id: format!("{org}/{}", provider.as_str()),
    }
}
