//! Contract cases for drift checks: the next fire time follows the schedule, due checks are
//! listed in order, advancing is conditional, and a recorded result keeps the newest apply.

use std::sync::Arc;

use chrono::{DateTime, Duration, TimeZone, Utc};
use sortie_core::drift::{DriftSkipped, DriftStatus, DriftVerdict};
use sortie_core::{ChangeSummary, EnvPath, EnvSettings};
use sortie_store::{LastApply, Store, StoreError};

use super::{env, environment, job, setup_env, setup_env_with, ENV};

fn schedule(cron: &str) -> EnvSettings {
    EnvSettings {
        drift_schedule: Some(cron.into()),
        ..Default::default()
    }
}

async fn due_paths<S: Store>(s: &S, now: DateTime<Utc>, limit: u32) -> Vec<String> {
    s.due_drift_checks(now, limit)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.environment.path.to_string())
        .collect()
}

async fn next_drift_at<S: Store>(s: &S, path: &str) -> Option<DateTime<Utc>> {
    s.get_environment(&EnvPath::parse(path).unwrap())
        .await
        .unwrap()
        .item
        .next_drift_at
}

pub async fn next_drift_at_follows_the_schedule_and_due_drift_checks_lists_only_due_environments_in_order<
    S: Store + 'static,
>(
    s: Arc<S>,
) {
    let (a, b, c) = ("acme/payments/a", "acme/payments/b", "acme/payments/c");
    let before = Utc::now();
    let env_a = setup_env_with(&*s, a, EnvSettings::default()).await;
    setup_env_with(&*s, b, schedule("*/15 * * * *")).await;
    let env_c = setup_env_with(&*s, c, schedule("0 */6 * * *")).await;
    let after = Utc::now();
    assert_eq!(next_drift_at(&*s, a).await, None, "no schedule");
    let next_b = next_drift_at(&*s, b).await.expect("scheduled");
    let next_c = next_drift_at(&*s, c).await.expect("scheduled");
    assert!(
        next_b > before && next_b <= after + Duration::minutes(15),
        "{next_b}"
    );
    assert!(
        next_c > before && next_c <= after + Duration::hours(6),
        "{next_c}"
    );
    assert!(next_b <= next_c, "every fire time of c is one of b's");

    // Nothing is due before its time; each is due from its time on, earliest first.
    assert!(due_paths(&*s, after, 10).await.is_empty());
    assert!(due_paths(&*s, next_b - Duration::milliseconds(1), 10)
        .await
        .is_empty());
    let at_b = due_paths(&*s, next_b, 10).await;
    assert_eq!(at_b[0], b, "due at its fire time");
    assert_eq!(at_b.len(), if next_c == next_b { 2 } else { 1 });
    let later = next_c + Duration::minutes(1);
    assert_eq!(due_paths(&*s, later, 10).await, vec![b, c]);
    assert_eq!(due_paths(&*s, later, 1).await, vec![b], "at most `limit`");
    let due = s.due_drift_checks(later, 10).await.unwrap();
    assert_eq!(due[1].environment, env_c, "the whole record");
    assert_eq!(due[1].next_drift_at, Some(next_c));

    // An update that sets a schedule schedules; one that clears it unschedules; one that
    // keeps it keeps the next fire time.
    let mut scheduled_a = env_a.clone();
    scheduled_a.settings = schedule("@hourly");
    s.update_environment(&scheduled_a, Some(1)).await.unwrap();
    let next_a = next_drift_at(&*s, a)
        .await
        .expect("scheduled by the update");
    assert!(next_a > after && next_a <= Utc::now() + Duration::hours(1));
    let mut cleared_b = environment(b, "acme/local");
    cleared_b.settings = EnvSettings::default();
    let updated = s.update_environment(&cleared_b, Some(1)).await.unwrap();
    assert_eq!(updated.item.next_drift_at, None);
    assert_eq!(next_drift_at(&*s, b).await, None);
    let mut relabelled_c = env_c.clone();
    relabelled_c.labels.insert("team".into(), "blue".into());
    s.update_environment(&relabelled_c, Some(1)).await.unwrap();
    assert_eq!(next_drift_at(&*s, c).await, Some(next_c), "same schedule");
    let far = Utc::now() + Duration::days(1);
    let mut expected = vec![(next_a, a), (next_c, c)];
    expected.sort();
    assert_eq!(
        due_paths(&*s, far, 10).await,
        expected.into_iter().map(|(_, p)| p).collect::<Vec<_>>()
    );
    // A relink keeps it too.
    let link = environment(c, "acme/local").runner;
    s.relink_environment(&env_c.path, &link, Some(2))
        .await
        .unwrap();
    assert_eq!(next_drift_at(&*s, c).await, Some(next_c));
    assert!(due_paths(&*s, far, 10).await.contains(&c.to_string()));
    // A deleted environment is no longer due.
    s.delete_environment(&env_c.path, None).await.unwrap();
    assert_eq!(due_paths(&*s, far, 10).await, vec![a]);
}

pub async fn advance_drift_is_conditional_on_the_fire_time_and_records_a_skip<
    S: Store + 'static,
