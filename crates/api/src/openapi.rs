//! The OpenAPI document, generated with utoipa from the route handlers' annotations.
//!
//! Every operation declares its request body schema, each status it answers with
//! its schema (the [`ErrorBody`] on every 4xx and 5xx), its path, query and header
//! parameters, and its security: `bearerAuth` (a user's JWT) on user routes,
//! `jobToken` (a job's token) on the runner's routes, `agentToken` (a pool's credential)
//! on the agents' routes, none on the meta routes.

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::error::{ErrorBody, ErrorDetail, FieldProblem};
use crate::routes::*;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Sortie API",
        version = "1",
        description = "Runners, rules, environments, jobs and memberships. Group and environment paths are written with their slashes and end at the `/-/` separator; the root group is `-`."
    ),
    paths(
        health,
        openapi_json,
        whoami,
        list_runners,
        create_runner,
        get_runner,
        update_runner,
        delete_runner,
        check_runner,
        list_rules,
        create_rule,
        get_rule,
        update_rule,
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
        get_job_sensitive_variables,
        put_job_summary,
        create_upload,
        put_upload_problems,
        report_job_exit,
        put_job_tool,
        approve_job,
        discard_job,
        get_job_outputs,
        get_environment_outputs,
        list_memberships,
        grant_membership,
        revoke_membership,
        create_agent_pool,
        list_agent_pools,
        get_agent_pool,
        delete_agent_pool,
        create_pool_token,
        revoke_pool_token,
        claim_job,
        agent_heartbeat,
        agent_exit,
    ),
    components(schemas(ErrorBody, ErrorDetail, FieldProblem)),
    modifiers(&SecuritySchemes)
)]
struct ApiDoc;

/// Adds the two bearer schemes.
struct SecuritySchemes;

impl Modify for SecuritySchemes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearerAuth",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .description(Some(
                        "A user's or CI system's OIDC token, verified by API Gateway's JWT authorizer",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "jobToken",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "The job token dispatch gave the runner: valid for that one job, while it is not terminal",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "agentToken",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An agent's credential: a pool token, or an OIDC token of the issuer the pool trusts (verified by the API)",
                    ))
                    .build(),
            ),
        );
    }
}

/// The OpenAPI document as JSON.
pub fn openapi() -> serde_json::Value {
    serde_json::to_value(ApiDoc::openapi()).unwrap_or_default()
}

/// The error responses operations declare, each with the [`ErrorBody`] schema.
#[allow(dead_code)]
pub(crate) mod errors {
    use utoipa::IntoResponses;

    use crate::error::ErrorBody;

    /// 400.
    #[derive(IntoResponses)]
    #[response(
        status = 400,
        description = "Invalid: every problem, each with its field path (`group`, `environment`, `query.<name>`, `If-Match` or a body path)"
    )]
    pub(crate) struct BadRequest(ErrorBody);

    /// 401 on user routes.
    #[derive(IntoResponses)]
    #[response(
        status = 401,
        description = "No verified bearer token: `unauthenticated` when none was sent, `invalid_token` when one was sent but not verified",
        headers(("www-authenticate" = String, description = "`Bearer` when no token was sent; `Bearer error=\"invalid_token\"` when one was sent but is not valid (RFC 6750)"))
    )]
    pub(crate) struct Unauthorized(ErrorBody);

    /// 401 on the runner's routes.
    #[derive(IntoResponses)]
    #[response(
        status = 401,
        description = "The token is not this job's, or the job ended (no hint whether the job exists); the code is always `invalid_token`",
        headers(("www-authenticate" = String, description = "`Bearer` when no bearer token was sent; `Bearer error=\"invalid_token\"` when one was sent but is not valid (RFC 6750)"))
    )]
    pub(crate) struct InvalidToken(ErrorBody);

    /// 403.
    #[derive(IntoResponses)]
    #[response(
        status = 403,
        description = "The caller sees the group but lacks the role"
    )]
    pub(crate) struct Forbidden(ErrorBody);

    /// 404.
    #[derive(IntoResponses)]
    #[response(
        status = 404,
        description = "Not found, or not visible to the caller (another tenant's resources are never revealed)"
    )]
    pub(crate) struct NotFound(ErrorBody);

    /// 409.
    #[derive(IntoResponses)]
    #[response(
        status = 409,
        description = "A conflict: the id is taken, the resource is in use (`fields` lists by what), no rule matches (`fields` explains), the job's state forbids it, or an Idempotency-Key was reused with another body"
    )]
    pub(crate) struct Conflict(ErrorBody);

    /// 412.
    #[derive(IntoResponses)]
    #[response(
        status = 412,
        description = "If-Match names a version that is no longer current"
    )]
    pub(crate) struct PreconditionFailed(ErrorBody);

    /// 413.
    #[derive(IntoResponses)]
    #[response(status = 413, description = "The request body is over 256 KiB")]
    pub(crate) struct PayloadTooLarge(ErrorBody);

    /// 415.
    #[derive(IntoResponses)]
    #[response(
        status = 415,
        description = "The body's Content-Type is not one this API reads (`unsupported_media_type`; the message lists application/json and application/*+json, application/yaml, application/x-yaml, text/yaml). Without a Content-Type, JSON text is read as JSON and anything else as YAML"
    )]
    pub(crate) struct UnsupportedMediaType(ErrorBody);

    /// 502.
    #[derive(IntoResponses)]
    #[response(
        status = 502,
        description = "The store failed in a way a retry will not fix (access denied, a corrupt item); the request was not applied"
    )]
    pub(crate) struct BadGateway(ErrorBody);

    /// 503.
    #[derive(IntoResponses)]
    #[response(
        status = 503,
        description = "The store is throttling or unavailable (a retryable failure); the request was not applied: retry after `Retry-After` seconds",
        headers(("retry-after" = String, description = "Seconds to wait"))
    )]
    pub(crate) struct Unavailable(ErrorBody);
}
