//! `sweeper`: EventBridge schedule → one bounded, idempotent sweep pass.
//!
//! Wiring plus one handler.

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use sortie_lifecycle::wiring::{from_env, Wired};

/// Runs one sweep pass per schedule tick.
async fn handler(
    wired: &Wired,
    _tick: LambdaEvent<EventBridgeEvent<serde_json::Value>>,
) -> Result<(), Error> {
    let report = wired.engine.sweep(chrono::Utc::now()).await?;
    tracing::info!(?report, "sweep pass done");
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    sortie_telemetry::init();
    let config = aws_config::load_from_env().await;
    let wired = from_env(&config)?;
    run(service_fn(|event| handler(&wired, event))).await
}
