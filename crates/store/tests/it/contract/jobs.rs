//! Contract cases for jobs: conditional transitions, exactly-once claims, cancels that leave
//! the queue, listings, the sweeper's launched jobs, pending sends and active jobs.

use std::sync::Arc;

use chrono::{Duration, Utc};
use sortie_core::JobState;
use sortie_store::{JobUpdate, Released, Store, StoreError};

use super::{env, job, pending_ids, setup_env, step, ENV};

pub async fn job_transitions_are_conditional_and_recorded<S: Store + 'static>(s: Arc<S>) {
    setup_env(&*s, ENV).await;
    let j = job(ENV);
    s.submit_job(&j, None).await.unwrap();
    let now = Utc::now();
    let claimed = s
        .transition_job(
            &j.id,
            JobState::Queued,
            JobState::Dispatching,
            now,
            "claimed by dispatch",
            JobUpdate::default(),
        )
        .await
        .unwrap();
    assert_eq!(claimed.job.state, JobState::Dispatching);
    // A second claim (a duplicate delivery) loses: the write is conditional.
    match s
        .transition_job(
            &j.id,
            JobState::Queued,
            JobState::Dispatching,
            now,
            "again",
            JobUpdate::default(),
        )
        .await
    {
        Err(StoreError::StateConflict {
            expected: JobState::Queued,
            actual: JobState::Dispatching,
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    let update = JobUpdate {
        task: Some("arn:aws:ecs:us-east-1:123456789012:task/c/abc".into()),
        token_hash: Some("0f".repeat(32)),
        ..Default::default()
    };
    let running = s
        .transition_job(
            &j.id,
            JobState::Dispatching,
            JobState::Running,
            now,
            "launched",
            update,
        )
        .await
        .unwrap();
    assert_eq!(
        running.task.as_deref(),
        Some("arn:aws:ecs:us-east-1:123456789012:task/c/abc")
    );
    let states: Vec<JobState> = running.job.transitions.iter().map(|t| t.to).collect();
    assert_eq!(
        states,
        vec![JobState::Queued, JobState::Dispatching, JobState::Running]
    );
    assert_eq!(
        s.get_job(&j.id).await.unwrap(),
        running,
        "the stored record equals the returned one"
    );
    // The core state machine refuses an illegal transition before any write.
    assert!(matches!(
        s.transition_job(
            &j.id,
            JobState::Running,
            JobState::Dispatching,
            now,
            "x",
            JobUpdate::default()
        )
        .await,
        Err(StoreError::StateConflict {
            expected: JobState::Running,
            actual: JobState::Running,
            ..
        })
    ));
    let done = s
        .transition_job(
            &j.id,
            JobState::Running,
            JobState::Succeeded,
            now,
            "exit code 0",
            JobUpdate::default(),
        )
        .await
        .unwrap();
    let states: Vec<JobState> = done.job.transitions.iter().map(|t| t.to).collect();
    assert_eq!(
        states,
        vec![
            JobState::Queued,
            JobState::Dispatching,
            JobState::Running,
            JobState::Succeeded
        ]
    );
    let read = s.get_job(&j.id).await.unwrap();
    assert_eq!(read.job, done.job, "the stored job equals the returned one");
    assert_eq!(read.job.request.variables["n"], serde_json::json!(3));
    assert!(s
        .pending_sends(Utc::now() + Duration::seconds(1), 100)
        .await
        .unwrap()
        .iter()
        .all(|p| p.id != j.id));
    assert!(matches!(
        s.transition_job(
            &"ghost".into(),
            JobState::Queued,
            JobState::Dispatching,
            Utc::now(),
            "x",
            JobUpdate::default()
        )
        .await,
        Err(StoreError::NotFound { kind: "job", .. })
    ));
}

pub async fn racing_claims_on_one_job_succeed_exactly_once<S: Store + 'static>(s: Arc<S>) {
    setup_env(&*s, ENV).await;
    let j = job(ENV);
    s.submit_job(&j, None).await.unwrap();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (s, id) = (s.clone(), j.id.clone());
            tokio::spawn(async move {
                s.transition_job(
                    &id,
                    JobState::Queued,
                    JobState::Dispatching,
                    Utc::now(),
                    "claimed",
                    JobUpdate::default(),
                )
                .await
                .is_ok()
            })
        })
        .collect();
    let mut wins = 0;
    for t in tasks {
        wins += usize::from(t.await.unwrap());
    }
    assert_eq!(wins, 1);
}

