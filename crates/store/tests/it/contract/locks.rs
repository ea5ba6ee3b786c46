//! Contract cases for environment locks, group freezes and group expiry limits.

use std::sync::Arc;

use chrono::{TimeZone, Utc};
use sortie_core::expiry::ExpiryLimits;
use sortie_core::lock::EnvLock;
use sortie_core::{EnvPath, GroupPath};
use sortie_store::{LockOutcome, Store, StoreError};

use super::setup_env;

fn lock(by: &str, reason: &str) -> EnvLock {
    EnvLock::new(
        by,
        Utc.with_ymd_and_hms(2026, 11, 26, 10, 0, 0).unwrap(),
        reason,
    )
    .unwrap()
}

/// A lock is taken once, answered back to a second locker, read on the environment,
/// kept across an update, never bumps the version, and an unlock answers what it removed.
pub async fn an_environment_is_locked_once_and_unlocked_without_a_version_bump<
    S: Store + 'static,
>(
    s: Arc<S>,
) {
    let path = EnvPath::parse("acme/locks/prod").unwrap();
    setup_env(&*s, "acme/locks/prod").await;
    let before = s.get_environment(&path).await.unwrap();
    let alice = lock("alice", "incident 42");
    assert_eq!(
        s.lock_environment(&path, &alice).await.unwrap(),
        LockOutcome::Taken
    );
    assert_eq!(
        s.lock_environment(&path, &lock("bob", "release"))
            .await
            .unwrap(),
        LockOutcome::AlreadyHeld(alice.clone()),
        "the second locker is told who holds it"
    );
    let read = s.get_environment(&path).await.unwrap();
    assert_eq!(read.item.lock.as_ref(), Some(&alice));
    assert_eq!(read.version, before.version, "a lock is not an edit");
    // An update of the settings keeps the lock.
    let updated = s
        .update_environment(&read.item.environment, Some(read.version))
        .await
        .unwrap();
    assert_eq!(updated.item.lock.as_ref(), Some(&alice));
    assert_eq!(
        s.get_environment(&path).await.unwrap().item.lock,
        Some(alice.clone())
    );
    assert_eq!(s.unlock_environment(&path).await.unwrap(), Some(alice));
    assert_eq!(s.unlock_environment(&path).await.unwrap(), None);
    assert_eq!(s.get_environment(&path).await.unwrap().item.lock, None);
    let missing = EnvPath::parse("acme/locks/missing").unwrap();
    assert!(matches!(
        s.lock_environment(&missing, &lock("a", "b")).await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        s.unlock_environment(&missing).await,
        Err(StoreError::NotFound { .. })
    ));
}

/// A freeze is held once per group, read back for the group and every group below it
/// (deepest first), never for a sibling, and the root group cannot be frozen.
pub async fn a_group_freeze_is_held_once_and_read_from_every_group_below<S: Store + 'static>(
    s: Arc<S>,
) {
    let org = GroupPath::parse("acme").unwrap();
    let team = GroupPath::parse("acme/pay").unwrap();
    let deep = GroupPath::parse("acme/pay/eu").unwrap();
    let sibling = GroupPath::parse("acme/payments").unwrap();
    assert!(s.group_settings_over(&deep).await.unwrap().is_empty());
    let freeze = lock("carol", "release freeze");
    assert_eq!(
        s.freeze_group(&team, &freeze).await.unwrap(),
        LockOutcome::Taken
    );
    assert_eq!(
        s.freeze_group(&team, &lock("dave", "x")).await.unwrap(),
        LockOutcome::AlreadyHeld(freeze.clone())
    );
    let limits = ExpiryLimits {
        default_ttl_seconds: Some(7200),
        max_ttl_seconds: Some(86_400),
        default_since: Some(Utc.with_ymd_and_hms(2026, 11, 29, 10, 0, 0).unwrap()),
    };
    s.set_group_expiry(&org, &limits).await.unwrap();
    let over = s.group_settings_over(&deep).await.unwrap();
    let groups: Vec<&str> = over.iter().map(|(g, _)| g.as_str()).collect();
    assert_eq!(
        groups,
        ["acme/pay", "acme"],
        "deepest first, only those set"
    );
    assert_eq!(over[0].1.freeze.as_ref(), Some(&freeze));
    assert_eq!(over[1].1.freeze, None);
    assert_eq!(over[1].1.expiry, limits);
    let beside = s.group_settings_over(&sibling).await.unwrap();
    assert!(
        beside.iter().all(|(_, g)| g.freeze.is_none()),
        "a sibling whose name starts alike is not frozen: {beside:?}"
    );
    assert!(matches!(
        s.freeze_group(&GroupPath::root(), &freeze).await,
        Err(StoreError::Invalid { .. })
    ));
    // The freeze and the limits live on one item: each write keeps the other.
    s.set_group_expiry(&team, &limits).await.unwrap();
    assert_eq!(
        s.group_settings_over(&team).await.unwrap()[0]
            .1
            .freeze
            .as_ref(),
        Some(&freeze)
    );
    assert_eq!(s.unfreeze_group(&team).await.unwrap(), Some(freeze));
    assert_eq!(s.unfreeze_group(&team).await.unwrap(), None);
    assert_eq!(s.unfreeze_group(&deep).await.unwrap(), None);
    let after = s.group_settings_over(&team).await.unwrap();
    assert_eq!(after[0].1.freeze, None);
    assert_eq!(after[0].1.expiry, limits);
}

