//! `task-events`: EventBridge `aws.ecs` "ECS Task State Change" → the job's outcome.
//!
//! Wiring plus one handler; the logic is `sortie_lambda_adapters::task_state_change`.

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use sortie_lambda_adapters::FunctionError;
use sortie_lifecycle::EcsTaskStateChange;
use sortie_wiring::{compose, Composition, Resources};

/// Handles one task state change; an error (with its class as the `errorType`) makes
/// Lambda's asynchronous invocation run it again, at most twice more (EventBridge's own
/// retries cover only delivering the event to Lambda).
async fn handler(
    parts: &Composition,
    event: LambdaEvent<EventBridgeEvent<EcsTaskStateChange>>,
) -> Result<(), FunctionError> {
    sortie_lambda_adapters::task_state_change(&parts.engine, event.payload).await?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    sortie_telemetry::init();
    let config = sortie_wiring::function_sdk_config().await;
    let parts = compose(&config, Resources::for_function("task-events")?, None);
    run(service_fn(|event| handler(&parts, event))).await
}
