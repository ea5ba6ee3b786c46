//! `dispatch`: SQS jobs queue → claim, assume the runner's role, launch, record.
//!
//! Wiring plus one handler. Each record is handled by `Engine::dispatch`; only the
//! records worth retrying (and poison, on its way to the DLQ) are batch item failures.

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use sortie_lifecycle::wiring::{from_env, Wired};
use sortie_lifecycle::RecordOutcome;

/// Handles one SQS batch; one bad record never fails the others.
async fn handler(wired: &Wired, event: LambdaEvent<SqsEvent>) -> Result<SqsBatchResponse, Error> {
    let mut response = SqsBatchResponse::default();
    for record in event.payload.records {
        let message_id = record.message_id.clone().unwrap_or_default();
        let receive_count = record
            .attributes
            .get("ApproximateReceiveCount")
            .and_then(|v| v.parse().ok())
            .unwrap_or(1);
        let outcome = wired
            .engine
            .dispatch(record.body.as_deref().unwrap_or_default(), receive_count)
            .await;
        let failed = match outcome {
            RecordOutcome::Done => false,
            RecordOutcome::Retry {
                delay_seconds,
                reason,
            } => {
                tracing::warn!(%message_id, delay_seconds, %reason, "retrying the record later");
                if let Some(handle) = record.receipt_handle.as_deref() {
                    if let Err(e) = wired.queue.delay_redelivery(handle, delay_seconds).await {
                        tracing::warn!(%message_id, error = %e, "could not set the retry delay");
                    }
                }
                true
            }
            RecordOutcome::Poison(reason) => {
                tracing::error!(%message_id, %reason, "poison message; it goes to the dead-letter queue after 5 receives");
                true
            }
        };
        if failed {
            let mut failure = BatchItemFailure::default();
            failure.item_identifier = message_id;
            response.batch_item_failures.push(failure);
        }
    }
    Ok(response)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    sortie_telemetry::init();
    let config = aws_config::load_from_env().await;
    let wired = from_env(&config)?;
    run(service_fn(|event| handler(&wired, event))).await
}
