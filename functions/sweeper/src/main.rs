//! `sweeper`: EventBridge schedule → one bounded, idempotent sweep pass.
//!
//! Wiring plus one handler; the logic is `sortie_handlers::sweep_tick`.

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use sortie_lifecycle::wiring::{from_env, Wired};

/// Runs one sweep pass per schedule tick.
async fn handler(
    wired: &Wired,
    tick: LambdaEvent<EventBridgeEvent<serde_json::Value>>,
) -> Result<(), Error> {
    sortie_handlers::sweep_tick(&wired.engine, tick.payload).await?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    sortie_telemetry::init();
    let config = aws_config::load_from_env().await;
    let wired = from_env(&config)?;
    run(service_fn(|event| handler(&wired, event))).await
}