pub async fn a_waiting_job_is_canceled_at_once_and_leaves_the_queue<S: Store + 'static>(s: Arc<S>) {
    setup_env(&*s, ENV).await;
    let env = env();
    let (a, b) = (job(ENV), job(ENV));
    s.submit_job(&a, None).await.unwrap();
    s.submit_job(&b, None).await.unwrap();
    let canceled = s
        .cancel_waiting_job(&b.id, Utc::now(), "canceled by alice")
        .await
        .unwrap();
    assert_eq!(canceled.job.state, JobState::Canceled);
    assert_eq!(
        s.get_job(&b.id).await.unwrap().job.state,
        JobState::Canceled
    );
    assert_eq!(s.get_environment(&env).await.unwrap().item.queued_count, 0);
    assert_eq!(
        s.release_environment(&env, &a.id).await.unwrap(),
        Released::Idle,
        "the canceled job never gets the lock"
    );
    assert!(s
        .cancel_waiting_job(&b.id, Utc::now(), "again")
        .await
        .is_err());
}

pub async fn a_waiting_job_is_canceled_and_leaves_the_queue_but_the_holder_is_not<
    S: Store + 'static,
>(
    s: Arc<S>,
) {
    setup_env(&*s, ENV).await;
    let (a, b, c) = (job(ENV), job(ENV), job(ENV));
    for j in [&a, &b, &c] {
        s.submit_job(j, None).await.unwrap();
    }
    let canceled = s
        .cancel_waiting_job(&b.id, Utc::now(), "canceled by alice")
        .await
        .unwrap();
    assert_eq!(canceled.job.state, JobState::Canceled);
    assert_eq!(s.get_job(&b.id).await.unwrap(), canceled);
    assert_eq!(
        s.get_environment(&env()).await.unwrap().item.queued_count,
        1
    );
    assert!(matches!(
        s.cancel_waiting_job(&b.id, Utc::now(), "again").await,
        Err(StoreError::StateConflict {
            actual: JobState::Canceled,
            ..
        })
    ));
    assert!(
        matches!(
            s.cancel_waiting_job(&a.id, Utc::now(), "holder").await,
            Err(StoreError::StateConflict {
                actual: JobState::Queued,
                ..
            })
        ),
        "the lock holder is not waiting"
    );
    assert!(
        matches!(s.release_environment(&env(), &a.id).await.unwrap(), Released::HandedTo(n) if n.id == c.id),
        "the canceled job never gets the lock"
    );
    assert_eq!(
        s.release_environment(&env(), &c.id).await.unwrap(),
        Released::Idle
    );
}

pub async fn jobs_list_newest_first_with_an_opaque_cursor<S: Store + 'static>(s: Arc<S>) {
    setup_env(&*s, ENV).await;
    let env = env();
    let mut ids = vec![];
    for _ in 0..5 {
        let j = job(ENV);
        ids.push(j.id.clone());
        s.submit_job(&j, None).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    ids.reverse();
    let p1 = s.list_jobs(&env, 2, None).await.unwrap();
    let p2 = s.list_jobs(&env, 2, p1.next.as_deref()).await.unwrap();
    let p3 = s.list_jobs(&env, 2, p2.next.as_deref()).await.unwrap();
    let got: Vec<String> = [p1.jobs, p2.jobs, p3.jobs]
        .concat()
        .into_iter()
        .map(|j| j.job.id.to_string())
        .collect();
    assert_eq!(got, ids);
    // A short last page has no cursor (DynamoDB may give one after a full last page).
    assert!(p3.next.is_none());
    assert!(matches!(
        s.list_jobs(&env, 2, Some("zz-not-a-cursor")).await,
        Err(StoreError::NotFound { kind: "cursor", .. })
    ));
    assert!(matches!(
        s.list_jobs(&env, 2, Some("zz")).await,
        Err(StoreError::NotFound { kind: "cursor", .. })
    ));
}

