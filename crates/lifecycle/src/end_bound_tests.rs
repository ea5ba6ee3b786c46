//! Issue 41 item 4: no failure on a job's end path holds its environment's lock for good.
//! An artifacts bucket that always fails (retryable) or refuses (403-like, not retryable)
//! the gate's read of `plan.json`: the job ends failed with the reason quoted, after the
//! bound on tries or age, and the next job of the environment's queue is sent.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use serde_json::json;
use sortie_core::end_retry::{MAX_END_RETRY_MINUTES, MAX_END_TRIES};
use sortie_core::sensitive::SensitiveValues;
use sortie_core::{GroupPath, JobRequest, JobState, Outcome};
use sortie_store::{
    Artifacts, EnvironmentStore, JobRecord, JobStore, JobUpdate, ObjectInfo, PresignedPut,
    StoreError,
};

use crate::testing::World;
use crate::{EndCause, JobOrder, PolicySets};

/// A bucket whose every read fails with `error` (retryable or not), counting the reads.
struct Failing {
    retryable: bool,
    reads: std::sync::atomic::AtomicUsize,
}

impl Failing {
    fn new(retryable: bool) -> Arc<Self> {
        Arc::new(Self {
            retryable,
            reads: Default::default(),
        })
    }

    fn error(&self) -> StoreError {
        self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let message = if self.retryable {
            "SlowDown: Please reduce your request rate."
        } else {
            "AccessDenied: Access Denied (403)"
        };
        StoreError::Aws {
            service: "s3",
            message: message.into(),
            retryable: self.retryable,
        }
    }
}

#[async_trait]
impl Artifacts for Failing {
    async fn presign_put(&self, _: &str, _: &str, _: Duration) -> Result<PresignedPut, StoreError> {
        Err(self.error())
    }
    async fn list(&self, _: &str) -> Result<Vec<ObjectInfo>, StoreError> {
        Err(self.error())
    }
    async fn get(&self, _: &str) -> Result<Vec<u8>, StoreError> {
        Err(self.error())
    }
    async fn head(&self, _: &str) -> Result<ObjectInfo, StoreError> {
        Err(self.error())
    }
}

/// A world whose gate reads from `bucket`, with a mandatory set (`on_unavailable: fail`)
/// over `acme`, and environment `acme/payments/prod`.
async fn world(bucket: Arc<Failing>) -> (World, sortie_core::Environment) {
    let mut w = World::new().await;
    w.jobs.gate.artifacts = Some(bucket as Arc<dyn Artifacts>);
    let env = w.environment("acme/payments/prod").await;
    let rego = "package tf\n\ndeny contains msg if {\n  some rc in input.plan.resource_changes\n  msg := rc.address\n}\n";
    PolicySets::new(w.store.clone())
        .create(
            &GroupPath::parse("acme").unwrap(),
            Some("strict"),
            json!({"enforcement": "mandatory", "on_unavailable": "fail",
                   "modules": [{"name": "tf", "rego": rego}]}),
        )
        .await
        .unwrap();
    (w, env)
}

/// Submits `operation` to `env`; the first one holds the lock, the next wait in order.
async fn submit(w: &World, env: &sortie_core::Environment, operation: &str) -> sortie_core::JobId {
    let request: JobRequest = serde_json::from_value(json!({
        "operation": operation,
        "source": {"type": "inline", "files": {"main.tf": ""}},
    }))
    .unwrap();
    let order = JobOrder::submit(request, SensitiveValues::default(), "alice", None);
    w.jobs.submit_for(env, order).await.unwrap().job.id
}

/// Moves the lock holder `id` to `running` at `at`.
async fn run(w: &World, id: &sortie_core::JobId, at: chrono::DateTime<Utc>) -> JobRecord {
    for (from, to) in [
        (JobState::Queued, JobState::Dispatching),
        (JobState::Dispatching, JobState::Running),
    ] {
        w.store
            .transition_job(id, from, to, at, "test", Default::default())
            .await
            .unwrap();
    }
    w.store.get_job(id).await.unwrap()
}

