//! Contract cases for the expiry due list and the `destroyed` mark.

use std::sync::Arc;

use chrono::{Duration, TimeZone, Utc};
use sortie_core::expiry::{Destroyed, Reminder};
use sortie_core::EnvPath;
use sortie_store::{ExpiryEntry, Store, StoreError};

use super::setup_env;

/// An entry is put, kept as it is for the same end, started afresh for a new end (keeping
/// a destroy in flight), listed only when due, earliest first, and removed.
pub async fn an_expiry_entry_is_set_kept_for_the_same_end_and_listed_when_due<
    S: Store + 'static,
>(
    s: Arc<S>,
) {
    let t0 = Utc.with_ymd_and_hms(2026, 11, 26, 10, 0, 0).unwrap();
    let a = EnvPath::parse("acme/expiry/a").unwrap();
    let b = EnvPath::parse("acme/expiry/b").unwrap();
    s.set_expiry(&a, t0 + Duration::days(3)).await.unwrap();
    s.set_expiry(&b, t0 + Duration::hours(1)).await.unwrap();
    let held = s.get_expiry(&a).await.unwrap().unwrap();
    assert_eq!(held.item.expires_at, t0 + Duration::days(3));
    assert_eq!(
        held.item.due,
        t0 + Duration::days(1),
        "due at its 2-day reminder"
    );
    assert!(held.item.sent.is_empty());
    // Nothing is due before the earliest due time; then the earliest comes first.
    let none = s
        .due_expiries(t0 - Duration::days(3), 10, None)
        .await
        .unwrap();
    assert!(none.entries.is_empty() && none.next.is_none());
    let due = s
        .due_expiries(t0 + Duration::days(2), 10, None)
        .await
        .unwrap();
    let paths: Vec<_> = due.entries.iter().map(|e| e.item.path.clone()).collect();
    assert_eq!(paths, vec![b.clone(), a.clone()]);
    // Reminders recorded, conditionally on the version.
    let mut entry = held.item.clone();
    entry.sent = vec![Reminder::TwoDays];
    entry.destroy_job = Some("01job".into());
    assert!(s.update_expiry(&entry, held.version).await.unwrap());
    assert!(
        !s.update_expiry(&entry, held.version).await.unwrap(),
        "a second writer with the same version writes nothing"
    );
    // The same end keeps what was sent.
    s.set_expiry(&a, t0 + Duration::days(3)).await.unwrap();
    let kept = s.get_expiry(&a).await.unwrap().unwrap();
    assert_eq!(kept.item.sent, vec![Reminder::TwoDays]);
    assert_eq!(kept.version, held.version + 1);
    // A new end starts afresh, keeping the destroy in flight.
    s.set_expiry(&a, t0 + Duration::days(5)).await.unwrap();
    let fresh = s.get_expiry(&a).await.unwrap().unwrap();
    assert!(fresh.item.sent.is_empty());
    assert_eq!(fresh.item.due, t0 + Duration::days(3));
    assert_eq!(fresh.item.destroy_job.as_deref(), Some("01job"));
    assert!(fresh.version > kept.version);
    s.remove_expiry(&a).await.unwrap();
    s.remove_expiry(&a).await.unwrap();
    assert!(s.get_expiry(&a).await.unwrap().is_none());
    assert!(
        !s.update_expiry(&fresh.item, fresh.version).await.unwrap(),
        "a removed entry is never written back"
    );
    let due = s
        .due_expiries(t0 + Duration::days(9), 10, None)
        .await
        .unwrap();
    assert_eq!(due.entries.len(), 1);
    assert_eq!(due.entries[0].item.path, b);
}

/// The due list pages to the end: every due entry once, in due order.
pub async fn due_expiries_page_to_the_end_in_due_order<S: Store + 'static>(s: Arc<S>) {
    let t0 = Utc.with_ymd_and_hms(2026, 11, 26, 10, 0, 0).unwrap();
    let mut want = vec![];
    for i in 0..7i64 {
        let path = EnvPath::parse(&format!("acme/page/e{i}")).unwrap();
        // Ends an hour apart, all due (their 30-minute reminder) before t0 + 10h.
        s.set_expiry(&path, t0 + Duration::hours(i)).await.unwrap();
        want.push(path);
    }
    // Not due yet: far away.
    s.set_expiry(
        &EnvPath::parse("acme/page/later").unwrap(),
        t0 + Duration::days(30),
    )
    .await
    .unwrap();
    let mut got = vec![];
    let mut after: Option<String> = None;
    for _ in 0..10 {
        let page = s
            .due_expiries(t0 + Duration::hours(10), 3, after.as_deref())
            .await
            .unwrap();
        assert!(page.entries.len() <= 3);
        got.extend(page.entries.into_iter().map(|e| e.item.path));
        after = page.next;
        if after.is_none() {
            break;
        }
    }
    assert_eq!(got, want);
    let e = ExpiryEntry::new(want[0].clone(), t0);
    assert_eq!(e.due, t0 - Duration::days(2));
}

