//! The engine: dispatch, completion, cancel and the sweep.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use sortie_core::outcome::{CANCELED_BY, TIMED_OUT_AFTER};
use sortie_core::{task_outcome, JobId, JobState, RunnerConfiguration, TaskRef, TaskStop};
use sortie_launch::{job_id_of, LaunchError, LaunchSpec, Launcher, TaskStatus};
use sortie_store::{JobMessage, JobRecord, JobUpdate, StoreError, Unreadable};
use tracing::{info, warn, Instrument};

use crate::{EcsTaskStateChange, JobService, LifecycleError};

/// What to do with one queue message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordOutcome {
    /// Handled (or a harmless duplicate): delete the message.
    Done,
    /// Try again after `delay_seconds` (a batch item failure with a longer visibility timeout).
    Retry {
        /// Backoff before the next delivery.
        delay_seconds: i32,
        /// Why.
        reason: String,
    },
    /// The message can never succeed: let it reach the dead-letter queue.
    Poison(String),
}

/// What a task event did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventOutcome {
    /// The job moved to this state.
    Moved(JobState),
    /// Nothing to do: an unknown task, a duplicate, an out-of-order or intermediate event.
    Ignored(&'static str),
}

/// Timing of the sweep.
#[derive(Debug, Clone, Copy)]
pub struct SweepSettings {
    /// A lock holder still `queued` this long after it was queued is re-sent.
    pub resend_after: Duration,
    /// A job `dispatching` this long without a recorded task is looked up by `startedBy`.
    pub dispatch_lease: Duration,
    /// A `running` job not heard from this long is looked up with DescribeTasks.
    pub silence: Duration,
    /// At most this many jobs are looked at per pass, per kind.
    pub batch: u32,
}

impl Default for SweepSettings {
    fn default() -> Self {
        Self {
            resend_after: Duration::seconds(60),
            dispatch_lease: Duration::seconds(120),
            silence: Duration::minutes(10),
            batch: 100,
        }
    }
}

/// What one sweep pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Lost sends re-sent.
    pub resent: usize,
    /// Orphaned tasks adopted.
    pub adopted: usize,
    /// Dispatches with no task after the lease, requeued.
    pub requeued: usize,
    /// Tasks stopped for exceeding their timeout.
    pub timed_out: usize,
    /// Jobs finished from DescribeTasks because their event was lost.
    pub resolved: usize,
    /// Jobs whose sweep failed, and lists that could not be read (logged; tried again next
    /// pass; the rest of the pass goes on).
    pub errors: usize,
    /// Job items that could not be decoded: failed with a clear reason, their task stopped
    /// when it could be found, and their environment released.
    pub unreadable: usize,
}

/// Backoff for a retried launch: 2, 4, 8, 16, 32, then 60 seconds.
pub fn backoff_seconds(receive_count: u32) -> i32 {
    2i32.saturating_pow(receive_count.clamp(1, 6)).min(60)
}

/// The lifecycle's dependencies.
pub struct Engine {
    /// Submit, cancel, complete and release-and-next, shared with the API.
    pub jobs: JobService,
    /// Starts and controls tasks.
    pub launcher: Arc<dyn Launcher>,
    /// The API URL runners call back.
    pub api_url: String,
    /// Sweep timing.
    pub settings: SweepSettings,
}

fn new_token() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the OS random source is available");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn when_entered(record: &JobRecord, state: JobState) -> DateTime<Utc> {
    record
        .job
        .transitions
        .iter()
        .rev()
        .find(|t| t.to == state)
        .map(|t| t.at)
        .unwrap_or(record.updated_at)
}

fn container_name(record: &JobRecord) -> Option<String> {
    match record
        .job
        .runner_spec
        .as_ref()
        .map(|s| &s.runner_configuration)
    {
        Some(RunnerConfiguration::EcsFargate(c)) => Some(c.container_name.clone()),
        _ => None,
    }
}

