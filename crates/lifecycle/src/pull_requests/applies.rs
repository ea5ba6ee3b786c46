//! Applies from a pull request: submitting one once per commit, and settling approved
//! ones against the pull request's requirements right before their apply phase.

use chrono::Utc;
use sortie_core::sensitive::SensitiveValues;
use sortie_core::vcs::pull::PullRequestRecord;
use sortie_core::vcs::report::escape;
use sortie_core::vcs::requirements::{evaluate, Unmet};
use sortie_core::vcs::VcsBinding;
use sortie_core::{Environment, JobId, JobRequest, Operation, ReviewVerdict, Source};
use sortie_store::{IdempotencyKey, StoreError};
use tracing::{info, warn};

use super::{CodeHost, PullError, PullRequests, REQUIREMENTS_PRINCIPAL};
use crate::{JobOrder, SubmitError};

/// The most source tokens one report revokes; the next report takes the rest.
pub const MAX_REVOKES_PER_REPORT: usize = 50;
/// The most source tokens one report looks up (their jobs read from the store): running
/// jobs' tokens are passed over, so this is larger than [`MAX_REVOKES_PER_REPORT`].
pub const MAX_LOOKUPS_PER_REPORT: usize = 500;

impl PullRequests {
    /// Submits the apply of `sha` to `env` for `requested_by` (a host login), once per pull
    /// request, environment and commit; `merged` for the merge commit's apply after the
    /// merge (no requirement is checked again before its apply phase).
    pub(super) async fn submit_apply(
        &self,
        env: &Environment,
        binding: &VcsBinding,
        record: &PullRequestRecord,
        sha: &str,
        requested_by: &str,
        merged: bool,
    ) -> Result<String, PullError> {
        let request = JobRequest {
            operation: Operation::Apply,
            source: Source::of_commit(
                binding.provider,
                &binding.repository,
                sha,
                &binding.directory,
            ),
            variables: Default::default(),
            files: Default::default(),
            secret_refs: Default::default(),
            sensitive_variables: Default::default(),
            sensitive_secret: None,
        };
        let key = IdempotencyKey {
            key: format!(
                "pr-apply:{}#{}@{sha}",
                record.repository.to_ascii_lowercase(),
                record.number
            ),
            request_hash: sha.to_string(),
        };
        let mut order = JobOrder::submit(
            request,
            SensitiveValues::default(),
            format!("{}:{requested_by}", record.provider.as_str()),
            Some(key),
        );
        let mut origin = record.job_ref(sha);
        origin.merged = merged;
        order.pull_request = Some(origin);
        match self.jobs.submit_for(env, order).await {
            Ok(submitted) => {
                info!(job_id = %submitted.job.id, environment = %env.path, pull_request = %record.display(), "apply submitted from the pull request");
                Ok(submitted.job.id.to_string())
            }
            Err(SubmitError::Store(e)) => Err(e.into()),
            Err(e) => Err(StoreError::Invalid {
                path: env.path.to_string(),
                problem: e.to_string(),
            }
            .into()),
        }
    }

    /// Writes the pull request's checks and comment again from its jobs.
    pub(super) async fn report(
        &self,
        host: &dyn CodeHost,
        repository: &str,
        number: u64,
    ) -> Result<(), PullError> {
        let Some(found) = self
            .store()
            .get_pull_request(host.provider(), repository, number)
            .await?
        else {
            return Ok(());
        };
        let waiting = self.settle_approved(host, &found.item).await?;
        self.write_report(host, found.item, found.version).await?;
        // A job's end asks for this report: its source token goes with it.
        self.revoke_ended_sources(host, repository).await;
        match waiting {
            Some(why) => Err(PullError::Waiting(why)),
            None => Ok(()),
        }
    }

    /// Revokes each source token of `repository` still active whose job has ended (its
    /// pilot revokes it itself once the archive is downloaded, unless it died first). Best
    /// effort and bounded: at most [`MAX_LOOKUPS_PER_REPORT`] tokens looked up and
    /// [`MAX_REVOKES_PER_REPORT`] revoked, each failure logged and the rest tried; a token
    /// of a job this deployment does not know is left alone (it expires within a day).
    pub(super) async fn revoke_ended_sources(&self, host: &dyn CodeHost, repository: &str) {
        let held = match host.source_tokens(repository).await {
            Ok(held) => held,
            Err(e) => {
                warn!(error = %e, repository, "the active source tokens could not be listed");
                return;
            }
        };
        let mut revokes = 0;
        for token in held.into_iter().take(MAX_LOOKUPS_PER_REPORT) {
            if revokes == MAX_REVOKES_PER_REPORT {
                break;
            }
            let job = JobId::new(token.job.clone());
            let ended = match self.store().get_job(&job).await {
                Ok(record) => record.job.state.is_terminal(),
                Err(StoreError::NotFound { .. }) => false,
                Err(e) => {
                    warn!(error = %e, job_id = %token.job, "a source token's job could not be read");
                    continue;
                }
            };
            if !ended {
                continue;
            }
            revokes += 1;
            match host.revoke_source(repository, token.token_id).await {
                Ok(()) => {
                    info!(job_id = %token.job, token_id = token.token_id, "revoked an ended job's source token")
                }
                Err(e) => {
                    warn!(error = %e, job_id = %token.job, "an ended job's source token could not be revoked")
                }
            }
        }
    }

