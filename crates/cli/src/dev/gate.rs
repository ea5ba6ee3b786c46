//! The development token in front of the API: a request without it is refused, one with
//! it acts as the local development user.

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// The issuer of `sortie dev`'s named users.
pub const DEV_USER_ISSUER: &str = "sortie:local-dev-user";

/// Lets through the console (`GET`/`HEAD` of `/` and `/assets/…`), health, the OpenAPI
/// document and the runner routes (which carry job tokens);
/// everything else needs the development token (`expected` is `Bearer <token>`), the
/// scheme matched in any case. A refusal is 401 with `WWW-Authenticate: Bearer`, plus
/// `error="invalid_token"` when a bearer token was sent but is not the development one.
///
/// A named user's token (`users`: token → name) passes too, with claims for that user on
/// the request, so the API sees that user and not the development identity.
pub(super) async fn dev_token_gate(
    expected: &str,
    users: &std::collections::BTreeMap<String, String>,
    mut req: Request,
    next: Next,
) -> Response {
    let path = req.uri().path();
    // The console's page and assets are public (GET and HEAD only): it signs in itself,
    // and its API calls carry the token.
    let console = matches!(
        *req.method(),
        axum::http::Method::GET | axum::http::Method::HEAD
    ) && (path == "/" || path.starts_with("/assets/"));
    // The runner routes, from the route table: `/v1/jobs/{id}/<tail>`.
    let open = console
        || path == "/v1/health"
        || path == "/v1/openapi.json"
        || (path.starts_with("/v1/jobs/")
            && sortie_api::Route::ALL
                .iter()
                .filter(|r| r.uses_job_token())
                .filter_map(|r| r.method_and_path().1.strip_prefix("/v1/jobs/{id}"))
                .any(|tail| path.ends_with(tail)))
        // The agents' routes: `/v1/agent-pools/{id}/claims`, `…/jobs/{job}/heartbeat|exit`.
        || (path.starts_with("/v1/agent-pools/")
            && (path.ends_with("/claims")
                || path.ends_with("/heartbeat")
                || path.ends_with("/exit")));
    let want = expected.strip_prefix("Bearer ").unwrap_or(expected);
    let sent = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .and_then(|v| {
            let (scheme, token) = v.split_once([' ', '\t']).unwrap_or((v, ""));
            scheme
                .eq_ignore_ascii_case("bearer")
                .then(|| token.trim_start_matches([' ', '\t']))
        });
    if open || sent == Some(want) {
        return next.run(req).await;
    }
    if let Some(name) = sent.and_then(|t| users.get(t)).cloned() {
        let claims = std::collections::BTreeMap::from([
            ("iss".to_string(), json!(DEV_USER_ISSUER)),
            ("sub".to_string(), json!(name)),
        ]);
        req.extensions_mut()
            .insert(sortie_api::VerifiedClaims(claims));
        return next.run(req).await;
    }
    let (code, challenge) = match sent {
        Some(_) => ("invalid_token", r#"Bearer error="invalid_token""#),
        None => ("unauthenticated", "Bearer"),
    };
    let body = json!({"error": {"code": code, "message": "sortie dev needs `Authorization: Bearer <token>`, as printed at start", "fields": []}});
    (
        axum::http::StatusCode::UNAUTHORIZED,
        [(axum::http::header::WWW_AUTHENTICATE, challenge)],
        axum::Json(body),
    )
        .into_response()
}
