//! The job service: submit, cancel, complete, and release-and-next, in one place.
//!
//! The API (submit, cancel) and the engine (completion, the sweeper) both move
//! jobs through their lifecycle; they share this service so that the environment
//! lock is released, and the next queued job sent, by one piece of code.

use std::sync::Arc;

use chrono::Utc;
use sortie_core::{EnvPath, Job, JobId, JobState};
use sortie_store::{
    IdempotencyKey, JobMessage, JobQueue, JobRecord, Released, Store, StoreError, Submitted,
};
use tracing::{info, warn};

use crate::Bus;

/// The job operations shared by the API and the engine.
#[derive(Clone)]
pub struct JobService {
    /// The repository.
    pub store: Arc<dyn Store>,
    /// The jobs queue.
    pub queue: Arc<dyn JobQueue>,
    /// Where `sortie.job.completed` goes.
    pub bus: Arc<dyn Bus>,
}

/// What a cancel did.
#[derive(Debug, Clone, PartialEq)]
pub enum Cancellation {
    /// The job had not been launched: it is `canceled` now.
    Canceled(JobRecord),
    /// The job was launched: its task is being stopped, and its STOPPED event ends it `canceled`.
    Stopping(JobRecord),
    /// The job had already ended; nothing changed.
    AlreadyEnded(JobRecord),
}

impl JobService {
    /// Writes a new `queued` job (taking or joining its environment's lock) and, when it
    /// took the lock, sends it to the jobs queue.
    pub async fn submit(
        &self,
        job: &Job,
        idempotency: Option<&IdempotencyKey>,
    ) -> Result<Submitted, StoreError> {
        let submitted = self.store.submit_job(job, idempotency).await?;
        if submitted.took_lock {
            self.send_or_leave_pending(&submitted.job.id).await;
        }
        Ok(submitted)
    }

    /// Sends a lock-holding job to the queue. If the send fails the job stays a pending
    /// send in the store (it holds the lock and is `queued`), and the sweeper re-sends it.
    pub async fn send_or_leave_pending(&self, job_id: &JobId) {
        if let Err(e) = self.queue.send(job_id, 0).await {
            warn!(%job_id, error = %e, "send to the jobs queue failed; the sweeper will re-send");
        }
    }

    /// Cancels a job for `by`. A job not yet launched ends at once (releasing its lock, or
    /// leaving its environment's queue); a launched job's task is stopped by `dispatch`
    /// (the API holds no ECS permission), and task-events ends it when the task stops.
    pub async fn cancel(&self, record: &JobRecord, by: &str) -> Result<Cancellation, StoreError> {
        let job = &record.job;
        if job.state.is_terminal() {
            return Ok(Cancellation::AlreadyEnded(record.clone()));
        }
        if job.state.is_active() {
            let message = JobMessage {
                job_id: job.id.clone(),
                cancel_by: Some(by.to_string()),
            };
            self.queue.send_message(&message, 0).await?;
            return Ok(Cancellation::Stopping(record.clone()));
        }
        let reason = format!("sortie: canceled by {by}");
        let env = self.store.get_environment(&job.environment).await?;
        let holds_lock = env.item.active_job.as_deref() == Some(job.id.as_str());
        let canceled = if holds_lock {
            let canceled = self
                .store
                .transition_job(
                    &job.id,
                    JobState::Queued,
                    JobState::Canceled,
                    Utc::now(),
                    &reason,
                    Default::default(),
                )
                .await?;
            self.release_and_next(&canceled).await?;
            canceled
        } else {
            self.store
                .cancel_waiting_job(&job.id, Utc::now(), &reason)
                .await?
        };
        Ok(Cancellation::Canceled(canceled))
    }

    /// Releases the environment's lock if this job holds it, and sends the job it was
    /// handed to. Idempotent: a release by anyone but the holder changes nothing.
    pub async fn release_and_next(&self, record: &JobRecord) -> Result<(), StoreError> {
        self.release_env_and_next(&record.job.environment, &record.job.id)
            .await
    }

    /// [`JobService::release_and_next`] by the environment and the job id alone: for a job
    /// whose item cannot be read.
    pub async fn release_env_and_next(
        &self,
        env: &EnvPath,
        job_id: &JobId,
    ) -> Result<(), StoreError> {
        if let Released::HandedTo(next) = self.store.release_environment(env, job_id).await? {
            info!(next = %next.id, "environment handed to the next queued job");
            self.send_or_leave_pending(&next.id).await;
        }
        Ok(())
    }

    /// After a job reached a terminal state: release, start the next job, publish
    /// `sortie.job.completed` (best effort: the outcome is already durable).
    pub async fn complete(&self, record: &JobRecord) -> Result<(), StoreError> {
        self.release_and_next(record).await?;
        if let Err(e) = self.bus.job_completed(record).await {
            warn!(error = %e, "publishing sortie.job.completed failed");
        }
        info!(state = %record.job.state, reason = record.job.reason(), "job finished");
        Ok(())
    }
}
