//! The handlers' CPU time per record, excluding AWS latency (issue 4, "Measure").
//!
//! The engine runs on [`MemoryStore`] with a fake launcher (a task ARN at once), a fake
//! jobs queue and a fake bus that only record what they are given, so what is timed is
//! Sortie's own work: parsing the message, the state-machine checks, the store calls'
//! bookkeeping, the token and its hash, building the completion event.
//!
//! - `dispatch/one_submitted_job`: `Engine::dispatch` of one submitted job
//!   (claim → launch → record running).
//! - `task_event/stopped_exit_0`: `Engine::task_event` with a STOPPED exit-0 event for a
//!   running job (finish → release, hand the lock to the next queued job and send it →
//!   publish `sortie.job.ended`).
//! - `task_event/parse_detail`: deserialising that event's `detail` (done by the Lambda
//!   runtime before the handler runs).
//! - `resolve/50_rules_4_deep`: `sortie_core::resolve` over 50 rules for an environment
//!   in a 4-deep group.
//!
//! Each dispatch and task-event iteration gets a fresh store, set up outside the timing
//! (`iter_batched`), so every record meets the same small table. No `tracing` subscriber
//! is installed: JSON log formatting is not included.
//!
//! `cargo bench -p sortie-lifecycle --bench dispatch`

use std::collections::{BTreeMap, BTreeSet};
use std::hint::black_box;
use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use chrono::Utc;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use sortie_core::{
    resolve, Criteria, EnvPath, Environment, GroupPath, Job, JobRequest, JobState, Runner,
    RunnerId, RunnerLink, RunnerRule, RunnerSpec, TaskRef,
};
use sortie_launch::{LaunchError, LaunchSpec, Launcher, TaskStatus};
use sortie_lifecycle::{
    Bus, EcsTaskStateChange, Engine, EventEffect, JobService, LifecycleError, MessageDisposition,
    SweepSettings,
};
use sortie_store::{
    EnvironmentStore, JobMessage, JobQueue, JobRecord, JobStore, MemoryStore, RunnerStore,
    StoreError,
};
use tokio::runtime::Runtime;

const ENV: &str = "acme/payments/prod";
const RUNNER: &str = "acme/fargate";
const STOPPED_EXIT_0: &str = include_str!("../../../events/ecs-task-stopped-exit0.json");

/// Launches nothing: answers with a task ARN at once.
struct FakeLauncher;

#[async_trait]
impl Launcher for FakeLauncher {
    async fn launch(&self, spec: &LaunchSpec<'_>) -> Result<TaskRef, LaunchError> {
        Ok(TaskRef::new(format!(
            "arn:aws:ecs:us-east-1:123456789012:task/runners/{}",
            spec.job.id
        )))
    }
    async fn stop(&self, _job: &Job, _task: &TaskRef, _reason: &str) -> Result<(), LaunchError> {
        Ok(())
    }
    async fn describe(&self, _job: &Job, _task: &TaskRef) -> Result<TaskStatus, LaunchError> {
        Ok(TaskStatus::Running)
    }
    async fn find(&self, _job: &Job) -> Result<Option<TaskRef>, LaunchError> {
        Ok(None)
    }
}

/// Records the messages sent.
#[derive(Default)]
struct FakeQueue(Mutex<Vec<JobMessage>>);

#[async_trait]
impl JobQueue for FakeQueue {
    async fn send_message(&self, message: &JobMessage, _delay: i32) -> Result<(), StoreError> {
        self.0.lock().unwrap().push(message.clone());
        Ok(())
    }
}

/// Records the ids of the jobs published as completed.
#[derive(Default)]
struct FakeBus(Mutex<Vec<String>>);

#[async_trait]
impl Bus for FakeBus {
    async fn job_ended(&self, record: &JobRecord) -> Result<(), LifecycleError> {
        // Build the detail as the EventBridge bus does, so its cost is counted.
        let detail = sortie_lifecycle::ended_detail(record).to_string();
        black_box(detail);
        self.0.lock().unwrap().push(record.job.id.to_string());
        Ok(())
    }
}

/// One engine over a fresh in-memory store holding the runner and one environment.
struct World {
    engine: Engine,
    store: Arc<MemoryStore>,
    queue: Arc<FakeQueue>,
    bus: Arc<FakeBus>,
}

