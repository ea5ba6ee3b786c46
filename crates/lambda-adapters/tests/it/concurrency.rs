//! The dispatch adapter handles a batch's records concurrently, bounded, and still
//! reports exactly the failed ones; a function's error carries its class.
//!
//! Fast unit tests over the in-memory store and a gated launcher; the moto-backed
//! path of the same adapter is `batch.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use chrono::Utc;
use sortie_core::{
    EnvPath, Environment, Job, JobRequest, JobState, Runner, RunnerId, RunnerLink, RunnerSpec,
    TaskRef,
};
use sortie_lambda_adapters::{dispatch_batch, FunctionError, RECORDS_IN_FLIGHT};
use sortie_launch::{LaunchError, LaunchSpec, Launcher, TaskStatus};
use sortie_lifecycle::LifecycleError;
use sortie_store::{EnvironmentStore, JobStore, RunnerStore, SqsJobQueue, StoreError};
use sortie_testkit::world::World;

/// Holds every launch for a while and records how many were in flight at once.
#[derive(Default)]
struct GatedLauncher {
    in_flight: AtomicUsize,
    most: AtomicUsize,
}

#[async_trait]
impl Launcher for GatedLauncher {
    async fn launch(&self, spec: &LaunchSpec<'_>) -> Result<TaskRef, LaunchError> {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(150)).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        Ok(TaskRef::new(format!(
            "arn:aws:ecs:us-east-1:123456789012:task/c/{}",
            spec.job.id
        )))
    }
    async fn stop(&self, _: &Job, _: &TaskRef, _: &str) -> Result<(), LaunchError> {
        Ok(())
    }
    async fn describe(&self, _: &Job, _: &TaskRef) -> Result<TaskStatus, LaunchError> {
        Ok(TaskStatus::Running)
    }
    async fn find(&self, _: &Job) -> Result<Option<TaskRef>, LaunchError> {
        Ok(None)
    }
}

fn local_runner() -> Runner {
    Runner {
        id: RunnerId::parse("acme/local").unwrap(),
        spec: RunnerSpec::parse(
            "runner_configuration: {type: local}\nstate_storage_configuration: {type: local, directory: /tmp/s}",
        )
        .unwrap(),
    }
}

fn record(id: &str, body: &str) -> SqsMessage {
    let mut r = SqsMessage::default();
    r.message_id = Some(id.to_string());
    r.body = Some(body.to_string());
    r
}

#[tokio::test]
async fn a_batch_launches_its_records_concurrently_and_reports_exactly_the_failed_ones() {
    let launcher = Arc::new(GatedLauncher::default());
    let world = World::fast_with(|setup| setup.parts.launcher = launcher.clone());
    let store = world.fakes().store.clone();
    let (jobs, engine) = (&world.plane.jobs, &world.plane.engine);
    let runner = local_runner();
    store.create_runner(&runner).await.unwrap();
    let mut event = SqsEvent::default();
    let mut ids = vec![];
    for i in 0..6 {
        let path = EnvPath::parse(&format!("acme/team/env{i}")).unwrap();
        store
            .create_environment(&Environment {
                settings: Default::default(),
                path: path.clone(),
                env_type: "development".into(),
                labels: BTreeMap::new(),
                tags: BTreeSet::new(),
                runner: RunnerLink {
                    runner_id: runner.id.clone(),
                    rule_id: "r".into(),
                    linked_by: "alice".into(),
                    linked_at: Utc::now(),
                },
            })
            .await
            .unwrap();
        let mut job = Job::new(
            sortie_core::tokens::new_id(),
            path,
            runner.id.clone(),
            JobRequest::parse(r#"{"operation":"plan","files":{"main.tf":""}}"#).unwrap(),
            "alice".into(),
            Utc::now(),
        );
        job.runner_spec = Some(runner.spec.clone());
        assert!(jobs.submit(&job, None).await.unwrap().took_lock);
        event.records.push(record(
            &format!("m{i}"),
            &serde_json::json!({ "job_id": job.id }).to_string(),
        ));
        if i % 3 == 0 {
            event
                .records
                .push(record(&format!("poison{i}"), "not json"));
        }
        ids.push(job.id);
    }
    // The queue is only used to delay a retried record's redelivery; none retries here.
    let config = aws_config::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .build();
    let queue = SqsJobQueue::new(aws_sdk_sqs::Client::new(&config), "unused");

    let response = dispatch_batch(engine, &queue, event).await;

    let failed: BTreeSet<String> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone())
        .collect();
    assert_eq!(
        failed,
        BTreeSet::from(["poison0".to_string(), "poison3".to_string()]),
        "exactly the poison records fail, whatever order they finish in"
    );
    for id in &ids {
        assert_eq!(
            store.get_job(id).await.unwrap().job.state,
            JobState::Running
        );
    }
    let most = launcher.most.load(Ordering::SeqCst);
    assert!(
        most > 1 && most <= RECORDS_IN_FLIGHT,
        "launches overlapped (at most {most} at once), within the bound"
    );
}

#[test]
fn a_function_error_reports_its_class_as_the_lambda_error_type() {
    let transient = FunctionError(LifecycleError::Store(StoreError::Aws {
        service: "dynamodb",
        message: "ThrottlingException: slow down".into(),
        retryable: true,
    }));
    let d: lambda_runtime::Diagnostic = transient.into();
    assert_eq!(d.error_type, "Sortie.StoreUnavailable");
    assert!(d.error_message.contains("slow down"));
    let fatal = FunctionError(LifecycleError::Launch(LaunchError::Fatal(
        "AccessDeniedException".into(),
    )));
    let d: lambda_runtime::Diagnostic = fatal.into();
    assert_eq!(d.error_type, "Sortie.LaunchFatal");
}
