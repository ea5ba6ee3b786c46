//! `api`: API Gateway HTTP API (payload v2) → Sortie's HTTP API.
//!
//! Wiring plus one handler. The router grows into the full v1 API (issue 3).

use lambda_http::{run, service_fn, Body, Error, Request, Response};

/// Answers one API Gateway request.
async fn handler(request: Request) -> Result<Response<Body>, Error> {
    let (status, body) = match request.uri().path() {
        "/v1/health" => (200, serde_json::json!({ "status": "ok" })),
        path => (
            404,
            serde_json::json!({ "error": { "code": "not_found", "message": format!("no route for {path}"), "fields": [] } }),
        ),
    };
    Ok(Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))?)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    sortie_telemetry::init();
    run(service_fn(handler)).await
}
