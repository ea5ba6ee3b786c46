//! The bus: `sortie.job.ended` and Sortie's other events on its EventBridge bus.

use async_trait::async_trait;
use aws_sdk_eventbridge::types::PutEventsRequestEntry;
use serde_json::json;
use sortie_store::JobRecord;

use crate::LifecycleError;

/// The `source` of Sortie's own events.
pub const SOURCE: &str = "sortie";
/// The `detail-type` of a job that reached a terminal state: its end.
pub const JOB_ENDED: &str = "sortie.job.ended";
/// The name [`JOB_ENDED`] had before the rename to one word for a job's end: published
/// beside it on EventBridge, with the same detail, for one release (0.2.x), so a rule of
/// a subscriber's own still matches while it moves to `sortie.job.ended`. Sortie's own
/// rules and consumers read only `sortie.job.ended` ([`sortie_core::notify::kind_of`]
/// gives this name no kind, so no destination is sent an end twice).
pub const JOB_COMPLETED_ALIAS: &str = "sortie.job.completed";
/// The `detail-type` of a pull request's job claimed by dispatch (launched or offered
/// to its agent pool): its check goes in progress. Other jobs do not publish it.
pub const JOB_DISPATCHED: &str = "sortie.job.dispatched";
/// The `detail-type` of a pull request's apply approved (by a person or the policy gate):
/// its requirements are checked again before its apply phase. Other jobs do not publish it.
pub const JOB_APPROVED: &str = "sortie.job.approved";
/// The `detail-type` of a reviewed job whose plan awaits a decision.
pub const JOB_AWAITING_APPROVAL: &str = "sortie.job.awaiting_approval";
/// The `detail-type` of a plan checked against its environment's policy sets (the gate).
pub const JOB_POLICY_CHECKED: &str = "sortie.job.policy_checked";
/// The `detail-type` of a drift check that found changes.
pub const ENVIRONMENT_DRIFTED: &str = "sortie.environment.drifted";
/// The `detail-type` of a reminder that an environment expires soon (2 days, 2 hours and
/// 30 minutes before; each once).
pub const ENVIRONMENT_EXPIRING: &str = "sortie.environment.expiring";
/// The `detail-type` of an expired environment whose destroy waits: it is busy or locked.
pub const ENVIRONMENT_EXPIRY_WAITING: &str = "sortie.environment.expiry_waiting";
/// The `detail-type` of an expiry whose destroy could not be submitted or failed: it is
/// retried with backoff.
pub const ENVIRONMENT_EXPIRY_FAILED: &str = "sortie.environment.expiry_failed";

/// Publishes lifecycle events.
#[async_trait]
pub trait Bus: Send + Sync {
    /// Publishes that a job reached a terminal state.
    async fn job_ended(&self, record: &JobRecord) -> Result<(), LifecycleError>;
    /// Publishes one event of `detail_type` about `resource` (`sortie:job/<id>`,
    /// `sortie:environment/<path>`). Buses that only count completions keep this default,
    /// which publishes nothing.
    async fn publish(
        &self,
        detail_type: &str,
        resource: &str,
        detail: serde_json::Value,
    ) -> Result<(), LifecycleError> {
        let _ = (detail_type, resource, detail);
        Ok(())
    }
}

/// The detail of `sortie.job.ended`.
pub fn ended_detail(record: &JobRecord) -> serde_json::Value {
    let job = &record.job;
    let mut detail = json!({
        "job_id": job.id,
        "environment": job.environment.to_string(),
        "org": job.environment.org(),
        "operation": job.request.operation,
        "state": job.state,
        "reason": job.reason(),
        "runner_id": job.runner_id.to_string(),
        "task_arn": record.task,
        "requested_by": job.requested_by,
    });
    // A pull request's job names it: the template's rule sends its end to the pull queue.
    if let Some(pr) = &job.pull_request {
        detail["pull_request"] = json!(pr);
    }
    detail
}

/// Sortie's EventBridge bus.
#[derive(Debug, Clone)]
pub struct EventBridgeBus {
    client: aws_sdk_eventbridge::Client,
    bus_name: String,
}

impl EventBridgeBus {
    /// The bus named `bus_name`.
    pub fn new(client: aws_sdk_eventbridge::Client, bus_name: impl Into<String>) -> Self {
        Self {
            client,
            bus_name: bus_name.into(),
        }
    }

    /// One PutEvents call with `entries` (at most 10, EventBridge's limit); any entry
    /// refused fails the call, quoting EventBridge.
    async fn put(&self, entries: Vec<PutEventsRequestEntry>) -> Result<(), LifecycleError> {
        let out = self
            .client
            .put_events()
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(|e| {
                LifecycleError::Bus(aws_sdk_eventbridge::error::DisplayErrorContext(&e).to_string())
            })?;
        if out.failed_entry_count() > 0 {
            let why = out
                .entries()
                .iter()
                .find_map(|e| e.error_message.clone())
                .unwrap_or_default();
            return Err(LifecycleError::Bus(format!(
                "PutEvents rejected the event: {why}"
            )));
        }
        Ok(())
    }
}

#[async_trait]
impl Bus for EventBridgeBus {
    async fn job_ended(&self, record: &JobRecord) -> Result<(), LifecycleError> {
        // One PutEvents call with the end and its alias (JOB_COMPLETED_ALIAS).
        let resource = format!("sortie:job/{}", record.job.id);
        let detail = ended_detail(record).to_string();
        let entries = [JOB_ENDED, JOB_COMPLETED_ALIAS].map(|detail_type| {
            PutEventsRequestEntry::builder()
                .event_bus_name(&self.bus_name)
                .source(SOURCE)
                .detail_type(detail_type)
                .resources(&resource)
                .detail(&detail)
                .build()
        });
        self.put(entries.to_vec()).await
    }

    async fn publish(
        &self,
        detail_type: &str,
        resource: &str,
        detail: serde_json::Value,
    ) -> Result<(), LifecycleError> {
        let entry = PutEventsRequestEntry::builder()
            .event_bus_name(&self.bus_name)
            .source(SOURCE)
            .detail_type(detail_type)
            .resources(resource)
            .detail(detail.to_string())
            .build();
        self.put(vec![entry]).await
    }
}
