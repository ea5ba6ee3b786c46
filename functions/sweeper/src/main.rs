//! `sweeper`: EventBridge schedule → one bounded, idempotent sweep pass.
//!
//! Wiring plus one handler. The sweep itself lands with issue 4.

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use lambda_runtime::{run, service_fn, Error, LambdaEvent};

/// Handles one schedule tick.
async fn handler(event: LambdaEvent<EventBridgeEvent<serde_json::Value>>) -> Result<(), Error> {
    tracing::info!(time = ?event.payload.time, "sweep tick received");
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    sortie_telemetry::init();
    run(service_fn(handler)).await
}
