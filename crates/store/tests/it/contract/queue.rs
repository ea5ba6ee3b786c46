//! Contract cases for the environment lock and its queue: a submit takes the lock or waits
//! in line, a release hands it on in submit order, a submit-if-idle writes nothing when
//! busy, and a speculative plan takes no lock at all.

use std::collections::BTreeSet;
use std::sync::Arc;

use chrono::{Duration, Utc};
use sortie_core::{Job, JobState};
use sortie_store::{IdempotencyKey, Released, Store, StoreError};

use super::{env, job, pending_ids, setup_env, ENV};

pub async fn submit_takes_the_lock_then_queues_fifo_and_release_hands_it_on<S: Store + 'static>(
    s: Arc<S>,
) {
    setup_env(&*s, ENV).await;
    let env = env();
    let (a, b, c) = (job(ENV), job(ENV), job(ENV));
    assert!(s.submit_job(&a, None).await.unwrap().took_lock);
    assert!(!s.submit_job(&b, None).await.unwrap().took_lock);
    assert!(!s.submit_job(&c, None).await.unwrap().took_lock);
    let rec = s.get_environment(&env).await.unwrap().item;
    assert_eq!(rec.active_job.as_deref(), Some(a.id.as_str()));
    assert_eq!(rec.queued_count, 2);
    assert!(matches!(
        s.delete_environment(&env, None).await,
        Err(StoreError::InUse { .. })
    ));
    // The lock holder is a pending send until it is claimed.
    let pending = s
        .pending_sends(Utc::now() + Duration::seconds(1), 100)
        .await
        .unwrap();
    assert!(pending.iter().any(|j| j.id == a.id) && !pending.iter().any(|j| j.id == b.id));

    assert_eq!(
        s.release_environment(&env, &b.id).await.unwrap(),
        Released::NotHeld,
        "only the holder releases"
    );
    match s.release_environment(&env, &a.id).await.unwrap() {
        Released::HandedTo(next) => assert_eq!(next.id, b.id, "FIFO"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        s.release_environment(&env, &a.id).await.unwrap(),
        Released::NotHeld,
        "a second release is harmless"
    );
    match s.release_environment(&env, &b.id).await.unwrap() {
        Released::HandedTo(next) => assert_eq!(next.id, c.id),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        s.release_environment(&env, &c.id).await.unwrap(),
        Released::Idle
    );
    let rec = s.get_environment(&env).await.unwrap().item;
    assert_eq!((rec.active_job, rec.queued_count), (None, 0));
}

pub async fn twenty_waiting_jobs_get_the_lock_in_submit_order<S: Store + 'static>(s: Arc<S>) {
    setup_env(&*s, ENV).await;
    let jobs: Vec<Job> = (0..20).map(|_| job(ENV)).collect();
    let mut took = vec![];
    for j in &jobs {
        took.push(s.submit_job(j, None).await.unwrap().took_lock);
    }
    assert!(took[0] && took[1..].iter().all(|t| !t));
    let rec = s.get_environment(&env()).await.unwrap();
    assert_eq!(rec.item.active_job.as_deref(), Some(jobs[0].id.as_str()));
    assert_eq!((rec.item.queued_count, rec.item.queue_seq), (19, 19));
    assert_eq!(rec.version, 1, "the lock never bumps the version");
    assert!(matches!(
        s.delete_environment(&env(), None).await,
        Err(StoreError::InUse { by, .. }) if by == vec![jobs[0].id.clone()]
    ));

    let mut order = vec![jobs[0].id.clone()];
    let mut holder = jobs[0].id.clone();
    assert_eq!(
        s.release_environment(&env(), &jobs[5].id).await.unwrap(),
        Released::NotHeld,
        "only the holder releases"
    );
    while let Released::HandedTo(next) = s.release_environment(&env(), &holder).await.unwrap() {
        assert_eq!(
            s.release_environment(&env(), &holder).await.unwrap(),
            Released::NotHeld,
            "a second release is harmless"
        );
        holder = next.id.clone();
        order.push(next.id);
    }
    assert_eq!(
        order,
        jobs.iter().map(|j| j.id.clone()).collect::<Vec<_>>(),
        "strict FIFO, even within one millisecond"
    );
    let rec = s.get_environment(&env()).await.unwrap().item;
    assert_eq!((rec.active_job, rec.queued_count), (None, 0));
    s.delete_environment(&env(), Some(1)).await.unwrap();
}

