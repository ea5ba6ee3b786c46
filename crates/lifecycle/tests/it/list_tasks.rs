//! ListTasks as ECS documents it (issue 25, item 5): "When you specify startedBy as
//! the filter, it must be the only filter that you use." The strict ECS double
//! (`FaultProxy`) refuses `startedBy` with another filter, as ECS does; the lookup of a
//! job's task filters on `startedBy` alone and asks DescribeTasks which one runs.

use crate::common;

use common::World;
use sortie_lifecycle::MessageDisposition;
use sortie_store::JobStore;

#[tokio::test]
async fn the_strict_double_refuses_started_by_with_another_filter() {
    sortie_testkit::require_aws!();
    let w = World::new().await;
    let ecs = aws_sdk_ecs::Client::new(&common::config_for(&w.proxy.url()).await);
    let refused = ecs
        .list_tasks()
        .cluster(&w.cluster)
        .started_by("sortie/x")
        .desired_status(aws_sdk_ecs::types::DesiredStatus::Running)
        .send()
        .await
        .unwrap_err();
    let service = refused.as_service_error().expect("a service error");
    assert!(service.is_invalid_parameter_exception(), "{service:?}");
    let family = ecs
        .list_tasks()
        .cluster(&w.cluster)
        .started_by("sortie/x")
        .family("sortie-runner")
        .send()
        .await
        .unwrap_err();
    assert!(
        family
            .as_service_error()
            .is_some_and(|e| e.is_invalid_parameter_exception()),
        "{family:?}"
    );
    // startedBy alone, and another filter without startedBy, reach moto.
    ecs.list_tasks()
        .cluster(&w.cluster)
        .started_by("sortie/x")
        .send()
        .await
        .unwrap();
    ecs.list_tasks()
        .cluster(&w.cluster)
        .desired_status(aws_sdk_ecs::types::DesiredStatus::Stopped)
        .send()
        .await
        .unwrap();
}

#[tokio::test]
async fn the_lookup_by_started_by_finds_the_task_running_then_stopped_with_started_by_alone() {
    sortie_testkit::require_aws!();
    let w = World::new().await;
    let env = w.environment("acme/payments/prod", "").await;
    let (job, _) = w.submit(&env, "plan", "").await;
    assert_eq!(
        w.engine.dispatch(&World::body(&job.id), 1).await,
        MessageDisposition::Done
    );
    let rec = w.store.get_job(&job.id).await.unwrap();
    let task = rec.task.clone().expect("launched");

    let found = w.engine.launcher.find(&rec.job).await;
    assert_eq!(found.unwrap(), Some(task.clone()), "the running task");

    w.ecs
        .stop_task()
        .cluster(&w.cluster)
        .task(task.as_str())
        .reason("test")
        .send()
        .await
        .unwrap();
    let found = w.engine.launcher.find(&rec.job).await;
    assert_eq!(found.unwrap(), Some(task), "the stopped task");

    // A job that never launched has no task.
    let env2 = w.environment("acme/payments/dev", "").await;
    let (other, _) = w.submit(&env2, "plan", "").await;
    assert_eq!(w.engine.launcher.find(&other).await.unwrap(), None);

    let lists = w.proxy.requests_for("ListTasks");
    assert!(lists.len() >= 3, "{}", lists.len());
    for r in lists {
        let body = r.json().unwrap();
        assert!(body["startedBy"].is_string(), "{body}");
        assert!(body["desiredStatus"].is_null(), "startedBy alone: {body}");
    }
}
