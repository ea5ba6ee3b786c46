//! The job service: submit, cancel and review, in one place with the end of a job
//! ([`crate::end`]).
//!
//! The API (submit, cancel, review) and the engine (the end, the sweeper) both move
//! jobs through their lifecycle; they share this service so that the environment
//! lock is released, and the next queued job sent, by one piece of code.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use sortie_core::job::JobPhase;
use sortie_core::{
    review_refusal, Decision, EnvPath, Job, JobId, JobState, ReviewRefusal, ReviewVerdict,
};
use sortie_launch::JobSecrets;
use sortie_store::{
    IdempotencyKey, JobMessage, JobQueue, JobRecord, JobUpdate, Store, StoreError, Submitted,
};
use tracing::{info, warn};

use crate::end::How;
use crate::Bus;

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
    /// The policy gate's parts: where a plan's `plan.json` is read, compiled sets.
    pub gate: crate::PolicyGate,
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
            self.send_or_leave_pending(&submitted.job).await;
        }
        Ok(submitted)
    }

    /// Sends a lock-holding job to the queue. If the send fails the job stays a pending
    /// send in the store (it holds the lock and is `queued`), and the sweeper re-sends it.
    pub async fn send_or_leave_pending(&self, job: &Job) {
        if let Err(e) = self.queue.send(job, 0).await {
            warn!(job_id = %job.id, error = %e, "send to the jobs queue failed; the sweeper will re-send");
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
            let message = JobMessage::cancel(job, by);
            self.queue.send_message(&message, 0).await?;
            return Ok(Cancellation::Stopping(record.clone()));
        }
        let reason = format!("sortie: canceled by {by}");
        let env = self.store.get_environment(&job.environment).await?;
        let holds_lock = env.item.active_job.as_deref() == Some(job.id.as_str());
        let canceled = if holds_lock {
            // `queued` with the lock, or `awaiting_approval` (which keeps it).
            self.store
                .transition_job(
                    &job.id,
                    job.state,
                    JobState::Canceled,
                    Utc::now(),
                    &reason,
                    Default::default(),
                )
                .await?
        } else {
            self.store
                .cancel_waiting_job(&job.id, Utc::now(), &reason)
                .await?
        };
        self.end(&canceled, How::Reached).await?;
        Ok(Cancellation::Canceled(canceled))
    }

    /// Reviews a job for `by`: approves or discards it, with an optional comment. `Ok(Err(_))`
    /// says why the review is refused (the job is not awaiting approval, or four eyes
    /// forbid the requester to approve). An approval moves the job to `queued` (it keeps the
    /// lock; its second task applies the saved plan) and sends it; a discard ends it
    /// `discarded` and releases the environment.
    pub async fn review(
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
            overrode_policy: verdict == ReviewVerdict::Approved
                && sortie_core::policy::gate::approval_overrides_policy(record.policy.as_ref()),
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
        let reviewed = match result {
            Ok(r) => r,
            Err(StoreError::StateConflict { actual, .. }) => {
                return Ok(Err(ReviewRefusal::NotAwaiting(actual)))
            }
            Err(e) => return Err(e),
        };
        info!(job_id = %job.id, verdict = ?verdict, by, "job reviewed");
        match verdict {
            ReviewVerdict::Approved => self.send_or_leave_pending(&reviewed.job).await,
            ReviewVerdict::Discarded => {
                self.end(&reviewed, How::Reached).await?;
            }
        }
        Ok(Ok(reviewed))
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
}
