//! How a job ends, on the fast tier ([`common::fast::FastWorld`]): a task's events map to
//! outcomes, release the lock and start the next job; a cancel and a timeout stop the task
//! from outside; twenty jobs of one environment run one at a time, in order, beside
//! another environment's; a plan's Spot requeues are bounded; the sweeper releases a lock an
//! ended job still holds. What ECS itself answers (RunTask's client token, ListTasks,
//! DescribeTasks, throttling) is shown on moto in `lifecycle.rs`, `relaunch.rs` and
//! `true_to_ecs.rs`.

use crate::common;

use chrono::{Duration, Utc};
use common::fast::FastWorld as World;
use sortie_core::JobState;
use sortie_lifecycle::{EventEffect, MessageDisposition, SweepSettings};
use sortie_store::{EnvironmentStore, JobStore};

#[tokio::test]
async fn a_job_past_its_timeout_is_stopped_from_outside_and_ends_timed_out() {
    let w = World::with_settings(SweepSettings {
        silence: Duration::zero(),
        ..Default::default()
    })
    .await;
    let env = w
        .environment("acme/payments/prod", "  timeout_seconds: 60\n")
        .await;
    let (job, _) = w.submit(&env, "apply", "  timeout_seconds: 60\n").await;
    w.engine.dispatch(&World::body(&job.id), 1).await;
    let task = w.store.get_job(&job.id).await.unwrap().task.unwrap();
    let later = Utc::now() + Duration::seconds(61);
    assert_eq!(w.engine.sweep(later).await.unwrap().timed_out, 1);
    assert_eq!(
        w.launcher.stopped(),
        vec![(
            task.as_str().to_string(),
            "sortie: timed out after 60s".to_string()
        )],
        "the task was stopped from outside, saying why"
    );
    // Either the STOPPED event or the sweeper's describe finishes it as timed_out.
    w.engine.sweep(later).await.unwrap();
    let rec = w.store.get_job(&job.id).await.unwrap();
    assert_eq!(rec.job.state, JobState::TimedOut, "{}", rec.job.reason());
    assert!(rec.job.reason().contains("60s"));
}

