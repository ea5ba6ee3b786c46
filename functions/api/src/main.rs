//! `api`: API Gateway HTTP API (payload v2) → Sortie's v1 router.
//!
//! Wiring plus one handler; `sortie_handlers::api_request` moves the claims that
//! API Gateway's JWT authorizer verified onto the request and calls the router.

use std::sync::Arc;

use lambda_http::{run, service_fn, Error, Request};
use sortie_api::{router, AppState, BucketConfig};
use sortie_store::{DynamoStore, S3Artifacts, SqsJobQueue};

/// Answers one API Gateway request with the router, as the caller the authorizer verified.
async fn handler(app: axum::Router, request: Request) -> Result<axum::response::Response, Error> {
    Ok(sortie_handlers::api_request(app, request).await?)
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
    let bucket = sortie_settings::required(sortie_settings::BUCKET)?;
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&config)
            .force_path_style(std::env::var_os("AWS_ENDPOINT_URL").is_some())
            .build(),
    );
    let region = config.region().map(|r| r.to_string()).unwrap_or_default();
    let app = router(AppState {
        store: Arc::new(store),
        queue: Arc::new(queue),
        dev_identity: false,
        artifacts: Arc::new(S3Artifacts::new(s3, bucket.clone())),
        bucket: BucketConfig {
            name: bucket,
            region,
        },
        admin_subjects: std::env::var(sortie_settings::ADMIN_SUBJECTS)
            .unwrap_or_default()
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
    });
    run(service_fn(move |request| handler(app.clone(), request))).await
}
