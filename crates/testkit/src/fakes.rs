//! In-memory fakes of the control plane's outside world, for the fast tier: the jobs
//! queue, the event bus, the artifacts bucket and the launcher. Each records what it
//! was asked, so a test can assert on it. (The store is `sortie_store::MemoryStore`,
//! the secrets `sortie_launch::MemoryJobSecrets`, the runner checker
//! `sortie_launch::StaticRunnerChecker`: each lives beside its trait.)

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use sortie_core::{Job, TaskRef};
use sortie_launch::{LaunchError, LaunchSpec, Launcher, TaskStatus};
use sortie_lifecycle::{Bus, LifecycleError};
use sortie_store::{
    Artifacts, JobMessage, JobQueue, JobRecord, ObjectInfo, PresignedPut, StoreError,
};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The jobs queue in memory: every message sent, with its delay, until taken.
#[derive(Debug, Default)]
pub struct MemoryQueue {
    sent: Mutex<Vec<(JobMessage, i32)>>,
}

impl MemoryQueue {
    /// The messages sent since the last take, with their delays, removed from the queue.
    pub fn take(&self) -> Vec<(JobMessage, i32)> {
        std::mem::take(&mut *lock(&self.sent))
    }
}

#[async_trait]
impl JobQueue for MemoryQueue {
    async fn send_message(
        &self,
        message: &JobMessage,
        delay_seconds: i32,
    ) -> Result<(), StoreError> {
        lock(&self.sent).push((message.clone(), delay_seconds));
        Ok(())
    }
}

/// One event published on a [`MemoryBus`].
#[derive(Debug, Clone, PartialEq)]
pub struct Published {
    /// Its `detail-type`.
    pub detail_type: String,
    /// The resource it is about (`sortie:job/<id>`, ...).
    pub resource: String,
    /// Its detail.
    pub detail: serde_json::Value,
}

/// The event bus in memory: every event published, `sortie.job.ended` included.
#[derive(Debug, Default)]
pub struct MemoryBus {
    published: Mutex<Vec<Published>>,
}

impl MemoryBus {
    /// Every event published so far, in order.
    pub fn published(&self) -> Vec<Published> {
        lock(&self.published).clone()
    }
}

#[async_trait]
impl Bus for MemoryBus {
    async fn job_ended(&self, record: &JobRecord) -> Result<(), LifecycleError> {
        self.publish(
            sortie_lifecycle::JOB_ENDED,
            &format!("sortie:job/{}", record.job.id),
            sortie_lifecycle::ended_detail(record),
        )
        .await
    }

    async fn publish(
        &self,
        detail_type: &str,
        resource: &str,
        detail: serde_json::Value,
    ) -> Result<(), LifecycleError> {
        lock(&self.published).push(Published {
            detail_type: detail_type.to_string(),
            resource: resource.to_string(),
            detail,
        });
        Ok(())
    }
}

/// The artifacts bucket in memory. Presigned URLs are `memory://artifacts/<key>`: nothing
/// serves them, so a test writes an object with [`MemoryArtifacts::put`].
#[derive(Debug, Default)]
pub struct MemoryArtifacts {
    objects: Mutex<BTreeMap<String, Vec<u8>>>,
}

impl MemoryArtifacts {
    /// Stores `bytes` at `key`, as a runner's upload would.
    pub fn put(&self, key: &str, bytes: impl Into<Vec<u8>>) {
        lock(&self.objects).insert(key.to_string(), bytes.into());
    }
}

#[async_trait]
impl Artifacts for MemoryArtifacts {
    async fn presign_put(
        &self,
        key: &str,
        content_type: &str,
        expires_in: Duration,
    ) -> Result<PresignedPut, StoreError> {
        Ok(PresignedPut {
            url: format!("memory://artifacts/{key}"),
            method: "PUT".into(),
            headers: BTreeMap::from([("content-type".to_string(), content_type.to_string())]),
            expires_at: Utc::now()
                + chrono::Duration::from_std(expires_in)
                    .unwrap_or_else(|_| chrono::Duration::days(7)),
        })
    }

    async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, StoreError> {
        Ok(lock(&self.objects)
            .iter()
            .filter(|(key, _)| key.starts_with(prefix))
            .map(|(key, bytes)| ObjectInfo {
                key: key.clone(),
                size: bytes.len() as u64,
            })
            .collect())
    }

