//! The job service: submit, cancel and review, in one place with the end of a job
//! ([`crate::end`]).
//!
//! The API (submit, cancel, review) and the engine (the end, the sweeper) both move
//! jobs through their lifecycle; they share this service so that the environment
//! lock is released, and the next queued job sent, by one piece of code.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use sortie_core::job::JobPhase;
use sortie_core::sensitive;
use sortie_core::{
    review_refusal, EnvPath, Job, JobId, JobState, ReviewDecision, ReviewRefusal, ReviewVerdict,
};
use sortie_launch::JobSecrets;
use sortie_store::{
    IdempotencyKey, JobMessage, JobQueue, JobRecord, JobUpdate, Store, StoreError, Submitted,
};
use tracing::{info, warn};

use crate::end::EndCause;
use crate::Bus;

/// How many times a cancel is tried when the job moved between its read and its write
/// (a queued job that took its environment's lock meanwhile).
pub const CANCEL_TRIES: u32 = 5;
/// How long one secret's deletion may take when a job ends: past the bound of its retries
/// under throttling ([`sortie_launch::ThrottleRetry::default`]), within the 29 s and 30 s
/// of the functions that end jobs.
pub const SECRET_DELETE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

/// Who discards a reviewed job whose approval timed out.
pub const APPROVAL_TIMEOUT_PRINCIPAL: &str = "sortie:approval-timeout";

/// The job operations shared by the API and the engine.
#[derive(Clone)]
pub struct JobService {
    /// The repository.
    pub store: Arc<dyn Store>,
    /// The jobs queue.
    pub queue: Arc<dyn JobQueue>,
    /// Where `sortie.job.ended` goes.
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
    ///
    /// A queued job may take its environment's lock between the read of the environment
    /// and the write (the holder ended, and the queue moved on): the write then finds it
    /// no longer waiting, and the cancel is tried again from a fresh read, at most
    /// `CANCEL_TRIES` (5) times, so two cancels in one environment never answer a conflict.
    pub async fn cancel(&self, record: &JobRecord, by: &str) -> Result<Cancellation, StoreError> {
        let mut record = record.clone();
        let mut tries = 1;
        loop {
            match self.cancel_once(&record, by).await {
                Err(StoreError::StateConflict { actual, .. })
                    if tries < CANCEL_TRIES && !actual.is_terminal() && !actual.is_active() =>
                {
                    tries += 1;
                    record = self.store.get_job(&record.job.id).await?;
                }
                other => return other,
            }
        }
    }