>(
    s: Arc<S>,
) {
    let env = setup_env_with(&*s, ENV, schedule("*/15 * * * *")).await;
    let fired = next_drift_at(&*s, ENV).await.unwrap();
    let next = fired + Duration::minutes(15);
    let skipped = DriftSkipped {
        at: fired + Duration::seconds(3),
        reason: "the environment was busy".into(),
    };
    assert!(s
        .advance_drift(&env.path, fired, Some(next), Some(&skipped))
        .await
        .unwrap());
    let rec = s.get_environment(&env.path).await.unwrap();
    assert_eq!(rec.item.next_drift_at, Some(next));
    assert_eq!(rec.item.drift_skipped.as_ref(), Some(&skipped));
    assert_eq!(
        rec.version, 1,
        "the schedule's moves never bump the version"
    );
    // Another sweep that saw the same fire time loses, and changes nothing.
    assert!(!s
        .advance_drift(&env.path, fired, Some(next + Duration::hours(1)), None)
        .await
        .unwrap());
    assert_eq!(next_drift_at(&*s, ENV).await, Some(next));
    // The index moved with it.
    assert!(due_paths(&*s, next - Duration::seconds(1), 10)
        .await
        .is_empty());
    assert_eq!(due_paths(&*s, next, 10).await, vec![ENV]);
    // Without a next fire time it leaves the index; the skip recorded stays.
    assert!(s.advance_drift(&env.path, next, None, None).await.unwrap());
    let rec = s.get_environment(&env.path).await.unwrap().item;
    assert_eq!(rec.next_drift_at, None);
    assert_eq!(rec.drift_skipped, Some(skipped));
    assert!(due_paths(&*s, next + Duration::days(30), 10)
        .await
        .is_empty());
    assert!(!s.advance_drift(&env.path, next, None, None).await.unwrap());
    assert!(matches!(
        s.advance_drift(
            &EnvPath::parse("acme/payments/ghost").unwrap(),
            fired,
            None,
            None
        )
        .await,
        Err(StoreError::NotFound {
            kind: "environment",
            ..
        })
    ));
}

pub async fn record_drift_sets_the_result_and_an_older_apply_never_replaces_a_newer<
    S: Store + 'static,
>(
    s: Arc<S>,
) {
    setup_env(&*s, ENV).await;
    let env = env();
    let ghost = EnvPath::parse("acme/payments/ghost").unwrap();
    let a = job(ENV);
    assert!(s.submit_job(&a, None).await.unwrap().took_lock);
    let status = DriftStatus {
        status: DriftVerdict::Drifted,
        checked_at: Utc::now(),
        job_id: a.id.clone(),
        summary: Some(ChangeSummary {
            add: 1,
            change: 2,
            destroy: 0,
            has_changes: Some(true),
        }),
        reason: None,
        remediation_job_id: Some("01remediation".into()),
    };
    s.record_drift(&env, &status).await.unwrap();
    let rec = s.get_environment(&env).await.unwrap();
    assert_eq!(rec.item.drift.as_ref(), Some(&status));
    assert_eq!(
        rec.item.active_job.as_ref(),
        Some(&a.id),
        "the lock is untouched"
    );
    assert_eq!(rec.version, 1);
    assert!(matches!(
        s.record_drift(&ghost, &status).await,
        Err(StoreError::NotFound {
            kind: "environment",
            ..
        })
    ));

    // A whole second, and half a second after it: the later one wins whatever the order.
    let base = Utc.with_ymd_and_hms(2026, 5, 4, 3, 2, 1).unwrap();
    let apply = |id: &str, at: DateTime<Utc>| LastApply {
        job_id: id.into(),
        at,
    };
    let newer = apply("01newer", base + Duration::milliseconds(1500));
    s.record_last_apply(&env, &newer).await.unwrap();
    let last = |s: Arc<S>| async move {
        s.get_environment(&EnvPath::parse(ENV).unwrap())
            .await
            .unwrap()
            .item
            .last_apply
    };
    assert_eq!(last(s.clone()).await, Some(newer.clone()));
    for older in [
        apply("01older", base + Duration::seconds(1)),
        apply("01older-frac", base + Duration::nanoseconds(1_499_999_999)),
        apply("01same", newer.at),
    ] {
        s.record_last_apply(&env, &older).await.unwrap();
        assert_eq!(
            last(s.clone()).await,
            Some(newer.clone()),
            "{} never replaces the newer one",
            older.job_id
        );
    }
    let newest = apply("01newest", base + Duration::seconds(2));
    s.record_last_apply(&env, &newest).await.unwrap();
    assert_eq!(last(s.clone()).await, Some(newest.clone()));
    // A destroy before the newest apply forgets nothing; one after it forgets it.
    s.forget_last_apply(&env, base + Duration::milliseconds(1999))
        .await
        .unwrap();
    assert_eq!(last(s.clone()).await, Some(newest.clone()));
    s.forget_last_apply(&env, base + Duration::seconds(3))
        .await
        .unwrap();
    assert_eq!(last(s.clone()).await, None, "destroyed: no latest apply");
    s.forget_last_apply(&env, base + Duration::seconds(4))
        .await
        .unwrap();
    assert!(matches!(
        s.forget_last_apply(&ghost, base).await,
        Err(StoreError::NotFound {
            kind: "environment",
            ..
        })
    ));
    s.record_last_apply(&env, &newest).await.unwrap();
    assert_eq!(last(s.clone()).await, Some(newest));
    assert!(matches!(
        s.record_last_apply(&ghost, &newer).await,
        Err(StoreError::NotFound {
            kind: "environment",
            ..
        })
    ));
    assert!(
        s.get_environment(&ghost).await.is_err(),
        "a record on a missing environment creates nothing"
    );
    let rec = s.get_environment(&env).await.unwrap();
    assert_eq!(
        (rec.version, rec.item.drift.as_ref()),
        (1, Some(&status)),
        "each attribute is written alone"
    );
}
