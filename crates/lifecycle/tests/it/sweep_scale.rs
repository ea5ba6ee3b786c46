//! Sweeps that see every active job (issue 25, item 9). The sweeper pages through the
//! active jobs to the end (it read one page of 100 before), looks at them one by one so that
//! one job's failure stops none of the others, and within a time budget: what the budget
//! leaves is counted, and the next pass starts there.
//!
//! Every job here is `running` and silent for longer than the silence, so looking at it is
//! one DescribeTasks: the fake launcher records which jobs were described. The first tests
//! run on the in-memory store; `three_hundred_active_jobs_on_dynamodb_are_all_described`
//! needs moto (`scripts/with-moto.sh cargo test -p sortie-lifecycle --test it -- sweep_scale::`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use sortie_core::{
    EnvPath, Environment, Job, JobRequest, JobState, Runner, RunnerId, RunnerLink, RunnerSpec,
    TaskRef,
};
use sortie_launch::{LaunchError, LaunchSpec, Launcher, TaskStatus};
use sortie_lifecycle::{Engine, SweepReport, SweepResume, SweepSettings};
use sortie_store::{DynamoStore, JobStore, JobUpdate, MemoryStore, Store, StoreError};
use sortie_testkit::world::World;

const RUNNER: &str = "acme/fargate";

/// Describes every task as running, recording which jobs it was asked about; the job
/// `failing` gets an error instead, and each describe takes `pause`.
#[derive(Default)]
struct RecordingLauncher {
    described: Mutex<Vec<String>>,
    failing: Option<String>,
    pause: Option<StdDuration>,
}

#[async_trait]
impl Launcher for RecordingLauncher {
    async fn launch(&self, spec: &LaunchSpec<'_>) -> Result<TaskRef, LaunchError> {
        Ok(task_of(&spec.job.id))
    }
    async fn stop(&self, _job: &Job, _task: &TaskRef, _reason: &str) -> Result<(), LaunchError> {
        Ok(())
    }
    async fn describe(&self, job: &Job, _task: &TaskRef) -> Result<TaskStatus, LaunchError> {
        if let Some(pause) = self.pause {
            tokio::time::sleep(pause).await;
        }
        self.described.lock().unwrap().push(job.id.to_string());
        if self.failing.as_deref() == Some(job.id.as_str()) {
            return Err(LaunchError::Retryable(
                "ThrottlingException: Rate exceeded".into(),
            ));
        }
        Ok(TaskStatus::Running)
    }
    async fn find(&self, _job: &Job) -> Result<Option<TaskRef>, LaunchError> {
        Ok(None)
    }
}

impl RecordingLauncher {
    fn described(&self) -> Vec<String> {
        self.described.lock().unwrap().clone()
    }
}

fn task_of(id: &str) -> TaskRef {
    TaskRef::new(format!(
        "arn:aws:ecs:us-east-1:123456789012:task/runners/{id}"
    ))
}

fn runner_spec() -> RunnerSpec {
    RunnerSpec::parse(
        "runner_configuration:
  type: ecs-fargate
  role_arn: arn:aws:iam::123456789012:role/sortie-launcher
  external_id: sortie-ext-7f3a
  region: us-east-1
  cluster: runners
  task_definition: arn:aws:ecs:us-east-1:123456789012:task-definition/sortie-runner:1
  container_name: runner
  subnets: [subnet-0123456789abcdef0]
  security_groups: [sg-0123456789abcdef0]
state_storage_configuration:
  type: s3
  bucket: acme-state
  region: us-east-1
",
    )
    .unwrap()
}

/// The engine of a fast test world (`sortie_testkit::world`) over `store`, describing every
/// task through `launcher`.
fn engine(
    store: Arc<dyn Store>,
    launcher: Arc<RecordingLauncher>,
    settings: SweepSettings,
) -> Engine {
    let world = World::fast_with(|setup| {
        setup.parts.store = store;
        setup.parts.launcher = launcher;
        setup.resources.sweep = settings;
    });
    match Arc::try_unwrap(world.plane.engine) {
        Ok(engine) => engine,
        Err(_) => unreachable!("a world's engine is its own"),
    }
}

