//! The end of a job: one verb, [`JobService::end`], whatever saw the end.
//!
//! A job ends when its task's event or a describe says the task stopped (the engine), when
//! the runner or an agent reports the exit, when the sweeper decides it (a lost task, a
//! refused stop), when a launch is refused for good, or when a cancel or a discard moves it
//! to a terminal state itself. Each of them calls [`JobService::end`], saying its [`EndCause`]; the
//! end then releases the environment's lock (handing it to the next queued job), deletes
//! the job's secrets, publishes `sortie.job.ended` and records what the end means for
//! the environment (its latest apply, a drift check's verdict). Answering a drift is the
//! next step, not part of the end: [`JobService::remediate_drift`], which the caller runs
//! once the job ended.

use chrono::Utc;
use serde_json::json;
use sortie_core::drift::{self, DriftStatus, DriftVerdict};
use sortie_core::end_retry::{cut, give_up_reason, EndTries, INTERRUPTED, QUOTED_ERROR_MAX_BYTES};
use sortie_core::job::JobPhase;
use sortie_core::oversight::{oversee, Oversight, Seen, Timing};
use sortie_core::protocol::pilot::PilotExit;
use sortie_core::{EnvPath, JobId, JobState, Operation, Outcome, TaskStop};
use sortie_store::{JobRecord, JobUpdate, LastApply, PhaseRecord, Released, StoreError};
use tracing::{info, warn};

use crate::{JobService, JOB_AWAITING_APPROVAL};

/// What ended a job: what the caller knows of its end.
#[derive(Debug, Clone, PartialEq)]
pub enum EndCause {
    /// Its task exited with this stop, as the pilot's own final callback or the job's agent
    /// reported: decided as a stopped task ([`oversee`]), so a cancel or timeout Sortie asked
    /// for names the end, and a Spot-interrupted (or handed-back) plan is requeued instead.
    /// Only a `running` job ends this way.
    Exited(TaskStop),
    /// The engine's decision named this outcome for the job, moving it from `from` (a task
    /// event or a describe, the sweeper, a launch refused for good, a cancel of an offered
    /// job). A reviewed job whose plan phase succeeded moves to `awaiting_approval` instead.
    Decided {
        /// The state the job is moved from, with one conditional write.
        from: JobState,
        /// Its end.
        outcome: Outcome,
    },
    /// The caller already moved the job to its terminal state (a cancel before launch, a
    /// discard): only the end's consequences are left.
    Reached,
}

/// What [`JobService::end`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum EndReport {
    /// The job ended now (or, for [`EndCause::Exited`] and [`EndCause::Decided`], was requeued or
    /// awaits approval, as its record says).
    Ended(JobRecord),
    /// The job had already ended (another path saw its end first): nothing changed.
    AlreadyEnded(JobRecord),
    /// The job is not `running`, or moved on meanwhile: its launch is not recorded yet, or
    /// it was requeued.
    NotRunning(JobState),
}

impl EndReport {
    /// The record of a job that ended (or moved) now.
    pub fn ended(&self) -> Option<&JobRecord> {
        match self {
            EndReport::Ended(r) => Some(r),
            _ => None,
        }
    }
}

impl JobService {
    /// Ends a job, the one way: moves it as `how` says (unless the caller already did), then
    /// releases its environment and sends the next queued job, deletes its secrets,
    /// publishes `sortie.job.ended` (best effort: the outcome is already durable) and
    /// records what the end means for its environment. A job that moved on meanwhile is
    /// left alone ([`EndReport::AlreadyEnded`], [`EndReport::NotRunning`]). Answering a
    /// drift check's drift is the caller's next step ([`JobService::remediate_drift`]).
    ///
    /// Every try is bounded ([`sortie_core::end_retry`]): a try that fails (other than by a
    /// move meanwhile) is counted on the job with its error, and once the tries or their age
    /// pass the bound, the job fails with a reason quoting the last error, which releases
    /// its environment and sends the next queued job.
    pub async fn end(&self, record: &JobRecord, how: EndCause) -> Result<EndReport, StoreError> {
        self.end_counted(record, how, false).await
    }