impl Engine {
    /// Handles one jobs-queue message: launch the job, or stop it for a cancel.
    pub async fn dispatch(&self, body: &str, receive_count: u32) -> RecordOutcome {
        let message: JobMessage = match serde_json::from_str(body) {
            Ok(m) => m,
            Err(e) => return RecordOutcome::Poison(format!("unparsable message: {e}")),
        };
        let span = tracing::info_span!("job", job_id = %message.job_id);
        async {
            match &message.cancel_by {
                Some(by) => self.cancel_launched(&message.job_id, by).await,
                None => self.launch(&message.job_id, receive_count).await,
            }
        }
        .instrument(span)
        .await
    }

    async fn launch(&self, id: &JobId, receive_count: u32) -> RecordOutcome {
        let now = Utc::now();
        // Claim: the one conditional write that makes a duplicate delivery, or a racing
        // dispatcher, a no-op. Moto ignores RunTask's clientToken, so this alone must hold.
        let claimed = match self
            .jobs
            .store
            .transition_job(
                id,
                JobState::Queued,
                JobState::Dispatching,
                now,
                "claimed by dispatch",
                JobUpdate::default(),
            )
            .await
        {
            Ok(r) => r,
            Err(StoreError::StateConflict { actual, .. }) => {
                info!(state = %actual, "already claimed; duplicate delivery");
                if actual.is_terminal() {
                    return match self.ensure_released(id).await {
                        Ok(()) => RecordOutcome::Done,
                        Err(e) => RecordOutcome::Retry {
                            delay_seconds: backoff_seconds(receive_count),
                            reason: e.to_string(),
                        },
                    };
                }
                return RecordOutcome::Done;
            }
            Err(StoreError::NotFound { .. }) => {
                return RecordOutcome::Poison(format!("job {id} does not exist"))
            }
            // Its item cannot be read: the message can never succeed. The sweeper fails the
            // job and releases its environment.
            Err(e @ StoreError::Corrupt { .. }) => {
                return RecordOutcome::Poison(format!("job {id} is unreadable: {e}"))
            }
            Err(e) => {
                return RecordOutcome::Retry {
                    delay_seconds: backoff_seconds(receive_count),
                    reason: e.to_string(),
                }
            }
        };
        let token = new_token();
        let launched = self
            .launcher
            .launch(&LaunchSpec {
                job: &claimed.job,
                token: &token,
                api_url: &self.api_url,
            })
            .await;
        match launched {
            Ok(task) => {
                let update = JobUpdate {
                    task: Some(task.clone()),
                    token_hash: Some(sortie_store::sha256_hex(token.as_bytes())),
                    ..Default::default()
                };
                match self
                    .jobs
                    .store
                    .transition_job(
                        id,
                        JobState::Dispatching,
                        JobState::Running,
                        Utc::now(),
                        &format!("launched task {task}"),
                        update,
                    )
                    .await
                {
                    Ok(running) => {
                        info!(task = %task, "launched");
                        if let Some(by) = &running.cancel_requested_by {
                            if let Err(e) = self
                                .launcher
                                .stop(&running.job, &task, &format!("{CANCELED_BY}{by}"))
                                .await
                            {
                                warn!(error = %e, "cancel requested during launch; stop failed, the sweeper retries");
                            }
                        }
                    }
                    // The task runs but is not recorded: the sweeper adopts it by startedBy.
                    // Never launch again: a retry of this message finds the job dispatching.
                    Err(e) => {
                        warn!(task = %task, error = %e, "launched but not recorded; the sweeper will adopt the task")
                    }
                }
                RecordOutcome::Done
            }
            Err(LaunchError::Retryable(reason)) => {
                warn!(%reason, "launch failed; retrying with backoff");
                if let Err(e) = self
                    .jobs
                    .store
                    .transition_job(
                        id,
                        JobState::Dispatching,
                        JobState::Queued,
                        Utc::now(),
                        &format!("launch will be retried: {reason}"),
                        JobUpdate::default(),
                    )
                    .await
                {
                    warn!(error = %e, "could not requeue; the sweeper will");
                }
                RecordOutcome::Retry {
                    delay_seconds: backoff_seconds(receive_count),
                    reason,
                }
            }
            Err(LaunchError::Fatal(reason)) => {
                warn!(%reason, "launch failed for good");
                match self
                    .jobs
                    .store
                    .transition_job(
                        id,
                        JobState::Dispatching,
                        JobState::Failed,
                        Utc::now(),
                        &format!("launch failed: \"{reason}\""),
                        JobUpdate::default(),
                    )
                    .await
                {
                    Ok(failed) => match self.complete(&failed).await {
                        Ok(()) => RecordOutcome::Done,
                        Err(e) => RecordOutcome::Retry {
                            delay_seconds: backoff_seconds(receive_count),
                            reason: e.to_string(),
                        },
                    },
                    Err(e) => RecordOutcome::Retry {
                        delay_seconds: backoff_seconds(receive_count),
                        reason: e.to_string(),
                    },
                }
            }
        }
    }

