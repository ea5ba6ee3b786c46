//! The job service: submit, cancel, complete, and release-and-next, in one place.
//!
//! The API (submit, cancel) and the engine (completion, the sweeper) both move
//! jobs through their lifecycle; they share this service so that the environment
//! lock is released, and the next queued job sent, by one piece of code.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::json;
use sortie_core::drift::{self, DriftStatus, DriftVerdict, DRIFT_PRINCIPAL};
use sortie_core::{
    review_refusal, Decision, EnvPath, Job, JobId, JobPhase, JobState, Operation, Outcome,
    ReviewRefusal, ReviewVerdict,
};
use sortie_launch::JobSecrets;
use sortie_store::{
    IdempotencyKey, JobMessage, JobQueue, JobRecord, JobUpdate, LastApply, PhaseRecord, Released,
    Store, StoreError, Submitted,
};
use tracing::{info, warn};

use crate::{Bus, ENVIRONMENT_DRIFTED, JOB_AWAITING_APPROVAL};

/// How long one secret's deletion may take when a job ends.
pub const SECRET_DELETE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Who discards a reviewed job whose approval timed out.
pub const APPROVAL_TIMEOUT_PRINCIPAL: &str = "sortie:approval-timeout";

/// The job operations shared by the API and the engine.
#[derive(Clone)]
pub struct JobService {
    /// The repository.
    pub store: Arc<dyn Store>,
    /// The jobs queue.
    pub queue: Arc<dyn JobQueue>,
    /// Where `sortie.job.completed` goes.
    pub bus: Arc<dyn Bus>,
    /// The secrets holding jobs' sensitive variables while they run.
    pub secrets: Arc<dyn JobSecrets>,
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
        self.task_stopped(record, stop).await
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
            // `queued` with the lock, or `awaiting_approval` (which keeps it).
            let canceled = self
                .store
                .transition_job(
                    &job.id,
                    job.state,
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
        self.forget_sensitive_variables(&canceled.job).await;
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
    /// `sortie.job.completed` (best effort: the outcome is already durable), then record what
    /// the end means for its environment (its latest successful apply, a drift check's result).
    pub async fn complete(&self, record: &JobRecord) -> Result<(), StoreError> {
        self.forget_sensitive_variables(&record.job).await;
        self.release_and_next(record).await?;
        if let Err(e) = self.bus.job_completed(record).await {
            warn!(error = %e, "publishing sortie.job.completed failed");
        }
        info!(state = %record.job.state, reason = record.job.reason(), "job finished");
        self.after_end(record).await;
        Ok(())
    }

    /// Ends a job's task with `outcome`, moving it from `from` with one conditional write: a
    /// reviewed job whose plan phase succeeded moves to `awaiting_approval` instead, keeping
    /// its environment's lock and its plan phase (task, attempt, summary) on the record;
    /// anything else reaches `outcome.state` and is completed ([`JobService::complete`]).
    /// A job that moved on meanwhile is a `StateConflict`, for the caller to read.
    pub async fn finish(
        &self,
        record: &JobRecord,
        from: JobState,
        outcome: &Outcome,
    ) -> Result<JobRecord, StoreError> {
        let now = Utc::now();
        let job = &record.job;
        if let (JobState::Succeeded, Some(review)) = (outcome.state, &job.review) {
            if review.phase == JobPhase::Plan {
                let mut review = review.clone();
                review.awaiting_since = Some(now);
                let deadline = now + chrono::Duration::seconds(i64::from(review.timeout_seconds));
                let summary = record
                    .summary
                    .map(|s| format!("+{} ~{} -{}", s.add, s.change, s.destroy))
                    .unwrap_or_else(|| "no summary".into());
                let reason = format!(
                    "plan succeeded ({summary}); awaiting approval to {} until {}",
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
                let mut detail = crate::completed_detail(&awaiting);
                detail["summary"] = json!(record.summary);
                detail["approval_deadline"] = json!(deadline);
                if let Err(e) = self
                    .bus
                    .publish(
                        JOB_AWAITING_APPROVAL,
                        &format!("sortie:job/{}", job.id),
                        detail,
                    )
                    .await
                {
                    warn!(error = %e, "publishing sortie.job.awaiting_approval failed");
                }
                return Ok(awaiting);
            }
        }
        let finished = self
            .store
            .transition_job(
                &job.id,
                from,
                outcome.state,
                now,
                &outcome.reason,
                JobUpdate::default(),
            )
            .await?;
        self.complete(&finished).await?;
        Ok(finished)
    }

    /// Approves or discards a reviewed job for `by`, with an optional comment. `Ok(Err(_))`
    /// says why the decision is refused (the job is not awaiting approval, or four eyes
    /// forbid the requester to approve). An approval moves the job to `queued` (it keeps the
    /// lock; its second task applies the saved plan) and sends it; a discard ends it
    /// `discarded` and releases the environment.
    pub async fn decide(
        &self,
        record: &JobRecord,
        by: &str,
        verdict: ReviewVerdict,
        comment: Option<String>,
        at: DateTime<Utc>,
    ) -> Result<Result<JobRecord, ReviewRefusal>, StoreError> {
        let job = &record.job;
        if let Some(refusal) = review_refusal(job, by, verdict) {
            return Ok(Err(refusal));
        }
        let Some(mut review) = job.review.clone() else {
            return Ok(Err(ReviewRefusal::NotAwaiting(job.state)));
        };
        review.decision = Some(Decision {
            verdict,
            by: by.to_string(),
            at,
            comment: comment.clone(),
        });
        let said = comment.map(|c| format!(": {c}")).unwrap_or_default();
        let result = match verdict {
            ReviewVerdict::Approved => {
                review.phase = JobPhase::Apply;
                let update = JobUpdate {
                    review: Some(review),
                    clear_task: true,
                    clear_summary: true,
                    ..Default::default()
                };
                let reason =
                    format!("approved by {by}{said}; the saved plan is applied by a second task");
                self.store
                    .transition_job(
                        &job.id,
                        JobState::AwaitingApproval,
                        JobState::Queued,
                        at,
                        &reason,
                        update,
                    )
                    .await
            }
            ReviewVerdict::Discarded => {
                let update = JobUpdate {
                    review: Some(review),
                    ..Default::default()
                };
                let reason = format!("discarded by {by}{said}; nothing was applied");
                self.store
                    .transition_job(
                        &job.id,
                        JobState::AwaitingApproval,
                        JobState::Discarded,
                        at,
                        &reason,
                        update,
                    )
                    .await
            }
        };
        let decided = match result {
            Ok(r) => r,
            Err(StoreError::StateConflict { actual, .. }) => {
                return Ok(Err(ReviewRefusal::NotAwaiting(actual)))
            }
            Err(e) => return Err(e),
        };
        info!(job_id = %job.id, verdict = ?verdict, by, "review decided");
        match verdict {
            ReviewVerdict::Approved => self.send_or_leave_pending(&job.id).await,
            ReviewVerdict::Discarded => self.complete(&decided).await?,
        }
        Ok(Ok(decided))
    }

    /// Keeps the values of job `job_id`'s sensitive variables in one secret each
    /// ([`sortie_core::sensitive::secret_name`]), tagged with the job, its environment and
    /// its organisation; returns `{name: ARN}` for the job record. On a failure the
    /// secrets already made are deleted and the error (which names no value) returned.
    pub async fn keep_sensitive_variables(
        &self,
        job_id: &JobId,
        env: &EnvPath,
        values: &sortie_core::sensitive::SensitiveValues,
    ) -> Result<std::collections::BTreeMap<String, String>, String> {
        let mut refs = std::collections::BTreeMap::new();
        let (job, env_text) = (job_id.to_string(), env.to_string());
        let tags = [
            ("sortie:job", job.as_str()),
            ("sortie:env", env_text.as_str()),
            ("sortie:org", env.org()),
        ];
        for (name, value) in values.iter() {
            let secret = sortie_core::sensitive::secret_name(job_id, name);
            match self.secrets.create(&secret, value, &tags).await {
                Ok(arn) => {
                    refs.insert(name.to_string(), arn);
                }
                Err(e) => {
                    self.delete_secrets(job_id, refs.values()).await;
                    return Err(e);
                }
            }
        }
        Ok(refs)
    }

    /// The values of `job`'s sensitive variables, read from their secrets, by name.
    pub async fn sensitive_values(
        &self,
        job: &Job,
    ) -> Result<sortie_core::sensitive::SensitiveValues, String> {
        let mut values = std::collections::BTreeMap::new();
        for (name, arn) in &job.request.sensitive_variables {
            let value = self
                .secrets
                .value(arn)
                .await
                .map_err(|e| format!("sensitive variable `{name}`: {e}"))?;
            values.insert(name.clone(), value);
        }
        Ok(sortie_core::sensitive::SensitiveValues::new(values))
    }

    /// Deletes the secrets of `job`'s sensitive variables (once it ended, or when its
    /// submit made no job), each bounded in time; a failure is logged, never fatal (the
    /// job's outcome is already durable).
    pub async fn forget_sensitive_variables(&self, job: &Job) {
        self.delete_secrets(&job.id, job.request.sensitive_variables.values())
            .await;
    }

    async fn delete_secrets(&self, job_id: &JobId, arns: impl Iterator<Item = &String>) {
        for arn in arns {
            match tokio::time::timeout(SECRET_DELETE_TIMEOUT, self.secrets.delete(arn)).await {
                Ok(Ok(())) => info!(%job_id, %arn, "sensitive variable's secret deleted"),
                Ok(Err(e)) => {
                    warn!(%job_id, error = %e, "could not delete a sensitive variable's secret")
                }
                Err(_) => warn!(%job_id, %arn, "deleting a sensitive variable's secret timed out"),
            }
        }
    }

    /// What a job's end means for its environment, best effort (failures are logged; the
    /// job's own outcome is already durable): a successful apply becomes the environment's
    /// latest apply; a drift check's result is recorded, published when it drifted, and
    /// remediated when the environment asks for it.
    async fn after_end(&self, record: &JobRecord) {
        let job = &record.job;
        if job.state == JobState::Succeeded
            && job.request.operation == Operation::Apply
            && !job.drift_check
        {
            let last = LastApply {
                job_id: job.id.clone(),
                at: Utc::now(),
            };
            if let Err(e) = self.store.record_last_apply(&job.environment, &last).await {
                warn!(error = %e, "could not record the environment's latest apply");
            }
        }
        if job.state == JobState::Succeeded && job.request.operation == Operation::Destroy {
            // Destroyed: no outputs, and nothing to check for drift until the next apply.
            if let Err(e) = self
                .store
                .forget_last_apply(&job.environment, Utc::now())
                .await
            {
                warn!(error = %e, "could not forget the environment's latest apply");
            }
        }
        if job.drift_check {
            if let Err(e) = self.drift_checked(record).await {
                warn!(error = %e, "could not record the drift check's result");
            }
        }
    }

    /// Records a drift check's verdict on its environment; a drift is published as
    /// `sortie.environment.drifted` and, with `drift_remediation: apply`, remediated by an
    /// apply (requested by `sortie:drift`, subject to the environment's approval setting).
    async fn drift_checked(&self, record: &JobRecord) -> Result<(), StoreError> {
        let job = &record.job;
        let verdict = drift::verdict(job.state == JobState::Succeeded, record.summary.as_ref());
        let mut status = DriftStatus {
            status: verdict,
            checked_at: Utc::now(),
            job_id: job.id.clone(),
            summary: record.summary,
            reason: (verdict == DriftVerdict::Error).then(|| job.reason().to_string()),
            remediation_job_id: None,
        };
        if verdict == DriftVerdict::Drifted {
            let env = self.store.get_environment(&job.environment).await?;
            if env.item.environment.settings.drift_remediation
                == sortie_core::DriftRemediation::Apply
            {
                let runner = self
                    .store
                    .get_runner(&env.item.environment.runner.runner_id)
                    .await?;
                let mut request = job.request.clone();
                request.operation = Operation::Apply;
                // The check's secrets are gone with it: a remediation has no sensitive values.
                request.sensitive_variables.clear();
                let apply = Job::for_environment(
                    sortie_store::new_id(),
                    &env.item.environment,
                    runner.item.spec,
                    request,
                    DRIFT_PRINCIPAL.to_string(),
                    Utc::now(),
                );
                self.submit(&apply, None).await?;
                info!(remediation = %apply.id, "drift remediation submitted");
                status.remediation_job_id = Some(apply.id.clone());
            }
            let detail = json!({
                "environment": job.environment.to_string(),
                "org": job.environment.org(),
                "job_id": job.id,
                "summary": record.summary,
                "remediation_job_id": status.remediation_job_id,
            });
            if let Err(e) = self
                .bus
                .publish(
                    ENVIRONMENT_DRIFTED,
                    &format!("sortie:environment/{}", job.environment),
                    detail,
                )
                .await
            {
                warn!(error = %e, "publishing sortie.environment.drifted failed");
            }
        }
        info!(verdict = verdict.as_str(), "drift check recorded");
        self.store.record_drift(&job.environment, &status).await
    }
}