    /// [`JobService::end`] for the sweeper: the try is counted on the job before it starts
    /// (with [`INTERRUPTED`] as its error), so that a try that kills the function (out of
    /// memory or time) still counts, and the job is given up after the bound instead of
    /// killing every pass. The count also moves the job's last-heard time, so the sweeper
    /// tries it again only after its silence (a backoff).
    pub async fn end_counted_first(
        &self,
        record: &JobRecord,
        how: EndCause,
    ) -> Result<EndReport, StoreError> {
        self.end_counted(record, how, true).await
    }

    async fn end_counted(
        &self,
        record: &JobRecord,
        how: EndCause,
        first: bool,
    ) -> Result<EndReport, StoreError> {
        let from = match &how {
            EndCause::Reached => None,
            EndCause::Decided { from, .. } => Some(*from),
            EndCause::Exited(_) => Some(JobState::Running),
        };
        // Only a launched job's end is tried again (and counted on it).
        let Some(from) = from.filter(|_| record.job.state.is_active()) else {
            return self.end_once(record, how).await;
        };
        let entered = crate::engine::when_entered(record, record.job.state);
        let now = Utc::now();
        let tries = record.end_tries().current(entered);
        if tries.exhausted(now) {
            return self.give_up_end(record, from, &tries, now).await;
        }
        let mut record = std::borrow::Cow::Borrowed(record);
        if first {
            let update = JobUpdate {
                end_try: true,
                end_error: Some(INTERRUPTED.into()),
                ..Default::default()
            };
            match self.store.mark_job(&record.job.id, now, update).await {
                Ok(marked) => record = std::borrow::Cow::Owned(marked),
                Err(StoreError::StateConflict { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        let error = match self.end_once(&record, how).await {
            Err(e) if !matches!(e, StoreError::StateConflict { .. }) => e,
            other => return other,
        };
        let update = JobUpdate {
            end_try: !first,
            end_error: Some(cut(&error.to_string(), QUOTED_ERROR_MAX_BYTES)),
            ..Default::default()
        };
        warn!(job_id = %record.job.id, %error, "the job's end failed; it is tried again, within a bound");
        let marked = match self.store.mark_job(&record.job.id, now, update).await {
            Ok(marked) => marked,
            Err(e) => {
                warn!(error = %e, "the failed end could not be counted on the job");
                return Err(error);
            }
        };
        let tries = marked.end_tries().current(entered);
        if tries.exhausted(now) {
            return self.give_up_end(&marked, from, &tries, now).await;
        }
        Err(error)
    }

    /// Fails a job whose end was tried past the bound, quoting the last error; nothing of the
    /// end that failed (the policy gate) is run again. The environment is released.
    async fn give_up_end(
        &self,
        record: &JobRecord,
        from: JobState,
        tries: &EndTries,
        now: chrono::DateTime<Utc>,
    ) -> Result<EndReport, StoreError> {
        let reason = give_up_reason(tries, now);
        warn!(job_id = %record.job.id, %reason, "giving up the job's end: it fails");
        let failed = self
            .store
            .transition_job(
                &record.job.id,
                from,
                JobState::Failed,
                now,
                &reason,
                JobUpdate::default(),
            )
            .await;
        match failed {
            Ok(failed) => {
                self.ended(&failed).await?;
                Ok(EndReport::Ended(failed))
            }
            Err(StoreError::StateConflict { actual, .. }) if actual.is_terminal() => Ok(
                EndReport::AlreadyEnded(self.store.get_job(&record.job.id).await?),
            ),
            Err(StoreError::StateConflict { actual, .. }) => Ok(EndReport::NotRunning(actual)),
            Err(e) => Err(e),
        }
    }

    /// One try of [`JobService::end`].
    async fn end_once(&self, record: &JobRecord, how: EndCause) -> Result<EndReport, StoreError> {
        let moved = match how {
            EndCause::Reached => {
                self.ended(record).await?;
                return Ok(EndReport::Ended(record.clone()));
            }
            EndCause::Decided { from, outcome } => self.decided(record, from, &outcome).await,
            EndCause::Exited(stop) => {
                if record.job.state.is_terminal() {
                    return Ok(EndReport::AlreadyEnded(record.clone()));
                }
                if record.job.state != JobState::Running {
                    return Ok(EndReport::NotRunning(record.job.state));
                }
                self.exited(record, stop).await
            }
        };
        match moved {
            Ok(r) => Ok(EndReport::Ended(r)),
            Err(StoreError::StateConflict { actual, .. }) if actual.is_terminal() => Ok(
                EndReport::AlreadyEnded(self.store.get_job(&record.job.id).await?),
            ),
            Err(StoreError::StateConflict { actual, .. }) => Ok(EndReport::NotRunning(actual)),
            Err(e) => Err(e),
        }
    }

    /// The pilot's final callback: it is about to exit with `exit.exit_code`. The job ends
    /// as if its task had been seen stopped with that code ([`EndCause::Exited`]: a cancel or
    /// timeout Sortie asked for still names the end), and a drift check's drift is answered
    /// next ([`JobService::remediate_drift`]). Whichever comes first, this or the sweeper's
    /// poll of the platform, wins; the second changes nothing.
    pub async fn pilot_exited(
        &self,
        record: &JobRecord,
        exit: &PilotExit,
    ) -> Result<EndReport, StoreError> {
        let stop = TaskStop {
            stop_code: Some("EssentialContainerExited".into()),
            stopped_reason: Some("the runner reported its exit".into()),
            exit_code: Some(exit.exit_code),
            container_reason: exit.reason.clone(),
        };
        let report = self.end(record, EndCause::Exited(stop)).await?;
        if let Some(ended) = report.ended() {
            self.remediate_drift(ended).await;
        }
        Ok(report)
    }

    /// Decides a `running` job's exited task ([`EndCause::Exited`]): ends it, or requeues it.
    async fn exited(&self, record: &JobRecord, stop: TaskStop) -> Result<JobRecord, StoreError> {
        let timing = Timing {
            dispatch_lease: chrono::Duration::zero(),
            silence: chrono::Duration::zero(),
        };
        let step = oversee(
            &crate::engine::facts(record),
            &Seen::Stopped(stop),
            Utc::now(),
            timing,
        );
        match step {
            Oversight::End(outcome) => self.decided(record, JobState::Running, &outcome).await,
            Oversight::Requeue { reason, spot } => {
                let update = JobUpdate {
                    clear_task: true,
                    spot_requeue: spot,
                    ..Default::default()
                };
                let id = &record.job.id;
                let requeued = self
                    .store
                    .transition_job(
                        id,
                        JobState::Running,
                        JobState::Queued,
                        Utc::now(),
                        &reason,
                        update,
                    )
                    .await?;
                info!(job_id = %id, %reason, "requeued for a new launch attempt");
                self.send_or_leave_pending(&requeued.job).await;
                Ok(requeued)
            }
            other => {
                warn!(step = ?other, "a stopped task decided no end; left to the sweeper");
                Err(StoreError::StateConflict {
                    job_id: record.job.id.to_string(),
                    expected: JobState::Running,
                    actual: record.job.state,
                })
            }
        }
    }

    /// Moves a job from `from` to `outcome` ([`EndCause::Decided`]) with one conditional write and
    /// ends it; a reviewed job whose plan phase succeeded awaits approval instead.
    async fn decided(
        &self,
        record: &JobRecord,
        from: JobState,
        outcome: &Outcome,
    ) -> Result<JobRecord, StoreError> {
        let job = &record.job;
        if outcome.state == JobState::Succeeded {
            // The policy gate: a plan checked against the sets in force ([`crate::gate`]).
            if let Some(moved) = self.gate_plan_end(record, from, outcome).await? {
                return Ok(moved);
            }
        }
        if outcome.state == JobState::Succeeded
            && job.review.as_ref().map(|r| r.phase) == Some(JobPhase::Plan)
        {
            return self.hold_for_approval(record, from, None, None, true).await;
        }
        let ended = self
            .store
            .transition_job(
                &job.id,
                from,
                outcome.state,
                Utc::now(),
                &outcome.reason,
                JobUpdate::default(),
            )
            .await?;
        self.ended(&ended).await?;
        Ok(ended)
    }

    /// A reviewed job's plan phase succeeded: it moves to `awaiting_approval`, keeping its
    /// environment's lock and its plan phase (task, attempt, summary) on the record, until
    /// an approval, a discard or its deadline. The policy gate's `policy` result is
    /// recorded with it, and `held` (its messages) named in the reason; `announce`
    /// publishes `sortie.job.awaiting_approval` (not when the gate approves at once).
    pub(crate) async fn hold_for_approval(
        &self,
        record: &JobRecord,
        from: JobState,
        policy: Option<sortie_core::policy::PolicyResult>,
        held: Option<&[String]>,
        announce: bool,
    ) -> Result<JobRecord, StoreError> {
        let now = Utc::now();
        let job = &record.job;
        let Some(mut review) = job.review.clone() else {
            return Err(StoreError::StateConflict {
                job_id: job.id.to_string(),
                expected: from,
                actual: job.state,
            });
        };
        review.awaiting_since = Some(now);
        let deadline = now + chrono::Duration::seconds(i64::from(review.timeout_seconds));
        let summary = record
            .summary
            .map(|s| format!("+{} ~{} -{}", s.add, s.change, s.destroy))
            .unwrap_or_else(|| "no summary".into());
        let held = held
            .map(|m| format!("; held by policy: {}", held_messages(m)))
            .unwrap_or_default();
        let reason = format!(
            "plan succeeded ({summary}){held}; awaiting approval to {} until {}",
            job.request.operation.as_str(),
            deadline.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        );
        let update = JobUpdate {
            review: Some(review),
            plan_phase: Some(PhaseRecord {
                task: record.task.clone(),
                attempt: record.attempt,
                started_at: record.started_at,
                ended_at: now,
                summary: record.summary,
            }),
            approval_deadline: Some(deadline),
            policy,
            ..Default::default()
        };
        let awaiting = self
            .store
            .transition_job(
                &job.id,
                from,
                JobState::AwaitingApproval,
                now,
                &reason,
                update,
            )
            .await?;
        info!(job_id = %job.id, %deadline, "plan phase succeeded; awaiting approval");
        if !announce {
            return Ok(awaiting);
        }
        let mut detail = crate::ended_detail(&awaiting);
        detail["summary"] = json!(record.summary);
        detail["approval_deadline"] = json!(deadline);
        let resource = format!("sortie:job/{}", job.id);
        if let Err(e) = self
            .bus
            .publish(JOB_AWAITING_APPROVAL, &resource, detail)
            .await
        {
            warn!(error = %e, "publishing sortie.job.awaiting_approval failed");
        }
        Ok(awaiting)
    }

    /// The consequences of a job's reaching a terminal state: its secrets deleted, its
    /// environment released (and the next job sent), `sortie.job.ended` published, and
    /// what the end means for its environment recorded. Independent calls run at once: the
    /// secrets' deletion with the release (the next job waits for the release alone), then
    /// the event with the environment's record (which writes the environment's item, so
    /// only after the release).
    pub(crate) async fn ended(&self, record: &JobRecord) -> Result<(), StoreError> {
        let ((), released) = tokio::join!(
            self.forget_sensitive_variables(&record.job),
            self.release_and_next(record),
        );
        released?;
        info!(state = %record.job.state, reason = record.job.reason(), "job ended");
        let (published, ()) = tokio::join!(
            self.bus.job_ended(record),
            self.record_for_environment(record),
        );
        if let Err(e) = published {
            warn!(error = %e, "publishing sortie.job.ended failed");
        }
        Ok(())
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
            self.send_or_leave_pending(&next).await;
        }
        Ok(())
    }

    /// Settles a job the sweeper found ended: releases its environment if the job still
    /// holds it (a crash between its end and its release; the next job is sent), then marks
    /// it settled so later passes skip it. True when the environment had to be released.
    pub async fn settle_end(&self, record: &JobRecord) -> Result<bool, StoreError> {
        let held = match self.store.get_environment(&record.job.environment).await {
            Ok(e) => e.item.active_job.as_ref() == Some(&record.job.id),
            Err(StoreError::NotFound { .. }) => false,
            Err(e) => return Err(e),
        };
        if held {
            self.release_and_next(record).await?;
            warn!("released an environment still locked by its ended job");
        }
        self.store.settle_ended_job(&record.job.id).await?;
        Ok(held)
    }

    /// What a job's end means for its environment, best effort (failures are logged; the
    /// job's own outcome is already durable): a successful apply becomes the environment's
    /// latest apply, a successful destroy forgets it, and a drift check's verdict is
    /// recorded.
    async fn record_for_environment(&self, record: &JobRecord) {
        let job = &record.job;
        let succeeded = job.state == JobState::Succeeded;
        if succeeded && job.request.operation == Operation::Apply && !job.drift_check {
            // The apply before this one, whose outputs a trigger compares with.
            let (previous, counts_from_apply) =
                match self.store.get_environment(&job.environment).await {
                    Ok(e) => (
                        e.item.last_apply.map(|l| l.job_id),
                        e.item.environment.settings.ttl_from
                            == sortie_core::expiry::TtlFrom::LastApply,
                    ),
                    Err(_) => (None, false),
                };
            let last = LastApply {
                job_id: job.id.clone(),
                at: Utc::now(),
            };
            if let Err(e) = self.store.record_last_apply(&job.environment, &last).await {
                warn!(error = %e, "could not record the environment's latest apply");
            }
            self.fire_triggers(record, previous.as_ref()).await;
            if counts_from_apply {
                // A TTL counted from the last apply ends later now.
                crate::expiry::refresh_due_logged(self.store.as_ref(), &job.environment).await;
            }
        }
        if succeeded && job.request.operation == Operation::Destroy {
            // Destroyed: no outputs, and nothing to check for drift until the next apply.
            let forgot = self
                .store
                .forget_last_apply(&job.environment, Utc::now())
                .await;
            if let Err(e) = forgot {
                warn!(error = %e, "could not forget the environment's latest apply");
            }
            if job.requested_by == sortie_core::expiry::EXPIRY_PRINCIPAL {
                self.expiry_destroy_succeeded(record).await;
            }
        }
        if job.drift_check {
            let status = drift_status(record);
            info!(verdict = status.status.as_str(), "drift check recorded");
            if let Err(e) = self.store.record_drift(&job.environment, &status).await {
                warn!(error = %e, "could not record the drift check's result");
            }
        }
    }
}

/// The first policy messages that hold a job, for its reason (the rest are on the job).
fn held_messages(messages: &[String]) -> String {
    let shown = sortie_core::policy::gate::REASON_MESSAGES;
    let mut text = messages
        .iter()
        .take(shown)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    if messages.len() > shown {
        text.push_str(&format!(" (and {} more)", messages.len() - shown));
    }
    text
}

/// An ended drift check's verdict, as recorded on its environment (no remediation yet).
pub(crate) fn drift_status(record: &JobRecord) -> DriftStatus {
    let job = &record.job;
    let verdict = drift::verdict(job.state == JobState::Succeeded, record.summary.as_ref());
    DriftStatus {
        status: verdict,
        checked_at: Utc::now(),
        job_id: job.id.clone(),
        summary: record.summary,
        reason: (verdict == DriftVerdict::Error).then(|| job.reason().to_string()),
        remediation_job_id: None,
    }
}
