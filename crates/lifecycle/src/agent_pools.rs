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

/// What an agent's credential opened ([`AgentPools::authenticate`]).
#[derive(Debug, Clone, PartialEq)]
pub enum AgentAuth {
    /// The pool the credential opens.
    Accepted(Box<AgentPoolRecord>),
    /// No such pool, a credential of another pool, or an OIDC token for a pool that trusts
    /// no issuer: the pool is none of the caller's business.
    NoSuchPool,
    /// A wrong or revoked token of this pool, or an OIDC token refused by the issuer's
    /// keys or whose claim does not match the pool's pattern.
    Refused,
    /// The keys of the pool's issuer could not be fetched: nothing is known of the token.
    IssuerUnavailable(String),
}

/// What the pool's trusted issuer says of an OIDC token: the caller verifies it (the API's
/// verifier fetches the issuer's keys by OIDC discovery).
#[derive(Debug, Clone, PartialEq)]
pub enum OidcCheck {
    /// Verified (signature, issuer, audience, times): every claim.
    Claims(std::collections::BTreeMap<String, serde_json::Value>),
    /// Refused; why, never the token.
    Invalid(String),
    /// The issuer's keys are unavailable; why.
    Unavailable(String),
}

impl AgentPools {
    /// Which pool `token` opens as pool `id`: a pool token of that pool (hashed, any of
    /// its live tokens), or an OIDC token whose claim matches the pool's trust, read as a
    /// membership's claim is ([`sortie_core::auth::claim_value_matches`]). `verify` checks
    /// an OIDC token against the pool's trusted issuer; it is called only for a pool that
    /// trusts one and a token that is not a pool token.
    pub async fn authenticate<F, Fut>(
        &self,
        id: &str,
        token: &str,
        verify: F,
    ) -> Result<AgentAuth, StoreError>
    where
        F: FnOnce(sortie_core::agent_pool::OidcTrust) -> Fut,
        Fut: std::future::Future<Output = OidcCheck>,
    {
        let pool = match self.get(id).await {
            Ok(p) => p.item,
            Err(StoreError::NotFound { .. }) => return Ok(AgentAuth::NoSuchPool),
            Err(e) => return Err(e),
        };
        if let Some(rest) = token.strip_prefix(sortie_core::agent_pool::POOL_TOKEN_PREFIX) {
            let mut parts = rest.splitn(3, '.');
            let (named, token_id) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            if named != id {
                // Another pool's token: this pool is none of its business.
                return Ok(AgentAuth::NoSuchPool);
            }
            if pool.accepts(token) {
                return Ok(AgentAuth::Accepted(Box::new(pool)));
            }
            tracing::warn!(pool = %id, token_id = %token_id.chars().take(64).collect::<String>(), "refused an agent: a wrong or revoked pool token");
            return Ok(AgentAuth::Refused);
        }
        let Some(trust) = pool.pool.oidc.clone() else {
            return Ok(AgentAuth::NoSuchPool);
        };
        let claim = trust.claim.clone();
        let pattern = trust.pattern.clone();
        Ok(match verify(trust).await {
            OidcCheck::Claims(claims)
                if claims
                    .get(&claim)
                    .is_some_and(|v| sortie_core::auth::claim_value_matches(&pattern, v)) =>
            {
                AgentAuth::Accepted(Box::new(pool))
            }
            OidcCheck::Claims(_) => {
                tracing::warn!(pool = %id, %claim, "refused an agent: its OIDC claim does not match the pool's pattern");
                AgentAuth::Refused
            }
            OidcCheck::Invalid(why) => {
                tracing::warn!(pool = %id, error = %why, "refused an agent: its OIDC token");
                AgentAuth::Refused
            }
            OidcCheck::Unavailable(why) => {
                tracing::warn!(pool = %id, %why, "the pool's OIDC issuer is unavailable");
                AgentAuth::IssuerUnavailable(why)
            }
        })
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

    #[tokio::test]
    async fn a_credential_opens_only_its_own_pool_and_oidc_is_asked_only_when_trusted() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let w = World::new().await;
        let pools = AgentPools::new(w.store.clone());
        let group = GroupPath::parse("acme/payments").unwrap();
        let trust = sortie_core::agent_pool::OidcTrust {
            issuer: "https://issuer.example.com".into(),
            audience: "sortie".into(),
            claim: "sub".into(),
            pattern: "system:serviceaccount:agents:*".into(),
        };
        let a = pools
            .create(
                group.clone(),
                "a".into(),
                String::new(),
                Some(trust),
                "alice",
            )
            .await
            .unwrap();
        let b = pools
            .create(group, "b".into(), String::new(), None, "alice")
            .await
            .unwrap();
        let (a_id, b_id) = (a.pool.item.pool.id.clone(), b.pool.item.pool.id.clone());
        let asked = AtomicUsize::new(0);
        let answer = |check: OidcCheck| {
            let asked = &asked;
            move |_: sortie_core::agent_pool::OidcTrust| {
                asked.fetch_add(1, Ordering::SeqCst);
                std::future::ready(check)
            }
        };
        let claims =
            |sub: &str| OidcCheck::Claims([("sub".to_string(), serde_json::json!(sub))].into());
        let never = || answer(OidcCheck::Invalid("not asked".into()));
        // Its own pool token opens it, without asking the issuer.
        assert!(matches!(
            pools.authenticate(&a_id, &a.token, never()).await.unwrap(),
            AgentAuth::Accepted(p) if p.pool.id == a_id
        ));
        // Another pool's token: that pool is none of its business.
        assert_eq!(
            pools.authenticate(&a_id, &b.token, never()).await.unwrap(),
            AgentAuth::NoSuchPool
        );
        // A wrong secret under the pool's own prefix.
        let forged = format!("{}x", a.token);
        assert_eq!(
            pools.authenticate(&a_id, &forged, never()).await.unwrap(),
            AgentAuth::Refused
        );
        // No such pool, and an id not shaped like one.
        assert_eq!(
            pools
                .authenticate("apool-01jzzzzzzzzzzzzzzzzzzzzzzz", &a.token, never())
                .await
                .unwrap(),
            AgentAuth::NoSuchPool
        );
        assert_eq!(
            pools.authenticate("nope", &a.token, never()).await.unwrap(),
            AgentAuth::NoSuchPool
        );
        // An OIDC token to a pool that trusts no issuer.
        assert_eq!(
            pools.authenticate(&b_id, "eyJ.jwt", never()).await.unwrap(),
            AgentAuth::NoSuchPool
        );
        assert_eq!(
            asked.load(Ordering::SeqCst),
            0,
            "the issuer was never asked"
        );
        // An OIDC token to the trusting pool: the claim decides.
        let oidc_cases = [
            (claims("system:serviceaccount:agents:ci"), "accepted"),
            (claims("system:serviceaccount:other:ci"), "refused"),
            (OidcCheck::Invalid("expired".into()), "refused"),
            (
                OidcCheck::Unavailable("timeout".into()),
                "unavailable: timeout",
            ),
        ];
        for (check, expected) in oidc_cases {
            let got = match pools
                .authenticate(&a_id, "eyJ.jwt", answer(check.clone()))
                .await
                .unwrap()
            {
                AgentAuth::Accepted(p) if p.pool.id == a_id => "accepted".to_string(),
                AgentAuth::Accepted(p) => format!("accepted as {}", p.pool.id),
                AgentAuth::NoSuchPool => "no such pool".to_string(),
                AgentAuth::Refused => "refused".to_string(),
                AgentAuth::IssuerUnavailable(why) => format!("unavailable: {why}"),
            };
            assert_eq!(got, expected, "{check:?}");
        }
        assert_eq!(asked.load(Ordering::SeqCst), 4);
    }
}
