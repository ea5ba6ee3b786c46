//! The local event sources: the jobs-queue poller feeding `SqsEvent` batches to dispatch,
//! local runners' exits as task events, and resending what was queued before a restart.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use serde_json::json;
use sortie_launch::LocalLauncher;
use sortie_lifecycle::{EcsTaskStateChange, Engine};
use sortie_store::SqsJobQueue;

use super::at_once::{tag_of, Handed, Settled};

/// Jobs-queue pollers running at once (Lambda's SQS event source mapping starts with 5).
pub(super) const POLLERS: usize = 4;

/// Received batches handled at once, across the pollers: a poller hands each batch on and
/// polls again at once, as Lambda's event source mapping invokes the function for each
/// batch while its pollers keep receiving (it scales invocations with the queue's depth).
/// A poller waits for a free slot before it receives, so at most this many batches are
/// received and not yet handled.
pub(super) const BATCHES_IN_FLIGHT: usize = 64;

/// Local task events handled at once.
pub(super) const EVENTS_IN_FLIGHT: usize = 32;

/// A local task event waiting to be handled (after its task's earlier events).
pub(super) struct PendingEvent {
    /// Its handling.
    pub(super) handle: tokio::task::JoinHandle<()>,
    /// Its `lastStatus`.
    pub(super) status: String,
    /// Set when a later event of its task makes it moot: it is then not handled.
    pub(super) skip: Arc<AtomicBool>,
}

/// Whether a task event with `earlier` status is moot once the task's `later` event
/// arrived: anything before a STOPPED is, and the STOPPED does not wait for it. The
/// engine already takes a STOPPED first and a RUNNING after it, or both at once
/// (EventBridge keeps no order, and invokes task-events for each at once): a RUNNING
/// after the STOPPED is ignored, so skipping one not started changes no outcome, and one
/// under way races the STOPPED's conditional writes as on AWS. The STOPPED no longer
/// waits for a RUNNING's two or three round trips (a runner that ends at once).
pub(super) fn superseded_by(earlier: &str, later: &str) -> bool {
    later == "STOPPED" && earlier != "STOPPED"
}

/// Sends every queued lock holder's message again (at most 1,000).
pub(super) async fn resend_queued(
    store: &dyn sortie_store::JobStore,
    queue: &dyn sortie_store::JobQueue,
) {
    let listed = match store
        .pending_sends(chrono::Utc::now() + chrono::Duration::seconds(1), 1000)
        .await
    {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(error = %e, "queued jobs could not be listed; the sweeper re-sends them");
            return;
        }
    };
    let mut sent = 0;
    for job in listed.records {
        match queue.send(&job, 0).await {
            Ok(()) => sent += 1,
            Err(e) => {
                tracing::warn!(job_id = %job.id, error = %e, "re-send failed; the sweeper re-sends it")
            }
        }
    }
    if sent > 0 {
        println!("sortie dev: sent {sent} queued job(s) again");
    }
}

/// Handles one local runner event as the task-events function would, retrying a failure
/// a few times; a STOPPED event that was handled is acknowledged to the launcher.
pub(super) async fn local_task_event(
    engine: &Engine,
    local: &LocalLauncher,
    detail: serde_json::Value,
) {
    let event = json!({
        "version": "0", "id": sortie_core::tokens::random_hex(8), "detail-type": "ECS Task State Change", "source": "aws.ecs",
        "account": "000000000000", "time": chrono::Utc::now(), "region": "local", "resources": [detail["taskArn"].clone()], "detail": detail,
    });
    let parsed: EventBridgeEvent<EcsTaskStateChange> = match serde_json::from_value(event) {
        Ok(e) => e,
        Err(e) => {
            tracing::error!(error = %e, "unreadable local task event");
            return;
        }
    };
    for attempt in 1..=5 {
        match sortie_lambda_adapters::task_state_change(engine, parsed.clone()).await {
            Ok(_) => {
                if parsed.detail.last_status == "STOPPED" {
                    local.acknowledge(&parsed.detail.task_arn).await;
                }
                return;
            }
            Err(e) => {
                tracing::warn!(attempt, error = %e, "task event failed; retrying");
                tokio::time::sleep(Duration::from_secs(attempt)).await;
            }
        }
    }
}

