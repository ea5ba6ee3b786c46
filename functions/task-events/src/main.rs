//! `task-events`: EventBridge `aws.ecs` "ECS Task State Change" → the job's outcome.
//!
//! Wiring plus one handler; the logic is `sortie_handlers::task_state_change`.

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use sortie_lifecycle::wiring::{from_env, Wired};
use sortie_lifecycle::EcsTaskStateChange;

/// Handles one task state change; an error makes EventBridge retry it.
async fn handler(
    wired: &Wired,
    event: LambdaEvent<EventBridgeEvent<EcsTaskStateChange>>,
) -> Result<(), Error> {
    sortie_handlers::task_state_change(&wired.engine, event.payload).await?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    sortie_telemetry::init();
    let config = aws_config::load_from_env().await;
    let wired = from_env(&config)?;
    run(service_fn(|event| handler(&wired, event))).await
}