fn runner_spec() -> &'static RunnerSpec {
    static SPEC: OnceLock<RunnerSpec> = OnceLock::new();
    SPEC.get_or_init(|| {
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
        .expect("the bench runner is valid")
    })
}

impl World {
    async fn new() -> Self {
        let store = Arc::new(MemoryStore::new());
        let queue = Arc::new(FakeQueue::default());
        let bus = Arc::new(FakeBus::default());
        let runner_id = RunnerId::parse(RUNNER).unwrap();
        store
            .create_runner(&Runner {
                id: runner_id.clone(),
                spec: runner_spec().clone(),
            })
            .await
            .unwrap();
        store
            .create_environment(&Environment {
                settings: Default::default(),
                path: EnvPath::parse(ENV).unwrap(),
                env_type: "production".into(),
                labels: BTreeMap::new(),
                tags: BTreeSet::new(),
                runner: RunnerLink {
                    runner_id,
                    rule_id: "default".into(),
                    linked_by: "admin".into(),
                    linked_at: Utc::now(),
                },
            })
            .await
            .unwrap();
        let engine = Engine {
            jobs: JobService {
                store: store.clone(),
                queue: queue.clone(),
                bus: bus.clone(),
                secrets: Arc::new(sortie_launch::MemoryJobSecrets::default()),
                gate: Default::default(),
            },
            launcher: Arc::new(FakeLauncher),
            api_url: "https://api.sortie.example.com".into(),
            settings: SweepSettings::default(),
        };
        Self {
            engine,
            store,
            queue,
            bus,
        }
    }

    /// Submits a job as the API does (with the runner snapshot); true if it took the lock.
    async fn submit(&self, operation: &str) -> (Job, bool) {
        let request = JobRequest::parse(&format!(
            r#"{{"operation":"{operation}","files":{{"main.tf":""}}}}"#
        ))
        .unwrap();
        let mut job = Job::new(
            sortie_core::tokens::new_id(),
            EnvPath::parse(ENV).unwrap(),
            RunnerId::parse(RUNNER).unwrap(),
            request,
            "alice".into(),
            Utc::now(),
        );
        job.runner_spec = Some(runner_spec().clone());
        let took = self.store.submit_job(&job, None).await.unwrap().took_lock;
        (job, took)
    }
}

fn body(job_id: &str) -> String {
    serde_json::json!({ "job_id": job_id }).to_string()
}

/// A world whose environment's lock is held by a job that was just submitted (not sent yet).
async fn submitted() -> (World, String) {
    let w = World::new().await;
    let (job, took) = w.submit("apply").await;
    assert!(took);
    (w, body(&job.id))
}

/// A world with one running job (its task stopped with exit code 0) and one waiting job.
async fn running_with_next() -> (World, EcsTaskStateChange) {
    let w = World::new().await;
    let (job, took) = w.submit("apply").await;
    let (_, waits) = w.submit("plan").await;
    assert!(took && !waits);
    assert_eq!(
        w.engine.dispatch(&body(&job.id), 1).await,
        MessageDisposition::Done
    );
    let task = w
        .store
        .get_job(&job.id)
        .await
        .unwrap()
        .task
        .unwrap()
        .to_string();
    let mut change = stopped_detail();
    change.started_by = Some(format!("sortie/{}", job.id));
    change.task_arn = task;
    // From the runner's own cluster, or the engine refuses the event (its origin check).
    change.cluster_arn = "arn:aws:ecs:us-east-1:123456789012:cluster/runners".to_string();
    (w, change)
}

#[derive(serde::Deserialize)]
struct Envelope {
    detail: EcsTaskStateChange,
}

fn stopped_detail() -> EcsTaskStateChange {
    serde_json::from_str::<Envelope>(STOPPED_EXIT_0)
        .expect("the STOPPED sample parses")
        .detail
}