    /// Stops a launched job's task for a cancel; `task-events` then finishes it as `canceled`.
    async fn cancel_launched(&self, id: &JobId, by: &str) -> RecordOutcome {
        let marked = match self
            .jobs
            .store
            .mark_job(
                id,
                Utc::now(),
                JobUpdate {
                    cancel_requested_by: Some(by.to_string()),
                    ..Default::default()
                },
            )
            .await
        {
            Ok(r) => r,
            Err(StoreError::StateConflict { .. }) => return RecordOutcome::Done,
            Err(StoreError::NotFound { .. }) => {
                return RecordOutcome::Poison(format!("job {id} does not exist"))
            }
            Err(e @ StoreError::Corrupt { .. }) => {
                return RecordOutcome::Poison(format!("job {id} is unreadable: {e}"))
            }
            Err(e) => {
                return RecordOutcome::Retry {
                    delay_seconds: 2,
                    reason: e.to_string(),
                }
            }
        };
        match &marked.task {
            Some(task) => match self
                .launcher
                .stop(&marked.job, task, &format!("{CANCELED_BY}{by}"))
                .await
            {
                Ok(()) => RecordOutcome::Done,
                Err(LaunchError::Retryable(reason)) => RecordOutcome::Retry {
                    delay_seconds: 2,
                    reason,
                },
                Err(LaunchError::Fatal(reason)) => {
                    warn!(%reason, "stop for cancel failed; the sweeper resolves the job");
                    RecordOutcome::Done
                }
            },
            // Still launching: the dispatcher stops the task once it records it.
            None => RecordOutcome::Done,
        }
    }

    /// Records the task of a job still `dispatching` (`dispatching → running`): a task seen
    /// running, stopped, or found by `startedBy` before the dispatcher recorded it.
    async fn adopt(
        &self,
        id: &JobId,
        task: &TaskRef,
        reason: &str,
        seen_running: bool,
    ) -> Result<JobRecord, StoreError> {
        let update = JobUpdate {
            task: Some(task.clone()),
            started_at: seen_running.then(Utc::now),
            ..Default::default()
        };
        self.jobs
            .store
            .transition_job(
                id,
                JobState::Dispatching,
                JobState::Running,
                Utc::now(),
                reason,
                update,
            )
            .await
    }

    /// Releases the environment's lock if this (terminal) job still holds it, sending the next job.
    async fn ensure_released(&self, id: &JobId) -> Result<(), LifecycleError> {
        let record = self.jobs.store.get_job(id).await?;
        self.release_and_next(&record).await
    }

    async fn release_and_next(&self, record: &JobRecord) -> Result<(), LifecycleError> {
        Ok(self.jobs.release_and_next(record).await?)
    }

    async fn complete(&self, record: &JobRecord) -> Result<(), LifecycleError> {
        Ok(self.jobs.complete(record).await?)
    }

