//! The OpenAPI document, generated with utoipa from the handlers' annotations.

use utoipa::OpenApi;

use crate::handlers::*;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Sortie API",
        version = "1",
        description = "Runners, rules, environments, jobs and memberships. Group and environment paths are written with their slashes and end at the `/-/` separator."
    ),
    paths(
        health,
        openapi_json,
        list_runners,
        create_runner,
        get_runner,
        update_runner,
        delete_runner,
        list_rules,
        create_rule,
        get_rule,
        delete_rule,
        list_environments,
        create_environment,
        get_environment,
        update_environment,
        delete_environment,
        refresh_runner,
        list_jobs,
        submit_job,
        get_job,
        cancel_job,
        get_job_logs,
        get_job_spec,
        put_job_summary,
        list_memberships,
        grant_membership,
        revoke_membership,
    ),
    components(schemas(crate::error::ErrorDetail))
)]
struct ApiDoc;

/// `GET /v1/health`: liveness, without authentication.
#[utoipa::path(get, path = "/v1/health", tag = "meta", responses((status = 200, description = "The API is up", body = Object)))]
#[allow(dead_code)]
fn health() {}

/// `GET /v1/openapi.json`: this document.
#[utoipa::path(get, path = "/v1/openapi.json", tag = "meta", responses((status = 200, description = "The OpenAPI document", body = Object)))]
#[allow(dead_code)]
fn openapi_json() {}

/// The OpenAPI document as JSON.
pub fn openapi() -> serde_json::Value {
    serde_json::to_value(ApiDoc::openapi()).unwrap_or_default()
}
