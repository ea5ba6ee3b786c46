//! GitHub: an organisation's connection through a GitHub App, and the webhook GitHub
//! delivers to, verified by its `X-Hub-Signature-256`.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sortie_core::vcs::connection::{ConnectionInput, VcsConnection};
use sortie_core::vcs::webhook::{
    verify_signature, DELIVERY_HEADER, EVENT_HEADER, MAX_BODY_BYTES, SIGNATURE_HEADER,
};
use sortie_core::vcs::VcsProvider;
use sortie_core::Action;
use sortie_lifecycle::pull_requests::{issuer_of, work_of};
use sortie_store::DELIVERY_ID_MAX;
use tracing::info;
use utoipa::ToSchema;

use super::super::Reply;
use super::{
    connection_of, disconnect, forget_cached_secret, header, org_of, owner_of, queue_delivery,
    read_body, refused, require_json, service, take_secret, webhook_secret, webhook_url,
    WebhookAccepted,
};
use crate::error::ApiError;
use crate::extract::{Caller, Document, GroupParam};
use crate::openapi::errors::*;
use crate::AppState;

/// An organisation's GitHub connection, as shown (never its key or secret).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ConnectionView {
    /// The organisation.
    pub org: String,
    /// `github`.
    pub provider: String,
    /// The GitHub App's id.
    pub app_id: u64,
    /// The GitHub REST API it calls.
    pub api_url: String,
    /// Where GitHub must deliver the App's webhooks: an absolute URL, the API's own as this
    /// request reached it (its `Host` and `X-Forwarded-Proto`, as API Gateway sets them).
    pub webhook_url: String,
    /// The issuer of the App's users: grant a GitHub user a role with a membership for
    /// subject `<login>` of this issuer.
    pub issuer: String,
    /// Who connected it.
    pub created_by: String,
    /// When.
    pub created_at: DateTime<Utc>,
}

/// What a connect sends: the App's id, its API (GitHub Enterprise Server), and the
/// App's private key and webhook secret, which are kept in Secrets Manager and never shown.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ConnectionBody {
    /// The GitHub App's id.
    pub app_id: u64,
    /// The REST API's URL; `https://api.github.com` when absent.
    #[serde(default)]
    pub api_url: Option<String>,
    /// The App's private key, PEM.
    #[schema(format = Password, write_only)]
    pub private_key: String,
    /// The App's webhook secret.
    #[schema(format = Password, write_only)]
    pub webhook_secret: String,
}

/// A GitHub webhook payload as GitHub sends it: its fields depend on the event
/// (`X-GitHub-Event`); these are the ones every event Sortie acts on carries.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct GithubPayload {
    /// The event's action (`opened`, `synchronize`, `created`, ...), when it has one.
    #[serde(default)]
    pub action: Option<String>,
    /// The repository it happened in.
    #[serde(default)]
    pub repository: Option<GithubRepository>,
}

/// A payload's repository.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct GithubRepository {
    /// `owner/name`.
    pub full_name: String,
}

fn view(state: &AppState, headers: &HeaderMap, c: &VcsConnection) -> ConnectionView {
    ConnectionView {
        org: c.org.clone(),
        provider: c.provider.as_str().into(),
        app_id: c.app_id,
        api_url: c.api_url.clone(),
        webhook_url: webhook_url(state, headers, VcsProvider::Github, &c.org),
        issuer: issuer_of(c),
        created_by: c.created_by.clone(),
        created_at: c.created_at,
    }
}

/// Connects an organisation to GitHub through a GitHub App, replacing its connection if it
/// had one. The key and the webhook secret go to Secrets Manager; the answer never holds
/// them.
#[utoipa::path(put, path = "/v1/groups/{group}/-/vcs/github", tag = "pull requests",
    params(("group" = String, Path, description = "The organisation (a top-level group)")),
    request_body(description = "The App's id, API URL, private key and webhook secret", content((ConnectionBody = "application/json"), (ConnectionBody = "application/yaml"))),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "Connected", body = ConnectionView),
        BadRequest, Unauthorized, Forbidden, NotFound, PayloadTooLarge, UnsupportedMediaType, BadGateway, Unavailable))]
pub(crate) async fn connect_github(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    caller: Caller,
    headers: HeaderMap,
    body: Document,
) -> Result<Reply<ConnectionView>, ApiError> {
    let (org, principal) = owner_of(&state, &caller, &group).await?;
    let prs = service(&state)?;
    let mut doc = body.value()?;
    let private_key = take_secret(&mut doc, "private_key")?;
    let webhook_secret = take_secret(&mut doc, "webhook_secret")?;
    let input = ConnectionInput::from_value(&doc)?;
    let connection = prs
        .connect(
            &org,
            input,
            &private_key,
            &webhook_secret,
            &principal.subject,
        )
        .await
        .map_err(refused)?;
    forget_cached_secret(&state, VcsProvider::Github, &org);
    info!(org = %org, app_id = connection.app_id, "organisation connected to GitHub");
    Ok(Reply::ok(view(&state, &headers, &connection)))
}

