//! One secret per job, read and deleted, a job from before it still served, and the
//! sweep's secret step (issue 41): ended jobs' secrets are deleted page by page, within the
//! pass's bound, each on its own; a live job's and a young unknown one's stay.

use std::sync::Arc;

use chrono::{Duration, Utc};
use sortie_core::sensitive::{self, SensitiveValues};
use sortie_core::JobRequest;
use sortie_launch::{JobSecrets, MemoryJobSecrets};
use sortie_store::JobStore;

use crate::submit::JobOrder;
use crate::testing::World;

fn request() -> JobRequest {
    serde_json::from_value(serde_json::json!({
        "operation": "plan", "source": {"type": "inline"}, "files": {"main.tf": ""},
    }))
    .unwrap()
}

fn values(pairs: &[(&str, &str)]) -> SensitiveValues {
    SensitiveValues::new(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

/// A world whose secrets are `secrets`.
async fn world(secrets: &Arc<MemoryJobSecrets>) -> World {
    let mut w = World::new().await;
    w.jobs.secrets = secrets.clone();
    w
}

#[tokio::test]
async fn a_job_keeps_every_value_in_one_secret_and_an_older_job_s_are_still_read_and_deleted() {
    let secrets = Arc::new(MemoryJobSecrets::default());
    let w = world(&secrets).await;
    let env = w.environment("acme/payments/one").await;
    let five: Vec<(String, String)> = (0..5)
        .map(|i| (format!("v{i}"), format!("s3cret-{i}")))
        .collect();
    let pairs: Vec<(&str, &str)> = five.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let order = JobOrder::submit(request(), values(&pairs), "alice", None);
    let job = w.jobs.submit_for(&env, order).await.unwrap().job;
    assert_eq!(
        secrets.secrets.lock().unwrap().len(),
        1,
        "five values, one secret"
    );
    assert_eq!(sensitive::secret_arns(&job.request).len(), 1);
    let read = w.jobs.sensitive_values(&job).await.unwrap();
    assert_eq!(read, values(&pairs));

    // A job submitted before one secret per job: each name with its own secret's ARN.
    let mut older = job.clone();
    older.request.sensitive_secret = None;
    older.request.sensitive_variables.clear();
    for (name, value) in [("db", "hunter2"), ("key", "k-1")] {
        let arn = secrets
            .create(&sensitive::secret_name(&older.id, name), value, &[])
            .await
            .unwrap();
        older.request.sensitive_variables.insert(name.into(), arn);
    }
    let read = w.jobs.sensitive_values(&older).await.unwrap();
    assert_eq!(read, values(&[("db", "hunter2"), ("key", "k-1")]));
    w.jobs.forget_sensitive_variables(&older).await;
    w.jobs.forget_sensitive_variables(&job).await;
    assert!(
        secrets.secrets.lock().unwrap().is_empty(),
        "every secret deleted"
    );
}

#[tokio::test]
async fn the_sweep_deletes_ended_jobs_secrets_page_by_page_each_on_its_own() {
    use crate::engine::SweepReport;
    let secrets = Arc::new(MemoryJobSecrets::default());
    let w = world(&secrets).await;
    let live_env = w.environment("acme/payments/live").await;
    let ended_env = w.environment("acme/payments/ended").await;
    let submit = |env| {
        let order = JobOrder::submit(request(), values(&[("db", "hunter2")]), "alice", None);
        let jobs = w.jobs.clone();
        async move { jobs.submit_for(env, order).await.unwrap().job }
    };
    let live = submit(&live_env).await;
    let ended = submit(&ended_env).await;
    // The end's own delete fails (throttled past its retries, say): the secret is left.
    let ended_arn = ended.request.sensitive_secret.clone().unwrap();
    secrets
        .fail_delete
        .lock()
        .unwrap()
        .insert(ended_arn.clone());
    let record = w.store.get_job(&ended.id).await.unwrap();
    w.jobs.cancel(&record, "alice").await.unwrap();
    assert!(
        secrets.secrets.lock().unwrap().contains_key(&ended_arn),
        "left by the end"
    );
    // 250 more secrets of the ended job (more than two pages, more than one pass deletes),
    // an unknown job's made just now (its submit may be writing it) and one made an hour ago.
    let tag = ended.id.to_string();
    for i in 0..250 {
        secrets
            .create(
                &format!("sortie/jobs/{tag}-extra-{i:03}"),
                "{}",
                &[(sensitive::JOB_TAG, &tag)],
            )
            .await
            .unwrap();
    }
    let young = secrets
        .create(
            "sortie/jobs/01unknownyoung",
            "{}",
            &[(sensitive::JOB_TAG, "01unknownyoung")],
        )
        .await
        .unwrap();
    let old = secrets
        .create(
            "sortie/jobs/01unknownold",
            "{}",
            &[(sensitive::JOB_TAG, "01unknownold")],
        )
        .await
        .unwrap();
    secrets
        .secrets
        .lock()
        .unwrap()
        .get_mut(&old)
        .unwrap()
        .created = Utc::now() - Duration::hours(1);

    let engine = w.engine();
    let first: SweepReport = engine.sweep(Utc::now()).await.unwrap();
    assert_eq!(
        first.secrets_deleted,
        crate::engine::secret_sweep::SECRET_DELETES,
        "the pass's bound: {first:?}"
    );
    let second = engine.sweep(Utc::now()).await.unwrap();
    let third = engine.sweep(Utc::now()).await.unwrap();
    // 252 to delete in all: 250 extras and the old unknown one (the failing one never goes).
    assert_eq!(
        first.secrets_deleted + second.secrets_deleted,
        251,
        "{second:?}"
    );
    assert_eq!(third.secrets_deleted, 0);
    assert!(
        second.errors >= 1 && third.errors >= 1,
        "the failing delete is counted"
    );
    let left: Vec<String> = secrets.secrets.lock().unwrap().keys().cloned().collect();
    let live_arn = live.request.sensitive_secret.clone().unwrap();
    let mut want = vec![ended_arn.clone(), live_arn, young];
    want.sort();
    assert_eq!(
        left, want,
        "the failing one, the live job's and the young unknown one"
    );

    // Once the delete works again, the next pass deletes it.
    secrets.fail_delete.lock().unwrap().clear();
    let fourth = engine.sweep(Utc::now()).await.unwrap();
    assert_eq!(fourth.secrets_deleted, 1);
    assert!(!secrets.secrets.lock().unwrap().contains_key(&ended_arn));
}
