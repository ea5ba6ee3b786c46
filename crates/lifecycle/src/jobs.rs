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

/// What the runner's own report of its exit did.
#[derive(Debug, Clone, PartialEq)]
pub enum ExitReport {
    /// The job ended (or, for a stop Sortie asked for, ended as that stop says) now.
    Ended(JobRecord),
    /// The job had already ended (its task's status was seen first): nothing changed.
    AlreadyEnded(JobRecord),
    /// The job is not `running`: its launch is not recorded yet, or it was requeued.
    NotRunning(JobState),
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
    /// The runner's final callback: it is about to exit with `exit.exit_code`. The job ends
    /// as if its task had been seen stopped with that code ([`sortie_core::decision::decide`]:
    /// a cancel or timeout Sortie asked for still names the end). Whichever comes first,
    /// this or the sweeper's poll of the platform, wins; the second changes nothing.
    pub async fn runner_exited(
        &self,
        record: &JobRecord,
        exit: &sortie_core::RunnerExit,
    ) -> Result<ExitReport, StoreError> {
        use sortie_core::decision::{decide, Seen, Step, Timing};
        if record.job.state.is_terminal() {
            return Ok(ExitReport::AlreadyEnded(record.clone()));
        }
        if record.job.state != JobState::Running {
            return Ok(ExitReport::NotRunning(record.job.state));
        }
        let stop = sortie_core::TaskStop {
            stop_code: Some("EssentialContainerExited".into()),
            stopped_reason: Some("the runner reported its exit".into()),
            exit_code: Some(exit.exit_code),
            container_reason: exit.reason.clone(),
        };
        let timing = Timing {
            dispatch_lease: chrono::Duration::zero(),
            silence: chrono::Duration::zero(),
        };
        let outcome = match decide(
            &crate::engine::facts(record),
            &Seen::Stopped(stop),
            Utc::now(),
            timing,
        ) {
            Step::End(outcome) => outcome,
            // An exit code never requeues (only a Spot interruption does).
            other => {
                warn!(step = ?other, "a runner's exit decided no end; left to the sweeper");
                return Ok(ExitReport::NotRunning(record.job.state));
            }
        };
        let finished = match self
            .store
            .transition_job(
                &record.job.id,
                JobState::Running,
                outcome.state,
                Utc::now(),
                &outcome.reason,
                sortie_store::JobUpdate::default(),
            )
            .await
        {
            Ok(r) => r,
            Err(StoreError::StateConflict { actual, .. }) if actual.is_terminal() => {
                return Ok(ExitReport::AlreadyEnded(
                    self.store.get_job(&record.job.id).await?,
                ))
            }
            Err(StoreError::StateConflict { actual, .. }) => {
                return Ok(ExitReport::NotRunning(actual))
            }
            Err(e) => return Err(e),
        };
        info!(job_id = %record.job.id, state = %outcome.state, reason = %outcome.reason, "job ended on its runner's report");
        self.complete(&finished).await?;
        Ok(ExitReport::Ended(finished))
    }

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