pub async fn a_released_lock_is_taken_again_by_the_next_submit<S: Store + 'static>(s: Arc<S>) {
    setup_env(&*s, ENV).await;
    let a = job(ENV);
    assert!(s.submit_job(&a, None).await.unwrap().took_lock);
    assert_eq!(
        s.release_environment(&env(), &a.id).await.unwrap(),
        Released::Idle
    );
    assert!(s.submit_job(&job(ENV), None).await.unwrap().took_lock);
    assert!(matches!(
        s.submit_job(&job("acme/payments/ghost"), None).await,
        Err(StoreError::NotFound {
            kind: "environment",
            ..
        })
    ));
    assert!(matches!(
        s.submit_job(&a, None).await,
        Err(StoreError::AlreadyExists { kind: "job", .. })
    ));
}

pub async fn environments_lock_independently<S: Store + 'static>(s: Arc<S>) {
    setup_env(&*s, ENV).await;
    setup_env(&*s, "acme/payments/eu").await;
    assert!(s.submit_job(&job(ENV), None).await.unwrap().took_lock);
    assert!(
        s.submit_job(&job("acme/payments/eu"), None)
            .await
            .unwrap()
            .took_lock
    );
    assert!(!s.submit_job(&job(ENV), None).await.unwrap().took_lock);
}

pub async fn two_concurrent_submits_to_an_idle_environment_take_the_lock_once<
    S: Store + 'static,
>(
    s: Arc<S>,
) {
    setup_env(&*s, ENV).await;
    for _ in 0..5 {
        let env = env();
        let (a, b) = (job(ENV), job(ENV));
        let (s1, s2) = (s.clone(), s.clone());
        let (ra, rb) = tokio::join!(async move { s1.submit_job(&a, None).await }, async move {
            s2.submit_job(&b, None).await
        });
        let (ra, rb) = (ra.unwrap(), rb.unwrap());
        assert!(
            ra.took_lock ^ rb.took_lock,
            "exactly one takes the lock (took: {}, {})",
            ra.took_lock,
            rb.took_lock
        );
        let holder = if ra.took_lock { &ra.job } else { &rb.job };
        let waiter = if ra.took_lock { &rb.job } else { &ra.job };
        assert_eq!(
            s.get_environment(&env)
                .await
                .unwrap()
                .item
                .active_job
                .as_deref(),
            Some(holder.id.as_str())
        );
        assert_eq!(
            s.get_job(&waiter.id).await.unwrap().job.state,
            JobState::Queued
        );
        // Drain: the waiter gets the lock, then the environment is idle again.
        assert!(
            matches!(s.release_environment(&env, &holder.id).await.unwrap(), Released::HandedTo(j) if j.id == waiter.id)
        );
        assert_eq!(
            s.release_environment(&env, &waiter.id).await.unwrap(),
            Released::Idle
        );
    }
}

pub async fn the_same_job_submitted_twice_is_a_conflict_whether_the_environment_is_idle_or_busy<
    S: Store + 'static,
>(
    s: Arc<S>,
) {
    setup_env(&*s, ENV).await;
    let (a, b) = (job(ENV), job(ENV));
    assert!(s.submit_job(&a, None).await.unwrap().took_lock);
    assert!(!s.submit_job(&b, None).await.unwrap().took_lock);
    // `b` again while the environment is busy: refused at once, not retried into a timeout.
    assert!(matches!(
        s.submit_job(&b, None).await,
        Err(StoreError::AlreadyExists { kind: "job", .. })
    ));
    assert_eq!(
        s.get_environment(&env()).await.unwrap().item.queued_count,
        1,
        "queued once"
    );
    // `a` again once the environment is idle.
    s.release_environment(&env(), &a.id).await.unwrap();
    s.release_environment(&env(), &b.id).await.unwrap();
    assert!(matches!(
        s.submit_job(&a, None).await,
        Err(StoreError::AlreadyExists { kind: "job", .. })
    ));
}

