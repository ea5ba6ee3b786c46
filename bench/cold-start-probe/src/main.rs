//! `cold-start-probe`: the floor that `scripts/bench-cold-start.py` measures the four
//! functions against. It does what every Rust Lambda function must do before its first
//! invocation, the way the SDK's documentation does it (`aws_config::load_from_env`,
//! then `lambda_runtime::run`), and nothing more.

use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use serde_json::Value;

/// Echoes the event.
async fn handler(event: LambdaEvent<Value>) -> Result<Value, Error> {
    Ok(event.payload)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let config = aws_config::load_from_env().await;
    // Keep the configuration alive, as a function keeps the clients it builds from it.
    let _config = std::hint::black_box(config);
    run(service_fn(handler)).await
}