    /// Handles one "ECS Task State Change" event.
    pub async fn task_event(
        &self,
        change: &EcsTaskStateChange,
    ) -> Result<EventOutcome, LifecycleError> {
        let Some(id) = change
            .started_by
            .as_deref()
            .and_then(job_id_of)
            .map(JobId::from)
        else {
            return Ok(EventOutcome::Ignored("not a task Sortie started"));
        };
        let id = &id;
        let task = TaskRef::new(change.task_arn.clone());
        let span = tracing::info_span!("job", job_id = %id);
        async {
            let record = match self.jobs.store.get_job(id).await {
                Ok(r) => r,
                Err(StoreError::NotFound { .. }) => {
                    return Ok(EventOutcome::Ignored("unknown job"))
                }
                Err(e @ StoreError::Corrupt { .. }) => {
                    warn!(error = %e, "task event for an unreadable job; the sweeper fails it");
                    return Ok(EventOutcome::Ignored("unreadable job"));
                }
                Err(e) => return Err(e.into()),
            };
            if record.task.as_ref().is_some_and(|known| *known != task) {
                return Ok(EventOutcome::Ignored(
                    "an event of an earlier task of this job",
                ));
            }
            match change.last_status.as_str() {
                "STOPPED" => {
                    let stop = change.task_stop(container_name(&record).as_deref());
                    self.finish_stopped(record, stop, &task).await
                }
                "RUNNING" => match record.job.state {
                    JobState::Dispatching => {
                        match self
                            .adopt(id, &task, &format!("task {task} running"), true)
                            .await
                        {
                            Ok(_) => Ok(EventOutcome::Moved(JobState::Running)),
                            Err(StoreError::StateConflict { .. }) => {
                                Ok(EventOutcome::Ignored("already moved on"))
                            }
                            Err(e) => Err(e.into()),
                        }
                    }
                    JobState::Running if record.started_at.is_none() => {
                        match self
                            .jobs
                            .store
                            .mark_job(
                                id,
                                Utc::now(),
                                JobUpdate {
                                    started_at: Some(Utc::now()),
                                    ..Default::default()
                                },
                            )
                            .await
                        {
                            Ok(_) | Err(StoreError::StateConflict { .. }) => {
                                Ok(EventOutcome::Ignored("start recorded"))
                            }
                            Err(e) => Err(e.into()),
                        }
                    }
                    _ => Ok(EventOutcome::Ignored("out of order or duplicate")),
                },
                _ => Ok(EventOutcome::Ignored("intermediate status")),
            }
        }
        .instrument(span)
        .await
    }

    /// Finishes a job whose task stopped (from its event, or from DescribeTasks in the sweep).
    async fn finish_stopped(
        &self,
        record: JobRecord,
        stop: TaskStop,
        task: &TaskRef,
    ) -> Result<EventOutcome, LifecycleError> {
        let id = record.job.id.clone();
        if record.job.state.is_terminal() {
            // A duplicate STOPPED: harmless, but make sure the lock was released.
            self.release_and_next(&record).await?;
            return Ok(EventOutcome::Ignored("already finished"));
        }
        let mut from = record.job.state;
        if from == JobState::Queued {
            return Ok(EventOutcome::Ignored("already requeued"));
        }
        if from == JobState::Dispatching {
            // The task stopped before the dispatcher recorded it: record it first.
            match self
                .adopt(
                    &id,
                    task,
                    &format!("task {task} adopted on its stop"),
                    false,
                )
                .await
            {
                Ok(_) => from = JobState::Running,
                Err(StoreError::StateConflict {
                    actual: JobState::Running,
                    ..
                }) => from = JobState::Running,
                Err(StoreError::StateConflict { .. }) => {
                    return Ok(EventOutcome::Ignored("already moved on"))
                }
                Err(e) => return Err(e.into()),
            }
        }
        let mut outcome = task_outcome(record.job.request.operation, &stop);
        if let Some(by) = &record.cancel_requested_by {
            if outcome.state != JobState::Succeeded {
                outcome = sortie_core::Outcome {
                    state: JobState::Canceled,
                    reason: format!("canceled by {by}"),
                };
            }
        } else if record.timeout_requested_at.is_some() && outcome.state == JobState::Failed {
            let limit = record
                .job
                .runner_spec
                .as_ref()
                .map(|s| s.runner_configuration.timeout_seconds())
                .unwrap_or_default();
            outcome = sortie_core::Outcome {
                state: JobState::TimedOut,
                reason: format!("timed out after {limit}s"),
            };
        }
        let finished = match self
            .jobs
            .store
            .transition_job(
                &id,
                from,
                outcome.state,
                Utc::now(),
                &outcome.reason,
                JobUpdate::default(),
            )
            .await
        {
            Ok(r) => r,
            Err(StoreError::StateConflict { .. }) => {
                return Ok(EventOutcome::Ignored("already moved on"))
            }
            Err(e) => return Err(e.into()),
        };
        if outcome.state == JobState::Queued {
            // A plan interrupted on Spot: it keeps the environment's lock and runs again.
            if let Err(e) = self.jobs.queue.send(&id, 0).await {
                warn!(error = %e, "requeue send failed; the sweeper will re-send");
            }
        } else {
            self.complete(&finished).await?;
        }
        Ok(EventOutcome::Moved(outcome.state))
    }

