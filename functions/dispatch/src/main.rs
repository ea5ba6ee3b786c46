//! `dispatch`: SQS jobs queue → claim, assume role, launch.
//!
//! Wiring plus one handler. Until launching lands (issue 4) every record is
//! reported as a batch item failure, so no job message is ever dropped.

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use lambda_runtime::{run, service_fn, Error, LambdaEvent};

/// Handles one SQS batch, answering with the records to retry.
async fn handler(event: LambdaEvent<SqsEvent>) -> Result<SqsBatchResponse, Error> {
    let mut response = SqsBatchResponse::default();
    for record in event.payload.records {
        tracing::warn!(message_id = ?record.message_id, "dispatch is not implemented yet; keeping the message");
        let mut failure = BatchItemFailure::default();
        failure.item_identifier = record.message_id.unwrap_or_default();
        response.batch_item_failures.push(failure);
    }
    Ok(response)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    sortie_telemetry::init();
    run(service_fn(handler)).await
}
