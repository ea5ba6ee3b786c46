//! Issue 41 items 4 and 5 on the AWS tier (DynamoDB and S3 on moto): a job's end that keeps
//! failing is counted on its item and given up at the bound (the next job starts); a
//! `plan.json` that was never uploaded ends the job at once, saying so; the sweep's cursor
//! is written on condition of its version.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use sortie_core::end_retry::MAX_END_TRIES;
use sortie_core::{EnvPath, Environment, JobId, JobState, Outcome, Runner, RunnerId, RunnerLink};
use sortie_lifecycle::{EndCause, JobOrder, JobService, PolicySets};
use sortie_store::{
    Artifacts, DynamoStore, EnvironmentStore, JobMessage, JobQueue, JobStore, ObjectInfo,
    PresignedPut, RunnerStore, S3Artifacts, StoreError,
};

/// Records the jobs sent.
#[derive(Default)]
struct Sent(Mutex<Vec<JobId>>);

#[async_trait]
impl JobQueue for Sent {
    async fn send_message(&self, message: &JobMessage, _: i32) -> Result<(), StoreError> {
        self.0.lock().unwrap().push(message.job_id.clone());
        Ok(())
    }
}

struct NoBus;

#[async_trait]
impl sortie_lifecycle::Bus for NoBus {
    async fn job_ended(
        &self,
        _: &sortie_store::JobRecord,
    ) -> Result<(), sortie_lifecycle::LifecycleError> {
        Ok(())
    }
}

/// A bucket whose every read is throttled.
struct Throttled;

#[async_trait]
impl Artifacts for Throttled {
    async fn presign_put(&self, _: &str, _: &str, _: Duration) -> Result<PresignedPut, StoreError> {
        Err(slow_down())
    }
    async fn list(&self, _: &str) -> Result<Vec<ObjectInfo>, StoreError> {
        Err(slow_down())
    }
    async fn get(&self, _: &str) -> Result<Vec<u8>, StoreError> {
        Err(slow_down())
    }
    async fn head(&self, _: &str) -> Result<ObjectInfo, StoreError> {
        Err(slow_down())
    }
}

fn slow_down() -> StoreError {
    StoreError::Aws {
        service: "s3",
        message: "SlowDown: Please reduce your request rate.".into(),
        retryable: true,
    }
}

const SPEC: &str = "runner_configuration:\n  type: ecs-fargate\n  role_arn: arn:aws:iam::123456789012:role/sortie-launcher\n  external_id: sortie-ext-7f3a\n  region: us-east-1\n  cluster: runners\n  task_definition: arn:aws:ecs:us-east-1:123456789012:task-definition/sortie-runner:1\n  container_name: runner\n  subnets: [subnet-0123456789abcdef0]\n  security_groups: [sg-0123456789abcdef0]\nstate_storage_configuration:\n  type: s3\n  bucket: acme-state\n  region: us-east-1\n";

/// A DynamoDB-backed job service whose gate reads `artifacts`; environment
/// `acme/payments/prod` under a mandatory set (`on_unavailable: fail`).
async fn world(
    artifacts: Arc<dyn Artifacts>,
) -> (JobService, Arc<DynamoStore>, Arc<Sent>, Environment) {
    let config = sortie_testkit::sdk_config_at(&sortie_testkit::endpoint()).await;
    let store = Arc::new(DynamoStore::new(
        sortie_testkit::dynamodb_client(&config),
        sortie_testkit::unique("sortie"),
    ));
    store.ensure_table().await.unwrap();
    let sent = Arc::new(Sent::default());
    let mut jobs = JobService {
        store: store.clone(),
        queue: sent.clone(),
        bus: Arc::new(NoBus),
        secrets: Arc::new(sortie_launch::MemoryJobSecrets::default()),
        gate: Default::default(),
    };
    jobs.gate.artifacts = Some(artifacts);
    let runner = Runner {
        id: RunnerId::parse("acme/fargate").unwrap(),
        spec: sortie_core::RunnerSpec::parse(SPEC).unwrap(),
    };
    store.create_runner(&runner).await.unwrap();
    let env = Environment {
        settings: Default::default(),
        path: EnvPath::parse("acme/payments/prod").unwrap(),
        env_type: "production".into(),
        labels: Default::default(),
        tags: Default::default(),
        runner: RunnerLink {
            runner_id: runner.id.clone(),
            rule_id: "default".into(),
            linked_by: "admin".into(),
            linked_at: chrono::Utc::now(),
        },
    };
    store.create_environment(&env).await.unwrap();
    let rego = "package tf\n\ndeny contains msg if {\n  some rc in input.plan.resource_changes\n  msg := rc.address\n}\n";
    PolicySets::new(store.clone())
        .create(
            &sortie_core::GroupPath::parse("acme").unwrap(),
            Some("strict"),
            json!({"enforcement": "mandatory", "on_unavailable": "fail",
                   "modules": [{"name": "tf", "rego": rego}]}),
        )
        .await
        .unwrap();
    (jobs, store, sent, env)
}

