//! `notify`: the notify queue's batches. A record is an event of the bus (fanned out, one
//! message per delivery) or one delivery (attempted). A delivery the receiver failed is
//! made visible again when the retry rule says (a batch item failure), so its receive count
//! is its attempt count; the queue's redrive sends a message to its DLQ after more receives
//! than the rule's 24 hours hold. A record that is neither goes to the DLQ (visible again at
//! once, until its receives run out).

use std::sync::Arc;

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use chrono::{DateTime, TimeZone, Utc};
use futures_util::stream::{self, StreamExt};
use sortie_core::notify::delivery::Next;
use sortie_lifecycle::notify_queue::{message_of, NotifyMessage};
use sortie_lifecycle::{NotificationRefusal, Notifications, Sender};
use sortie_store::{SqsDeliveryQueue, StoreError};

use crate::RECORDS_IN_FLIGHT;

/// What the `notify` function works with.
pub struct NotifyParts {
    /// The notification service.
    pub notifications: Notifications,
    /// The notify queue: deliveries go to it, and a retry's wait is set on it.
    pub queue: SqsDeliveryQueue,
    /// Sends one delivery (the SSRF-guarded client).
    pub sender: Arc<dyn Sender>,
    /// The console Slack messages link to.
    pub console_url: String,
}

/// The wait before a record whose handling failed in the control plane (the store, Secrets
/// Manager, the queue; not the receiver) is tried again: 30 s doubling to 15 minutes.
pub fn plane_retry_delay(receive_count: u32) -> i32 {
    let seconds = 30u64 << receive_count.saturating_sub(1).min(5);
    i32::try_from(seconds.min(900)).unwrap_or(900)
}

/// Handles a batch of the notify queue, a few records at once; the records to try again.
pub async fn notify_batch(parts: &NotifyParts, event: SqsEvent) -> SqsBatchResponse {
    let failed: Vec<Option<String>> = stream::iter(event.records)
        .map(|record| notify_record(parts, record))
        .buffer_unordered(RECORDS_IN_FLIGHT)
        .collect()
        .await;
    let mut response = SqsBatchResponse::default();
    for message_id in failed.into_iter().flatten() {
        let mut failure = BatchItemFailure::default();
        failure.item_identifier = message_id;
        response.batch_item_failures.push(failure);
    }
    response
}

/// When SQS first received the message (its `SentTimestamp`, in milliseconds).
fn sent_at(record: &SqsMessage) -> Option<DateTime<Utc>> {
    let ms: i64 = record.attributes.get("SentTimestamp")?.parse().ok()?;
    Utc.timestamp_millis_opt(ms).single()
}

/// One record; its message id when it is a batch item failure.
async fn notify_record(parts: &NotifyParts, record: SqsMessage) -> Option<String> {
    let message_id = record.message_id.clone().unwrap_or_default();
    let receive_count: u32 = record
        .attributes
        .get("ApproximateReceiveCount")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let now = Utc::now();
    match message_of(record.body.as_deref().unwrap_or_default()) {
        None => {
            tracing::error!(%message_id, "neither an event nor a delivery: it goes to the dead-letter queue");
            delay(parts, &record, 0).await;
            Some(message_id)
        }
        Some(NotifyMessage::Event(event)) => {
            match parts.notifications.fan_out_to(&event, &parts.queue).await {
                Ok(queued) => {
                    tracing::info!(%message_id, event = %event.detail_type, queued, "event fanned out");
                    None
                }
                Err(e) => {
                    tracing::warn!(%message_id, error = %e, "the event could not be fanned out; trying again later");
                    delay(parts, &record, plane_retry_delay(receive_count)).await;
                    Some(message_id)
                }
            }
        }
        Some(NotifyMessage::Delivery(mut pending)) => {
            // The message is the delivery: its receives are its attempts.
            pending.attempts = receive_count.saturating_sub(1);
            pending.first_at = sent_at(&record).or(pending.first_at);
            match parts
                .notifications
                .attempt(&pending, parts.sender.as_ref(), &parts.console_url, now)
                .await
            {
                Ok(done) => match done.next {
                    Next::RetryAt(at) => {
                        let wait = (at - now).num_seconds().clamp(1, 43_200);
                        let wait = i32::try_from(wait).unwrap_or(43_200);
                        delay(parts, &record, wait).await;
                        Some(message_id)
                    }
                    Next::Delivered | Next::GaveUp(_) => None,
                },
                Err(NotificationRefusal::Store(StoreError::NotFound { .. })) => {
                    tracing::info!(delivery = %pending.id, "the destination is gone: its delivery is dropped");
                    None
                }
                Err(e) => {
                    tracing::warn!(delivery = %pending.id, error = %e, "the delivery could not be attempted; trying again later");
                    delay(parts, &record, plane_retry_delay(receive_count)).await;
                    Some(message_id)
                }
            }
        }
    }
}

async fn delay(parts: &NotifyParts, record: &SqsMessage, seconds: i32) {
    if let Some(handle) = record.receipt_handle.as_deref() {
        if let Err(e) = parts.queue.delay_redelivery(handle, seconds).await {
            tracing::warn!(error = %e, "could not set the retry delay");
        }
    }
}
