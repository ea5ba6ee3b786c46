//! The agent-pool service: a pool's life (create, read, list, delete) and its tokens (add,
//! revoke). The API checks who may act; this service does it. The pull protocol the pools'
//! agents speak is [`crate::JobService::claim`] and its neighbours.

use std::sync::Arc;

use chrono::Utc;
use sortie_core::agent_pool::{pool_id_problem, AgentPool, MAX_POOL_TOKENS, POOL_ID_PREFIX};
use sortie_core::GroupPath;
use sortie_store::{AgentPoolRecord, PoolToken, Store, StoreError, Versioned};

/// Agent pools, over the store.
#[derive(Clone)]
pub struct AgentPools {
    /// The repository.
    pub store: Arc<dyn Store>,
}

/// A pool and a token just made for it: the token is shown once, never stored in clear.
#[derive(Debug, Clone, PartialEq)]
pub struct MintedToken {
    /// The pool, with the new token's hash among its tokens.
    pub pool: Versioned<AgentPoolRecord>,
    /// The token (`sortie-pool-<pool>.<token id>.<secret>`).
    pub token: String,
    /// The token's id, to revoke it by.
    pub token_id: String,
}

/// Why a pool's tokens were not changed.
#[derive(Debug, thiserror::Error)]
pub enum PoolTokenRefusal {
    /// The pool holds [`MAX_POOL_TOKENS`] already.
    #[error("the pool has {MAX_POOL_TOKENS} tokens, the most it may hold: revoke one first")]
    TooMany,
    /// The pool has no token of that id.
    #[error("token `{0}` was not found")]
    NoSuchToken(String),
    /// The store failed (a stale version is its `VersionMismatch`).
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl AgentPools {
    /// The service over `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }

    /// Creates `pool` (its id is made here: `apool-<ulid>`) for `by`, with its first token.
    pub async fn create(
        &self,
        group: GroupPath,
        name: String,
        description: String,
        oidc: Option<sortie_core::agent_pool::OidcTrust>,
        by: &str,
    ) -> Result<MintedToken, StoreError> {
        let id = format!("{POOL_ID_PREFIX}{}", sortie_core::tokens::new_id());
        let (token, stored) = PoolToken::mint(&id, by);
        let record = AgentPoolRecord {
            pool: AgentPool {
                id,
                group,
                name,
                description,
                oidc,
            },
            tokens: vec![stored.clone()],
            created_at: Utc::now(),
            created_by: by.to_string(),
            last_claim_at: None,
        };
        let pool = self.store.create_pool(&record).await?;
        Ok(MintedToken {
            pool,
            token,
            token_id: stored.id,
        })
    }

    /// Pool `id`; `NotFound` too for an id that is not shaped like a pool's.
    pub async fn get(&self, id: &str) -> Result<Versioned<AgentPoolRecord>, StoreError> {
        if pool_id_problem(id).is_some() {
            return Err(StoreError::NotFound {
                kind: "agent pool",
                id: id.to_string(),
            });
        }
        self.store.get_pool(id).await
    }

    /// The pools of exactly `group`.
    pub async fn list(
        &self,
        group: &GroupPath,
    ) -> Result<Vec<Versioned<AgentPoolRecord>>, StoreError> {
        self.store.list_pools(group).await
    }

    /// Records that an agent of pool `id` asked for work at `now`, when worth it: at most
    /// every [`sortie_core::waiting::CLAIM_RECORD_INTERVAL_SECONDS`] after `last` (the
    /// pool's recorded last claim), for waiting jobs and `runner check`.
    pub async fn record_claim(
        &self,
        id: &str,
        last: Option<chrono::DateTime<Utc>>,
        now: chrono::DateTime<Utc>,
    ) -> Result<(), StoreError> {
        if sortie_core::waiting::claim_worth_recording(last, now) {
            self.store.record_pool_claim(id, now).await?;
        }
        Ok(())
    }

    /// Deletes pool `id` (at version `expected`, when given).
    pub async fn delete(&self, id: &str, expected: Option<u64>) -> Result<(), StoreError> {
        self.store.delete_pool(id, expected).await
    }

    /// Adds a token made by `by` to `pool` (as read): rotation is adding one, moving the
    /// agents to it, and revoking the old one.
    pub async fn add_token(
        &self,
        pool: Versioned<AgentPoolRecord>,
        by: &str,
    ) -> Result<MintedToken, PoolTokenRefusal> {
        let mut record = pool.item;
        if record.tokens.len() >= MAX_POOL_TOKENS {
            return Err(PoolTokenRefusal::TooMany);
        }
        let (token, stored) = PoolToken::mint(&record.pool.id, by);
        record.tokens.push(stored.clone());
        let pool = self.store.update_pool(&record, Some(pool.version)).await?;
        Ok(MintedToken {
            pool,
            token,
            token_id: stored.id,
        })
    }

    /// Revokes token `token_id` of `pool` (as read): its agents are refused from their next call.
    pub async fn revoke_token(
        &self,
        pool: Versioned<AgentPoolRecord>,
        token_id: &str,
    ) -> Result<Versioned<AgentPoolRecord>, PoolTokenRefusal> {
        let mut record = pool.item;
        let before = record.tokens.len();
        record.tokens.retain(|t| t.id != token_id);
        if record.tokens.len() == before {
            return Err(PoolTokenRefusal::NoSuchToken(token_id.to_string()));
        }
        Ok(self.store.update_pool(&record, Some(pool.version)).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::World;

    #[tokio::test]
    async fn a_pool_is_made_with_one_token_that_opens_it_until_revoked() {
        let w = World::new().await;
        let pools = AgentPools::new(w.store.clone());
        let group = GroupPath::parse("acme/payments").unwrap();
        let made = pools
            .create(
                group.clone(),
                "builders".into(),
                String::new(),
                None,
                "alice",
            )
            .await
            .unwrap();
        let id = made.pool.item.pool.id.clone();
        assert!(id.starts_with(POOL_ID_PREFIX));
        assert!(made.pool.item.accepts(&made.token));
        assert_eq!(pools.list(&group).await.unwrap().len(), 1);

        let second = pools
            .add_token(pools.get(&id).await.unwrap(), "alice")
            .await
            .unwrap();
        assert!(second.pool.item.accepts(&made.token) && second.pool.item.accepts(&second.token));
        let revoked = pools
            .revoke_token(second.pool, &made.token_id)
            .await
            .unwrap();
        assert!(!revoked.item.accepts(&made.token) && revoked.item.accepts(&second.token));
        assert!(matches!(
            pools.revoke_token(revoked, &made.token_id).await,
            Err(PoolTokenRefusal::NoSuchToken(_))
        ));

        pools.delete(&id, None).await.unwrap();
        assert!(matches!(
            pools.get(&id).await,
            Err(StoreError::NotFound { .. })
        ));
        assert!(matches!(
            pools.get("not-a-pool").await,
            Err(StoreError::NotFound { .. })
        ));
    }

    #[tokio::test]
    async fn a_pool_holds_at_most_its_quota_of_tokens() {
        let w = World::new().await;
        let pools = AgentPools::new(w.store.clone());
        let group = GroupPath::parse("acme/payments").unwrap();
        let mut pool = pools
            .create(group, "builders".into(), String::new(), None, "alice")
            .await
            .unwrap()
            .pool;
        for _ in 1..MAX_POOL_TOKENS {
            pool = pools.add_token(pool, "alice").await.unwrap().pool;
        }
        assert!(matches!(
            pools.add_token(pool, "alice").await,
            Err(PoolTokenRefusal::TooMany)
        ));
    }
}