/// The lock and the freezes are conditions of the submit's write itself (not only of a
/// read before it): a submit to a locked environment, or below a frozen group, writes
/// nothing and answers `Locked`, whether it would take the idle lock, join the queue, or
/// only run when idle.
pub async fn a_submit_to_a_locked_or_frozen_environment_writes_nothing<S: Store + 'static>(
    s: Arc<S>,
) {
    let path = EnvPath::parse("acme/locks/race").unwrap();
    setup_env(&*s, "acme/locks/race").await;
    let count = |s: Arc<S>| {
        let path = path.clone();
        async move { s.list_jobs(&path, 50, None).await.unwrap().jobs.len() }
    };
    let locked = |r: Result<(), StoreError>| matches!(r, Err(StoreError::Locked { ref environment }) if environment == "acme/locks/race");
    s.lock_environment(&path, &lock("alice", "incident 42"))
        .await
        .unwrap();
    assert!(locked(
        s.submit_job(&super::job("acme/locks/race"), None)
            .await
            .map(|_| ())
    ));
    assert!(locked(
        s.submit_if_idle(&super::job("acme/locks/race"))
            .await
            .map(|_| ())
    ));
    assert_eq!(
        count(s.clone()).await,
        0,
        "an idle locked environment took no job"
    );
    s.unlock_environment(&path).await.unwrap();
    let first = s
        .submit_job(&super::job("acme/locks/race"), None)
        .await
        .unwrap();
    assert!(first.took_lock);
    // Busy: the queue's write is conditional too.
    s.lock_environment(&path, &lock("alice", "incident 43"))
        .await
        .unwrap();
    assert!(locked(
        s.submit_job(&super::job("acme/locks/race"), None)
            .await
            .map(|_| ())
    ));
    s.unlock_environment(&path).await.unwrap();
    // A freeze of any group above (its settings item; groups without one pass).
    let group = GroupPath::parse("acme/locks").unwrap();
    s.freeze_group(&group, &lock("bob", "release freeze"))
        .await
        .unwrap();
    assert!(locked(
        s.submit_job(&super::job("acme/locks/race"), None)
            .await
            .map(|_| ())
    ));
    assert!(locked(
        s.submit_if_idle(&super::job("acme/locks/race"))
            .await
            .map(|_| ())
    ));
    assert_eq!(
        count(s.clone()).await,
        1,
        "only the job from before the locks"
    );
    assert_eq!(
        s.get_environment(&path).await.unwrap().item.queued_count,
        0,
        "nothing joined the queue"
    );
    s.unfreeze_group(&group).await.unwrap();
    let queued = s
        .submit_job(&super::job("acme/locks/race"), None)
        .await
        .unwrap();
    assert!(!queued.took_lock, "queued behind the first once unfrozen");
    assert_eq!(count(s.clone()).await, 2);
}