/// Chaos for the soak, from the environment of `sortie dev` (never set otherwise):
/// `SORTIE_DEV_CHAOS_DELIVER_TWICE=1` hands every batch of queue messages to dispatch twice,
/// at the same time, as SQS's at-least-once delivery may; `SORTIE_DEV_CHAOS_THROTTLE_PERCENT=N`
/// answers N% of launches with a throttling error, as ECS RunTask may.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Chaos {
    /// Every batch dispatched twice, concurrently.
    pub(super) deliver_twice: bool,
    /// The share of launches throttled, in percent.
    pub(super) throttle_percent: u8,
}

impl Chaos {
    /// Read from `SORTIE_DEV_CHAOS_*`; none set is no chaos.
    pub(super) fn from_env() -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        Self {
            deliver_twice: var("SORTIE_DEV_CHAOS_DELIVER_TWICE").is_some_and(|v| v != "0"),
            throttle_percent: var("SORTIE_DEV_CHAOS_THROTTLE_PERCENT")
                .and_then(|v| v.parse::<u8>().ok())
                .map_or(0, |p| p.min(100)),
        }
    }

    /// Whether any chaos is on.
    pub(super) fn any(&self) -> bool {
        self.deliver_twice || self.throttle_percent > 0
    }
}

/// One long poll of the jobs queue: up to 10 messages (none when it timed out).
pub(super) async fn receive(
    sqs: &aws_sdk_sqs::Client,
    url: &str,
) -> anyhow::Result<Vec<aws_sdk_sqs::types::Message>> {
    let (began, clock) = (std::time::SystemTime::now(), std::time::Instant::now());
    let got = sqs
        .receive_message()
        .queue_url(url)
        .max_number_of_messages(10)
        .wait_time_seconds(1)
        .message_system_attribute_names(
            aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount,
        )
        .message_attribute_names(sortie_store::DISPATCHED_HERE_ATTRIBUTE)
        .send()
        .await?;
    let messages = got.messages.unwrap_or_default();
    // The receive was the wait of each job it handed out (moto's timing, in the bench).
    for m in &messages {
        let body = m.body().unwrap_or_default();
        if let Ok(message) = serde_json::from_str::<sortie_store::JobMessage>(body) {
            let job = message.job_id.to_string();
            sortie_wiring::job_header::log_call(&job, "SQS.ReceiveMessage", began, clock.elapsed());
        }
    }
    Ok(messages)
}

/// Hands one received batch to dispatch (twice over under [`Chaos::deliver_twice`]), as
/// one Lambda invocation, then deletes the messages it did not report as failed with one
/// `DeleteMessageBatch` (a failed one comes back after its visibility timeout).
///
/// First each copy of a message dispatched here at once is settled by that hand-over
/// ([`Handed::settle`]): deleted unclaimed when it was handled, delayed when it asked for
/// a retry, and dispatched with the rest otherwise.
pub(super) async fn handle_batch(
    sqs: &aws_sdk_sqs::Client,
    url: &str,
    engine: &Engine,
    queue: &SqsJobQueue,
    handed: &Handed,
    received: Vec<aws_sdk_sqs::types::Message>,
    deliver_twice: bool,
) -> anyhow::Result<()> {
    let (mut handled, mut messages) = (Vec::new(), Vec::new());
    // One after another: the hand-overs run meanwhile, so the waits overlap.
    for message in received {
        match handed.settle(tag_of(&message)).await {
            Settled::Handled => handled.push(message),
            Settled::Dispatch => messages.push(message),
            Settled::Retry(delay) => {
                let handle = message.receipt_handle().unwrap_or_default();
                if let Err(e) = queue.delay_redelivery(handle, delay).await {
                    tracing::warn!(error = %e, "could not set the retry delay");
                }
            }
        }
    }
    let event = sqs_event(&messages);
    let mut failed: Vec<String> = Vec::new();
    let responses = if messages.is_empty() {
        vec![]
    } else if deliver_twice {
        let (a, b) = tokio::join!(
            sortie_lambda_adapters::dispatch_batch(engine, queue, event.clone()),
            sortie_lambda_adapters::dispatch_batch(engine, queue, event)
        );
        vec![a, b]
    } else {
        vec![sortie_lambda_adapters::dispatch_batch(engine, queue, event).await]
    };
    for response in responses {
        failed.extend(
            response
                .batch_item_failures
                .iter()
                .map(|f| f.item_identifier.clone()),
        );
    }
    handled.extend(messages);
    let done = done_entries(&handled, &failed);
    if done.is_empty() {
        return Ok(());
    }
    let answer = sqs
        .delete_message_batch()
        .queue_url(url)
        .set_entries(Some(done))
        .send()
        .await?;
    for f in answer.failed() {
        tracing::warn!(id = %f.id(), code = %f.code(), "a handled message was not deleted; it is delivered again (dispatch is idempotent)");
    }
    Ok(())
}

