//! Sortie as an OIDC issuer: the public discovery document and JWKS a cloud fetches to
//! verify a job identity token, and `POST /v1/jobs/{id}/identity-token`, where the pilot
//! gets one with its job token. The token is never logged.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use sortie_core::identity::{Jwks, Phase};
use sortie_core::protocol::pilot::IdentityToken;
use sortie_lifecycle::{Issuer, IssuerError};

use super::pilot_callbacks::job_by_token;
use super::Reply;
use crate::error::{ApiError, ErrorBody};
use crate::extract::{Document, JobIdParam};
use crate::openapi::errors::*;
use crate::AppState;

/// How long a cloud may keep the discovery document and the JWKS: five minutes, well under
/// the time a standby key is published before it signs.
const KEYS_MAX_AGE: &str = "public, max-age=300";

fn issuer(state: &AppState) -> Result<&Issuer, ApiError> {
    state.issuer.as_ref().ok_or_else(|| {
        ApiError::not_found(
            "issuer: this deployment issues no job identity tokens (it has no signing key)",
        )
    })
}

fn unavailable(e: IssuerError) -> ApiError {
    match e {
        IssuerError::Refused(reason) => {
            ApiError::new(StatusCode::CONFLICT, "identity_refused", reason)
        }
        IssuerError::Unavailable(reason) => {
            ApiError::new(StatusCode::BAD_GATEWAY, "identity_unavailable", reason)
        }
    }
}

/// A public JSON answer a cloud may cache (the API's other answers are `no-store`).
fn cacheable(body: impl serde::Serialize) -> Response {
    let mut response = axum::Json(body).into_response();
    response.extensions_mut().insert(Cacheable);
    response
}

/// Marks an answer whose `Cache-Control` the API's headers leave as [`KEYS_MAX_AGE`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cacheable;

/// The `Cache-Control` of a [`Cacheable`] answer.
pub(crate) fn cache_control(response: &Response) -> Option<&'static str> {
    response
        .extensions()
        .get::<Cacheable>()
        .map(|_| KEYS_MAX_AGE)
}

/// The OIDC discovery document of the job identity issuer, without authentication.
#[utoipa::path(get, path = "/.well-known/openid-configuration", tag = "identity",
    responses((status = 200, description = "The discovery document: `issuer` (the API's URL, every token's `iss`), `jwks_uri`, and ES256", body = sortie_core::identity::DiscoveryDocument),
        NotFound))]
pub(crate) async fn openid_configuration(
    State(state): State<AppState>,
) -> Result<Response, ApiError> {
    Ok(cacheable(issuer(&state)?.discovery()))
}

/// The keys job identity tokens are verified with, without authentication: the signing
/// key, and the standby key while one rolls in or out.
#[utoipa::path(get, path = "/.well-known/jwks.json", tag = "identity",
    responses((status = 200, description = "The JWK Set (EC P-256 keys, `kid` their RFC 7638 thumbprint)", body = Jwks),
        NotFound,
        (status = 502, description = "KMS could not be read (`identity_unavailable`)", body = ErrorBody)))]
pub(crate) async fn jwks(State(state): State<AppState>) -> Result<Response, ApiError> {
    let jwks = issuer(&state)?.jwks().await.map_err(unavailable)?;
    Ok(cacheable(jwks))
}

/// A job identity token for one phase of the job, to the job's own token while its task may
/// run. A cloud exchanges it for the phase's role; the pilot asks again before it expires.
#[utoipa::path(post, path = "/v1/jobs/{id}/identity-token", tag = "pilot",
    params(("id" = String, Path, description = "Job id")),
    request_body(description = "The phase", content((sortie_core::protocol::pilot::IdentityTokenRequest = "application/json"))),
    security(("jobToken" = [])),
    responses((status = 200, description = "The token and when it expires", body = IdentityToken),
        BadRequest, InvalidToken, NotFound,
        (status = 409, description = "The job's runner has no identity block, or this task has no such phase (`identity_refused`)", body = ErrorBody),
        PayloadTooLarge, UnsupportedMediaType,
        (status = 502, description = "KMS could not sign (`identity_unavailable`), or the store failed", body = ErrorBody),
        Unavailable))]
pub(crate) async fn mint_identity_token(
    State(state): State<AppState>,
    JobIdParam(id): JobIdParam,
    headers: HeaderMap,
    body: Document,
) -> Result<Reply<IdentityToken>, ApiError> {
    let record = job_by_token(&state, &headers, &id).await?;
    let phase = phase_of(body.value()?)?;
    let token = issuer(&state)?
        .mint(&record.job, phase, Utc::now())
        .await
        .map_err(unavailable)?;
    tracing::info!(job_id = %id, phase = %phase, expires_at = %token.expires_at, "job identity token minted");
    Ok(Reply::ok(token))
}

/// The body's `phase`: an object with `phase` (`plan` or `apply`) and nothing else.
fn phase_of(body: serde_json::Value) -> Result<Phase, ApiError> {
    let serde_json::Value::Object(fields) = body else {
        return Err(ApiError::field(
            "body",
            "must be an object with `phase` (`plan` or `apply`)",
        ));
    };
    if let Some(other) = fields.keys().find(|k| *k != "phase") {
        return Err(ApiError::field(
            other.clone(),
            "unknown field; expected `phase`",
        ));
    }
    match fields.get("phase").and_then(serde_json::Value::as_str) {
        Some("plan") => Ok(Phase::Plan),
        Some("apply") => Ok(Phase::Apply),
        None if !fields.contains_key("phase") => Err(ApiError::field("phase", "is required")),
        _ => Err(ApiError::field("phase", "must be `plan` or `apply`")),
    }
}