/// An organisation's GitHub connection.
#[utoipa::path(get, path = "/v1/groups/{group}/-/vcs/github", tag = "pull requests",
    params(("group" = String, Path, description = "The organisation (a top-level group)")),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "The connection", body = ConnectionView),
        BadRequest, Unauthorized, NotFound, BadGateway, Unavailable))]
pub(crate) async fn get_github_connection(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    caller: Caller,
    headers: HeaderMap,
) -> Result<Reply<ConnectionView>, ApiError> {
    let org = org_of(&group)?;
    caller
        .authorize(&state, Action::Read, &group, &format!("group `{org}`"))
        .await?;
    let connection = connection_of(&state, &org, VcsProvider::Github).await?;
    Ok(Reply::ok(view(&state, &headers, &connection)))
}

/// Disconnects an organisation from GitHub: its connection and its secrets are deleted,
/// and deliveries to its webhook are refused from then on.
#[utoipa::path(delete, path = "/v1/groups/{group}/-/vcs/github", tag = "pull requests",
    params(("group" = String, Path, description = "The organisation (a top-level group)")),
    security(("bearerAuth" = [])),
    responses((status = 204, description = "Disconnected"),
        BadRequest, Unauthorized, Forbidden, NotFound, BadGateway, Unavailable))]
pub(crate) async fn delete_github_connection(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    caller: Caller,
) -> Result<StatusCode, ApiError> {
    disconnect(&state, &caller, &group, VcsProvider::Github).await
}

/// The one answer to anything not signed by the organisation's connection: no detail,
/// so a forger learns nothing (not even whether the organisation is connected).
fn not_signed() -> ApiError {
    let mut e = ApiError::new(
        StatusCode::UNAUTHORIZED,
        "invalid_signature",
        "the delivery is not signed by this connection's webhook secret",
    );
    e.www_authenticate = Some(SIGNATURE_HEADER);
    e
}

/// Receives a GitHub webhook delivery for an organisation's connection. Its signature is
/// checked over the exact body before anything is parsed; a delivery seen before is
/// answered without doing anything; otherwise its work is queued and the answer is 202 at
/// once, well inside GitHub's 10 seconds.
#[utoipa::path(post, path = "/v1/vcs/github/{org}/webhook", tag = "pull requests",
    params(("org" = String, Path, description = "The organisation whose connection the App delivers to"),
        ("X-Hub-Signature-256" = String, Header, description = "`sha256=` and the HMAC-SHA256 of the body with the webhook secret"),
        ("X-GitHub-Event" = String, Header, description = "The event's name"),
        ("X-GitHub-Delivery" = String, Header, description = "The delivery's unique id")),
    request_body(description = "GitHub's payload, as delivered (the webhook's content type must be `application/json`)", content((GithubPayload = "application/json"))),
    responses((status = 202, description = "Verified: queued, a duplicate, or nothing to do", body = WebhookAccepted),
        BadRequest, NotSigned, PayloadTooLarge, UnsupportedMediaType, Unavailable))]
pub(crate) async fn github_webhook(
    State(state): State<AppState>,
    Path(org): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Reply<WebhookAccepted>, ApiError> {
    let bytes = read_body(body, MAX_BODY_BYTES).await?;
    let Some(secret) = webhook_secret(&state, VcsProvider::Github, &org).await? else {
        return Err(not_signed());
    };
    if !verify_signature(
        secret.as_bytes(),
        &bytes,
        header(&headers, SIGNATURE_HEADER),
    ) {
        return Err(not_signed());
    }
    // Signed by the connection: from here on the headers and the body are trusted to be
    // GitHub's, and still read as hostile text. A webhook set to send form-encoded
    // payloads is named, so its owner can switch it to JSON.
    require_json(
        &headers,
        "set the GitHub App's webhook content type to application/json",
    )?;
    let event = header(&headers, EVENT_HEADER)
        .filter(|e| !e.is_empty() && e.len() <= 64)
        .ok_or_else(|| ApiError::field("X-GitHub-Event", "is required"))?;
    let delivery = header(&headers, DELIVERY_HEADER)
        .filter(|d| {
            !d.is_empty()
                && d.len() <= DELIVERY_ID_MAX
                && d.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
        .ok_or_else(|| {
            ApiError::field(
                "X-GitHub-Delivery",
                format!("is required: a unique id of letters, digits and `-`, at most {DELIVERY_ID_MAX}"),
            )
        })?;
    let parsed = sortie_github::webhook::parse(event, &bytes)
        .map_err(|e| ApiError::field("body", e.to_string()))?;
    queue_delivery(&state, &org, delivery, event, work_of(&org, &parsed)).await
}
