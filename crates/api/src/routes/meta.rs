//! The open meta routes: health and this API's OpenAPI document.

use axum::Json;

use crate::model::{Health, OpenApiDocument};

/// Liveness, without authentication.
#[utoipa::path(get, path = "/v1/health", tag = "meta",
    responses((status = 200, description = "The API is up", body = Health)))]
pub(crate) async fn health() -> Json<Health> {
    Json(Health {
        status: "ok".into(),
    })
}

/// This document, without authentication.
#[utoipa::path(get, path = "/v1/openapi.json", tag = "meta",
    responses((status = 200, description = "The OpenAPI document", body = OpenApiDocument)))]
pub(crate) async fn openapi_json() -> Json<serde_json::Value> {
    Json(crate::openapi())
}
