//! A pull request's report, rendered from its jobs' records: one check run per environment
//! on the head commit, and the one comment. Written after every change of a job, from the
//! records, so a report lost to a host outage is written whole by the next.

use sortie_core::plan::{PlanData, PlanView};
use sortie_core::policy::PolicyStatus;
use sortie_core::vcs::pull::{PullEnvironment, PullRequestRecord};
use sortie_core::vcs::report::{
    plan_shown, render_check, render_comment, CommentInput, Counts, EnvReport, EnvStatus,
    PolicyLine,
};
use sortie_core::{JobId, JobState};
use sortie_store::{read_plan_data_within, StoreError};
use tracing::warn;

use super::{CodeHost, PullError, PullRequests, RECORD_TRIES};

impl PullRequests {
    /// Writes the checks of the head and the comment that changed since they were last
    /// written (their digests), then records what the host gave (a new check run, the
    /// comment) and the new digests, on condition of `version`; a record moved since is
    /// read again and only these are merged in. An edit per job state change, at most.
    pub(super) async fn write_report(
        &self,
        host: &dyn CodeHost,
        mut record: PullRequestRecord,
        version: u64,
    ) -> Result<(), PullError> {
        let mut reports = Vec::new();
        let mut written = Vec::new();
        for (path, entry) in &record.environments {
            let report = self.env_report(path, entry).await?;
            if entry.sha == record.head_sha {
                let check = render_check(&report);
                let digest = digest(&(&check, &report.job_url));
                if entry.check_run_id.is_none() || entry.check_digest.as_ref() != Some(&digest) {
                    let id = host
                        .write_check(
                            &record.repository,
                            &entry.sha,
                            entry.check_run_id,
                            &check,
                            report.job_url.as_deref(),
                        )
                        .await?;
                    written.push((path.clone(), entry.sha.clone(), id, digest));
                }
            }
            reports.push(report);
        }
        let mut notes = Vec::new();
        if record.over_limit > 0 {
            notes.push(format!(
                "{} more environments match this pull request and were not planned: at most {} are.",
                record.over_limit,
                sortie_core::vcs::pull::MAX_ENVIRONMENTS
            ));
        }
        notes.extend(record.notes.iter().cloned());
        if record.merged {
            notes.push("This pull request is merged.".into());
        } else if !record.open {
            notes.push("This pull request is closed.".into());
        }
        let body = render_comment(&CommentInput {
            head_sha: record.head_sha.clone(),
            environments: reports,
            notes,
        });
        let body_digest = digest(&body);
        // A pull request that touches no bound environment, and never did, gets no comment:
        // in a repository where infrastructure is one directory, a comment on every pull
        // request would be noise (Atlantis's "Ran Plan for 0 projects", which its users
        // silence). One that touched some before is told it no longer does.
        let silent = record.environments.is_empty()
            && record.comment_id.is_none()
            && record.over_limit == 0
            && record.notes.is_empty();
        let comment = if silent
            || (record.comment_id.is_some() && record.comment_digest.as_ref() == Some(&body_digest))
        {
            None
        } else {
            Some(
                host.upsert_comment(&record.repository, record.number, record.comment_id, &body)
                    .await?,
            )
        };
        if written.is_empty() && comment.is_none() {
            return Ok(());
        }
        let mut version = Some(version);
        for _ in 0..RECORD_TRIES {
            for (path, sha, id, digest) in &written {
                if let Some(e) = record.environments.get_mut(path) {
                    if e.sha == *sha {
                        e.check_run_id = Some(*id);
                        e.check_digest = Some(digest.clone());
                    }
                }
            }
            if let Some(id) = comment {
                record.comment_id = Some(id);
                record.comment_digest = Some(body_digest.clone());
            }
            match self.store().put_pull_request(&record, version).await {
                Ok(_) => return Ok(()),
                Err(StoreError::VersionMismatch { .. }) => {
                    let Some(found) = self
                        .store()
                        .get_pull_request(record.provider, &record.repository, record.number)
                        .await?
                    else {
                        return Ok(());
                    };
                    record = found.item;
                    version = Some(found.version);
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// One environment's report, from its latest job.
    async fn env_report(
        &self,
        path: &str,
        entry: &PullEnvironment,
    ) -> Result<EnvReport, PullError> {
        let mut report = EnvReport {
            environment: path.to_string(),
            status: EnvStatus::NotPlanned {
                why: entry
                    .not_planned
                    .clone()
                    .unwrap_or_else(|| "not planned yet".into()),
            },
            counts: None,
            changed: vec![],
            policy: vec![],
            diff: None,
            job_id: None,
            job_url: None,
            apply_command: None,
        };
        let (job_id, applying) = match (&entry.apply_job, &entry.plan_job) {
            (Some(id), _) => (id, true),
            (None, Some(id)) => (id, false),
            (None, None) => return Ok(report),
        };
        let record = match self.store().get_job(&JobId::from(job_id.clone())).await {
            Ok(r) => r,
            Err(StoreError::NotFound { .. }) => return Ok(report),
            Err(e) => return Err(e.into()),
        };
        let job = &record.job;
        let denied = record
            .policy
            .as_ref()
            .is_some_and(|p| p.status == PolicyStatus::Denied);
        let changes = record
            .summary
            .as_ref()
            .and_then(|s| s.has_changes.or(Some(s.add + s.change + s.destroy > 0)));
        report.status = match job.state {
            JobState::Queued if applying => EnvStatus::Queued { behind: None },
            JobState::Queued => EnvStatus::Queued { behind: None },
            JobState::Dispatching | JobState::Running if applying => EnvStatus::Applying,
            JobState::Dispatching | JobState::Running => EnvStatus::Planning,
            JobState::AwaitingApproval => EnvStatus::AwaitingApproval,
            JobState::Succeeded if applying => EnvStatus::Applied,
            JobState::Succeeded if changes == Some(false) => EnvStatus::NoChanges,
            JobState::Succeeded => EnvStatus::Planned,
            _ if denied => EnvStatus::PolicyDenied,
            JobState::Failed | JobState::TimedOut if applying => EnvStatus::ApplyFailed {
                reason: job.reason().to_string(),
            },
            JobState::Failed | JobState::TimedOut => EnvStatus::PlanFailed {
                reason: job.reason().to_string(),
            },
            JobState::Canceled | JobState::Discarded => EnvStatus::Cancelled,
        };
        report.counts = record.summary.as_ref().map(|s| Counts {
            add: s.add,
            change: s.change,
            destroy: s.destroy,
        });
        report.policy = record
            .policy
            .iter()
            .flat_map(|p| p.sets.iter())
            .map(|s| PolicyLine {
                set: s.set.clone(),
                outcome: if !s.deny.is_empty() || s.error.is_some() {
                    "deny".into()
                } else if !s.warn.is_empty() {
                    "warn".into()
                } else {
                    "pass".into()
                },
                messages: s.deny.iter().chain(s.warn.iter()).cloned().collect(),
            })
            .collect();
        if !matches!(job.state, JobState::Queued | JobState::Dispatching) {
            if let Some(view) = self.plan_view(&job.id).await? {
                let (changed, diff) = plan_shown(&view);
                report.changed = changed;
                report.diff = Some(diff);
            }
        }
        report.job_id = Some(job_id.clone());
        report.job_url = Some(format!(
            "{}/#/jobs/{job_id}",
            self.console_url.trim_end_matches('/')
        ));
        Ok(report)
    }
}

impl PullRequests {
    /// The plan a report shows, from job `id`'s redacted plan data: `None` when there is
    /// none (not planned yet, Terraform 0.11, no bucket) or when it is over
    /// [`REPORT_PLAN_MAX_BYTES`] (the job's page shows it). Only a retryable error of the
    /// bucket is an error (the report is written again); any other is logged and the
    /// report goes without the plan.
    async fn plan_view(&self, id: &JobId) -> Result<Option<PlanView>, PullError> {
        let Some(artifacts) = &self.jobs.gate.artifacts else {
            return Ok(None);
        };
        match read_plan_data_within(artifacts.as_ref(), id, REPORT_PLAN_MAX_BYTES).await {
            Ok(PlanData::Available(doc)) => Ok(Some(PlanView::from_document(&doc))),
            Ok(PlanData::Unavailable(_)) => Ok(None),
            Err(e) if e.is_retryable() => Err(e.into()),
            Err(e) => {
                warn!(job_id = %id, error = %e, "the plan could not be read for the pull request's report");
                Ok(None)
            }
        }
    }
}

/// The largest plan data (`plan.json`, in bytes) a report reads to show its changes and
/// text (4 MiB, about 40 MiB once parsed: well within the pulls function's memory). A
/// larger plan's counts and policy results are still shown, its changes on the job's page.
pub const REPORT_PLAN_MAX_BYTES: usize = 4 * 1024 * 1024;

/// The SHA-256 of what was written, as JSON.
fn digest<T: serde::Serialize>(value: &T) -> String {
    let text = serde_json::to_vec(value).unwrap_or_default();
    sortie_core::tokens::sha256_hex(&text)
}
