//! Relaunch through the strict ECS double: each launch attempt has its own RunTask
//! `clientToken`, so a requeued job launches again instead of meeting ECS's
//! `ConflictException` (moto alone would accept anything).

use crate::common;

use common::World;
use serde_json::json;
use sortie_core::JobState;
use sortie_lifecycle::{EventEffect, MessageDisposition};
use sortie_store::JobStore;

/// The `clientToken` of every RunTask the proxy saw for this job, in order.
fn client_tokens(w: &World, job_id: &str) -> Vec<String> {
    w.proxy
        .requests_for("RunTask")
        .iter()
        .filter_map(|r| r.json())
        .filter(|v| v["startedBy"] == format!("sortie/{job_id}"))
        .map(|v| v["clientToken"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test]
async fn the_strict_double_answers_a_reused_token_as_ecs_does() {
    sortie_testkit::require_aws!();
    let w = World::new().await;
    let ecs = aws_sdk_ecs::Client::new(&common::config_for(&w.proxy.url()).await);
    let run = |overrides: &str| {
        ecs.run_task()
            .cluster(&w.cluster)
            .task_definition(&w.task_definition)
            .launch_type(aws_sdk_ecs::types::LaunchType::Fargate)
            .client_token("token-1")
            .started_by(overrides.to_string())
            .network_configuration(
                aws_sdk_ecs::types::NetworkConfiguration::builder()
                    .awsvpc_configuration(
                        aws_sdk_ecs::types::AwsVpcConfiguration::builder()
                            .subnets(&w.subnet)
                            .security_groups(&w.security_group)
                            .build()
                            .unwrap(),
                    )
                    .build(),
            )
            .send()
    };
    let first = run("sortie/a").await.unwrap();
    let again = run("sortie/a").await.unwrap();
    let arn = first.tasks()[0].task_arn().unwrap().to_string();
    assert_eq!(
        again.tasks()[0].task_arn(),
        Some(arn.as_str()),
        "same token, same parameters: the same task"
    );
    let conflict = run("sortie/b").await.unwrap_err();
    let service = conflict.as_service_error().expect("a service error");
    assert_eq!(
        aws_sdk_ecs::error::ProvideErrorMetadata::code(service),
        Some("ConflictException")
    );
    assert!(service.is_conflict_exception(), "{service:?}");
    let raw = conflict.raw_response().unwrap().body().bytes().unwrap();
    let body: serde_json::Value = serde_json::from_slice(raw).unwrap();
    assert_eq!(body["resourceIds"], json!([arn]));
    // Only one task reached moto.
    let listed = w.ecs.list_tasks().cluster(&w.cluster).send().await.unwrap();
    assert_eq!(listed.task_arns().len(), 1);
}

#[tokio::test]
async fn a_plan_requeued_after_spot_launches_again_with_a_new_client_token() {
    sortie_testkit::require_aws!();
    let w = World::new().await;
    let env = w.environment("acme/payments/prod", "").await;
    let (job, _) = w.submit(&env, "plan", "").await;
    assert_eq!(
        w.engine.dispatch(&World::body(&job.id), 1).await,
        MessageDisposition::Done
    );
    let first = w.store.get_job(&job.id).await.unwrap();
    let first_task = first.task.clone().expect("launched");
    let spot = World::event("ecs-task-spot-interruption.json", &job.id, &first_task);
    assert_eq!(
        w.engine.task_event(&spot).await.unwrap(),
        EventEffect::Moved(JobState::Queued)
    );
    let requeued = w.store.get_job(&job.id).await.unwrap();
    assert_eq!(
        requeued.task, None,
        "the old task reference is cleared on requeue"
    );
    assert_eq!(w.queued_ids().await, vec![job.id.clone()]);
    // The relaunch: a new attempt, a new token, a new task.
    assert_eq!(
        w.engine.dispatch(&World::body(&job.id), 1).await,
        MessageDisposition::Done
    );
    let second = w.store.get_job(&job.id).await.unwrap();
    assert_eq!(
        second.job.state,
        JobState::Running,
        "{}",
        second.job.reason()
    );
    let second_task = second.task.clone().unwrap();
    assert_ne!(second_task, first_task);
    let tokens = client_tokens(&w, &job.id);
    assert_eq!(
        tokens,
        vec![format!("{}-1", job.id), format!("{}-2", job.id)]
    );
}

#[tokio::test]
async fn a_timeout_stop_that_fails_is_tried_again_on_the_next_sweep_until_seen_stopped() {
    sortie_testkit::require_aws!();
    let w = World::new().await;
    let timeout = "  timeout_seconds: 60\n";
    let env = w.environment("acme/payments/prod", timeout).await;
    let (job, _) = w.submit(&env, "apply", timeout).await;
    assert_eq!(
        w.engine.dispatch(&World::body(&job.id), 1).await,
        MessageDisposition::Done
    );
    let later = chrono::Utc::now() + chrono::Duration::seconds(120);
    // Refused on every try the SDK makes (three).
    w.proxy
        .inject("StopTask", 3, 400, "ThrottlingException", "Rate exceeded");
    let first = w.engine.sweep(later).await.unwrap();
    assert_eq!((first.timed_out, first.errors), (0, 1), "{first:?}");
    assert!(
        w.store
            .get_job(&job.id)
            .await
            .unwrap()
            .timeout_requested_at
            .is_none(),
        "a refused stop is not recorded as asked"
    );
    let second = w.engine.sweep(later).await.unwrap();
    assert_eq!(second.timed_out, 1, "{second:?}");
    assert!(w
        .store
        .get_job(&job.id)
        .await
        .unwrap()
        .timeout_requested_at
        .is_some());
    // The next sweep describes the task (a stop was asked for): seen STOPPED, the job ends.
    let third = w.engine.sweep(later).await.unwrap();
    assert_eq!(third.resolved, 1, "{third:?}");
    let rec = w.store.get_job(&job.id).await.unwrap();
    assert_eq!(rec.job.state, JobState::TimedOut, "{}", rec.job.reason());
}

#[tokio::test]
async fn a_stop_refused_for_good_on_cancel_fails_the_job_quoting_aws() {
    sortie_testkit::require_aws!();
    let w = World::new().await;
    let env = w.environment("acme/payments/prod", "").await;
    let (job, _) = w.submit(&env, "apply", "").await;
    assert_eq!(
        w.engine.dispatch(&World::body(&job.id), 1).await,
        MessageDisposition::Done
    );
    w.proxy.inject(
        "StopTask",
        1,
        400,
        "AccessDeniedException",
        "User is not authorized to perform ecs:StopTask",
    );
    let cancel = json!({"job_id": job.id, "cancel_by": "alice"}).to_string();
    assert_eq!(
        w.engine.dispatch(&cancel, 1).await,
        MessageDisposition::Done
    );
    let rec = w.store.get_job(&job.id).await.unwrap();
    assert_eq!(rec.job.state, JobState::Failed);
    assert!(
        rec.job.reason().contains("for the cancel by alice")
            && rec.job.reason().contains("\"StopTask failed: AccessDeniedException: User is not authorized to perform ecs:StopTask\""),
        "{}",
        rec.job.reason()
    );
}

#[tokio::test]
async fn a_run_task_with_an_unknown_outcome_is_never_relaunched_blindly() {
    sortie_testkit::require_aws!();
    let w = World::with_settings(sortie_lifecycle::SweepSettings {
        dispatch_lease: chrono::Duration::zero(),
        ..Default::default()
    })
    .await;
    let env = w.environment("acme/payments/prod", "").await;
    let (job, _) = w.submit(&env, "apply", "").await;
    // ECS answers 500 to every try of the first call: the task may or may not exist.
    w.proxy
        .inject("RunTask", 3, 500, "ServerException", "internal error");
    assert_eq!(
        w.engine.dispatch(&World::body(&job.id), 1).await,
        MessageDisposition::Done
    );
    assert_eq!(
        w.state(&job.id).await,
        JobState::Dispatching,
        "left for the lookup"
    );
    assert!(w.queued_ids().await.is_empty(), "no blind relaunch");
    // The lookup by startedBy finds nothing: a new attempt, with a new token.
    let report = w.engine.sweep(chrono::Utc::now()).await.unwrap();
    assert_eq!(report.requeued, 1, "{report:?}");
    assert_eq!(w.queued_ids().await, vec![job.id.clone()]);
    assert_eq!(
        w.engine.dispatch(&World::body(&job.id), 1).await,
        MessageDisposition::Done
    );
    let rec = w.store.get_job(&job.id).await.unwrap();
    assert_eq!((rec.job.state, rec.attempt), (JobState::Running, 2));
    assert!(client_tokens(&w, &job.id).last().unwrap().ends_with("-2"));
}
