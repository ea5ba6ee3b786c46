//! Locks and the sweep, on the fast tier ([`common::fast::FastWorld`]): a locked environment's
//! scheduled drift check is skipped, saying who locked it and why, and submits nothing;
//! after the unlock the next fire runs.

use crate::common;

use chrono::{Duration, Utc};
use common::fast::FastWorld as World;
use sortie_core::{ChangeSummary, JobRequest, JobState};
use sortie_lifecycle::EventEffect;
use sortie_store::{EnvironmentStore, JobStore, JobUpdate, RunnerStore};

#[tokio::test]
async fn a_locked_environments_drift_check_is_skipped_naming_the_lock() {
    let w = World::new().await;
    let env = w.environment("acme/payments/locked", "").await;
    let input = sortie_core::environment::EnvironmentInput::from_value(
        &serde_json::json!({"drift_schedule": "*/15 * * * *"}),
        false,
    )
    .unwrap();
    let mut current = w
        .store
        .get_environment(&env)
        .await
        .unwrap()
        .item
        .environment;
    input.apply_settings(&mut current.settings);
    w.store.update_environment(&current, None).await.unwrap();

    // One apply succeeds, so a drift check has something to plan.
    let record = w.store.get_environment(&env).await.unwrap();
    let runner = w
        .store
        .get_runner(&record.item.environment.runner.runner_id)
        .await
        .unwrap();
    let job = sortie_core::Job::for_environment(
        sortie_core::tokens::new_id(),
        &record.item.environment,
        runner.item.spec,
        JobRequest::parse(r#"{"operation":"apply","files":{"main.tf":""}}"#).unwrap(),
        "alice".into(),
        Utc::now(),
    );
    w.engine.jobs.submit(&job, None).await.unwrap();
    w.queued_ids().await;
    w.engine.dispatch(&World::body(&job.id), 1).await;
    let task = w.store.get_job(&job.id).await.unwrap().task.unwrap();
    w.store
        .mark_job(
            &job.id,
            Utc::now(),
            JobUpdate {
                summary: Some(ChangeSummary::default()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        w.engine
            .task_event(&World::event("ecs-task-stopped-exit0.json", &job.id, &task))
            .await
            .unwrap(),
        EventEffect::Moved(JobState::Succeeded)
    );

    w.engine
        .jobs
        .lock_environment(&env, "bob", "incident 42", Utc::now())
        .await
        .unwrap();
    let next = w
        .store
        .get_environment(&env)
        .await
        .unwrap()
        .item
        .next_drift_at
        .unwrap();
    let report = w.engine.sweep(next + Duration::seconds(1)).await.unwrap();
    assert_eq!(
        (report.drift_checks, report.drift_skipped),
        (0, 1),
        "{report:?}"
    );
    let rec = w.store.get_environment(&env).await.unwrap().item;
    let reason = rec.drift_skipped.unwrap().reason;
    assert!(
        reason.contains("locked by bob") && reason.contains("incident 42"),
        "{reason}"
    );
    assert_eq!(rec.active_job, None, "nothing was submitted");

    w.engine.jobs.unlock_environment(&env, "bob").await.unwrap();
    let next = rec.next_drift_at.unwrap();
    let report = w.engine.sweep(next + Duration::seconds(1)).await.unwrap();
    assert_eq!(report.drift_checks, 1, "{report:?}");
}
