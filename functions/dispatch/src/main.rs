//! `dispatch`: SQS jobs queue → claim, assume the runner's role, launch, record.
//!
//! Wiring plus one handler; the batch logic is `sortie_handlers::dispatch_batch`.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use sortie_lifecycle::wiring::{from_env, Wired};

/// Handles one SQS batch, answering with the records to retry.
async fn handler(wired: &Wired, event: LambdaEvent<SqsEvent>) -> Result<SqsBatchResponse, Error> {
    Ok(sortie_handlers::dispatch_batch(&wired.engine, &wired.queue, event.payload).await)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    sortie_telemetry::init();
    let config = aws_config::load_from_env().await;
    let wired = from_env(&config)?;
    run(service_fn(|event| handler(&wired, event))).await
}