    /// One bounded, idempotent sweep pass. It never stops at an error: a list that cannot be
    /// read, or a job whose repair fails, is logged and counted in `errors`, and the pass goes
    /// on; an unreadable job item is failed and its environment released (`unreadable`).
    pub async fn sweep(&self, now: DateTime<Utc>) -> Result<SweepReport, LifecycleError> {
        let mut report = SweepReport::default();
        match self
            .jobs
            .store
            .pending_sends(now - self.settings.resend_after, self.settings.batch)
            .await
        {
            Ok(listed) => {
                for u in &listed.unreadable {
                    self.fail_unreadable(u, now, &mut report).await;
                }
                for job in listed {
                    match self.jobs.queue.send(&job.id, 0).await {
                        Ok(()) => {
                            info!(job_id = %job.id, "re-sent a lost send");
                            report.resent += 1;
                        }
                        Err(e) => {
                            warn!(job_id = %job.id, error = %e, "re-send failed");
                            report.errors += 1;
                        }
                    }
                }
            }
            Err(e) => {
                warn!(error = %e, "pending sends could not be listed; next pass tries again");
                report.errors += 1;
            }
        }
        match self.jobs.store.active_jobs(self.settings.batch).await {
            Ok(listed) => {
                for u in &listed.unreadable {
                    self.fail_unreadable(u, now, &mut report).await;
                }
                for record in listed {
                    let span = tracing::info_span!("job", job_id = %record.job.id);
                    if let Err(e) = self
                        .sweep_one(record, now, &mut report)
                        .instrument(span)
                        .await
                    {
                        warn!(error = %e, "sweep of a job failed; next pass tries again");
                        report.errors += 1;
                    }
                }
            }
            Err(e) => {
                warn!(error = %e, "active jobs could not be listed; next pass tries again");
                report.errors += 1;
            }
        }
        Ok(report)
    }

    /// Fails a job whose item cannot be decoded, stops its task if it can still be found, and
    /// releases its environment, so that the environment is never held by a job that cannot
    /// progress. Errors are logged and counted; the pass goes on.
    async fn fail_unreadable(&self, u: &Unreadable, now: DateTime<Utc>, report: &mut SweepReport) {
        let span = tracing::info_span!("job", job_id = %u.job_id);
        async {
            let mut problem = u.message.clone();
            if problem.len() > 300 {
                let mut cut = 300;
                while !problem.is_char_boundary(cut) {
                    cut -= 1;
                }
                problem.truncate(cut);
                problem.push('…');
            }
            let reason = format!("sortie: the job's stored item is unreadable ({problem}); failed by the sweeper");
            warn!(key = %u.key, error = %u.message, "unreadable job item: failing it and releasing its environment");
            let record = match self.jobs.store.fail_unreadable_job(u, now, &reason).await {
                Ok(r) => r,
                Err(e) => {
                    warn!(error = %e, "could not fail the unreadable job; next pass tries again");
                    report.errors += 1;
                    return;
                }
            };
            // A launched job's task must not go on writing state once the lock is released.
            if let Some(task) = record.as_ref().and_then(|r| r.task.clone()) {
                let job = &record.as_ref().expect("just matched").job;
                if let Err(e) = self.launcher.stop(job, &task, &reason).await {
                    warn!(task = %task, error = %e, "could not stop the unreadable job's task");
                }
            }
            let env = record
                .as_ref()
                .map(|r| r.job.environment.clone())
                .or_else(|| u.environment.clone());
            match env {
                Some(env) => match self.jobs.release_env_and_next(&env, &u.job_id).await {
                    Ok(()) => report.unreadable += 1,
                    Err(e) => {
                        warn!(error = %e, "could not release the unreadable job's environment");
                        report.errors += 1;
                    }
                },
                None => {
                    warn!("the unreadable job names no readable environment; it was failed and left");
                    report.unreadable += 1;
                }
            }
        }
        .instrument(span)
        .await
    }

