//! `task-events`: EventBridge `aws.ecs` "ECS Task State Change" → job outcome.
//!
//! Wiring plus one handler. The outcome mapping lands with issue 4.

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use lambda_runtime::{run, service_fn, Error, LambdaEvent};

/// Handles one ECS task state change event.
async fn handler(event: LambdaEvent<EventBridgeEvent<serde_json::Value>>) -> Result<(), Error> {
    let detail = &event.payload.detail;
    tracing::info!(
        detail_type = %event.payload.detail_type,
        started_by = detail.get("startedBy").and_then(|v| v.as_str()).unwrap_or(""),
        last_status = detail.get("lastStatus").and_then(|v| v.as_str()).unwrap_or(""),
        "task state change received"
    );
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    sortie_telemetry::init();
    run(service_fn(handler)).await
}
