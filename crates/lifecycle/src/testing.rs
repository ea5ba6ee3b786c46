//! The services' unit tests' world: a [`MemoryStore`] with one runner, a queue and a bus
//! that record what they were given, and a launcher that launches nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use sortie_core::{
    EnvPath, Environment, Job, JobId, Runner, RunnerId, RunnerLink, RunnerSpec, TaskRef,
};
use sortie_launch::{LaunchError, LaunchSpec, Launcher, TaskStatus};
use sortie_store::{
    EnvironmentStore, JobMessage, JobQueue, JobRecord, MemoryStore, RunnerStore, StoreError,
};

use crate::{Bus, Engine, JobService, LifecycleError, SweepSettings};

pub(crate) const RUNNER: &str = "acme/fargate";

/// Records the jobs sent to the queue.
#[derive(Default)]
pub(crate) struct Queue(pub Mutex<Vec<JobId>>);

#[async_trait]
impl JobQueue for Queue {
    async fn send_message(&self, message: &JobMessage, _delay: i32) -> Result<(), StoreError> {
        self.0.lock().unwrap().push(message.job_id.clone());
        Ok(())
    }
}

/// Publishes nothing.
pub(crate) struct NoBus;

#[async_trait]
impl Bus for NoBus {
    async fn job_ended(&self, _record: &JobRecord) -> Result<(), LifecycleError> {
        Ok(())
    }
}

/// Launches nothing: every call is refused.
pub(crate) struct NoLauncher;

#[async_trait]
impl Launcher for NoLauncher {
    async fn launch(&self, _spec: &LaunchSpec<'_>) -> Result<TaskRef, LaunchError> {
        Err(LaunchError::Fatal("no launcher in this test".into()))
    }
    async fn stop(&self, _job: &Job, _task: &TaskRef, _reason: &str) -> Result<(), LaunchError> {
        Err(LaunchError::Fatal("no launcher in this test".into()))
    }
    async fn describe(&self, _job: &Job, _task: &TaskRef) -> Result<TaskStatus, LaunchError> {
        Err(LaunchError::Fatal("no launcher in this test".into()))
    }
    async fn find(&self, _job: &Job) -> Result<Option<TaskRef>, LaunchError> {
        Ok(None)
    }
}

/// A valid Fargate runner.
pub(crate) fn runner_spec() -> RunnerSpec {
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
    .expect("the test runner is valid")
}

/// One in-memory world: the store holds runner [`RUNNER`].
pub(crate) struct World {
    pub store: Arc<MemoryStore>,
    pub queue: Arc<Queue>,
    pub jobs: JobService,
}

impl World {
    /// The audit entries of `org`'s chain, oldest first.
    pub async fn audit_entries(&self, org: &str) -> Vec<sortie_core::audit::AuditEntry> {
        use sortie_store::AuditStore;
        let range = sortie_store::AuditRange {
            limit: 1000,
            ..Default::default()
        };
        let page = self.store.audit_page(org, &range).await.unwrap();
        page.records
            .iter()
            .map(|r| serde_json::from_str(&r.body).unwrap())
            .collect()
    }

    pub async fn new() -> Self {
        let store = Arc::new(MemoryStore::new());
        let queue = Arc::new(Queue::default());
        store
            .create_runner(&Runner {
                id: RunnerId::parse(RUNNER).unwrap(),
                spec: runner_spec(),
            })
            .await
            .unwrap();
        let jobs = JobService {
            store: store.clone(),
            queue: queue.clone(),
            bus: Arc::new(NoBus),
            secrets: Arc::new(sortie_launch::MemoryJobSecrets::default()),
            gate: Default::default(),
        };
        Self { store, queue, jobs }
    }

    pub fn engine(&self) -> Engine {
        Engine {
            jobs: self.jobs.clone(),
            launcher: Arc::new(NoLauncher),
            api_url: "https://api.sortie.example.com".into(),
            settings: SweepSettings::default(),
        }
    }

    /// Creates environment `path` on runner [`RUNNER`].
    pub async fn environment(&self, path: &str) -> Environment {
        let env = Environment {
            settings: Default::default(),
            path: EnvPath::parse(path).unwrap(),
            env_type: "production".into(),
            labels: BTreeMap::new(),
            tags: BTreeSet::new(),
            runner: RunnerLink {
                runner_id: RunnerId::parse(RUNNER).unwrap(),
                rule_id: "default".into(),
                linked_by: "admin".into(),
                linked_at: chrono::Utc::now(),
            },
        };
        self.store.create_environment(&env).await.unwrap();
        env
    }

    /// The ids sent to the jobs queue.
    pub fn sent(&self) -> Vec<JobId> {
        self.queue.0.lock().unwrap().clone()
    }
}

/// Artifacts in memory: what a test puts, listed with its size as S3 lists it.
#[derive(Default)]
pub(crate) struct Bucket(pub Mutex<BTreeMap<String, Vec<u8>>>);

impl Bucket {
    /// Puts `bytes` at `key`.
    pub fn put(&self, key: &str, bytes: Vec<u8>) {
        self.0.lock().unwrap().insert(key.to_string(), bytes);
    }
}

#[async_trait]
impl sortie_store::Artifacts for Bucket {
    async fn presign_put(
        &self,
        _: &str,
        _: &str,
        _: std::time::Duration,
    ) -> Result<sortie_store::PresignedPut, StoreError> {
        unreachable!("no uploads here")
    }
    async fn list(&self, prefix: &str) -> Result<Vec<sortie_store::ObjectInfo>, StoreError> {
        Ok(self
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| sortie_store::ObjectInfo {
                key: k.clone(),
                size: v.len() as u64,
            })
            .collect())
    }
    async fn get(&self, key: &str) -> Result<Vec<u8>, StoreError> {
        self.0
            .lock()
            .unwrap()
            .get(key)
            .cloned()
            .ok_or_else(|| StoreError::NotFound {
                kind: "object",
                id: key.into(),
            })
    }
}
