//! Agent pools, keyed by id.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sortie_core::GroupPath;

use super::{version_check, MemoryStore};
use crate::{AgentPoolRecord, AgentPoolStore, StoreError, Versioned};

fn not_found(id: &str) -> StoreError {
    StoreError::NotFound {
        kind: "agent pool",
        id: id.to_string(),
    }
}

#[async_trait]
impl AgentPoolStore for MemoryStore {
    async fn create_pool(
        &self,
        pool: &AgentPoolRecord,
    ) -> Result<Versioned<AgentPoolRecord>, StoreError> {
        let mut st = self.lock();
        if st.pools.contains_key(&pool.pool.id) {
            return Err(StoreError::AlreadyExists {
                kind: "agent pool",
                id: pool.pool.id.clone(),
            });
        }
        st.pools.insert(pool.pool.id.clone(), (pool.clone(), 1));
        st.audited();
        Ok(Versioned {
            item: pool.clone(),
            version: 1,
        })
    }

    async fn get_pool(&self, id: &str) -> Result<Versioned<AgentPoolRecord>, StoreError> {
        let st = self.lock();
        st.pools
            .get(id)
            .map(|(item, version)| Versioned {
                item: item.clone(),
                version: *version,
            })
            .ok_or_else(|| not_found(id))
    }

    async fn list_pools(
        &self,
        group: &GroupPath,
    ) -> Result<Vec<Versioned<AgentPoolRecord>>, StoreError> {
        let st = self.lock();
        Ok(st
            .pools
            .values()
            .filter(|(p, _)| &p.pool.group == group)
            .map(|(item, version)| Versioned {
                item: item.clone(),
                version: *version,
            })
            .collect())
    }

    async fn update_pool(
        &self,
        pool: &AgentPoolRecord,
        expected: Option<u64>,
    ) -> Result<Versioned<AgentPoolRecord>, StoreError> {
        let mut st = self.lock();
        let id = &pool.pool.id;
        let entry = st.pools.get_mut(id).ok_or_else(|| not_found(id))?;
        version_check("agent pool", id.clone(), expected, entry.1)?;
        *entry = (pool.clone(), entry.1 + 1);
        let version = entry.1;
        st.audited();
        Ok(Versioned {
            item: pool.clone(),
            version,
        })
    }

    async fn record_pool_claim(&self, id: &str, at: DateTime<Utc>) -> Result<(), StoreError> {
        let mut st = self.lock();
        let (pool, _) = st.pools.get_mut(id).ok_or_else(|| not_found(id))?;
        if pool.last_claim_at.is_none_or(|l| l < at) {
            pool.last_claim_at = Some(at);
        }
        Ok(())
    }

    async fn delete_pool(&self, id: &str, expected: Option<u64>) -> Result<(), StoreError> {
        let mut st = self.lock();
        let version = st.pools.get(id).ok_or_else(|| not_found(id))?.1;
        version_check("agent pool", id.to_string(), expected, version)?;
        st.pools.remove(id);
        st.audited();
        Ok(())
    }
}
