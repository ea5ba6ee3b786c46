//! `task-events`: EventBridge `aws.ecs` "ECS Task State Change" → the job's outcome.
//!
//! Wiring plus one handler. An error makes EventBridge retry the event; every
//! event is safe to handle twice.

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use sortie_lifecycle::wiring::{from_env, Wired};
use sortie_lifecycle::EcsTaskStateChange;

/// Handles one task state change.
async fn handler(
    wired: &Wired,
    event: LambdaEvent<EventBridgeEvent<EcsTaskStateChange>>,
) -> Result<(), Error> {
    let detail = &event.payload.detail;
    let outcome = wired.engine.task_event(detail).await?;
    tracing::info!(task = %detail.task_arn, status = %detail.last_status, outcome = ?outcome, "task state change handled");
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    sortie_telemetry::init();
    let config = aws_config::load_from_env().await;
    let wired = from_env(&config)?;
    run(service_fn(|event| handler(&wired, event))).await
}