pub async fn submit_if_idle_takes_an_idle_lock_and_writes_nothing_when_busy<S: Store + 'static>(
    s: Arc<S>,
) {
    setup_env(&*s, ENV).await;
    let env = env();
    let a = job(ENV);
    let submitted = s.submit_if_idle(&a).await.unwrap().expect("idle");
    assert!(submitted.took_lock && !submitted.replayed);
    assert_eq!(submitted.job, a);
    let rec = s.get_environment(&env).await.unwrap();
    assert_eq!(rec.item.active_job.as_ref(), Some(&a.id));
    assert_eq!(rec.version, 1);
    assert_eq!(s.get_job(&a.id).await.unwrap().job, a);
    assert_eq!(
        pending_ids(&*s, Utc::now() + Duration::seconds(1)).await,
        vec![a.id.clone()],
        "a pending send, like any lock holder"
    );

    // Busy: nothing written, the job id stays unknown, the queue unchanged.
    let b = job(ENV);
    assert_eq!(s.submit_if_idle(&b).await.unwrap(), None);
    assert!(matches!(
        s.get_job(&b.id).await,
        Err(StoreError::NotFound { kind: "job", .. })
    ));
    let c = job(ENV);
    assert!(!s.submit_job(&c, None).await.unwrap().took_lock);
    let d = job(ENV);
    assert_eq!(s.submit_if_idle(&d).await.unwrap(), None);
    assert!(matches!(
        s.get_job(&d.id).await,
        Err(StoreError::NotFound { .. })
    ));
    let rec = s.get_environment(&env).await.unwrap().item;
    assert_eq!(
        (rec.active_job.as_ref(), rec.queued_count, rec.queue_seq),
        (Some(&a.id), 1, 1)
    );
    let listed: BTreeSet<String> = s
        .list_jobs(&env, 10, None)
        .await
        .unwrap()
        .jobs
        .into_iter()
        .map(|j| j.job.id.to_string())
        .collect();
    assert_eq!(
        listed,
        BTreeSet::from([a.id.to_string(), c.id.to_string()]),
        "only the jobs written"
    );

    // A taken id, a missing environment.
    assert!(matches!(
        s.submit_if_idle(&a).await,
        Err(StoreError::AlreadyExists { kind: "job", .. })
    ));
    assert!(matches!(
        s.submit_if_idle(&job("acme/payments/ghost")).await,
        Err(StoreError::NotFound {
            kind: "environment",
            ..
        })
    ));

    // The queue goes on as before; once idle, the lock is taken again.
    assert!(
        matches!(s.release_environment(&env, &a.id).await.unwrap(), Released::HandedTo(n) if n.id == c.id)
    );
    assert_eq!(
        s.release_environment(&env, &c.id).await.unwrap(),
        Released::Idle
    );
    let e = job(ENV);
    assert!(s.submit_if_idle(&e).await.unwrap().unwrap().took_lock);
    assert_eq!(
        s.get_environment(&env).await.unwrap().item.active_job,
        Some(e.id.clone())
    );
}

pub async fn a_speculative_plan_takes_no_lock_joins_no_queue_and_is_a_pending_send<
    S: Store + 'static,
>(
    s: Arc<S>,
) {
    setup_env(&*s, ENV).await;
    let env = env();
    let holder = job(ENV);
    assert!(s.submit_job(&holder, None).await.unwrap().took_lock);
    // A person's lock does not stop a plan that writes nothing.
    let lock = sortie_core::lock::EnvLock::new("dave", Utc::now(), "audit").unwrap();
    s.lock_environment(&env, &lock).await.unwrap();
    let key = IdempotencyKey {
        key: "pr:acme/infra#7@1a2b".into(),
        request_hash: "h1".into(),
    };
    let plan = job(ENV);
    let submitted = s.submit_speculative(&plan, Some(&key)).await.unwrap();
    assert!(!submitted.took_lock && !submitted.replayed);
    let rec = s.get_environment(&env).await.unwrap().item;
    assert_eq!(
        (rec.active_job.as_ref(), rec.queued_count),
        (Some(&holder.id), 0),
        "neither the lock nor the queue moved"
    );
    let pending = pending_ids(&*s, Utc::now() + Duration::seconds(1)).await;
    assert!(
        pending.contains(&plan.id.to_string()),
        "a pending send at once"
    );
    // The same key answers the first job; another body under it is refused.
    let again = s.submit_speculative(&job(ENV), Some(&key)).await.unwrap();
    assert!(again.replayed && again.job.id == plan.id);
    let changed = IdempotencyKey {
        request_hash: "h2".into(),
        ..key.clone()
    };
    assert!(matches!(
        s.submit_speculative(&job(ENV), Some(&changed)).await,
        Err(StoreError::IdempotencyMismatch { .. })
    ));
    assert!(matches!(
        s.submit_speculative(&plan, None).await,
        Err(StoreError::AlreadyExists { .. })
    ));
    assert!(matches!(
        s.submit_speculative(&job("acme/payments/gone"), None).await,
        Err(StoreError::NotFound {
            kind: "environment",
            ..
        })
    ));
    // The holder's release hands nothing to the plan: it was never queued.
    s.unlock_environment(&env).await.unwrap();
    assert_eq!(
        s.release_environment(&env, &holder.id).await.unwrap(),
        Released::Idle
    );
    assert_eq!(
        s.release_environment(&env, &plan.id).await.unwrap(),
        Released::NotHeld,
        "a speculative plan holds nothing to release"
    );
}