#[tokio::test]
async fn task_events_map_outcomes_release_start_the_next_job_and_publish_completion() {
    let w = World::new().await;
    let env = w.environment("acme/payments/prod", "").await;
    let (job, _) = w.submit(&env, "apply", "").await;
    let (next, _) = w.submit(&env, "apply", "").await;
    w.queued_ids().await;
    w.engine.dispatch(&World::body(&job.id), 1).await;
    let task = w.store.get_job(&job.id).await.unwrap().task.unwrap();
    assert_eq!(
        w.engine
            .task_event(&World::event("ecs-task-running.json", &job.id, &task))
            .await
            .unwrap(),
        EventEffect::Ignored("start recorded")
    );
    assert!(w.store.get_job(&job.id).await.unwrap().started_at.is_some());
    let out = w
        .engine
        .task_event(&World::event("ecs-task-stopped-exit0.json", &job.id, &task))
        .await
        .unwrap();
    assert_eq!(out, EventEffect::Moved(JobState::Succeeded));
    assert_eq!(
        w.store
            .get_environment(&env)
            .await
            .unwrap()
            .item
            .active_job
            .as_deref(),
        Some(next.id.as_str())
    );
    assert_eq!(
        w.queued_ids().await,
        vec![next.id.clone()],
        "the next job is sent"
    );
    // The end reached the bus. (Its old name beside it, `JOB_COMPLETED_ALIAS`, is the
    // EventBridge bus's to add: `crates/testkit/it/iam.rs` shows both arrive on moto.)
    let ended = w.events().await;
    let types: Vec<&str> = ended
        .iter()
        .map(|e| e["detail-type"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        types,
        [sortie_lifecycle::JOB_ENDED],
        "sortie.job.ended reached the bus"
    );
    assert_eq!(ended[0]["detail"]["job_id"], job.id.as_str());
    assert_eq!(ended[0]["detail"]["state"], "succeeded");

    // Duplicate STOPPED, RUNNING after STOPPED, and an unknown task: all harmless.
    let before = w.store.get_job(&job.id).await.unwrap();
    assert_eq!(
        w.engine
            .task_event(&World::event("ecs-task-stopped-exit1.json", &job.id, &task))
            .await
            .unwrap(),
        EventEffect::Ignored("already finished")
    );
    assert_eq!(
        w.engine
            .task_event(&World::event("ecs-task-running.json", &job.id, &task))
            .await
            .unwrap(),
        EventEffect::Ignored("out of order or duplicate")
    );
    assert_eq!(
        w.engine
            .task_event(&World::event(
                "ecs-task-stopped-exit0.json",
                "01unknownjob0000000000000",
                "arn:aws:ecs:us-east-1:123456789012:task/x/y"
            ))
            .await
            .unwrap(),
        EventEffect::Ignored("unknown job")
    );
    let mut foreign = World::event("ecs-task-stopped-exit0.json", &job.id, &task);
    foreign.started_by = Some("ecs-svc/1234".into());
    assert_eq!(
        w.engine.task_event(&foreign).await.unwrap(),
        EventEffect::Ignored("not a task Sortie started")
    );
    assert_eq!(
        w.store.get_job(&job.id).await.unwrap(),
        before,
        "nothing changed"
    );
    assert!(w.queued_ids().await.is_empty(), "and nothing was sent");
    assert!(w.events().await.is_empty(), "nor published");
}

async fn outcome_of(sample: &str, operation: &str) -> (JobState, String, World, String) {
    let w = World::new().await;
    let env = w.environment("acme/payments/prod", "").await;
    let (job, _) = w.submit(&env, operation, "").await;
    w.engine.dispatch(&World::body(&job.id), 1).await;
    let task = w.store.get_job(&job.id).await.unwrap().task.unwrap();
    w.queued_ids().await;
    w.engine
        .task_event(&World::event(sample, &job.id, &task))
        .await
        .unwrap();
    let rec = w.store.get_job(&job.id).await.unwrap();
    (
        rec.job.state,
        rec.job.reason().to_string(),
        w,
        job.id.to_string(),
    )
}

#[tokio::test]
async fn stopped_events_become_the_right_outcome() {
    let (s, r, ..) = outcome_of("ecs-task-stopped-exit1.json", "apply").await;
    assert_eq!(s, JobState::Failed, "{r}");
    assert!(r.contains("code 1"));
    let (s, r, ..) = outcome_of("ecs-task-failed-to-start.json", "plan").await;
    assert_eq!(s, JobState::Failed);
    assert!(r.contains("CannotPullContainerError"), "{r}");
    let (s, r, ..) = outcome_of("ecs-task-oom.json", "apply").await;
    assert_eq!(s, JobState::Failed);
    assert!(r.contains("out of memory"), "{r}");
    let (s, r, ..) = outcome_of("ecs-task-timed-out.json", "apply").await;
    assert_eq!(s, JobState::TimedOut, "{r}");
    let (s, r, w, id) = outcome_of("ecs-task-spot-interruption.json", "plan").await;
    assert_eq!(s, JobState::Queued, "a plan on Spot is requeued: {r}");
    assert_eq!(
        w.queued_ids().await,
        vec![id],
        "and sent again, keeping its lock"
    );
    let (s, r, ..) = outcome_of("ecs-task-spot-interruption.json", "apply").await;
    assert_eq!(s, JobState::Failed);
    assert!(r.contains("not re-run blindly"), "{r}");
}

#[tokio::test]
async fn cancel_of_a_running_job_stops_its_task_and_ends_canceled() {
    let w = World::new().await;
    let env = w.environment("acme/payments/prod", "").await;
    let (job, _) = w.submit(&env, "apply", "").await;
    w.engine.dispatch(&World::body(&job.id), 1).await;
    let task = w.store.get_job(&job.id).await.unwrap().task.unwrap();
    let cancel = serde_json::json!({"job_id": job.id, "cancel_by": "bob"}).to_string();
    assert_eq!(
        w.engine.dispatch(&cancel, 1).await,
        MessageDisposition::Done
    );
    assert_eq!(
        w.launcher.stopped(),
        vec![(
            task.as_str().to_string(),
            "sortie: canceled by bob".to_string()
        )],
        "the task was asked to stop, saying by whom"
    );
    // The STOPPED event (here with exit 143 from SIGTERM) finishes it as canceled.
    let mut event = World::event("ecs-task-stopped-exit1.json", &job.id, &task);
    event.stopped_reason = Some("sortie: canceled by bob".into());
    assert_eq!(
        w.engine.task_event(&event).await.unwrap(),
        EventEffect::Moved(JobState::Canceled)
    );
    assert_eq!(
        w.store.get_job(&job.id).await.unwrap().job.reason(),
        "canceled by bob"
    );
}

#[tokio::test]
async fn invariant_1_twenty_jobs_run_one_at_a_time_in_fifo_order_while_another_environment_runs_in_parallel(
) {
    let w = World::new().await;
    let a = w.environment("acme/payments/prod", "").await;
    let b = w.environment("acme/web/prod", "").await;
    let mut submitted_a = vec![];
    for _ in 0..20 {
        submitted_a.push(w.submit(&a, "apply", "").await.0.id);
    }
    let mut submitted_b = vec![];
    for _ in 0..3 {
        submitted_b.push(w.submit(&b, "apply", "").await.0.id);
    }
    // Both environments' first jobs took their locks; the API would have sent them.
    let mut inbox: Vec<sortie_core::JobId> = vec![submitted_a[0].clone(), submitted_b[0].clone()];
    let (mut started_a, mut started_b) = (vec![], vec![]);
    let mut b_overlapped_a = false;
    while !inbox.is_empty() {
        // Dispatch everything delivered, as the SQS-triggered function would.
        for id in inbox.drain(..) {
            assert_eq!(
                w.engine.dispatch(&World::body(&id), 1).await,
                MessageDisposition::Done
            );
        }
        // At every step at most one job of each environment is launched.
        let mut running = vec![];
        for id in submitted_a.iter().chain(submitted_b.iter()) {
            if w.state(id).await.is_active() {
                running.push(id.clone());
            }
        }
        let active_a: Vec<&sortie_core::JobId> = running
            .iter()
            .filter(|id| submitted_a.contains(id))
            .collect();
        let active_b: Vec<&sortie_core::JobId> = running
            .iter()
            .filter(|id| submitted_b.contains(id))
            .collect();
        assert!(
            active_a.len() <= 1 && active_b.len() <= 1,
            "one writer per environment: {running:?}"
        );
        b_overlapped_a |= !active_a.is_empty() && !active_b.is_empty();
        // Finish each running task with its own STOPPED event.
        for id in running {
            let rec = w.store.get_job(&id).await.unwrap();
            if submitted_a.contains(&id) {
                started_a.push(id.clone())
            } else {
                started_b.push(id.clone())
            }
            let task = rec.task.unwrap();
            assert_eq!(
                w.engine
                    .task_event(&World::event("ecs-task-stopped-exit0.json", &id, &task))
                    .await
                    .unwrap(),
                EventEffect::Moved(JobState::Succeeded)
            );
        }
        inbox = w.queued_ids().await;
    }
    assert_eq!(started_a, submitted_a, "strict FIFO within the environment");
    assert_eq!(started_b, submitted_b);
    assert!(
        b_overlapped_a,
        "the other environment's jobs ran in parallel"
    );
    assert_eq!(w.launcher.launched().len(), 23, "one launch per job");
}

#[tokio::test]
async fn spot_requeues_of_a_plan_are_bounded_then_the_job_fails_saying_so() {
    let w = World::new().await;
    let env = w.environment("acme/payments/prod", "").await;
    let (job, _) = w.submit(&env, "plan", "").await;
    for attempt in 1..=4u32 {
        assert_eq!(
            w.engine.dispatch(&World::body(&job.id), 1).await,
            MessageDisposition::Done
        );
        let rec = w.store.get_job(&job.id).await.unwrap();
        assert_eq!((rec.job.state, rec.attempt), (JobState::Running, attempt));
        let spot = World::event(
            "ecs-task-spot-interruption.json",
            &job.id,
            rec.task.as_ref().unwrap(),
        );
        let moved = w.engine.task_event(&spot).await.unwrap();
        if attempt <= sortie_core::oversight::MAX_SPOT_REQUEUES {
            assert_eq!(moved, EventEffect::Moved(JobState::Queued));
            assert_eq!(w.queued_ids().await, vec![job.id.clone()]);
        } else {
            assert_eq!(moved, EventEffect::Moved(JobState::Failed));
        }
    }
    let rec = w.store.get_job(&job.id).await.unwrap();
    assert_eq!(rec.spot_requeues, 3);
    assert!(
        rec.job.reason().contains("interrupted on Spot 4 times"),
        "{}",
        rec.job.reason()
    );
    assert_eq!(
        w.launcher
            .launched()
            .iter()
            .filter(|j| j.as_str() == job.id.as_str())
            .count(),
        4,
        "four attempts, four launches"
    );
    // The lock is released: the environment is free.
    assert_eq!(
        sortie_store::EnvironmentStore::get_environment(&*w.store, &env)
            .await
            .unwrap()
            .item
            .active_job,
        None
    );
}

#[tokio::test]
async fn the_sweeper_releases_an_environment_still_locked_by_an_ended_job() {
    let w = World::new().await;
    let env = w.environment("acme/payments/prod", "").await;
    let (first, took) = w.submit(&env, "apply", "").await;
    assert!(took);
    let (next, _) = w.submit(&env, "apply", "").await;
    assert_eq!(
        w.engine.dispatch(&World::body(&first.id), 1).await,
        MessageDisposition::Done
    );
    // task-events recorded the end, then died before releasing the environment.
    w.store
        .transition_job(
            &first.id,
            JobState::Running,
            JobState::Succeeded,
            chrono::Utc::now(),
            "exit code 0",
            Default::default(),
        )
        .await
        .unwrap();
    w.queued_ids().await;
    let locked_by = |w: &World| {
        let (store, env) = (w.store.clone(), env.clone());
        async move {
            sortie_store::EnvironmentStore::get_environment(&*store, &env)
                .await
                .unwrap()
                .item
                .active_job
        }
    };
    assert_eq!(locked_by(&w).await, Some(first.id.clone()));
    // Not before the grace period: the normal path may still be releasing it.
    assert_eq!(
        w.engine.sweep(chrono::Utc::now()).await.unwrap().released,
        0
    );
    let later = chrono::Utc::now() + chrono::Duration::seconds(61);
    let report = w.engine.sweep(later).await.unwrap();
    assert_eq!((report.released, report.errors), (1, 0), "{report:?}");
    assert_eq!(
        locked_by(&w).await,
        Some(next.id.clone()),
        "handed to the next job"
    );
    assert_eq!(
        w.queued_ids().await,
        vec![next.id.clone()],
        "and the next job was sent"
    );
    // Settled: the next pass has nothing to repair.
    assert_eq!(w.engine.sweep(later).await.unwrap().released, 0);
}
