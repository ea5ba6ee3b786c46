//! A job's end reaches its pull request: the bus that queues a report of the job's pull
//! request beside publishing `sortie.job.completed` (`sortie dev` and tests; on AWS an
//! EventBridge rule sends the completed events of pull-request jobs to the same queue).

use std::sync::Arc;

use async_trait::async_trait;
use sortie_core::vcs::work::PullWork;
use sortie_store::{JobRecord, PullQueue};
use tracing::warn;

use crate::{Bus, LifecycleError};

/// A [`Bus`] that also queues [`PullWork::Report`] for a pull request's job when it ends.
pub struct PullReportingBus {
    /// The bus it publishes to.
    pub inner: Arc<dyn Bus>,
    /// Where the reports go.
    pub queue: Arc<dyn PullQueue>,
}

/// The report a job's end asks for, when the job is a pull request's.
pub fn report_of(record: &JobRecord) -> Option<PullWork> {
    let pr = record.job.pull_request.as_ref()?;
    Some(PullWork::Report {
        org: record.job.environment.org().to_string(),
        repository: pr.repository.clone(),
        number: pr.number,
    })
}

#[async_trait]
impl Bus for PullReportingBus {
    async fn job_completed(&self, record: &JobRecord) -> Result<(), LifecycleError> {
        if let Some(work) = report_of(record) {
            // Best effort, as the event itself: the next change or the reconcile reports.
            if let Err(e) = self.queue.send_work(&work).await {
                warn!(error = %e, "the pull request's report could not be queued");
            }
        }
        self.inner.job_completed(record).await
    }

    async fn publish(
        &self,
        detail_type: &str,
        resource: &str,
        detail: serde_json::Value,
    ) -> Result<(), LifecycleError> {
        self.inner.publish(detail_type, resource, detail).await
    }
}
