//! Issue 25 items 2, 3 and 6, against the strict ECS double (`FaultProxy`) on moto:
//!
//! - concurrent first jobs of a runner with secrets all register (or find) one derived
//!   task definition, though ECS refuses concurrent new revisions of one family;
//! - a runner's `memory` is the runner container's hard limit too, not only the task's;
//! - a cancel by a principal with a very long subject still stops the task (StopTask's
//!   `reason` is at most 255 characters).

use crate::common;

use std::sync::Arc;

use common::World;
use sortie_launch::{EcsLauncher, LaunchSpec, Launcher};
use sortie_lifecycle::MessageDisposition;
use sortie_store::JobStore;

const RUNNER_SECRET: &str =
    "arn:aws:secretsmanager:us-east-1:123456789012:secret:runner-token-AbCdEf";

#[tokio::test]
async fn five_concurrent_first_jobs_of_a_runner_with_secrets_all_launch() {
    sortie_testkit::require_aws!();
    let w = World::new().await;
    let extra = format!("  secrets:\n    RUNNER_TOKEN: {RUNNER_SECRET}\n");
    let mut jobs = vec![];
    for i in 0..5 {
        let env = w
            .environment(&format!("acme/concurrent/env-{i}"), &extra)
            .await;
        let (job, took) = w.submit(&env, "plan", &extra).await;
        assert!(took);
        jobs.push(job);
    }
    w.proxy.clear();
    // Five Lambda instances, each with its own launcher (and so its own caches), launch
    // the first job of the runner at the same time.
    let mut launchers = vec![];
    for _ in 0..5 {
        launchers.push(Arc::new(EcsLauncher::new(
            common::config_for(&w.proxy.url()).await,
        )));
    }
    let mut launches = tokio::task::JoinSet::new();
    for (job, launcher) in jobs.iter().cloned().zip(launchers) {
        launches.spawn(async move {
            let spec = LaunchSpec {
                job: &job,
                token: "job-token",
                api_url: "https://api.sortie.example.com",
                attempt: 1,
            };
            (job.id.to_string(), launcher.launch(&spec).await)
        });
    }
    while let Some(done) = launches.join_next().await {
        let (id, result) = done.unwrap();
        assert!(result.is_ok(), "job {id} did not launch: {result:?}");
    }

    let registrations = w.proxy.requests_for("RegisterTaskDefinition");
    let family = registrations[0].json().unwrap()["family"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        registrations
            .iter()
            .all(|r| r.json().unwrap()["family"] == family.as_str()),
        "one secret set, one family"
    );
    let revisions = w
        .ecs
        .list_task_definitions()
        .family_prefix(&family)
        .send()
        .await
        .unwrap()
        .task_definition_arns
        .unwrap_or_default();
    assert!(
        registrations.len() > revisions.len(),
        "the double refused the overlapping registrations: {} sent, {} registered",
        registrations.len(),
        revisions.len()
    );
    let runs = w.proxy.requests_for("RunTask");
    assert_eq!(runs.len(), 5);
    for run in runs {
        let td = run.json().unwrap()["taskDefinition"].to_string();
        assert!(td.contains(&family), "{td} runs the derived family");
    }
}

#[tokio::test]
async fn a_runner_with_8_gib_gets_8_gib_in_its_container_override() {
    sortie_testkit::require_aws!();
    let w = World::new().await;
    // The task definition's runner container has a hard limit of 512 MiB.
    let extra = "  cpu: 2048\n  memory: 8192\n";
    let env = w.environment("acme/memory/prod", extra).await;
    let (job, _) = w.submit(&env, "apply", extra).await;
    assert_eq!(
        w.engine.dispatch(&World::body(&job.id), 1).await,
        MessageDisposition::Done
    );
    assert!(w.store.get_job(&job.id).await.unwrap().task.is_some());
    let run = w.proxy.requests_for("RunTask")[0].json().unwrap();
    let overrides = &run["overrides"];
    assert_eq!(overrides["memory"], "8192");
    assert_eq!(overrides["cpu"], "2048");
    let runner = overrides["containerOverrides"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "runner")
        .unwrap();
    assert_eq!(runner["memory"], 8192, "{overrides}");

    // The double refuses a container override above the task's memory, as ECS does.
    let ecs = aws_sdk_ecs::Client::new(&common::config_for(&w.proxy.url()).await);
    let refused = ecs
        .run_task()
        .cluster(&w.cluster)
        .task_definition(&w.task_definition)
        .overrides(
            aws_sdk_ecs::types::TaskOverride::builder()
                .memory("2048")
                .cpu("1024")
                .container_overrides(
                    aws_sdk_ecs::types::ContainerOverride::builder()
                        .name("runner")
                        .memory(4096)
                        .build(),
                )
                .build(),
        )
        .send()
        .await
        .unwrap_err();
    assert!(
        refused
            .as_service_error()
            .is_some_and(|e| e.is_invalid_parameter_exception()),
        "{refused:?}"
    );
}

#[tokio::test]
async fn a_cancel_by_a_400_character_subject_stops_the_task() {
    sortie_testkit::require_aws!();
    let w = World::new().await;
    let env = w.environment("acme/payments/prod", "").await;
    let (job, _) = w.submit(&env, "apply", "").await;
    w.engine.dispatch(&World::body(&job.id), 1).await;
    let task = w.store.get_job(&job.id).await.unwrap().task.unwrap();
    let subject = format!("https://issuer.example.com|{}", "é".repeat(190));
    assert!(subject.chars().count() > 200 && subject.len() > 400);
    let cancel = serde_json::json!({"job_id": job.id, "cancel_by": subject}).to_string();
    assert_eq!(
        w.engine.dispatch(&cancel, 1).await,
        MessageDisposition::Done
    );
    let stops = w.proxy.requests_for("StopTask");
    assert_eq!(stops.len(), 1);
    let reason = stops[0].json().unwrap()["reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(reason.len() <= 255, "{} bytes", reason.len());
    assert!(reason.starts_with("sortie: canceled by https://issuer.example.com|é"));
    let described = w
        .ecs
        .describe_tasks()
        .cluster(&w.cluster)
        .tasks(&task)
        .send()
        .await
        .unwrap();
    assert_eq!(described.tasks()[0].desired_status(), Some("STOPPED"));
    assert_eq!(described.tasks()[0].stopped_reason(), Some(reason.as_str()));

    // The double refuses what ECS refuses: a reason over 255 characters.
    let refused = aws_sdk_ecs::Client::new(&common::config_for(&w.proxy.url()).await)
        .stop_task()
        .cluster(&w.cluster)
        .task(&task)
        .reason("x".repeat(256))
        .send()
        .await
        .unwrap_err();
    assert!(
        refused
            .as_service_error()
            .is_some_and(|e| e.is_invalid_parameter_exception()),
        "{refused:?}"
    );
}
