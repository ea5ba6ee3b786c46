//! The fast tier of the lifecycle's tests: the same control plane as [`super::World`], put
//! together by `sortie_wiring::assemble` over `sortie_testkit::world::World::fast` (the
//! memory store, queue, bus, launcher and secrets). It needs nothing, so it runs in every
//! `cargo test`. It speaks the same helper methods as the AWS tier's world, so a behaviour
//! test reads the same on either; what only ECS, DynamoDB or SQS on moto can show stays on
//! [`super::World`] (the launcher and store contract tests).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use chrono::Utc;
use serde_json::{json, Value};
use sortie_core::{
    EnvPath, Environment, Job, JobRequest, Runner, RunnerId, RunnerLink, RunnerSpec,
};
use sortie_lifecycle::{Engine, SweepSettings};
use sortie_store::{EnvironmentStore, JobStore, MemoryStore, RunnerStore};
use sortie_testkit::fakes::{MemoryBus, MemoryLauncher};

use super::{EXTERNAL_ID, ROLE};

/// The cluster every task of [`MemoryLauncher`] runs in (`task/memory/<job id>`).
pub const CLUSTER: &str = "memory";

/// The lifecycle on the fast tier.
pub struct FastWorld {
    /// The engine under test.
    pub engine: Arc<Engine>,
    /// The store.
    pub store: Arc<MemoryStore>,
    /// The secrets of sensitive variables.
    pub secrets: Arc<sortie_launch::MemoryJobSecrets>,
    /// The launcher of every runner type.
    pub launcher: Arc<MemoryLauncher>,
    /// The event bus.
    pub bus: Arc<MemoryBus>,
    queue: Arc<sortie_testkit::fakes::MemoryQueue>,
    /// How many of the bus's events [`FastWorld::events`] has handed out.
    seen: Mutex<usize>,
}

impl FastWorld {
    /// A fresh world with the default sweep settings.
    pub async fn new() -> Self {
        Self::with_settings(SweepSettings::default()).await
    }

    /// A fresh world with `settings` for the sweeper.
    pub async fn with_settings(settings: SweepSettings) -> Self {
        let world = sortie_testkit::world::World::fast_with(|setup| {
            setup.resources.sweep = settings;
        });
        let fakes = world.fakes();
        Self {
            engine: world.plane.engine.clone(),
            store: fakes.store.clone(),
            secrets: fakes.secrets.clone(),
            launcher: fakes.launcher.clone(),
            bus: fakes.bus.clone(),
            queue: fakes.queue.clone(),
            seen: Mutex::new(0),
        }
    }

    /// A Fargate runner's configuration in the memory launcher's cluster, with `extra`
    /// lines under `runner_configuration`.
    pub fn runner_spec(&self, extra: &str) -> RunnerSpec {
        RunnerSpec::parse(&format!(
            "runner_configuration:\n  type: ecs-fargate\n  role_arn: {ROLE}\n  external_id: {EXTERNAL_ID}\n  region: us-east-1\n  cluster: {CLUSTER}\n  task_definition: arn:aws:ecs:us-east-1:123456789012:task-definition/sortie-runner:1\n  container_name: runner\n  subnets: [subnet-0a1b2c3d]\n  security_groups: [sg-0a1b2c3d]\n{extra}state_storage_configuration:\n  type: s3\n  bucket: acme-state\n  region: us-east-1\n",
        ))
        .unwrap()
    }

    /// Creates the runner `acme/fargate` and environment `path` linked to it.
    pub async fn environment(&self, path: &str, extra: &str) -> EnvPath {
        let runner = Runner {
            id: RunnerId::parse("acme/fargate").unwrap(),
            spec: self.runner_spec(extra),
        };
        let _ = self.store.create_runner(&runner).await;
        let env = Environment {
            settings: Default::default(),
            path: EnvPath::parse(path).unwrap(),
            env_type: "production".into(),
            labels: BTreeMap::new(),
            tags: Default::default(),
            runner: RunnerLink {
                runner_id: runner.id.clone(),
                rule_id: "default".into(),
                linked_by: "admin".into(),
                linked_at: Utc::now(),
            },
        };
        self.store.create_environment(&env).await.unwrap();
        env.path
    }

    /// Submits a job as the API does (with the runner snapshot); true if it took the lock.
    pub async fn submit(&self, env: &EnvPath, operation: &str, extra: &str) -> (Job, bool) {
        let req = JobRequest::parse(&format!(
            r#"{{"operation":"{operation}","files":{{"main.tf":""}}}}"#
        ))
        .unwrap();
        let mut job = Job::new(
            sortie_core::tokens::new_id(),
            env.clone(),
            RunnerId::parse("acme/fargate").unwrap(),
            req,
            "alice".into(),
            Utc::now(),
        );
        job.runner_spec = Some(self.runner_spec(extra));
        let s = self.store.submit_job(&job, None).await.unwrap();
        (job, s.took_lock)
    }

    /// The body of a dispatch message for `job_id`.
    pub fn body(job_id: &str) -> String {
        super::World::body(job_id)
    }

    /// An "ECS Task State Change" detail built from a sample in `events/`, for this task.
    pub fn event(
        sample: &str,
        job_id: &str,
        task_arn: &str,
    ) -> sortie_lifecycle::EcsTaskStateChange {
        super::World::event(sample, job_id, task_arn)
    }

    /// Job ids of the messages sent to the jobs queue since the last call.
    pub async fn queued_ids(&self) -> Vec<sortie_core::JobId> {
        self.queue
            .take()
            .into_iter()
            .map(|(m, _)| m.job_id)
            .collect()
    }

    /// The events published since the last call, each as EventBridge delivers it to a
    /// target (`detail-type`, `source`, `resources`, `detail`).
    pub async fn events(&self) -> Vec<Value> {
        let published = self.bus.published();
        let mut seen = self.seen.lock().unwrap();
        let new = published[(*seen).min(published.len())..]
            .iter()
            .map(|e| {
                json!({
                    "detail-type": e.detail_type,
                    "source": sortie_lifecycle::SOURCE,
                    "resources": [e.resource],
                    "detail": e.detail,
                })
            })
            .collect();
        *seen = published.len();
        new
    }

    /// The job's state now.
    pub async fn state(&self, id: &str) -> sortie_core::JobState {
        self.store
            .get_job(&sortie_core::JobId::from(id))
            .await
            .unwrap()
            .job
            .state
    }
}
