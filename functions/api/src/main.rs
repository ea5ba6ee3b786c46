//! `api`: API Gateway HTTP API (payload v2) → Sortie's v1 router.
//!
//! Wiring plus one handler; `sortie_lambda_adapters::api_request` moves the claims that
//! API Gateway's JWT authorizer verified onto the request and calls the router.

use lambda_http::{run, service_fn, Error, Request};
use sortie_wiring::{compose, Resources};

/// Answers one API Gateway request with the router, as the caller the authorizer verified.
async fn handler(app: axum::Router, request: Request) -> Result<axum::response::Response, Error> {
    Ok(sortie_lambda_adapters::api_request(app, request).await?)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    sortie_telemetry::init();
    let config = sortie_wiring::function_sdk_config().await;
    let parts = compose(&config, Resources::for_function("api")?, None);
    // The development identity is never enabled in AWS: the authorizer verifies every caller.
    let app = parts.router(false)?;
    run(service_fn(move |request| handler(app.clone(), request))).await
}
