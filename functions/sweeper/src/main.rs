//! `sweeper`: EventBridge schedule → one bounded, idempotent sweep pass.
//!
//! Wiring plus one handler; the logic is `sortie_lambda_adapters::sweep_tick`.

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use sortie_lambda_adapters::{FunctionError, SweepResume};
use sortie_wiring::{compose, Composition, Resources};

/// Runs one sweep pass per schedule tick; a failed pass reports its class as the `errorType`.
/// A pass that spent its budget leaves in `resume` where the next tick starts.
async fn handler(
    parts: &Composition,
    resume: &SweepResume,
    tick: LambdaEvent<EventBridgeEvent<serde_json::Value>>,
) -> Result<(), FunctionError> {
    sortie_lambda_adapters::sweep_tick_resuming(&parts.engine, resume, tick.payload).await?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    sortie_telemetry::init();
    let config = sortie_wiring::function_sdk_config().await;
    let parts = compose(&config, Resources::for_function("sweeper")?, None);
    let resume = SweepResume::default();
    run(service_fn(|event| handler(&parts, &resume, event))).await
}
