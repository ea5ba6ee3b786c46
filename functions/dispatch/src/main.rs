//! `dispatch`: SQS jobs queue → claim, assume the runner's role, launch, record.
//!
//! Wiring plus one handler; the batch logic is `sortie_lambda_adapters::dispatch_batch`.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use sortie_wiring::{compose, AwsComposition, Resources};

/// Handles one SQS batch, answering with the records to retry.
async fn handler(
    parts: &AwsComposition,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, Error> {
    Ok(sortie_lambda_adapters::dispatch_batch(&parts.engine, &parts.queue, event.payload).await)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    sortie_telemetry::init();
    let config = sortie_wiring::function_sdk_config().await;
    let parts = compose(&config, Resources::for_function("dispatch")?, None);
    run(service_fn(|event| handler(&parts, event))).await
}
