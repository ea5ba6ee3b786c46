//! The open meta routes: health and this API's OpenAPI document.

use axum::Json;

use crate::error::ErrorBody;
use crate::model::{Health, OpenApiDocument};

/// Liveness, without authentication.
#[utoipa::path(get, path = "/v1/health", tag = "meta",
    responses((status = 200, description = "The API is up", body = Health),
        (status = "default", description = "Any error, in the error envelope: the API answers 200 whenever it runs, so an error comes from in front of it (a throttle, a failed function)", body = ErrorBody)))]
pub(crate) async fn health() -> Json<Health> {
    Json(Health {
        status: "ok".into(),
    })
}

/// This document, without authentication.
#[utoipa::path(get, path = "/v1/openapi.json", tag = "meta",
    responses((status = 200, description = "The OpenAPI document", body = OpenApiDocument),
        (status = "default", description = "Any error, in the error envelope: the API answers 200 whenever it runs, so an error comes from in front of it (a throttle, a failed function)", body = ErrorBody)))]
pub(crate) async fn openapi_json() -> axum::response::Response {
    use axum::response::IntoResponse;
    // Built and serialised once per process: the document is a constant of the build.
    static DOCUMENT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let text: &'static str = DOCUMENT.get_or_init(|| crate::openapi().to_string());
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        text,
    )
        .into_response()
}