/// The received messages as the `SqsEvent` Lambda's event source mapping would send.
fn sqs_event(messages: &[aws_sdk_sqs::types::Message]) -> SqsEvent {
    let records: Vec<SqsMessage> = messages
        .iter()
        .map(|m| {
            let mut r = SqsMessage::default();
            r.message_id = m.message_id.clone();
            r.receipt_handle = m.receipt_handle.clone();
            r.body = m.body.clone();
            r.event_source = Some("aws:sqs".into());
            r.aws_region = Some("local".into());
            for (k, v) in m.attributes().into_iter().flatten() {
                r.attributes.insert(k.as_str().to_string(), v.clone());
            }
            r
        })
        .collect();
    let mut event = SqsEvent::default();
    event.records = records;
    event
}

/// The delete entries of the messages dispatch did not report as failed (at most 10: one
/// receive's worth, `DeleteMessageBatch`'s limit), each named by its place in the batch.
fn done_entries(
    messages: &[aws_sdk_sqs::types::Message],
    failed: &[String],
) -> Vec<aws_sdk_sqs::types::DeleteMessageBatchRequestEntry> {
    messages
        .iter()
        .take(10)
        .enumerate()
        .filter(|(_, m)| !failed.contains(&m.message_id.clone().unwrap_or_default()))
        .filter_map(|(i, m)| {
            aws_sdk_sqs::types::DeleteMessageBatchRequestEntry::builder()
                .id(i.to_string())
                .receipt_handle(m.receipt_handle.clone().unwrap_or_default())
                .build()
                .ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(id: &str) -> aws_sdk_sqs::types::Message {
        aws_sdk_sqs::types::Message::builder()
            .message_id(id)
            .receipt_handle(format!("rh-{id}"))
            .body("{}")
            .build()
    }

    #[test]
    fn only_a_stopped_event_makes_its_tasks_earlier_unhandled_events_moot() {
        assert!(superseded_by("RUNNING", "STOPPED"));
        assert!(superseded_by("PENDING", "STOPPED"));
        assert!(
            !superseded_by("STOPPED", "STOPPED"),
            "a STOPPED is always handled"
        );
        assert!(!superseded_by("PENDING", "RUNNING"));
        assert!(!superseded_by("RUNNING", "RUNNING"));
    }

    #[test]
    fn a_batch_deletes_every_message_but_the_failed_ones_in_one_call() {
        let batch: Vec<_> = ["a", "b", "c"].into_iter().map(message).collect();
        let done = done_entries(&batch, &["b".to_string()]);
        let handles: Vec<_> = done.iter().map(|e| e.receipt_handle()).collect();
        assert_eq!(handles, ["rh-a", "rh-c"]);
        let ids: Vec<_> = done.iter().map(|e| e.id()).collect();
        assert_eq!(ids, ["0", "2"], "ids are unique within the call");
        assert!(done_entries(&batch, &["a".into(), "b".into(), "c".into()]).is_empty());
        let event = sqs_event(&batch);
        assert_eq!(event.records.len(), 3);
        assert_eq!(event.records[1].receipt_handle.as_deref(), Some("rh-b"));
    }
}
