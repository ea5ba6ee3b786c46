//! The sweep's secret step (issue 41): any job secret (`sortie/jobs/…`, tagged with its
//! job) whose job has ended is deleted, so a value outlives its job by one sweep at most
//! even when the end's own delete failed (throttled past its retries, a crash, a timeout).
//! Found with ListSecrets filtered by the job tag, paged with NextToken to the end (at most
//! [`SECRET_PAGES`] pages and [`SECRET_DELETES`] deletions a pass); each secret on its
//! own: a failure is counted and the others go on.

use super::*;
use sortie_core::sensitive::{self, SecretOwner};

/// The secrets one ListSecrets page asks for (its largest `MaxResults`).
pub const SECRET_PAGE_SIZE: i32 = 100;
/// The most pages one pass reads.
pub const SECRET_PAGES: usize = 20;
/// The most secrets one pass deletes (at Secrets Manager's 50 DeleteSecret per second, a
/// few seconds of the sweeper's two minutes).
pub const SECRET_DELETES: usize = 200;

impl Engine {
    /// Deletes the job secrets whose job has ended ([`sensitive::sweep_deletes`]), counting
    /// them in [`SweepReport::secrets_deleted`] and each failure in `errors`.
    pub(super) async fn sweep_secrets(&self, now: DateTime<Utc>, report: &mut SweepReport) {
        let mut token: Option<String> = None;
        for _ in 0..SECRET_PAGES {
            let page = match self
                .jobs
                .secrets
                .list_page(token.as_deref(), SECRET_PAGE_SIZE)
                .await
            {
                Ok(page) => page,
                Err(e) => {
                    warn!(error = %e, "job secrets could not be listed; next pass tries again");
                    report.errors += 1;
                    return;
                }
            };
            for secret in &page.secrets {
                if report.secrets_deleted >= SECRET_DELETES {
                    info!("job secrets: the pass's deletions are spent; next pass goes on");
                    return;
                }
                self.sweep_secret(secret, now, report).await;
            }
            match page.next {
                Some(next) => token = Some(next),
                None => return,
            }
        }
        warn!(
            pages = SECRET_PAGES,
            "job secrets: stopped at the bound on pages"
        );
    }

    /// One secret: deleted when its job has ended (or is missing past the grace).
    async fn sweep_secret(
        &self,
        secret: &sortie_launch::ListedSecret,
        now: DateTime<Utc>,
        report: &mut SweepReport,
    ) {
        let Some(job) = secret
            .job
            .as_deref()
            .or_else(|| sensitive::job_of_secret(&secret.name))
        else {
            return;
        };
        let id = JobId::from(job.to_string());
        let owner = match self.jobs.store.get_job(&id).await {
            Ok(record) if record.job.state.is_terminal() => SecretOwner::Ended,
            Ok(_) => SecretOwner::Live,
            Err(StoreError::NotFound { .. }) => SecretOwner::Missing,
            Err(e) => {
                warn!(job_id = %id, error = %e, "a job secret's job could not be read; next pass tries again");
                report.errors += 1;
                return;
            }
        };
        if !sensitive::sweep_deletes(owner, secret.created, now) {
            return;
        }
        if self.jobs.delete_secret(&id, &secret.arn).await {
            report.secrets_deleted += 1;
        } else {
            report.errors += 1;
        }
    }
}