pub async fn launched_jobs_are_listed_for_the_sweeper_and_can_be_marked<S: Store + 'static>(
    s: Arc<S>,
) {
    setup_env(&*s, ENV).await;
    let j = job(ENV);
    s.submit_job(&j, None).await.unwrap();
    assert!(
        matches!(
            s.mark_job(&j.id, Utc::now(), JobUpdate::default()).await,
            Err(StoreError::StateConflict { .. })
        ),
        "a queued job is not launched"
    );
    step(&*s, &j.id, JobState::Queued, JobState::Dispatching).await;
    let active: Vec<String> = s
        .active_jobs(10)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.job.id.to_string())
        .collect();
    assert_eq!(active, vec![j.id.clone()]);
    let marked = s
        .mark_job(
            &j.id,
            Utc::now(),
            JobUpdate {
                cancel_requested_by: Some("alice".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        (marked.job.state, marked.cancel_requested_by.as_deref()),
        (JobState::Dispatching, Some("alice"))
    );
    // Upload problems: recorded, read back, replaced by the next report.
    let problems = vec![
        "could not upload the summary: 403 Forbidden".to_string(),
        "log from offset 12 not uploaded".to_string(),
    ];
    let marked = s
        .mark_job(
            &j.id,
            Utc::now(),
            JobUpdate {
                upload_problems: Some(problems.clone()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(marked.upload_problems, problems);
    assert_eq!(s.get_job(&j.id).await.unwrap().upload_problems, problems);
    assert_eq!(
        marked.cancel_requested_by.as_deref(),
        Some("alice"),
        "other attributes are kept"
    );
    // Back to queued (a retryable launch failure): a pending send again, not active.
    step(&*s, &j.id, JobState::Dispatching, JobState::Queued).await;
    assert!(s.active_jobs(10).await.unwrap().is_empty());
    assert!(s
        .pending_sends(Utc::now() + Duration::seconds(1), 10)
        .await
        .unwrap()
        .iter()
        .any(|p| p.id == j.id));
    step(&*s, &j.id, JobState::Queued, JobState::Dispatching).await;
    step(&*s, &j.id, JobState::Dispatching, JobState::Failed).await;
    assert!(
        s.active_jobs(10).await.unwrap().is_empty(),
        "terminal jobs leave the index"
    );
    assert!(matches!(
        s.transition_job(
            &"ghost".into(),
            JobState::Queued,
            JobState::Dispatching,
            Utc::now(),
            "x",
            JobUpdate::default()
        )
        .await,
        Err(StoreError::NotFound { .. })
    ));
}

pub async fn pending_sends_and_active_jobs_follow_the_sparse_index<S: Store + 'static>(s: Arc<S>) {
    setup_env(&*s, ENV).await;
    let (a, b) = (job(ENV), job(ENV));
    s.submit_job(&a, None).await.unwrap();
    s.submit_job(&b, None).await.unwrap();
    let later = Utc::now() + Duration::seconds(1);
    assert_eq!(
        pending_ids(&*s, later).await,
        vec![a.id.clone()],
        "only the lock holder"
    );
    assert!(s
        .pending_sends(a.transitions[0].at, 10)
        .await
        .unwrap()
        .is_empty());
    assert!(matches!(
        s.mark_job(&a.id, Utc::now(), JobUpdate::default()).await,
        Err(StoreError::StateConflict {
            actual: JobState::Queued,
            ..
        })
    ));
    step(&*s, &a.id, JobState::Queued, JobState::Dispatching).await;
    assert!(pending_ids(&*s, later).await.is_empty());
    let active: Vec<String> = s
        .active_jobs(10)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.job.id.to_string())
        .collect();
    assert_eq!(active, vec![a.id.clone()]);
    let marked = s
        .mark_job(
            &a.id,
            Utc::now(),
            JobUpdate {
                cancel_requested_by: Some("alice".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        (marked.job.state, marked.cancel_requested_by.as_deref()),
        (JobState::Dispatching, Some("alice"))
    );
    // A retryable launch failure: a pending send again, no longer active.
    step(&*s, &a.id, JobState::Dispatching, JobState::Queued).await;
    assert!(s.active_jobs(10).await.unwrap().is_empty());
    assert_eq!(pending_ids(&*s, later).await, vec![a.id.clone()]);
    step(&*s, &a.id, JobState::Queued, JobState::Dispatching).await;
    step(&*s, &a.id, JobState::Dispatching, JobState::Running).await;
    step(&*s, &a.id, JobState::Running, JobState::Succeeded).await;
    assert!(s.active_jobs(10).await.unwrap().is_empty(), "terminal");
    assert!(pending_ids(&*s, later).await.is_empty());
    // The hand-over makes the next job a pending send.
    assert!(
        matches!(s.release_environment(&env(), &a.id).await.unwrap(), Released::HandedTo(n) if n.id == b.id)
    );
    assert_eq!(pending_ids(&*s, later).await, vec![b.id.clone()]);
    // An ended job stays on the ended list until the sweeper settles it.
    let ended = |s: Arc<S>| async move {
        s.ended_jobs(Utc::now() + Duration::seconds(2), 10)
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.job.id.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(ended(s.clone()).await, vec![a.id.clone()]);
    assert!(
        s.ended_jobs(Utc::now() - Duration::seconds(60), 10)
            .await
            .unwrap()
            .is_empty(),
        "only those that ended before the cut-off"
    );
    s.settle_ended_job(&a.id).await.unwrap();
    s.settle_ended_job(&a.id).await.unwrap();
    assert!(ended(s.clone()).await.is_empty(), "settled, idempotently");
    assert!(s.active_jobs(10).await.unwrap().is_empty());
}
