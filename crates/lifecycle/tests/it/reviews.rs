//! Reviewed applies and drift schedules in the lifecycle, on the fast tier
//! ([`common::fast::FastWorld`]): a plan phase that ends awaiting approval holding the
//! lock, the sweeper's approval timeout, and drift checks fired, skipped and remediated.

use crate::common;

use chrono::{Duration, Utc};
use common::fast::FastWorld as World;
use sortie_core::{ChangeSummary, EnvPath, Job, JobRequest, JobState};
use sortie_lifecycle::EventEffect;
use sortie_store::{AuditStore, EnvironmentStore, JobStore, JobUpdate, RunnerStore};

/// Sets the environment's settings from a JSON patch body (as the API applies them).
async fn configure(w: &World, env: &EnvPath, patch: serde_json::Value) {
    let input = sortie_core::environment::EnvironmentInput::from_value(&patch, false).unwrap();
    let mut current = w.store.get_environment(env).await.unwrap().item.environment;
    input.apply_settings(&mut current.settings);
    w.store.update_environment(&current, None).await.unwrap();
}

/// Submits `operation` as the API does (`Job::for_environment`) by `who`.
async fn submit(w: &World, env: &EnvPath, operation: &str, who: &str) -> Job {
    let record = w.store.get_environment(env).await.unwrap();
    let runner = w
        .store
        .get_runner(&record.item.environment.runner.runner_id)
        .await
        .unwrap();
    let request = JobRequest::parse(&format!(
        r#"{{"operation":"{operation}","files":{{"main.tf":""}}}}"#
    ))
    .unwrap();
    let job = Job::for_environment(
        sortie_core::tokens::new_id(),
        &record.item.environment,
        runner.item.spec,
        request,
        who.into(),
        Utc::now(),
    );
    w.engine.jobs.submit(&job, None).await.unwrap();
    job
}

