//! `api`: API Gateway HTTP API (payload v2) → Sortie's v1 router.
//!
//! Wiring plus one handler: the handler moves the claims that API Gateway's JWT
//! authorizer verified onto the request, and hands it to the router.

use std::collections::BTreeMap;
use std::sync::Arc;

use lambda_http::request::RequestContext;
use lambda_http::{run, service_fn, Error, Request, RequestExt};
use sortie_api::{router, AppState, VerifiedClaims};
use sortie_store::{DynamoStore, SqsJobQueue};
use tower::ServiceExt;

/// Answers one API Gateway request with the router, as the caller the authorizer verified.
async fn handler(app: axum::Router, request: Request) -> Result<axum::response::Response, Error> {
    let claims: BTreeMap<String, serde_json::Value> = match request.request_context_ref() {
        Some(RequestContext::ApiGatewayV2(ctx)) => ctx
            .authorizer
            .as_ref()
            .and_then(|a| a.jwt.as_ref())
            .map(|jwt| {
                jwt.claims
                    .iter()
                    .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                    .collect()
            })
            .unwrap_or_default(),
        _ => BTreeMap::new(),
    };
    let (mut parts, body) = request.into_parts();
    parts.extensions.insert(VerifiedClaims(claims));
    let request = axum::http::Request::from_parts(parts, axum::body::Body::new(body));
    Ok(app.oneshot(request).await?)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    sortie_telemetry::init();
    let config = aws_config::load_from_env().await;
    let store = DynamoStore::new(
        aws_sdk_dynamodb::Client::new(&config),
        sortie_settings::required(sortie_settings::TABLE)?,
    );
    let queue = SqsJobQueue::new(
        aws_sdk_sqs::Client::new(&config),
        sortie_settings::required(sortie_settings::JOBS_QUEUE_URL)?,
    );
    // The development identity is never enabled in AWS: the authorizer verifies every caller.
    let app = router(AppState {
        store: Arc::new(store),
        queue: Arc::new(queue),
        dev_identity: false,
    });
    run(service_fn(move |request| handler(app.clone(), request))).await
}