async fn submit(jobs: &JobService, env: &Environment, operation: &str) -> JobId {
    let request = serde_json::from_value(json!({
        "operation": operation,
        "source": {"type": "inline", "files": {"main.tf": ""}},
    }))
    .unwrap();
    let order = JobOrder::submit(request, Default::default(), "alice", None);
    jobs.submit_for(env, order).await.unwrap().job.id
}

async fn run(store: &DynamoStore, id: &JobId) {
    let now = chrono::Utc::now();
    for (from, to) in [
        (JobState::Queued, JobState::Dispatching),
        (JobState::Dispatching, JobState::Running),
    ] {
        store
            .transition_job(id, from, to, now, "test", Default::default())
            .await
            .unwrap();
    }
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
async fn on_dynamodb_an_end_that_always_fails_is_given_up_at_the_bound_and_the_next_job_starts() {
    let _aws = sortie_testkit::require_aws!();
    let (jobs, store, sent, env) = world(Arc::new(Throttled)).await;
    let first = submit(&jobs, &env, "apply").await;
    let next = submit(&jobs, &env, "plan").await;
    run(&store, &first).await;
    let mut tries = 0;
    let ended = loop {
        tries += 1;
        assert!(
            tries <= MAX_END_TRIES,
            "still not ended after {} tries",
            tries - 1
        );
        let record = store.get_job(&first).await.unwrap();
        if let Ok(report) = jobs.end(&record, succeeded()).await {
            break report.ended().cloned().expect("ended");
        }
        let counted = store.get_job(&first).await.unwrap();
        assert_eq!(
            counted.end_tries, tries,
            "each failed try is counted on the item"
        );
    };
    assert_eq!(ended.job.state, JobState::Failed);
    assert!(
        ended.job.reason().contains("SlowDown"),
        "{}",
        ended.job.reason()
    );
    let held = store.get_environment(&env.path).await.unwrap().item;
    assert_eq!(held.active_job.as_ref(), Some(&next));
    assert_eq!(sent.0.lock().unwrap().last(), Some(&next));
}

#[tokio::test]
async fn on_s3_a_plan_never_uploaded_ends_the_job_at_once_saying_so() {
    let _aws = sortie_testkit::require_aws!();
    let config = sortie_testkit::sdk_config_at(&sortie_testkit::endpoint()).await;
    let bucket = sortie_testkit::unique("artifacts");
    let artifacts = Arc::new(S3Artifacts::new(sortie_testkit::s3_client(&config), bucket));
    artifacts.ensure_bucket().await.unwrap();
    let (jobs, store, _, env) = world(artifacts).await;
    let first = submit(&jobs, &env, "apply").await;
    run(&store, &first).await;
    let record = store.get_job(&first).await.unwrap();
    let ended = jobs.end(&record, succeeded()).await.unwrap();
    let ended = ended.ended().expect("ended at the first try");
    assert_eq!(ended.job.state, JobState::Failed);
    assert!(
        ended.job.reason().contains(sortie_core::plan::NO_ARTIFACT),
        "{}",
        ended.job.reason()
    );
    let held = store.get_environment(&env.path).await.unwrap().item;
    assert!(held.active_job.is_none());
}

#[tokio::test]
async fn on_dynamodb_the_sweeps_cursor_is_written_on_condition_of_its_version() {
    let _aws = sortie_testkit::require_aws!();
    let config = sortie_testkit::sdk_config_at(&sortie_testkit::endpoint()).await;
    let store = DynamoStore::new(
        sortie_testkit::dynamodb_client(&config),
        sortie_testkit::unique("sortie"),
    );
    store.ensure_table().await.unwrap();
    let fresh = store.sweep_cursor().await.unwrap();
    assert_eq!((fresh.cursor, fresh.version), (None, 0));
    assert_eq!(store.save_sweep_cursor(Some("c1"), 0).await.unwrap(), 1);
    // A second pass that read version 0 does not overwrite the first's.
    assert!(matches!(
        store.save_sweep_cursor(Some("c2"), 0).await,
        Err(StoreError::VersionMismatch { actual: 1, .. })
    ));
    let kept = store.sweep_cursor().await.unwrap();
    assert_eq!((kept.cursor.as_deref(), kept.version), (Some("c1"), 1));
    assert_eq!(store.save_sweep_cursor(None, 1).await.unwrap(), 2);
    let cleared = store.sweep_cursor().await.unwrap();
    assert_eq!((cleared.cursor, cleared.version), (None, 2));
}