    /// Checks again, right before its apply phase, each apply of this pull request that
    /// was approved and waits ([`sortie_core::Job::approved_awaiting_pull_request`]): its
    /// requirements are read from the host now, as for `/sortie apply` (the head still the
    /// commit planned, approvals on it, mergeable, up to date, required checks green,
    /// Sortie's own left out). All hold: the apply phase starts. One that can no longer
    /// come to hold (the head moved, a check failed, an approval withdrawn, conflicts):
    /// the apply is discarded, saying why, and the pull request is told. Only ones that
    /// may still come to hold (a check running or not reported yet, GitHub still
    /// computing): it waits, and `Some(what)` asks for the work to be tried again; the
    /// approval's deadline bounds the wait.
    async fn settle_approved(
        &self,
        host: &dyn CodeHost,
        record: &PullRequestRecord,
    ) -> Result<Option<String>, PullError> {
        let mut facts = None;
        let mut waiting = Vec::new();
        for (path, entry) in &record.environments {
            let Some(apply) = &entry.apply_job else {
                continue;
            };
            let job = match self.store().get_job(&JobId::from(apply.clone())).await {
                Ok(r) => r,
                Err(StoreError::NotFound { .. }) => continue,
                Err(e) => return Err(e.into()),
            };
            if !job.job.approved_awaiting_pull_request() {
                continue;
            }
            let mut facts_now = match &facts {
                Some(f) => Clone::clone(f),
                None => {
                    let f = host.facts(&record.repository, record.number).await?;
                    facts = Some(f.clone());
                    f
                }
            };
            facts_now.planned_sha = Some(entry.sha.clone());
            let binding = match self.store().get_environment(&job.job.environment).await {
                Ok(e) => e.item.environment.settings.vcs,
                Err(StoreError::NotFound { .. }) => None,
                Err(e) => return Err(e.into()),
            };
            let unmet = match &binding {
                Some(b) if b.repository.eq_ignore_ascii_case(&record.repository) => {
                    evaluate(&b.requirements, &facts_now)
                }
                _ => {
                    self.discard_approved(
                        host,
                        record,
                        &job,
                        path,
                        "the environment is no longer bound to this repository",
                    )
                    .await?;
                    continue;
                }
            };
            if unmet.is_empty() {
                let Some(review) = job.job.review.clone() else {
                    continue;
                };
                let by = review
                    .decision
                    .as_ref()
                    .map(|d| d.by.clone())
                    .unwrap_or_default();
                let reason = format!(
                    "approved by {by}; the pull request's requirements hold, checked again right before the apply; the saved plan is applied by a second task"
                );
                match self
                    .jobs
                    .start_apply_phase(&job, review, Utc::now(), &reason)
                    .await
                {
                    Ok(_) => {
                        info!(job_id = %job.job.id, environment = %path, "requirements hold again: the apply phase starts")
                    }
                    Err(StoreError::StateConflict { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
            } else if unmet.iter().all(Unmet::may_still_hold) {
                let what: Vec<String> = unmet.iter().map(ToString::to_string).collect();
                waiting.push(format!("{path}: {}", what.join("; ")));
            } else {
                let what: Vec<String> = unmet
                    .iter()
                    .filter(|u| !u.may_still_hold())
                    .map(ToString::to_string)
                    .collect();
                self.discard_approved(host, record, &job, path, &what.join("; "))
                    .await?;
            }
        }
        Ok((!waiting.is_empty()).then(|| waiting.join(". ")))
    }

    /// Discards an approved apply whose requirements no longer hold, saying `why`, and
    /// tells the pull request.
    async fn discard_approved(
        &self,
        host: &dyn CodeHost,
        record: &PullRequestRecord,
        job: &sortie_store::JobRecord,
        path: &str,
        why: &str,
    ) -> Result<(), PullError> {
        let comment =
            format!("the pull request's requirements no longer hold right before the apply: {why}");
        // A refusal: it moved meanwhile (another delivery of this work, a person's discard).
        if let Ok(_discarded) = self
            .jobs
            .review(
                job,
                REQUIREMENTS_PRINCIPAL,
                ReviewVerdict::Discarded,
                Some(comment),
                Utc::now(),
            )
            .await?
        {
            info!(job_id = %job.job.id, environment = %path, %why, "approved apply discarded: requirements no longer hold");
            let body = format!(
                "Not applied: {}: the requirements no longer hold right before the apply: {}.",
                escape(path),
                escape(why)
            );
            host.reply(&record.repository, record.number, &body).await?;
        }
        Ok(())
    }
}