    async fn sweep_one(
        &self,
        record: JobRecord,
        now: DateTime<Utc>,
        report: &mut SweepReport,
    ) -> Result<(), LifecycleError> {
        let id = record.job.id.clone();
        match record.job.state {
            JobState::Dispatching => {
                if now - when_entered(&record, JobState::Dispatching) < self.settings.dispatch_lease
                {
                    return Ok(());
                }
                match self.launcher.find(&record.job).await? {
                    Some(task) => {
                        if self
                            .adopt(
                                &id,
                                &task,
                                &format!("adopted orphan task {task}, found by startedBy"),
                                false,
                            )
                            .await
                            .is_ok()
                        {
                            info!(task = %task, "adopted an orphaned task");
                            report.adopted += 1;
                        }
                    }
                    None if record.cancel_requested_by.is_some() => {
                        let by = record.cancel_requested_by.clone().unwrap_or_default();
                        if let Ok(done) = self
                            .jobs
                            .store
                            .transition_job(
                                &id,
                                JobState::Dispatching,
                                JobState::Canceled,
                                Utc::now(),
                                &format!("canceled by {by}"),
                                JobUpdate::default(),
                            )
                            .await
                        {
                            self.complete(&done).await?;
                        }
                    }
                    None => {
                        if self
                            .jobs
                            .store
                            .transition_job(
                                &id,
                                JobState::Dispatching,
                                JobState::Queued,
                                Utc::now(),
                                "no task after the dispatch lease; launching again",
                                JobUpdate::default(),
                            )
                            .await
                            .is_ok()
                        {
                            self.jobs
                                .queue
                                .send(&id, 0)
                                .await
                                .map_err(LifecycleError::Store)?;
                            report.requeued += 1;
                        }
                    }
                }
            }
            JobState::Running => {
                let Some(task) = record.task.clone() else {
                    return Ok(());
                };
                let limit = record
                    .job
                    .runner_spec
                    .as_ref()
                    .map(|s| s.runner_configuration.timeout_seconds())
                    .unwrap_or(sortie_core::runner::DEFAULT_TIMEOUT_SECONDS);
                let started = when_entered(&record, JobState::Running);
                if record.timeout_requested_at.is_none()
                    && now - started > Duration::seconds(i64::from(limit))
                {
                    self.jobs
                        .store
                        .mark_job(
                            &id,
                            Utc::now(),
                            JobUpdate {
                                timeout_requested_at: Some(now),
                                ..Default::default()
                            },
                        )
                        .await?;
                    self.launcher
                        .stop(&record.job, &task, &format!("{TIMED_OUT_AFTER}{limit}s"))
                        .await?;
                    info!(limit, "stopped a task past its timeout");
                    report.timed_out += 1;
                    return Ok(());
                }
                if now - record.updated_at < self.settings.silence {
                    return Ok(());
                }
                match self.launcher.describe(&record.job, &task).await? {
                    TaskStatus::Stopped(stop) => {
                        if let EventOutcome::Moved(_) =
                            self.finish_stopped(record, stop, &task).await?
                        {
                            report.resolved += 1;
                        }
                    }
                    TaskStatus::Missing => {
                        if let Ok(done) = self
                            .jobs
                            .store
                            .transition_job(
                                &id,
                                JobState::Running,
                                JobState::Failed,
                                Utc::now(),
                                &format!("task {task} vanished: ECS no longer knows it"),
                                JobUpdate::default(),
                            )
                            .await
                        {
                            self.complete(&done).await?;
                            report.resolved += 1;
                        }
                    }
                    TaskStatus::Running => {
                        // Heard from: the task is alive. Reset the silence clock.
                        let _ = self
                            .jobs
                            .store
                            .mark_job(&id, Utc::now(), JobUpdate::default())
                            .await;
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }
}
