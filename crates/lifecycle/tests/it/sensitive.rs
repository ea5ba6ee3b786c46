//! Sensitive variables in the lifecycle, on the fast tier ([`common::fast::FastWorld`]): a job's secrets are deleted when it ends, and a drift check of an
//! apply that had sensitive variables is skipped (their values are gone).

use crate::common;

use std::collections::BTreeMap;

use chrono::{Duration, Utc};
use common::fast::FastWorld as World;
use sortie_core::sensitive::SensitiveValues;
use sortie_core::{ChangeSummary, EnvPath, Job, JobId, JobRequest, JobState};
use sortie_lifecycle::EventEffect;
use sortie_store::{EnvironmentStore, JobStore, JobUpdate, RunnerStore};

#[tokio::test]
async fn an_ended_job_s_secrets_are_deleted_and_its_drift_check_is_skipped() {
    let w = World::new().await;
    let env = w.environment("acme/payments/secret", "").await;
    let mut current = w
        .store
        .get_environment(&env)
        .await
        .unwrap()
        .item
        .environment;
    let input = sortie_core::environment::EnvironmentInput::from_value(
        &serde_json::json!({"drift_schedule": "0 * * * *"}),
        false,
    )
    .unwrap();
    input.apply_settings(&mut current.settings);
    w.store.update_environment(&current, None).await.unwrap();

    let job = submit_with_secret(&w, &env).await;
    let arn = job.request.sensitive_secret.clone().unwrap();
    {
        let secrets = w.secrets.secrets.lock().unwrap();
        let kept = &secrets[&arn];
        assert_eq!(kept.name, format!("sortie/jobs/{}", job.id));
        assert_eq!(kept.value, r#"{"db":"hunter2"}"#);
        assert_eq!(kept.tags["sortie:job"], job.id.to_string());
        assert_eq!(kept.tags["sortie:org"], "acme");
        assert_eq!(kept.tags["sortie:env"], "acme/payments/secret");
    }

    // The task stops with exit 0: the job succeeds, and its secret goes.
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
    let stopped = World::event("ecs-task-stopped-exit0.json", &job.id, task.as_str());
    assert_eq!(
        w.engine.task_event(&stopped).await.unwrap(),
        EventEffect::Moved(JobState::Succeeded)
    );
    assert_eq!(*w.secrets.deleted.lock().unwrap(), vec![arn.clone()]);
    assert!(w.secrets.secrets.lock().unwrap().is_empty());

    // Its drift check would plan without the values: skipped, with the reason.
    let rec = w.store.get_environment(&env).await.unwrap().item;
    assert_eq!(rec.last_apply.as_ref().unwrap().job_id, job.id);
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
    let rec = w.store.get_environment(&env).await.unwrap().item;
    let reason = rec.drift_skipped.unwrap().reason;
    assert!(reason.contains("sensitive variables"), "{reason}");
}

#[tokio::test]
async fn a_failed_create_leaves_no_secret_behind_and_no_reference() {
    let mut w = World::new().await;
    let failing = sortie_launch::MemoryJobSecrets {
        fail_create_after: Some(0),
        ..Default::default()
    };
    let failing = std::sync::Arc::new(failing);
    std::sync::Arc::get_mut(&mut w.engine)
        .expect("the world's only engine")
        .jobs
        .secrets = failing.clone();
    let values = SensitiveValues::new(BTreeMap::from([
        ("a".to_string(), "1".to_string()),
        ("b".to_string(), "2".to_string()),
    ]));
    let env = EnvPath::parse("acme/payments/x").unwrap();
    let mut request = JobRequest::parse(r#"{"operation":"apply","files":{"main.tf":""}}"#).unwrap();
    let e = w
        .engine
        .jobs
        .keep_sensitive_variables(&JobId::from("01job"), &env, &values, &mut request)
        .await
        .unwrap_err();
    // One secret for both values: one create, which failed, and nothing to delete.
    assert!(e.contains("CreateSecret sortie/jobs/01job failed"), "{e}");
    assert!(failing.secrets.lock().unwrap().is_empty());
    assert!(request.sensitive_secret.is_none() && request.sensitive_variables.is_empty());
}

/// Submits an apply with the sensitive variable `db` as the API does.
async fn submit_with_secret(w: &World, env: &EnvPath) -> Job {
    let record = w.store.get_environment(env).await.unwrap();
    let runner = w
        .store
        .get_runner(&record.item.environment.runner.runner_id)
        .await
        .unwrap();
    let mut request = JobRequest::parse(r#"{"operation":"apply","files":{"main.tf":""}}"#).unwrap();
    let id = JobId::from(sortie_core::tokens::new_id());
    let values = SensitiveValues::new(BTreeMap::from([("db".to_string(), "hunter2".to_string())]));
    w.engine
        .jobs
        .keep_sensitive_variables(&id, env, &values, &mut request)
        .await
        .unwrap();
    let job = Job::for_environment(
        id,
        &record.item.environment,
        runner.item.spec,
        request,
        "alice".into(),
        Utc::now(),
    );
    w.engine.jobs.submit(&job, None).await.unwrap();
    job
}