/// `n` environments, each with one `running` job launched at `at`; their ids, in order.
async fn running_jobs<S: Store + ?Sized>(store: &S, n: usize, at: DateTime<Utc>) -> Vec<String> {
    let spec = runner_spec();
    let runner = RunnerId::parse(RUNNER).unwrap();
    let _ = store
        .create_runner(&Runner {
            id: runner.clone(),
            spec: spec.clone(),
        })
        .await;
    let group = sortie_core::tokens::new_id();
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let path = EnvPath::parse(&format!("acme/s{group}/e{i}")).unwrap();
        store
            .create_environment(&Environment {
                settings: Default::default(),
                path: path.clone(),
                env_type: "production".into(),
                labels: BTreeMap::new(),
                tags: BTreeSet::new(),
                runner: RunnerLink {
                    runner_id: runner.clone(),
                    rule_id: "default".into(),
                    linked_by: "admin".into(),
                    linked_at: at,
                },
            })
            .await
            .unwrap();
        let mut job = Job::new(
            sortie_core::tokens::new_id(),
            path,
            runner.clone(),
            JobRequest::parse(r#"{"operation":"plan","files":{"main.tf":""}}"#).unwrap(),
            "alice".into(),
            at,
        );
        job.runner_spec = Some(spec.clone());
        assert!(store.submit_job(&job, None).await.unwrap().took_lock);
        store
            .transition_job(
                &job.id,
                JobState::Queued,
                JobState::Dispatching,
                at,
                "claimed by dispatch",
                JobUpdate {
                    token_hash: Some(format!("hash-{i}")),
                    next_attempt: true,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        store
            .transition_job(
                &job.id,
                JobState::Dispatching,
                JobState::Running,
                at,
                "task started",
                JobUpdate {
                    task: Some(task_of(&job.id)),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        ids.push(job.id.to_string());
    }
    ids
}

/// A time when every job launched at `at` has been silent for longer than the silence, and
/// none is past its timeout: each is looked at with one DescribeTasks.
fn silent_after(at: DateTime<Utc>) -> DateTime<Utc> {
    at + SweepSettings::default().silence + Duration::minutes(5)
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[tokio::test]
async fn every_one_of_2500_active_jobs_is_looked_at_in_one_sweep_and_one_failure_stops_none() {
    let store = Arc::new(MemoryStore::new());
    let at = Utc::now();
    let ids = running_jobs(store.as_ref(), 2_500, at).await;
    let failing = ids[1_234].clone();
    let launcher = Arc::new(RecordingLauncher {
        failing: Some(failing.clone()),
        ..Default::default()
    });
    let engine = engine(store.clone(), launcher.clone(), SweepSettings::default());

    let report = engine.sweep(silent_after(at)).await.unwrap();

    let described = launcher.described();
    assert_eq!(described.len(), 2_500, "each active job described once");
    assert_eq!(sorted(described), sorted(ids.clone()));
    assert_eq!(report.errors, 1, "the one failing job: {report:?}");
    assert_eq!(report.active_left, 0, "{report:?}");
    // The others were heard from (their silence clock reset); the failing one was not.
    let heard = store.get_job(&ids[2_499].as_str().into()).await.unwrap();
    assert!(heard.updated_at > at, "the newest job was heard from");
    let failed = store.get_job(&failing.as_str().into()).await.unwrap();
    assert_eq!(
        failed.updated_at, at,
        "the failing job waits for the next pass"
    );
    assert_eq!(failed.job.state, JobState::Running);
}

#[tokio::test]
async fn a_pass_that_spends_its_budget_counts_what_it_left_and_the_next_starts_there() {
    let store = Arc::new(MemoryStore::new());
    let at = Utc::now();
    let ids = running_jobs(store.as_ref(), 30, at).await;
    let launcher = Arc::new(RecordingLauncher {
        pause: Some(StdDuration::from_millis(40)),
        ..Default::default()
    });
    let settings = SweepSettings {
        batch: 4,
        active_budget: Duration::milliseconds(300),
        ..Default::default()
    };
    let engine = engine(store.clone(), launcher.clone(), settings);
    let resume = SweepResume::default();

    let first: SweepReport = engine
        .sweep_resuming(silent_after(at), &resume)
        .await
        .unwrap();
    let looked = launcher.described().len();
    assert!(
        looked > 0 && looked < 30,
        "the budget stopped the pass: {looked}"
    );
    assert_eq!(
        first.active_left,
        30 - looked,
        "what was left is counted: {first:?}"
    );
    assert!(resume.is_pending(), "the next pass resumes");

    // The next pass (with time enough) starts in the page where the first stopped: the
    // jobs left are looked at, the first ones are not looked at again before them.
    let engine = Engine {
        settings: SweepSettings {
            batch: 4,
            ..Default::default()
        },
        ..engine
    };
    let second = engine
        .sweep_resuming(silent_after(at), &resume)
        .await
        .unwrap();
    assert_eq!(second.active_left, 0, "{second:?}");
    assert!(
        !resume.is_pending(),
        "a pass to the end leaves nothing to resume"
    );
    let described = launcher.described();
    let all: BTreeSet<&String> = described.iter().collect();
    assert_eq!(
        all,
        ids.iter().collect(),
        "every job was looked at over the two passes"
    );
    // The second pass starts at the page where the first stopped: at most that page's
    // 4 jobs are looked at again.
    assert!(described.len() <= 30 + 4, "{} describes", described.len());
}

#[tokio::test]
async fn three_hundred_active_jobs_on_dynamodb_are_all_described() {
    sortie_testkit::require_aws!();
    let config = sortie_testkit::sdk_config_at(&sortie_testkit::endpoint()).await;
    let store = Arc::new(DynamoStore::new(
        aws_sdk_dynamodb::Client::new(&config),
        sortie_testkit::unique("sortie"),
    ));
    store.ensure_table().await.unwrap();
    let at = Utc::now();
    let ids = running_jobs(store.as_ref(), 300, at).await;
    let launcher = Arc::new(RecordingLauncher::default());
    let engine = engine(store.clone(), launcher.clone(), SweepSettings::default());

    let report = engine.sweep(silent_after(at)).await.unwrap();

    assert_eq!(report.errors, 0, "{report:?}");
    assert_eq!(report.active_left, 0, "{report:?}");
    assert_eq!(sorted(launcher.described()), sorted(ids));

    // The pages follow one another to the end, each at most the page size.
    let mut cursor: Option<String> = None;
    let mut seen = BTreeSet::new();
    loop {
        let page = store
            .active_jobs_page(cursor.as_deref(), 100)
            .await
            .unwrap();
        assert!(page.listed.records.len() <= 100);
        for r in &page.listed.records {
            assert!(seen.insert(r.job.id.to_string()), "no job twice");
        }
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(seen.len(), 300);
    assert!(matches!(
        store.active_jobs_page(Some("not-a-cursor"), 100).await,
        Err(StoreError::NotFound { kind: "cursor", .. })
    ));
}

/// The sweeper bench (issue 27, `make bench`): one pass over 10,000 active jobs on the
/// in-memory store, each silent for longer than the silence (so each is one DescribeTasks
/// and one write recording that it was heard from). No AWS latency: what is timed is
/// Sortie's own work per pass. The goal is one pass within one sweep period (the
/// sweeper's schedule is `rate(1 minute)`, infra/template.yaml), with nothing left for
/// the next pass. Prints its figures (`-- --nocapture`):
/// `cargo test -p sortie-lifecycle --test it -- sweep_scale::sweeper_bench --nocapture`.
#[tokio::test]
async fn sweeper_bench_one_pass_over_10000_active_jobs_fits_one_sweep_period() {
    const JOBS: usize = 10_000;
    let period = StdDuration::from_secs(60);
    let store = Arc::new(MemoryStore::new());
    let at = Utc::now();
    let ids = running_jobs(store.as_ref(), JOBS, at).await;
    let launcher = Arc::new(RecordingLauncher::default());
    let engine = engine(store.clone(), launcher.clone(), SweepSettings::default());

    let started = std::time::Instant::now();
    let report = engine.sweep(silent_after(at)).await.unwrap();
    let took = started.elapsed();

    let described = launcher.described();
    let mut written = 0;
    for id in &ids {
        if store.get_job(&id.as_str().into()).await.unwrap().updated_at > at {
            written += 1;
        }
    }
    eprintln!(
        "sweeper bench: one pass over {JOBS} active jobs (in-memory store, {} build): {:.0} ms, \
         {:.1} µs per job; {} DescribeTasks, {written} job writes, {} left for the next pass; \
         goal: within one sweep period ({} s)",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
        took.as_secs_f64() * 1000.0,
        took.as_secs_f64() * 1e6 / JOBS as f64,
        described.len(),
        report.active_left,
        period.as_secs()
    );
    assert_eq!(described.len(), JOBS, "each active job described once");
    assert_eq!(written, JOBS, "each was recorded as heard from");
    assert_eq!(report.active_left, 0, "nothing left: {report:?}");
    assert_eq!(report.errors, 0, "{report:?}");
    assert!(
        took < period,
        "one pass took {took:?}, over the period {period:?}"
    );
}
