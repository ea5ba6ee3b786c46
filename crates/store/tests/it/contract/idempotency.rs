//! Contract cases for idempotent submits: a key replays its job, refuses a changed body,
//! and binds only until it expires.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use sortie_core::EnvPath;
use sortie_store::{IdempotencyKey, Store, StoreError};

use super::{env, job, setup_env, ENV};

/// Back-dates an idempotency key, as each store allows (DynamoDB's TTL deletes an
/// expired item only days later; until then the store itself must ignore it).
#[allow(async_fn_in_trait)]
pub trait ExpireKey {
    /// Sets when `key` of `env` stops binding.
    async fn expire_key_at(&self, env: &EnvPath, key: &str, at: DateTime<Utc>);
}

impl ExpireKey for sortie_store::MemoryStore {
    async fn expire_key_at(&self, env: &EnvPath, key: &str, at: DateTime<Utc>) {
        self.expire_idempotency_key_at(env, key, at).unwrap();
    }
}

impl ExpireKey for sortie_store::DynamoStore {
    async fn expire_key_at(&self, env: &EnvPath, key: &str, at: DateTime<Utc>) {
        self.expire_idempotency_key_at(env, key, at).await.unwrap();
    }
}

pub async fn idempotent_submit_returns_the_same_job_and_refuses_a_changed_body<
    S: Store + 'static,
>(
    s: Arc<S>,
) {
    setup_env(&*s, ENV).await;
    let key = IdempotencyKey {
        key: "deploy-42".into(),
        request_hash: "h1".into(),
    };
    let first = s.submit_job(&job(ENV), Some(&key)).await.unwrap();
    let retry = s.submit_job(&job(ENV), Some(&key)).await.unwrap();
    assert!(retry.replayed && !retry.took_lock);
    assert_eq!(retry.job.id, first.job.id);
    let changed = IdempotencyKey {
        key: "deploy-42".into(),
        request_hash: "h2".into(),
    };
    assert!(matches!(
        s.submit_job(&job(ENV), Some(&changed)).await,
        Err(StoreError::IdempotencyMismatch { job_id, .. }) if job_id == first.job.id
    ));
    let page = s.list_jobs(&env(), 10, None).await.unwrap();
    assert_eq!(page.jobs.len(), 1, "a replay writes no second job");
}

/// Issue 25, item 11: a key binds for 24 hours. Past its `expires_at` it is treated as
/// absent (and overwritten) even though its item is still there.
pub async fn an_idempotency_key_binds_until_it_expires_then_counts_as_absent<
    S: Store + ExpireKey + 'static,
>(
    s: Arc<S>,
) {
    setup_env(&*s, ENV).await;
    let key = |hash: &str| IdempotencyKey {
        key: "deploy-7".into(),
        request_hash: hash.into(),
    };
    let first = s.submit_job(&job(ENV), Some(&key("h1"))).await.unwrap();
    // Still binding a minute before it expires.
    s.expire_key_at(&env(), "deploy-7", Utc::now() + Duration::minutes(1))
        .await;
    let retry = s.submit_job(&job(ENV), Some(&key("h1"))).await.unwrap();
    assert!(retry.replayed, "{retry:?}");
    assert_eq!(retry.job.id, first.job.id);
    assert!(matches!(
        s.submit_job(&job(ENV), Some(&key("h2"))).await,
        Err(StoreError::IdempotencyMismatch { .. })
    ));
    // Expired, its item not yet deleted: absent. Another body makes a new job.
    s.expire_key_at(&env(), "deploy-7", Utc::now() - Duration::seconds(1))
        .await;
    let second = s.submit_job(&job(ENV), Some(&key("h2"))).await.unwrap();
    assert!(!second.replayed, "{second:?}");
    assert_ne!(second.job.id, first.job.id);
    // The key now binds to the new job, for another 24 hours.
    let again = s.submit_job(&job(ENV), Some(&key("h2"))).await.unwrap();
    assert!(again.replayed);
    assert_eq!(again.job.id, second.job.id);
    assert!(matches!(
        s.submit_job(&job(ENV), Some(&key("h1"))).await,
        Err(StoreError::IdempotencyMismatch { job_id, .. }) if job_id == second.job.id
    ));
    // The same holds for the first body once expired again.
    s.expire_key_at(&env(), "deploy-7", Utc::now() - Duration::hours(1))
        .await;
    let third = s.submit_job(&job(ENV), Some(&key("h1"))).await.unwrap();
    assert!(!third.replayed);
    assert_eq!(s.list_jobs(&env(), 10, None).await.unwrap().jobs.len(), 3);
}