/// Dispatches the job's task, lets it report `summary`, and delivers its STOPPED event
/// (exit code 0); the outcome of the event.
async fn run_to_stop(w: &World, job: &Job, summary: ChangeSummary) -> EventEffect {
    w.queued_ids().await;
    w.engine.dispatch(&World::body(&job.id), 1).await;
    let task = w.store.get_job(&job.id).await.unwrap().task.unwrap();
    w.store
        .mark_job(
            &job.id,
            Utc::now(),
            JobUpdate {
                summary: Some(summary),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    w.engine
        .task_event(&World::event("ecs-task-stopped-exit0.json", &job.id, &task))
        .await
        .unwrap()
}

fn counts(add: u32, change: u32, destroy: u32) -> ChangeSummary {
    ChangeSummary {
        add,
        change,
        destroy,
        has_changes: None,
    }
}

#[tokio::test]
async fn a_plan_phase_that_stops_well_awaits_approval_holding_the_lock_until_the_sweeper_discards_it(
) {
    let w = World::new().await;
    let env = w.environment("acme/payments/prod", "").await;
    configure(
        &w,
        &env,
        serde_json::json!({"approval": "required", "approval_timeout_seconds": 300}),
    )
    .await;
    let job = submit(&w, &env, "apply", "alice").await;
    let behind = submit(&w, &env, "plan", "bob").await;
    w.events().await;
    let out = run_to_stop(&w, &job, counts(2, 0, 0)).await;
    assert_eq!(out, EventEffect::Moved(JobState::AwaitingApproval));
    let rec = w.store.get_job(&job.id).await.unwrap();
    let plan_phase = rec.plan_phase.clone().expect("the plan phase is kept");
    assert_eq!(plan_phase.summary, Some(counts(2, 0, 0)));
    assert!(plan_phase.task.is_some());
    assert!(
        rec.job.reason().contains("awaiting approval"),
        "{}",
        rec.job.reason()
    );
    // The lock stays with the reviewed job; the job behind it is not sent.
    let held = w.store.get_environment(&env).await.unwrap().item;
    assert_eq!(held.active_job.as_ref(), Some(&job.id));
    assert!(w.queued_ids().await.is_empty());
    let events = w.events().await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["detail-type"], "sortie.job.awaiting_approval");
    assert_eq!(events[0]["detail"]["job_id"], job.id.as_str());

    // Before the deadline the sweeper leaves it; after it, the plan is discarded.
    let early = w
        .engine
        .sweep(Utc::now() + Duration::seconds(200))
        .await
        .unwrap();
    assert_eq!(early.approvals_timed_out, 0);
    assert_eq!(w.state(&job.id).await, JobState::AwaitingApproval);
    let late = w
        .engine
        .sweep(Utc::now() + Duration::seconds(301))
        .await
        .unwrap();
    assert_eq!(late.approvals_timed_out, 1, "{late:?}");
    let rec = w.store.get_job(&job.id).await.unwrap();
    assert_eq!(rec.job.state, JobState::Discarded);
    let decision = rec.job.review.unwrap().decision.unwrap();
    assert_eq!(decision.by, sortie_lifecycle::APPROVAL_TIMEOUT_PRINCIPAL);
    assert!(decision.comment.unwrap().contains("5m"));
    // The timeout's discard is in the audit trail, by the timeout, in its transaction.
    let page = w
        .store
        .audit_page(
            "acme",
            &sortie_store::AuditRange {
                limit: 100,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let timed_out: Vec<sortie_core::audit::AuditEntry> = page
        .records
        .iter()
        .map(|r| serde_json::from_str(&r.body).unwrap())
        .filter(|e: &sortie_core::audit::AuditEntry| e.action == "approval_timed_out")
        .collect();
    assert_eq!(timed_out.len(), 1, "{:?}", page.records);
    assert_eq!(timed_out[0].target, format!("/v1/jobs/{}", job.id));
    assert_eq!(
        timed_out[0].actor.credential,
        sortie_core::audit::CredentialKind::System
    );
    // The lock went to the job behind it, which was sent.
    let env_now = w.store.get_environment(&env).await.unwrap().item;
    assert_eq!(env_now.active_job.as_ref(), Some(&behind.id));
    assert_eq!(w.queued_ids().await, vec![behind.id.clone()]);
    // A second pass finds nothing more to discard.
    let again = w
        .engine
        .sweep(Utc::now() + Duration::seconds(400))
        .await
        .unwrap();
    assert_eq!(again.approvals_timed_out, 0);
}

#[tokio::test]
async fn an_approved_job_is_relaunched_for_its_apply_phase_and_then_succeeds() {
    let w = World::new().await;
    let env = w.environment("acme/payments/stage", "").await;
    configure(
        &w,
        &env,
        serde_json::json!({"approval": "required", "four_eyes": true}),
    )
    .await;
    let job = submit(&w, &env, "destroy", "alice").await;
    assert_eq!(
        run_to_stop(&w, &job, counts(0, 0, 3)).await,
        EventEffect::Moved(JobState::AwaitingApproval)
    );
    let rec = w.store.get_job(&job.id).await.unwrap();
    let plan_task = rec.task.clone().unwrap();
    let now = Utc::now();
    let refused = w
        .engine
        .jobs
        .review(
            &rec,
            "alice",
            sortie_core::ReviewVerdict::Approved,
            None,
            now,
        )
        .await
        .unwrap();
    assert_eq!(refused, Err(sortie_core::ReviewRefusal::OwnJob));
    let approved = w
        .engine
        .jobs
        .review(
            &rec,
            "bob",
            sortie_core::ReviewVerdict::Approved,
            Some("ok".into()),
            now,
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(approved.job.state, JobState::Queued);
    assert!(approved.task.is_none() && approved.summary.is_none());
    assert_eq!(w.queued_ids().await, vec![job.id.clone()], "sent again");
    // The plan task's late duplicate event changes nothing.
    assert_eq!(
        w.engine
            .task_event(&World::event(
                "ecs-task-stopped-exit1.json",
                &job.id,
                plan_task.as_str()
            ))
            .await
            .unwrap(),
        EventEffect::Ignored("already requeued")
    );
    // The apply phase: a second launch attempt, which ends the job.
    let out = run_to_stop(&w, &job, counts(0, 0, 3)).await;
    assert_eq!(out, EventEffect::Moved(JobState::Succeeded));
    let done = w.store.get_job(&job.id).await.unwrap();
    assert_eq!(done.attempt, 2);
    assert_ne!(done.task.as_ref(), Some(&plan_task));
    assert_eq!(done.plan_phase.unwrap().task, Some(plan_task));
    assert!(w
        .store
        .get_environment(&env)
        .await
        .unwrap()
        .item
        .active_job
        .is_none());
}

#[tokio::test]
async fn drift_checks_fire_on_schedule_skip_a_busy_environment_and_remediate_a_drift() {
    let w = World::new().await;
    let env = w.environment("acme/payments/drift", "").await;
    configure(
        &w,
        &env,
        serde_json::json!({"drift_schedule": "*/15 * * * *", "drift_remediation": "apply"}),
    )
    .await;
    let next = w
        .store
        .get_environment(&env)
        .await
        .unwrap()
        .item
        .next_drift_at
        .expect("a schedule sets the next fire time");
    assert!(next > Utc::now() && next <= Utc::now() + Duration::minutes(15));

    // No apply yet: the fire is skipped, and says why.
    let report = w.engine.sweep(next + Duration::seconds(1)).await.unwrap();
    assert_eq!(
        (report.drift_checks, report.drift_skipped),
        (0, 1),
        "{report:?}"
    );
    let rec = w.store.get_environment(&env).await.unwrap().item;
    assert!(rec
        .drift_skipped
        .unwrap()
        .reason
        .contains("no successful apply"));
    let next = rec.next_drift_at.unwrap();

    // An apply succeeds: it becomes the latest apply.
    let apply = submit(&w, &env, "apply", "alice").await;
    assert_eq!(
        run_to_stop(&w, &apply, counts(1, 0, 0)).await,
        EventEffect::Moved(JobState::Succeeded)
    );
    let rec = w.store.get_environment(&env).await.unwrap().item;
    assert_eq!(rec.last_apply.unwrap().job_id, apply.id);

    // The schedule fires: a plan of the latest apply's request, by sortie:drift.
    let report = w.engine.sweep(next + Duration::seconds(1)).await.unwrap();
    assert_eq!(report.drift_checks, 1, "{report:?}");
    let check_id = w
        .store
        .get_environment(&env)
        .await
        .unwrap()
        .item
        .active_job
        .unwrap();
    let check = w.store.get_job(&check_id).await.unwrap().job;
    assert!(check.drift_check);
    assert_eq!(check.requested_by, "sortie:drift");
    assert_eq!(check.request.operation, sortie_core::Operation::Plan);
    assert_eq!(check.request.files, apply.request.files);
    // The same fire seen by a second sweep does nothing.
    let report = w.engine.sweep(next + Duration::seconds(2)).await.unwrap();
    assert_eq!(
        (report.drift_checks, report.drift_skipped),
        (0, 0),
        "{report:?}"
    );

    // It finds changes: drifted, published, and an apply submitted to remediate.
    w.events().await;
    let drifted = ChangeSummary {
        has_changes: Some(true),
        ..counts(0, 1, 0)
    };
    assert_eq!(
        run_to_stop(&w, &check, drifted).await,
        EventEffect::Moved(JobState::Succeeded)
    );
    let rec = w.store.get_environment(&env).await.unwrap().item;
    let drift = rec.drift.clone().expect("the result is recorded");
    assert_eq!(drift.status, sortie_core::drift::DriftVerdict::Drifted);
    assert_eq!(drift.job_id, check.id);
    let remediation = drift.remediation_job_id.expect("remediation submitted");
    let fix = w.store.get_job(&remediation).await.unwrap().job;
    assert_eq!(fix.request.operation, sortie_core::Operation::Apply);
    assert_eq!(fix.requested_by, "sortie:drift");
    assert_eq!(
        rec.active_job.as_ref(),
        Some(&remediation),
        "the fix holds the lock"
    );
    let events = w.events().await;
    assert!(
        events
            .iter()
            .any(|e| e["detail-type"] == "sortie.environment.drifted"
                && e["detail"]["remediation_job_id"] == remediation.as_str()),
        "{events:?}"
    );

    // The next fire finds the environment busy with the fix: skipped, not queued.
    let next = rec.next_drift_at.unwrap();
    let report = w.engine.sweep(next + Duration::seconds(1)).await.unwrap();
    assert_eq!(
        (report.drift_checks, report.drift_skipped),
        (0, 1),
        "{report:?}"
    );
    let rec = w.store.get_environment(&env).await.unwrap().item;
    assert!(rec.drift_skipped.unwrap().reason.contains("busy"));
    assert_eq!(rec.queued_count, 0, "checks never pile up");
}

#[tokio::test]
async fn a_reviewed_apply_interrupted_on_spot_in_its_plan_phase_is_requeued_but_never_in_its_apply_phase(
) {
    let w = World::new().await;
    let env = w.environment("acme/payments/spot", "").await;
    configure(&w, &env, serde_json::json!({"approval": "required"})).await;
    let job = submit(&w, &env, "apply", "alice").await;
    w.queued_ids().await;
    w.engine.dispatch(&World::body(&job.id), 1).await;
    let task = w.store.get_job(&job.id).await.unwrap().task.unwrap();
    let spot = World::event("ecs-task-spot-interruption.json", &job.id, task.as_str());
    // The plan phase wrote nothing: it is requeued, keeping the lock.
    assert_eq!(
        w.engine.task_event(&spot).await.unwrap(),
        EventEffect::Moved(JobState::Queued)
    );
    assert_eq!(w.store.get_job(&job.id).await.unwrap().spot_requeues, 1);
    // Its second plan attempt ends well; approved, the apply phase is interrupted too.
    assert_eq!(
        run_to_stop(&w, &job, counts(1, 0, 0)).await,
        EventEffect::Moved(JobState::AwaitingApproval)
    );
    let rec = w.store.get_job(&job.id).await.unwrap();
    w.engine
        .jobs
        .review(
            &rec,
            "bob",
            sortie_core::ReviewVerdict::Approved,
            None,
            Utc::now(),
        )
        .await
        .unwrap()
        .unwrap();
    w.queued_ids().await;
    w.engine.dispatch(&World::body(&job.id), 1).await;
    let task = w.store.get_job(&job.id).await.unwrap().task.unwrap();
    let spot = World::event("ecs-task-spot-interruption.json", &job.id, task.as_str());
    assert_eq!(
        w.engine.task_event(&spot).await.unwrap(),
        EventEffect::Moved(JobState::Failed),
        "an apply is never re-run blindly"
    );
}

#[tokio::test]
async fn a_successful_destroy_forgets_the_latest_apply_so_drift_checks_skip_until_the_next_apply() {
    let w = World::new().await;
    let env = w.environment("acme/payments/gone", "").await;
    configure(&w, &env, serde_json::json!({"drift_schedule": "0 * * * *"})).await;
    let apply = submit(&w, &env, "apply", "alice").await;
    run_to_stop(&w, &apply, counts(1, 0, 0)).await;
    let rec = w.store.get_environment(&env).await.unwrap().item;
    assert_eq!(rec.last_apply.unwrap().job_id, apply.id);
    let destroy = submit(&w, &env, "destroy", "alice").await;
    assert_eq!(
        run_to_stop(&w, &destroy, counts(0, 0, 1)).await,
        EventEffect::Moved(JobState::Succeeded)
    );
    let rec = w.store.get_environment(&env).await.unwrap().item;
    assert!(rec.last_apply.is_none(), "destroyed: no latest apply");
    let report = w
        .engine
        .sweep(rec.next_drift_at.unwrap() + Duration::seconds(1))
        .await
        .unwrap();
    assert_eq!(
        (report.drift_checks, report.drift_skipped),
        (0, 1),
        "{report:?}"
    );
}