/// Checks once that the timed paths do what they claim, so the figures mean something.
fn check(rt: &Runtime) {
    rt.block_on(async {
        let (w, msg) = submitted().await;
        assert_eq!(w.engine.dispatch(&msg, 1).await, MessageDisposition::Done);
        let id = serde_json::from_str::<JobMessage>(&msg).unwrap().job_id;
        let rec = w.store.get_job(&id).await.unwrap();
        assert_eq!(rec.job.state, JobState::Running);
        assert!(rec.task.is_some() && rec.token_hash.is_some());

        let (w, change) = running_with_next().await;
        assert_eq!(
            w.engine.task_event(&change).await.unwrap(),
            EventEffect::Moved(JobState::Succeeded)
        );
        assert_eq!(w.bus.0.lock().unwrap().len(), 1, "published");
        let sent = w.queue.0.lock().unwrap().clone();
        assert_eq!(sent.len(), 1, "the next job was sent");
        let env = w
            .store
            .get_environment(&EnvPath::parse(ENV).unwrap())
            .await
            .unwrap();
        assert_eq!(
            env.item.active_job.as_deref(),
            Some(sent[0].job_id.as_str())
        );
    });
}

fn handlers(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    check(&rt);

    c.bench_function("dispatch/one_submitted_job", |b| {
        b.iter_batched(
            || rt.block_on(submitted()),
            |(w, msg)| {
                let out = rt.block_on(w.engine.dispatch(&msg, 1));
                (w, out)
            },
            BatchSize::SmallInput,
        )
    });

    c.bench_function("task_event/stopped_exit_0", |b| {
        b.iter_batched(
            || rt.block_on(running_with_next()),
            |(w, change)| {
                let out = rt.block_on(w.engine.task_event(&change));
                (w, out)
            },
            BatchSize::SmallInput,
        )
    });

    c.bench_function("task_event/parse_detail", |b| {
        b.iter(|| serde_json::from_str::<Envelope>(black_box(STOPPED_EXIT_0)).unwrap())
    });
}

/// 50 rules at the root and the four levels of `acme/platform/payments/eu`, with a mix of
/// criteria that hold and fail, for the environment `acme/platform/payments/eu/prod`.
fn rules() -> Vec<RunnerRule> {
    let scopes = [
        "",
        "acme",
        "acme/platform",
        "acme/platform/payments",
        "acme/platform/payments/eu",
    ];
    (0..50)
        .map(|i| {
            let scope = GroupPath::parse(scopes[i % scopes.len()]).unwrap();
            let runner_id = if scope.is_root() {
                RunnerId::parse("fargate-shared").unwrap()
            } else {
                RunnerId::parse("acme/fargate").unwrap()
            };
            let mut criteria = Criteria::default();
            match i % 6 {
                0 => criteria.env_type = Some("production".into()),
                1 => criteria.env_type = Some("development".into()),
                2 => {
                    criteria.env_path = Some("acme/**/prod".into());
                    criteria.labels.insert("tier".into(), "gold".into());
                }
                3 => criteria.env_path = Some("acme/*/staging".into()),
                4 => {
                    criteria.tags.insert("pci".into());
                    criteria.labels.insert("team".into(), "payments".into());
                }
                _ => {}
            }
            RunnerRule {
                id: format!("rule-{i:02}"),
                scope,
                runner_id,
                criteria,
                priority: (i % 7) as i32,
            }
        })
        .collect()
}

fn resolution(c: &mut Criterion) {
    let rules = rules();
    let env = Environment {
        settings: Default::default(),
        path: EnvPath::parse("acme/platform/payments/eu/prod").unwrap(),
        env_type: "production".into(),
        labels: BTreeMap::from([
            ("tier".into(), "gold".into()),
            ("team".into(), "payments".into()),
        ]),
        tags: BTreeSet::from(["pci".into(), "eu".into()]),
        runner: RunnerLink {
            runner_id: RunnerId::parse("acme/fargate").unwrap(),
            rule_id: "default".into(),
            linked_by: "admin".into(),
            linked_at: Utc::now(),
        },
    };
    let facts = env.facts();
    let picked = resolve(&facts, &rules).expect("a rule matches");
    assert_eq!(picked.explanation.len(), 50, "every rule is explained");
    c.bench_function("resolve/50_rules_4_deep", |b| {
        b.iter(|| resolve(black_box(&facts), black_box(&rules)))
    });
}

// `criterion_group!` defines a public function that cannot carry a rustdoc line.
#[allow(missing_docs)]
mod group {
    use super::*;
    criterion_group!(benches, handlers, resolution);
}
use group::benches;
criterion_main!(benches);
