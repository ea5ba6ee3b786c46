//! The engine: dispatch, completion, cancel and the sweep.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use sortie_core::decision::{decide, JobFacts, Seen, Step, Timing};
use sortie_core::outcome::CANCELED_BY;
use sortie_core::{JobId, JobState, RunnerConfiguration, TaskRef, TaskStop};
use sortie_launch::{job_id_of, LaunchError, LaunchSpec, Launcher, TaskStatus};
use sortie_store::{JobMessage, JobRecord, JobUpdate, StoreError, Unreadable};
use tracing::{info, warn, Instrument};

use crate::{EcsTaskStateChange, JobService, LifecycleError};

mod events;
mod sweep;

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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepSettings {
    /// A lock holder still `queued` this long after it was queued is re-sent.
    pub resend_after: Duration,
    /// A job `dispatching` this long without a recorded task is looked up by `startedBy`.
    pub dispatch_lease: Duration,
    /// A `running` job not heard from this long is looked up with DescribeTasks.
    pub silence: Duration,
    /// At most this many jobs are looked at per pass, per kind; for the active jobs, the
    /// size of each page, read to the end of the list.
    pub batch: u32,
    /// The time one pass spends on the active jobs. Beyond it the pass looks at no more of
    /// them: it counts what it left ([`SweepReport::active_left`]), and the next pass of the
    /// same process starts where it stopped ([`SweepResume`]).
    pub active_budget: Duration,
    /// A job claimed by an agent whose heartbeat stops this long is ended ("agent lost").
    pub agent_silence: Duration,
    /// A stop (cancel, timeout) delivered to an agent and not confirmed within this ends
    /// the job as the stop says, without the agent.
    pub agent_stop_grace: Duration,
}

