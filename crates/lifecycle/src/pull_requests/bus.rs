//! A job's end reaches its pull request: the bus that queues a report of the job's pull
//! request beside publishing `sortie.job.ended` (`sortie dev` and tests; on AWS an
//! EventBridge rule sends the completed events of pull-request jobs to the same queue).

use std::sync::Arc;

use async_trait::async_trait;
use sortie_core::vcs::work::PullWork;
use sortie_core::vcs::VcsProvider;
use sortie_store::{JobRecord, PullQueue};
use tracing::warn;

use crate::{Bus, LifecycleError};

/// The event kinds of a pull request's job that ask for its report: its claim by dispatch
/// (the check goes in progress), its approval (the requirements are checked again before
/// its apply phase) and its end.
pub const REPORTED_EVENTS: [&str; 3] = [
    crate::bus::JOB_DISPATCHED,
    crate::bus::JOB_APPROVED,
    crate::bus::JOB_ENDED,
];

/// The work a message of the pull queue carries: [`PullWork`] as Sortie queued it, or a
/// pull-request job's `sortie.job.dispatched` or `sortie.job.ended` event (as the
/// template's rule sends them), which asks for that pull request's report. `None` for
/// anything else.
pub fn work_of_message(body: &str) -> Option<PullWork> {
    if let Ok(work) = serde_json::from_str::<PullWork>(body) {
        return Some(work);
    }
    let event: serde_json::Value = serde_json::from_str(body).ok()?;
    if event.get("source")?.as_str()? != crate::bus::SOURCE
        || !REPORTED_EVENTS.contains(&event.get("detail-type")?.as_str()?)
    {
        return None;
    }
    report_of_detail(event.get("detail")?)
}

/// The report an event's detail asks for, when it names a pull request.
fn report_of_detail(detail: &serde_json::Value) -> Option<PullWork> {
    let pr = detail.get("pull_request")?;
    Some(PullWork::Report {
        org: detail.get("org")?.as_str()?.to_string(),
        provider: provider_named(pr.get("provider").and_then(|p| p.as_str()))?,
        repository: pr.get("repository")?.as_str()?.to_string(),
        number: pr.get("number")?.as_u64()?,
    })
}

/// The host a job's origin names (`github` when it names none: an origin recorded before
/// GitLab came); `None` for a host Sortie does not know.
fn provider_named(name: Option<&str>) -> Option<VcsProvider> {
    match name.unwrap_or("github") {
        "github" => Some(VcsProvider::Github),
        "gitlab" => Some(VcsProvider::Gitlab),
        _ => None,
    }
}

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
        provider: provider_named(Some(&pr.provider))?,
        repository: pr.repository.clone(),
        number: pr.number,
    })
}

#[async_trait]
impl Bus for PullReportingBus {
    async fn job_ended(&self, record: &JobRecord) -> Result<(), LifecycleError> {
        if let Some(work) = report_of(record) {
            // Best effort, as the event itself: the next change or the reconcile reports.
            if let Err(e) = self.queue.send_work(&work).await {
                warn!(error = %e, "the pull request's report could not be queued");
            }
        }
        self.inner.job_ended(record).await
    }

    async fn publish(
        &self,
        detail_type: &str,
        resource: &str,
        detail: serde_json::Value,
    ) -> Result<(), LifecycleError> {
        if REPORTED_EVENTS.contains(&detail_type) {
            if let Some(work) = report_of_detail(&detail) {
                if let Err(e) = self.queue.send_work(&work).await {
                    warn!(error = %e, "the pull request's report could not be queued");
                }
            }
        }
        self.inner.publish(detail_type, resource, detail).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sortie_core::vcs::origin::PullRequestRef;
    use sortie_core::{EnvPath, Job, JobRequest, RunnerId};

    fn record(pull_request: Option<PullRequestRef>) -> JobRecord {
        let request = JobRequest::from_value(
            &serde_json::json!({"operation": "plan", "files": {"main.tf": ""}}),
        )
        .unwrap();
        let mut job = Job::new(
            sortie_core::tokens::new_id(),
            EnvPath::parse("acme/web/dev").unwrap(),
            RunnerId::parse("acme/local").unwrap(),
            request,
            "github:octocat".into(),
            chrono::Utc::now(),
        );
        job.pull_request = pull_request;
        JobRecord::new(&job)
    }

    /// What EventBridge puts on the queue: the whole event, the detail as Sortie made it.
    fn event_body(record: &JobRecord, source: &str) -> String {
        event_of(record, source, crate::bus::JOB_ENDED)
    }

    fn event_of(record: &JobRecord, source: &str, detail_type: &str) -> String {
        serde_json::json!({
            "version": "0",
            "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
            "detail-type": detail_type,
            "source": source,
            "account": "123456789012",
            "time": "2026-11-28T22:00:00Z",
            "region": "us-east-1",
            "resources": [format!("sortie:job/{}", record.job.id)],
            "detail": crate::bus::ended_detail(record),
        })
        .to_string()
    }

    #[test]
    fn a_pull_request_jobs_completed_event_asks_for_its_report_and_other_messages_do_not() {
        let pr = PullRequestRef {
            provider: "github".into(),
            repository: "acme/infra".into(),
            number: 7,
            head_sha: "a".repeat(40),
            merged: false,
        };
        let with = record(Some(pr));
        assert_eq!(
            work_of_message(&event_body(&with, "sortie")),
            report_of(&with),
            "the rule's message is the report the bus would queue in sortie dev"
        );
        assert!(report_of(&with).is_some());
        assert_eq!(
            work_of_message(&event_of(&with, "sortie", crate::bus::JOB_DISPATCHED)),
            report_of(&with),
            "its claim by dispatch asks for the report too (the check goes in progress)"
        );
        assert_eq!(
            work_of_message(&event_of(&with, "sortie", crate::bus::JOB_POLICY_CHECKED)),
            None
        );
        let without = record(None);
        assert!(crate::bus::ended_detail(&without)
            .get("pull_request")
            .is_none());
        assert_eq!(work_of_message(&event_body(&without, "sortie")), None);
        assert_eq!(work_of_message(&event_body(&with, "aws.ecs")), None);
        for junk in ["", "not json", "{}", "[1,2]", r#"{"kind":"report"}"#] {
            assert_eq!(work_of_message(junk), None, "{junk:?}");
        }
        let queued = PullWork::Reconcile {
            org: "acme".into(),
            provider: VcsProvider::Github,
        };
        assert_eq!(
            work_of_message(&serde_json::to_string(&queued).unwrap()),
            Some(queued)
        );
    }
}