    async fn cancel_once(&self, record: &JobRecord, by: &str) -> Result<Cancellation, StoreError> {
        let job = &record.job;
        if job.state.is_terminal() {
            return Ok(Cancellation::AlreadyEnded(record.clone()));
        }
        if job.state.is_active() {
            // The cancel is a message, not a write of the table: its audit entry first.
            self.store.record_audit().await?;
            let message = JobMessage::cancel(job, by);
            self.queue.send_message(&message, 0).await?;
            return Ok(Cancellation::Stopping(record.clone()));
        }
        let reason = format!("sortie: canceled by {by}");
        let env = self.store.get_environment(&job.environment).await?;
        let holds_lock = env.item.active_job.as_deref() == Some(job.id.as_str());
        let canceled = if holds_lock || job.speculative {
            // `queued` with the lock, or `awaiting_approval` (which keeps it), or a
            // speculative plan (which never holds it nor waits in the queue).
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
        self.end(&canceled, EndCause::Reached).await?;
        Ok(Cancellation::Canceled(canceled))
    }

    /// Reviews a job for `by`: approves or discards it, with an optional comment. `Ok(Err(_))`
    /// says why the review is refused (the job is not awaiting approval, it is approved
    /// already, or four eyes forbid the requester to approve). An approval moves the job to
    /// `queued` (it keeps the lock; its second task applies the saved plan) and sends it,
    /// except a pull request's apply, whose approval is recorded while it stays
    /// `awaiting_approval` until its requirements are checked again; a discard ends it
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
        review.decision = Some(ReviewDecision {
            verdict,
            by: by.to_string(),
            at,
            comment: comment.clone(),
            overrode_policy: verdict == ReviewVerdict::Approved
                && sortie_core::policy::gate::approval_overrides_policy(record.policy.as_ref()),
        });
        let said = comment.map(|c| format!(": {c}")).unwrap_or_default();
        let result = match verdict {
            ReviewVerdict::Approved if job.checked_again_before_apply() => {
                // Recorded, not started: the pull request's handler checks its
                // requirements again, then starts the apply phase or discards it.
                return match self.approve_for_pull_request(record, review, at).await {
                    Ok(approved) => Ok(Ok(approved)),
                    Err(StoreError::StateConflict { actual, .. }) => {
                        Ok(Err(if actual == JobState::AwaitingApproval {
                            ReviewRefusal::AlreadyApproved
                        } else {
                            ReviewRefusal::NotAwaiting(actual)
                        }))
                    }
                    Err(e) => Err(e),
                };
            }
            ReviewVerdict::Approved => {
                let reason =
                    format!("approved by {by}{said}; the saved plan is applied by a second task");
                return match self.start_apply_phase(record, review, at, &reason).await {
                    Ok(started) => {
                        info!(job_id = %job.id, verdict = ?verdict, by, "job reviewed");
                        Ok(Ok(started))
                    }
                    Err(StoreError::StateConflict { actual, .. }) => {
                        Ok(Err(ReviewRefusal::NotAwaiting(actual)))
                    }
                    Err(e) => Err(e),
                };
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
        self.end(&reviewed, EndCause::Reached).await?;
        Ok(Ok(reviewed))
    }

    /// Starts the apply phase of a job awaiting approval: `review` (its decision made)
    /// recorded, the job queued again for a second task that applies the saved plan, and
    /// sent. `StateConflict` when the job moved meanwhile.
    pub async fn start_apply_phase(
        &self,
        record: &JobRecord,
        mut review: sortie_core::Review,
        at: DateTime<Utc>,
        reason: &str,
    ) -> Result<JobRecord, StoreError> {
        review.phase = JobPhase::Apply;
        let update = JobUpdate {
            review: Some(review),
            clear_task: true,
            clear_summary: true,
            ..Default::default()
        };
        let started = self
            .store
            .transition_job(
                &record.job.id,
                JobState::AwaitingApproval,
                JobState::Queued,
                at,
                reason,
                update,
            )
            .await?;
        self.send_or_leave_pending(&started.job).await;
        Ok(started)
    }

    /// Records the approval (in `review`) of a pull request's apply without starting it,
    /// and publishes [`crate::bus::JOB_APPROVED`]: the pull requests' handler checks the
    /// requirements again ([`sortie_core::Job::checked_again_before_apply`]). One decision
    /// only: `StateConflict` for a second.
    pub(crate) async fn approve_for_pull_request(
        &self,
        record: &JobRecord,
        review: sortie_core::Review,
        at: DateTime<Utc>,
    ) -> Result<JobRecord, StoreError> {
        let update = JobUpdate {
            review: Some(review),
            ..Default::default()
        };
        let approved = self
            .store
            .decide_awaiting_job(&record.job.id, at, update)
            .await?;
        info!(job_id = %record.job.id, "approved; the pull request's requirements are checked again before the apply");
        let resource = format!("sortie:job/{}", record.job.id);
        let detail = crate::ended_detail(&approved);
        if let Err(e) = self
            .bus
            .publish(crate::bus::JOB_APPROVED, &resource, detail)
            .await
        {
            // The reconcile checks it within its period.
            warn!(error = %e, "publishing sortie.job.approved failed");
        }
        Ok(approved)
    }

    /// Keeps the values of job `job_id`'s sensitive variables in ONE secret
    /// ([`sortie_core::sensitive::job_secret_name`], a JSON object name → value), tagged
    /// with the job, its environment and its organisation, and records its ARN and the
    /// names in `request` ([`sortie_core::sensitive::record`]). No value, no secret. The
    /// create is retried under Secrets Manager's throttling; its error names no value.
    pub async fn keep_sensitive_variables(
        &self,
        job_id: &JobId,
        env: &EnvPath,
        values: &sensitive::SensitiveValues,
        request: &mut sortie_core::JobRequest,
    ) -> Result<(), String> {
        if values.is_empty() {
            sensitive::record(request, None, values);
            return Ok(());
        }
        let (job, env_text) = (job_id.to_string(), env.to_string());
        let tags = [
            (sensitive::JOB_TAG, job.as_str()),
            (sensitive::ENV_TAG, env_text.as_str()),
            (sensitive::ORG_TAG, env.org()),
        ];
        let name = sensitive::job_secret_name(job_id);
        let arn = self
            .secrets
            .create(&name, &sensitive::encode(values), &tags)
            .await?;
        sensitive::record(request, Some(arn), values);
        Ok(())
    }

    /// The values of `job`'s sensitive variables, by name: read from its one secret, and
    /// for a job submitted before one secret per job, from each variable's own.
    pub async fn sensitive_values(&self, job: &Job) -> Result<sensitive::SensitiveValues, String> {
        let refs = &job.request.sensitive_variables;
        let mut values = std::collections::BTreeMap::new();
        if let Some(arn) = &job.request.sensitive_secret {
            let text = self.secrets.value(arn).await?;
            let names = refs
                .iter()
                .filter(|(_, r)| r.is_empty())
                .map(|(n, _)| n.as_str());
            values = sensitive::decode(&text, names)?.into_inner();
        }
        for (name, arn) in refs.iter().filter(|(_, r)| !r.is_empty()) {
            let value = self
                .secrets
                .value(arn)
                .await
                .map_err(|e| format!("sensitive variable `{name}`: {e}"))?;
            values.insert(name.clone(), value);
        }
        Ok(sensitive::SensitiveValues::new(values))
    }

    /// Deletes the secrets of `job`'s sensitive variables (once it ended, or when its
    /// submit made no job), each retried under throttling and bounded in time
    /// (`SECRET_DELETE_TIMEOUT`, 20 s); a failure is logged, never fatal (the job's outcome is
    /// already durable), and the sweep deletes what is left (`engine/secret_sweep.rs`).
    pub async fn forget_sensitive_variables(&self, job: &Job) {
        for arn in sensitive::secret_arns(&job.request) {
            self.delete_secret(&job.id, arn).await;
        }
    }

    /// Deletes the secret `arn` of job `job_id`, bounded by [`SECRET_DELETE_TIMEOUT`]; true
    /// when it is gone.
    pub(crate) async fn delete_secret(&self, job_id: &JobId, arn: &str) -> bool {
        match tokio::time::timeout(SECRET_DELETE_TIMEOUT, self.secrets.delete(arn)).await {
            Ok(Ok(())) => {
                info!(%job_id, %arn, "sensitive variables' secret deleted");
                true
            }
            Ok(Err(e)) => {
                warn!(%job_id, error = %e, "could not delete a sensitive variables' secret; the sweep will");
                false
            }
            Err(_) => {
                warn!(%job_id, %arn, "deleting a sensitive variables' secret timed out; the sweep will");
                false
            }
        }
    }
}