impl Default for SweepSettings {
    fn default() -> Self {
        Self {
            resend_after: Duration::seconds(60),
            dispatch_lease: Duration::seconds(120),
            silence: Duration::minutes(10),
            batch: 100,
            // The sweeper ticks every minute and may run for 120 s.
            active_budget: Duration::seconds(40),
            agent_silence: Duration::seconds(sortie_core::agent::DEFAULT_AGENT_SILENCE_SECONDS),
            agent_stop_grace: Duration::seconds(sortie_core::agent::DEFAULT_STOP_GRACE_SECONDS),
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
    /// Environments found still locked by an ended job (a crash between its end and its
    /// release), released and handed to their next job.
    pub released: usize,
    /// Job items that could not be decoded: failed with a clear reason, their task stopped
    /// when it could be found, and their environment released.
    pub unreadable: usize,
    /// Reviewed jobs discarded because nobody decided before their approval timeout.
    pub approvals_timed_out: usize,
    /// Drift checks submitted by their environment's schedule.
    pub drift_checks: usize,
    /// Drift checks the schedule fired but skipped (the environment busy, or no apply yet).
    pub drift_skipped: usize,
    /// Active jobs the pass did not look at because its time budget
    /// ([`SweepSettings::active_budget`]) was spent; the next pass starts with them.
    pub active_left: usize,
}

/// Where a sweep pass that spent its budget stopped in the active jobs: the next pass given
/// the same `SweepResume` starts there and goes to the end of the list; the one after starts
/// again from the job longest active. Kept in memory by the sweeper's process (a new
/// process starts from the beginning).
#[derive(Debug, Default)]
pub struct SweepResume(std::sync::Mutex<Option<String>>);

impl SweepResume {
    /// Takes the cursor to start from (`None`: from the beginning), leaving none.
    fn take(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Records where the next pass starts.
    fn set(&self, cursor: Option<String>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = cursor;
    }

    /// True when the next pass resumes an interrupted one.
    pub fn is_pending(&self) -> bool {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).is_some()
    }
}

/// Backoff for a retried launch: 2, 4, 8, 16, 32, then 60 seconds (the waiting reason
/// says when the next try is from the same function).
pub fn backoff_seconds(receive_count: u32) -> i32 {
    sortie_core::waiting::launch_backoff_seconds(receive_count)
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

/// A new job token: 32 random bytes, hex (only its hash is stored).
pub(crate) fn new_token() -> String {
    sortie_store::random_hex(32)
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

/// What the decision reads of a job record.
pub(crate) fn facts(record: &JobRecord) -> JobFacts {
    JobFacts {
        state: record.job.state,
        // What this task does: a reviewed job's plan phase is a plan (it writes no state, so
        // a Spot interruption requeues it like any plan), whatever the job's operation.
        operation: if record.job.phase() == Some(sortie_core::JobPhase::Plan) {
            sortie_core::Operation::Plan
        } else {
            record.job.request.operation
        },
        entered: when_entered(record, record.job.state),
        last_heard: record.updated_at,
        task: record.task.clone(),
        timeout_seconds: record
            .job
            .runner_spec
            .as_ref()
            .map(|s| s.runner_configuration.timeout_seconds())
            .unwrap_or(sortie_core::runner::DEFAULT_TIMEOUT_SECONDS),
        cancel_requested_by: record.cancel_requested_by.clone(),
        timeout_requested: record.timeout_requested_at.is_some(),
        spot_requeues: record.spot_requeues,
        polled: matches!(
            record
                .job
                .runner_spec
                .as_ref()
                .map(|s| &s.runner_configuration),
            Some(RunnerConfiguration::Eks(_) | RunnerConfiguration::Agent(_))
        ),
        offered: record.offered_to.is_some(),
    }
}

/// The job's `agent` runner, if its runner is one: its jobs are offered, not launched.
pub(crate) fn agent_runner(job: &sortie_core::Job) -> Option<&sortie_core::runner::AgentRunner> {
    match job.runner_spec.as_ref().map(|s| &s.runner_configuration) {
        Some(RunnerConfiguration::Agent(c)) => Some(c),
        _ => None,
    }
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
        self.dispatch_at(body, receive_count, Utc::now()).await
    }

    /// [`Engine::dispatch`] at `now`: the claim, a refusal's requeue and its backoff are
    /// recorded at this time (tests drive a retried launch with a fake clock).
    pub async fn dispatch_at(
        &self,
        body: &str,
        receive_count: u32,
        now: DateTime<Utc>,
    ) -> RecordOutcome {
        let message: JobMessage = match serde_json::from_str(body) {
            Ok(m) => m,
            Err(e) => return RecordOutcome::Poison(format!("unparsable message: {e}")),
        };
        let span = tracing::info_span!("job", job_id = %message.job_id);
        async {
            match &message.cancel_by {
                Some(by) => self.cancel_launched(&message.job_id, by).await,
                None => self.launch(&message.job_id, receive_count, now).await,
            }
        }
        .instrument(span)
        .await
    }

    async fn launch(&self, id: &JobId, receive_count: u32, now: DateTime<Utc>) -> RecordOutcome {
        let retry = |reason: String| RecordOutcome::Retry {
            delay_seconds: backoff_seconds(receive_count),
            reason,
        };
        // Claim: the one conditional write that makes a duplicate delivery, or a racing
        // dispatcher, a no-op. It starts a new launch attempt and records the job token's
        // hash before anything is launched, so the runner's first call is always accepted.
        let token = new_token();
        let claimed = match self
            .jobs
            .store
            .transition_job(
                id,
                JobState::Queued,
                JobState::Dispatching,
                now,
                "claimed by dispatch",
                JobUpdate {
                    token_hash: Some(sortie_store::sha256_hex(token.as_bytes())),
                    next_attempt: true,
                    ..Default::default()
                },
            )
            .await
        {
            Ok(r) => r,
            Err(StoreError::StateConflict { actual, .. }) => {
                info!(state = %actual, "already claimed; duplicate delivery");
                if actual.is_terminal() {
                    return match self.ensure_released(id).await {
                        Ok(()) => RecordOutcome::Done,
                        Err(e) => retry(e.to_string()),
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
            Err(e) => return retry(e.to_string()),
        };
        if let Some(agent) = agent_runner(&claimed.job) {
            return self
                .offer(&claimed, &agent.pool.clone(), receive_count)
                .await;
        }
        let launched = self
            .launcher
            .launch(&LaunchSpec {
                job: &claimed.job,
                token: &token,
                api_url: &self.api_url,
                attempt: claimed.attempt.max(1),
            })
            .await;
        let seen = match launched {
            Ok(task) => {
                self.record_launch(id, &task).await;
                return RecordOutcome::Done;
            }
            Err(LaunchError::Retryable(reason)) => {
                warn!(%reason, attempt = claimed.attempt, "launch refused; retryable");
                return self.retry_launch(&claimed, &reason, now).await;
            }
            // Refused for good: the job fails once, saying after how many attempts.
            Err(LaunchError::Fatal(reason)) => {
                warn!(%reason, attempt = claimed.attempt, "launch refused for good");
                let step = Step::End(sortie_core::Outcome {
                    state: JobState::Failed,
                    reason: sortie_core::retry::refused_for_good(claimed.attempt, &reason),
                });
                return match self.carry_out(&claimed, step, None).await {
                    Ok(_) => RecordOutcome::Done,
                    Err(e) => retry(e.to_string()),
                };
            }
            Err(LaunchError::Uncertain(reason)) => Seen::LaunchUncertain(reason),
        };
        warn!(
            ?seen,
            attempt = claimed.attempt,
            "launch did not start a task"
        );
        // An uncertain launch waits for the lookup by `startedBy` after the lease.
        let step = decide(&facts(&claimed), &seen, now, self.timing());
        match self.carry_out(&claimed, step, None).await {
            Ok(_) => RecordOutcome::Done,
            Err(e) => retry(e.to_string()),
        }
    }

    /// The one retry path of a retryable launch refusal (issue 25 item 1): back to `queued`
    /// with its next launch due after the backoff
    /// ([`sortie_core::retry::after_refusal`]), carried by exactly one new message sent with
    /// that delay (the current one is deleted); or, past the cap on attempts and time, the
    /// job fails through the one end path, which releases its environment.
    async fn retry_launch(
        &self,
        claimed: &JobRecord,
        reason: &str,
        now: DateTime<Utc>,
    ) -> RecordOutcome {
        use sortie_core::retry::{after_refusal, LaunchRetry, LAUNCH_RETRY_PREFIX};
        let id = &claimed.job.id;
        let backoff = |e: String| RecordOutcome::Retry {
            delay_seconds: backoff_seconds(claimed.attempt),
            reason: e,
        };
        let (delay, at) = match after_refusal(&claimed.job, claimed.attempt, reason, now) {
            LaunchRetry::Retry { delay_seconds, at } => (delay_seconds, at),
            LaunchRetry::GiveUp(reason) => {
                let step = Step::End(sortie_core::Outcome {
                    state: JobState::Failed,
                    reason,
                });
                return match self.carry_out(claimed, step, None).await {
                    Ok(_) => RecordOutcome::Done,
                    Err(e) => backoff(e.to_string()),
                };
            }
        };
        let update = JobUpdate {
            clear_task: true,
            retry_at: Some(at),
            ..Default::default()
        };
        match self
            .jobs
            .store
            .transition_job(
                id,
                JobState::Dispatching,
                JobState::Queued,
                now,
                &format!("{LAUNCH_RETRY_PREFIX}: {reason}"),
                update,
            )
            .await
        {
            Ok(_) => {}
            // Canceled (or moved on) meanwhile: nothing to retry.
            Err(StoreError::StateConflict { .. }) => return RecordOutcome::Done,
            Err(e) => return backoff(e.to_string()),
        }
        let delay = i32::try_from(delay).unwrap_or(i32::MAX);
        info!(
            delay_seconds = delay,
            attempt = claimed.attempt,
            "requeued; launch retried after the backoff"
        );
        match self.jobs.queue.send(id, delay).await {
            Ok(()) => RecordOutcome::Done,
            // Not sent: the current message carries the next attempt instead, after the same
            // delay (and the sweeper re-sends it should that be lost too).
            Err(e) => RecordOutcome::Retry {
                delay_seconds: delay,
                reason: format!("requeue send failed: {e}"),
            },
        }
    }

    /// Offers an `agent` runner's claimed job to its agent pool, where an agent claims it
    /// ([`JobService::claim`]). A pool that does not exist (any more) fails the job, saying so.
    async fn offer(&self, claimed: &JobRecord, pool: &str, receive_count: u32) -> RecordOutcome {
        let retry = |reason: String| RecordOutcome::Retry {
            delay_seconds: backoff_seconds(receive_count),
            reason,
        };
        let id = &claimed.job.id;
        match self.jobs.store.get_pool(pool).await {
            Ok(found) if &found.item.pool.group == claimed.job.runner_id.group() => {}
            Ok(_) | Err(StoreError::NotFound { .. }) => {
                let step = Step::End(sortie_core::Outcome {
                    state: JobState::Failed,
                    reason: format!(
                        "launch failed: \"agent pool {pool} does not exist in the runner's group\""
                    ),
                });
                return match self.carry_out(claimed, step, None).await {
                    Ok(_) => RecordOutcome::Done,
                    Err(e) => retry(e.to_string()),
                };
            }
            Err(e) => return retry(e.to_string()),
        }
        match self
            .jobs
            .store
            .mark_job(
                id,
                Utc::now(),
                JobUpdate {
                    offer_to: Some(pool.to_string()),
                    ..Default::default()
                },
            )
            .await
        {
            Ok(_) => {
                info!(%pool, attempt = claimed.attempt, "offered to the agent pool");
                RecordOutcome::Done
            }
            // Canceled or moved on meanwhile: nothing to offer.
            Err(StoreError::StateConflict { .. }) => RecordOutcome::Done,
            // Not offered: the sweeper finds it dispatching without a task after the lease and
            // requeues it (a new attempt, a new offer).
            Err(e) => {
                warn!(error = %e, "offer not recorded; the sweeper will requeue the job");
                RecordOutcome::Done
            }
        }
    }

    /// Asks the platform to stop a job's task; for a job an agent holds, orders the stop on
    /// the job, and the agent's next heartbeat answer delivers it.
    pub(super) async fn stop_task(
        &self,
        record: &JobRecord,
        task: &TaskRef,
        reason: &str,
    ) -> Result<(), LaunchError> {
        if record.agent.is_none() {
            return self.launcher.stop(&record.job, task, reason).await;
        }
        let update = JobUpdate {
            agent_stop: Some(sortie_core::agent::AgentStop {
                reason: reason.to_string(),
                at: Utc::now(),
            }),
            ..Default::default()
        };
        match self
            .jobs
            .store
            .mark_job(&record.job.id, Utc::now(), update)
            .await
        {
            Ok(_) | Err(StoreError::StateConflict { .. }) => Ok(()),
            Err(e) => Err(LaunchError::Retryable(e.to_string())),
        }
    }

    /// Records a launched task (`dispatching → running`), and stops it at once if a cancel
    /// arrived during the launch.
    async fn record_launch(&self, id: &JobId, task: &TaskRef) {
        match self
            .adopt(id, task, &format!("launched task {task}"), false)
            .await
        {
            Ok(running) => {
                info!(task = %task, attempt = running.attempt, "launched");
                if let Some(by) = &running.cancel_requested_by {
                    if let Err(e) = self
                        .launcher
                        .stop(&running.job, task, &format!("{CANCELED_BY}{by}"))
                        .await
                    {
                        warn!(error = %e, "cancel requested during launch; stop failed, the sweeper retries");
                    }
                }
            }
            // The task's own event was handled first and already adopted it (the sweeper
            // retries a stop a cancel asked for meanwhile).
            Err(StoreError::StateConflict {
                actual: JobState::Running,
                ..
            }) => {
                info!(task = %task, "launched; its task's event recorded it first")
            }
            // The task runs but is not recorded: the sweeper adopts it by startedBy.
            // Never launch again: a retry of this message finds the job dispatching.
            Err(e) => {
                warn!(task = %task, error = %e, "launched but not recorded; the sweeper will adopt the task")
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
        let Some(task) = &marked.task else {
            // Offered to an agent pool and not claimed: it ends now (a claim racing this
            // finds the cancel and refuses, or wins and its heartbeat delivers the cancel).
            if marked.offered_to.is_some() {
                let step = decide(&facts(&marked), &Seen::Nothing, Utc::now(), self.timing());
                return match self.carry_out(&marked, step, None).await {
                    Ok(_) => RecordOutcome::Done,
                    Err(e) => RecordOutcome::Retry {
                        delay_seconds: 2,
                        reason: e.to_string(),
                    },
                };
            }
            // Still launching: the dispatcher stops the task once it records it.
            return RecordOutcome::Done;
        };
        match self
            .stop_task(&marked, task, &format!("{CANCELED_BY}{by}"))
            .await
        {
            Ok(()) => RecordOutcome::Done,
            Err(LaunchError::Fatal(reason)) => {
                warn!(%reason, "stop for cancel refused for good");
                let step = decide(
                    &facts(&marked),
                    &Seen::StopRefused(reason),
                    Utc::now(),
                    self.timing(),
                );
                match self.carry_out(&marked, step, None).await {
                    Ok(_) => RecordOutcome::Done,
                    Err(e) => RecordOutcome::Retry {
                        delay_seconds: 2,
                        reason: e.to_string(),
                    },
                }
            }
            // Until the task is seen stopped, every sweep stops it again.
            Err(e) => RecordOutcome::Retry {
                delay_seconds: 2,
                reason: e.to_string(),
            },
        }
    }

    /// The decision's clocks, from the sweep settings.
    pub(super) fn timing(&self) -> Timing {
        Timing {
            dispatch_lease: self.settings.dispatch_lease,
            silence: self.settings.silence,
        }
    }

    /// Carries out one decided step for `record`. `task` is the task a stop was seen for
    /// (adopted first when the job is still `dispatching`). Returns the state the job moved
    /// to, if it moved; a job that moved on meanwhile is left alone.
    pub(super) async fn carry_out(
        &self,
        record: &JobRecord,
        step: Step,
        task: Option<&TaskRef>,
    ) -> Result<Option<JobState>, LifecycleError> {
        let id = &record.job.id;
        let mut from = record.job.state;
        match step {
            Step::Wait | Step::Find | Step::Describe => Ok(None),
            Step::Adopt(found) => match self
                .adopt(
                    id,
                    &found,
                    &format!("adopted orphan task {found}, found by startedBy"),
                    false,
                )
                .await
            {
                Ok(_) => {
                    info!(task = %found, "adopted an orphaned task");
                    Ok(Some(JobState::Running))
                }
                Err(StoreError::StateConflict { .. }) => Ok(None),
                Err(e) => Err(e.into()),
            },
            Step::Heard => {
                self.mark_unless_moved_on(id, JobUpdate::default()).await?;
                Ok(None)
            }
            Step::Stop { reason, timeout } => {
                let Some(task) = record.task.as_ref() else {
                    return Ok(None);
                };
                match self.stop_task(record, task, &reason).await {
                    Ok(()) => {
                        info!(task = %task, %reason, "asked the platform to stop the task");
                        if timeout && record.timeout_requested_at.is_none() {
                            // Recorded only once the platform took the stop: a refused stop
                            // is tried again on the next sweep.
                            self.mark_unless_moved_on(
                                id,
                                JobUpdate {
                                    timeout_requested_at: Some(Utc::now()),
                                    ..Default::default()
                                },
                            )
                            .await?;
                        }
                        Ok(None)
                    }
                    Err(LaunchError::Fatal(error)) => {
                        warn!(task = %task, %error, "stop refused for good");
                        let step = decide(
                            &facts(record),
                            &Seen::StopRefused(error),
                            Utc::now(),
                            self.timing(),
                        );
                        Box::pin(self.carry_out(record, step, None)).await
                    }
                    Err(e) => Err(e.into()),
                }
            }
            Step::Requeue { reason, spot } => {
                let update = JobUpdate {
                    clear_task: true,
                    spot_requeue: spot,
                    ..Default::default()
                };
                match self
                    .jobs
                    .store
                    .transition_job(id, from, JobState::Queued, Utc::now(), &reason, update)
                    .await
                {
                    Ok(_) => {}
                    Err(StoreError::StateConflict { .. }) => return Ok(None),
                    Err(e) => return Err(e.into()),
                }
                info!(%reason, spot, "requeued for a new launch attempt");
                // It keeps the environment's lock. A failed send is re-sent by the sweeper.
                if let Err(e) = self.jobs.queue.send(id, 0).await {
                    warn!(error = %e, "requeue send failed; the sweeper will re-send");
                }
                Ok(Some(JobState::Queued))
            }
            Step::End(outcome) => {
                if from == JobState::Dispatching {
                    if let Some(task) = task {
                        // The task stopped before the dispatcher recorded it: record it first.
                        match self
                            .adopt(id, task, &format!("task {task} adopted on its stop"), false)
                            .await
                        {
                            Ok(_)
                            | Err(StoreError::StateConflict {
                                actual: JobState::Running,
                                ..
                            }) => from = JobState::Running,
                            Err(StoreError::StateConflict { .. }) => return Ok(None),
                            Err(e) => return Err(e.into()),
                        }
                    }
                }
                // The one end path: a reviewed job's plan phase awaits approval instead.
                let finished = match self.jobs.finish(record, from, &outcome).await {
                    Ok(r) => r,
                    Err(StoreError::StateConflict { .. }) => return Ok(None),
                    Err(e) => return Err(e.into()),
                };
                info!(state = %finished.job.state, reason = %outcome.reason, "job ended");
                Ok(Some(finished.job.state))
            }
        }
    }

    /// Records the task of a job still `dispatching` (`dispatching → running`): a task seen
    /// running, stopped, or found by `startedBy` before the dispatcher recorded it.
    pub(super) async fn adopt(
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

    /// Records `update` on a launched job; a job that moved on meanwhile is left alone.
    pub(super) async fn mark_unless_moved_on(
        &self,
        id: &JobId,
        update: JobUpdate,
    ) -> Result<(), StoreError> {
        match self.jobs.store.mark_job(id, Utc::now(), update).await {
            Ok(_) | Err(StoreError::StateConflict { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Releases the environment's lock if this (terminal) job still holds it, sending the next job.
    pub(super) async fn ensure_released(&self, id: &JobId) -> Result<(), LifecycleError> {
        let record = self.jobs.store.get_job(id).await?;
        self.release_and_next(&record).await
    }

    pub(super) async fn release_and_next(&self, record: &JobRecord) -> Result<(), LifecycleError> {
        Ok(self.jobs.release_and_next(record).await?)
    }
}