/// The `destroyed` mark is set and cleared without a version bump, kept across an update,
/// and refused for a missing environment.
pub async fn an_environment_is_marked_destroyed_and_cleared_without_a_version_bump<
    S: Store + 'static,
>(
    s: Arc<S>,
) {
    let path = EnvPath::parse("acme/expiry/gone").unwrap();
    setup_env(&*s, "acme/expiry/gone").await;
    let before = s.get_environment(&path).await.unwrap();
    let mark = Destroyed {
        at: Utc.with_ymd_and_hms(2026, 11, 26, 11, 0, 0).unwrap(),
        job_id: Some("01destroy".into()),
        expired_at: Utc.with_ymd_and_hms(2026, 11, 26, 10, 59, 0).unwrap(),
    };
    s.mark_destroyed(&path, Some(&mark)).await.unwrap();
    let read = s.get_environment(&path).await.unwrap();
    assert_eq!(read.item.destroyed.as_ref(), Some(&mark));
    assert_eq!(read.version, before.version);
    let updated = s
        .update_environment(&read.item.environment, Some(read.version))
        .await
        .unwrap();
    assert_eq!(updated.item.destroyed.as_ref(), Some(&mark));
    s.mark_destroyed(&path, None).await.unwrap();
    assert_eq!(s.get_environment(&path).await.unwrap().item.destroyed, None);
    let missing = EnvPath::parse("acme/expiry/missing").unwrap();
    assert!(matches!(
        s.mark_destroyed(&missing, Some(&mark)).await,
        Err(StoreError::NotFound { .. })
    ));
}

/// A destroyed environment takes no job by any way a job is written: taking its idle lock,
/// joining its queue behind a job that holds it, only when idle, or as a speculative plan.
/// The refusal is the write's own condition (so a trigger, a drift check, a restore or a
/// pull request is refused as a person is) and carries the mark; clearing it lets jobs in.
pub async fn a_destroyed_environment_takes_no_job_by_any_way_of_writing_one<S: Store + 'static>(
    s: Arc<S>,
) {
    const ENV: &str = "acme/expiry/destroyed";
    let path = EnvPath::parse(ENV).unwrap();
    setup_env(&*s, ENV).await;
    let mark = Destroyed {
        at: Utc.with_ymd_and_hms(2026, 11, 26, 11, 0, 0).unwrap(),
        job_id: Some("01destroy".into()),
        expired_at: Utc.with_ymd_and_hms(2026, 11, 26, 10, 59, 0).unwrap(),
    };
    let refused = |r: Result<(), StoreError>| match r {
        Err(StoreError::Destroyed {
            environment,
            destroyed,
        }) => environment == ENV && destroyed == mark,
        other => panic!("expected the destroyed refusal, got {other:?}"),
    };
    let count = |s: Arc<S>| {
        let path = path.clone();
        async move { s.list_jobs(&path, 50, None).await.unwrap().jobs.len() }
    };
    s.mark_destroyed(&path, Some(&mark)).await.unwrap();
    // Idle: the lock's write and the idle-only write.
    assert!(refused(
        s.submit_job(&super::job(ENV), None).await.map(|_| ())
    ));
    assert!(refused(
        s.submit_if_idle(&super::job(ENV)).await.map(|_| ())
    ));
    assert_eq!(
        count(s.clone()).await,
        0,
        "a destroyed environment took a job"
    );
    // A speculative plan writes no state and takes no lock, so it is written, as under a
    // lock: a pull request's plan shows what an apply would create again.
    let plan = s.submit_speculative(&super::job(ENV), None).await.unwrap();
    assert!(!plan.took_lock && !plan.replayed);
    let e = s
        .submit_job(&super::job(ENV), None)
        .await
        .map(|_| ())
        .unwrap_err();
    assert!(e.to_string().contains("was destroyed"), "{e}");
    // Cleared (an extension): a job takes the lock. Marked again while it holds it (as an
    // expiry's destroy job ends): the queue's write is refused too.
    s.mark_destroyed(&path, None).await.unwrap();
    let holder = s.submit_job(&super::job(ENV), None).await.unwrap();
    assert!(holder.took_lock);
    s.mark_destroyed(&path, Some(&mark)).await.unwrap();
    assert!(refused(
        s.submit_job(&super::job(ENV), None).await.map(|_| ())
    ));
    assert_eq!(
        count(s.clone()).await,
        2,
        "the job before the mark and the speculative plan"
    );
    let env = s.get_environment(&path).await.unwrap().item;
    assert_eq!(
        (env.active_job.as_ref(), env.queued_count),
        (Some(&holder.job.id), 0)
    );
}