    async fn get(&self, key: &str) -> Result<Vec<u8>, StoreError> {
        lock(&self.objects)
            .get(key)
            .cloned()
            .ok_or_else(|| StoreError::NotFound {
                kind: "object",
                id: key.to_string(),
            })
    }

    async fn head(&self, key: &str) -> Result<ObjectInfo, StoreError> {
        lock(&self.objects)
            .get(key)
            .map(|bytes| ObjectInfo {
                key: key.to_string(),
                size: bytes.len() as u64,
            })
            .ok_or_else(|| StoreError::NotFound {
                kind: "object",
                id: key.to_string(),
            })
    }

    /// As S3's presigning, it does not look for the object: reading the URL would.
    async fn presign_get(&self, key: &str, _expires_in: Duration) -> Result<String, StoreError> {
        Ok(format!("memory://artifacts/{key}"))
    }

    async fn write(&self, key: &str, bytes: Vec<u8>, _: &str) -> Result<(), StoreError> {
        self.put(key, bytes);
        Ok(())
    }
}

/// A launcher in memory: each launch starts a new task `memory/<job id>-<n>` (the job's
/// n-th launch: as on ECS, every RunTask is a task of its own) that runs until stopped, and
/// every call is recorded.
#[derive(Debug, Default)]
pub struct MemoryLauncher {
    launched: Mutex<Vec<String>>,
    stopped: Mutex<Vec<(String, String)>>,
}

impl MemoryLauncher {
    /// The `n`-th task (from 1) of `job`, as [`MemoryLauncher`] launches it.
    pub fn task_of(job: &str, n: usize) -> TaskRef {
        TaskRef::new(format!(
            "arn:aws:ecs:us-east-1:123456789012:task/memory/{job}-{n}"
        ))
    }

    /// The jobs launched, in order (a job launched twice is listed twice).
    pub fn launched(&self) -> Vec<String> {
        lock(&self.launched).clone()
    }

    /// The stops asked: (task ARN, reason).
    pub fn stopped(&self) -> Vec<(String, String)> {
        lock(&self.stopped).clone()
    }

    /// How many times `job` was launched.
    fn launches_of(launched: &[String], job: &str) -> usize {
        launched.iter().filter(|j| j.as_str() == job).count()
    }
}

#[async_trait]
impl Launcher for MemoryLauncher {
    async fn launch(&self, spec: &LaunchSpec<'_>) -> Result<TaskRef, LaunchError> {
        let mut launched = lock(&self.launched);
        launched.push(spec.job.id.to_string());
        let n = Self::launches_of(&launched, spec.job.id.as_str());
        Ok(Self::task_of(spec.job.id.as_str(), n))
    }

    async fn stop(&self, _job: &Job, task: &TaskRef, reason: &str) -> Result<(), LaunchError> {
        lock(&self.stopped).push((task.as_str().to_string(), reason.to_string()));
        Ok(())
    }

    /// A stopped task is described as ECS describes one after StopTask: `UserInitiated`,
    /// the reason asked, and the container's exit on SIGTERM (143). A task never launched
    /// is missing.
    async fn describe(&self, job: &Job, task: &TaskRef) -> Result<TaskStatus, LaunchError> {
        let stop = lock(&self.stopped)
            .iter()
            .find(|(t, _)| t == task.as_str())
            .map(|(_, reason)| reason.clone());
        let launches = Self::launches_of(&lock(&self.launched), job.id.as_str());
        let known = (1..=launches).any(|n| Self::task_of(job.id.as_str(), n) == *task);
        Ok(match stop {
            Some(reason) => TaskStatus::Stopped(sortie_core::TaskStop {
                stop_code: Some("UserInitiated".into()),
                stopped_reason: Some(reason),
                exit_code: Some(143),
                container_reason: None,
            }),
            None if known => TaskStatus::Running,
            None => TaskStatus::Missing,
        })
    }

    async fn find(&self, job: &Job) -> Result<Option<TaskRef>, LaunchError> {
        let n = Self::launches_of(&lock(&self.launched), job.id.as_str());
        Ok((n > 0).then(|| Self::task_of(job.id.as_str(), n)))
    }
}