fn succeeded() -> EndCause {
    EndCause::Decided {
        from: JobState::Running,
        outcome: Outcome {
            state: JobState::Succeeded,
            reason: "the runner exited with code 0".into(),
        },
    }
}

#[tokio::test]
async fn a_plan_read_that_always_fails_ends_the_job_after_the_bound_and_the_next_job_starts() {
    let bucket = Failing::new(true);
    let (w, env) = world(bucket.clone()).await;
    let first = submit(&w, &env, "apply").await;
    let next = submit(&w, &env, "plan").await;
    run(&w, &first, Utc::now()).await;
    let mut tries = 0;
    let ended = loop {
        tries += 1;
        assert!(
            tries <= MAX_END_TRIES as usize,
            "still not ended after {} tries: the end is retried forever",
            tries - 1
        );
        let record = w.store.get_job(&first).await.unwrap();
        match w.jobs.end(&record, succeeded()).await {
            Ok(report) => break report.ended().cloned().expect("it ended"),
            Err(e) => assert!(e.is_retryable(), "{e}"),
        }
    };
    assert_eq!(tries, MAX_END_TRIES as usize, "ended on the bound's try");
    assert_eq!(ended.job.state, JobState::Failed);
    let reason = ended.job.reason();
    assert!(
        reason.contains(&format!("failed {MAX_END_TRIES} time(s)"))
            && reason.contains("\"s3 error: SlowDown: Please reduce your request rate.\""),
        "the reason says why, quoting the error: {reason}"
    );
    // Released and handed on: the next job of the queue holds the lock and was sent.
    let held = w.store.get_environment(&env.path).await.unwrap().item;
    assert_eq!(held.active_job.as_ref(), Some(&next));
    assert_eq!(w.sent(), vec![first.clone(), next.clone()]);
    // One read of the plan per try, no more.
    let reads = bucket.reads.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(reads, MAX_END_TRIES as usize);
}

#[tokio::test]
async fn an_end_failing_for_longer_than_the_age_bound_fails_at_its_next_try() {
    let (w, env) = world(Failing::new(true)).await;
    let first = submit(&w, &env, "apply").await;
    let next = submit(&w, &env, "plan").await;
    let long_ago = Utc::now() - chrono::Duration::minutes(MAX_END_RETRY_MINUTES + 5);
    run(&w, &first, long_ago).await;
    // One failed try recorded, as long ago as the bound (and then some).
    w.store
        .mark_job(
            &first,
            long_ago,
            JobUpdate {
                end_try: true,
                end_error: Some("s3 error: SlowDown".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let record = w.store.get_job(&first).await.unwrap();
    let ended = w.jobs.end(&record, succeeded()).await.unwrap();
    let ended = ended
        .ended()
        .expect("given up at once: the age bound passed");
    assert_eq!(ended.job.state, JobState::Failed);
    assert!(ended.job.reason().contains("failed 1 time(s) over"));
    let held = w.store.get_environment(&env.path).await.unwrap().item;
    assert_eq!(held.active_job.as_ref(), Some(&next));
}

#[tokio::test]
async fn a_plan_read_refused_for_good_ends_the_job_at_once_saying_so() {
    let (w, env) = world(Failing::new(false)).await;
    let first = submit(&w, &env, "apply").await;
    let next = submit(&w, &env, "plan").await;
    let record = run(&w, &first, Utc::now()).await;
    let ended = w.jobs.end(&record, succeeded()).await.unwrap();
    let ended = ended.ended().expect("ended at the first try");
    assert_eq!(ended.job.state, JobState::Failed);
    let reason = ended.job.reason();
    assert!(
        reason.contains("the plan data could not be read")
            && reason.contains("AccessDenied: Access Denied (403)"),
        "{reason}"
    );
    let held = w.store.get_environment(&env.path).await.unwrap().item;
    assert_eq!(held.active_job.as_ref(), Some(&next));
}
