//! `pulls`: the pull queue's batches and the schedule's reconcile tick.
//!
//! A record is pull-request work ([`PullWork`]) or a pull-request job's
//! `sortie.job.ended` event (the template's rule sends those, asking for a report). A
//! record the host failed is delayed by [`retry_delay`] and is a batch item failure, so SQS
//! delivers it again, at most 8 times (the queue's redrive policy), then to the DLQ; a
//! record that is not pull-request work goes to the DLQ at once (its visibility set to 0).
//! A tick queues one reconcile per connected organisation.

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use lambda_runtime::Diagnostic;
use sortie_lifecycle::pull_requests::{work_of_message, HostError, PullError, PullRequests};
use sortie_store::SqsPullQueue;

/// What the `pulls` function works with.
pub struct PullsParts {
    /// The pull-request service.
    pub prs: PullRequests,
    /// The pull queue: reconciles go to it, and a failed record's redelivery is delayed on it.
    pub queue: SqsPullQueue,
}

/// Why an invocation of `pulls` failed.
#[derive(Debug, thiserror::Error)]
pub enum PullsError {
    /// The work failed (a tick that could not queue every reconcile).
    #[error(transparent)]
    Pull(#[from] PullError),
    /// The event is neither an SQS batch nor a schedule's tick.
    #[error("not a pull queue batch: {0}")]
    Event(String),
}

impl PullsError {
    /// The error's class, as Lambda's `errorType`.
    pub fn class(&self) -> &'static str {
        match self {
            Self::Pull(PullError::Store(_)) => "StoreError",
            Self::Pull(PullError::Host(_)) => "HostError",
            Self::Pull(PullError::Waiting(_)) => "Waiting",
            Self::Event(_) => "InvalidEvent",
        }
    }
}

impl From<PullsError> for Diagnostic {
    fn from(e: PullsError) -> Self {
        Diagnostic {
            error_type: e.class().to_string(),
            error_message: e.to_string(),
        }
    }
}

/// The delay before try `receive_count + 1` of work that failed with `error`: what the
/// host asked for (`Retry-After`), else 30 s doubling to at most 15 minutes, so that 8
/// receives span about 45 minutes of a host's outage (and the reconcile covers the rest).
pub fn retry_delay(receive_count: u32, error: &PullError) -> i32 {
    let doubling = 30u64 << receive_count.saturating_sub(1).min(5);
    let asked = match error {
        PullError::Host(HostError::Unavailable {
            retry_after_seconds,
            ..
        }) => *retry_after_seconds,
        _ => 0,
    };
    i32::try_from(doubling.max(asked).min(900)).unwrap_or(900)
}

/// One invocation: an SQS batch (`Records`) answers its batch item failures; anything else
/// is the schedule's tick, which queues the reconciles.
pub async fn pulls_event(
    parts: &PullsParts,
    event: serde_json::Value,
) -> Result<serde_json::Value, PullsError> {
    if event.get("Records").is_some() {
        let batch: SqsEvent =
            serde_json::from_value(event).map_err(|e| PullsError::Event(e.to_string()))?;
        let response = pull_batch(parts, batch).await;
        return Ok(serde_json::to_value(response).expect("a batch response serialises"));
    }
    let queued = parts.prs.queue_reconciles(&parts.queue).await?;
    tracing::info!(queued, "reconciles queued");
    Ok(serde_json::Value::Null)
}

/// Handles a batch of the pull queue, one record after another (GitHub's secondary rate
/// limits punish bursts; the event source runs a few batches at once).
pub async fn pull_batch(parts: &PullsParts, event: SqsEvent) -> SqsBatchResponse {
    let mut response = SqsBatchResponse::default();
    for record in event.records {
        if let Some(message_id) = pull_record(parts, record).await {
            let mut failure = BatchItemFailure::default();
            failure.item_identifier = message_id;
            response.batch_item_failures.push(failure);
        }
    }
    response
}

/// One record; its message id when it is a batch item failure.
async fn pull_record(parts: &PullsParts, record: SqsMessage) -> Option<String> {
    let message_id = record.message_id.clone().unwrap_or_default();
    let receive_count: u32 = record
        .attributes
        .get("ApproximateReceiveCount")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let Some(work) = work_of_message(record.body.as_deref().unwrap_or_default()) else {
        tracing::error!(%message_id, "not pull-request work: it goes to the dead-letter queue");
        delay(parts, &record, 0).await;
        return Some(message_id);
    };
    match parts.prs.handle(&work).await {
        Ok(()) => None,
        Err(e) if e.is_retryable() => {
            let seconds = retry_delay(receive_count, &e);
            tracing::warn!(%message_id, org = work.org(), receive_count, delay_seconds = seconds, error = %e, "pull-request work failed; trying again later");
            delay(parts, &record, seconds).await;
            Some(message_id)
        }
        Err(e) => {
            tracing::error!(%message_id, org = work.org(), error = %e, "pull-request work refused for good: dropped");
            None
        }
    }
}

async fn delay(parts: &PullsParts, record: &SqsMessage, seconds: i32) {
    if let Some(handle) = record.receipt_handle.as_deref() {
        if let Err(e) = parts.queue.delay_redelivery(handle, seconds).await {
            tracing::warn!(error = %e, "could not set the retry delay");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delay_doubles_from_30_seconds_to_15_minutes_and_honours_retry_after() {
        let down = PullError::Host(HostError::Unavailable {
            message: "502".into(),
            retry_after_seconds: 1,
        });
        let delays: Vec<i32> = (1..=8).map(|n| retry_delay(n, &down)).collect();
        assert_eq!(delays, [30, 60, 120, 240, 480, 900, 900, 900]);
        let limited = PullError::Host(HostError::Unavailable {
            message: "secondary rate limit".into(),
            retry_after_seconds: 600,
        });
        assert_eq!(retry_delay(1, &limited), 600);
        assert_eq!(
            retry_delay(
                1,
                &PullError::Host(HostError::Unavailable {
                    message: String::new(),
                    retry_after_seconds: 86_400
                })
            ),
            900
        );
    }
}
