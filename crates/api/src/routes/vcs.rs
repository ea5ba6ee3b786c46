//! Pull requests on GitHub: an organisation's connection
//! (`/v1/groups/{group}/-/vcs/github`, owners only: it holds the App's key) and the
//! webhook GitHub delivers to (`POST /v1/vcs/github/{org}/webhook`, no JWT: verified by
//! its `X-Hub-Signature-256` before anything else is read).

use std::time::Instant;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use sortie_core::vcs::connection::{ConnectionInput, VcsConnection};
use sortie_core::vcs::webhook::{
    verify_signature, DELIVERY_HEADER, EVENT_HEADER, MAX_BODY_BYTES, SIGNATURE_HEADER,
};
use sortie_core::vcs::VcsProvider;
use sortie_core::{Action, GroupPath};
use sortie_lifecycle::pull_requests::{issuer_of, work_of, ConnectRefusal, PullRequests};
use sortie_store::{StoreError, DELIVERY_ID_MAX};
use tracing::{info, warn};
use utoipa::ToSchema;

use super::Reply;
use crate::error::ApiError;
use crate::extract::{Caller, Document, GroupParam};
use crate::openapi::errors::*;
use crate::{AppState, WEBHOOK_SECRET_TTL};

/// How long a delivery id is remembered: GitHub's redeliveries of the last days are
/// handled once (a manual redelivery after that runs again, harmlessly: plans are keyed
/// by commit).
const DELIVERY_MEMORY_HOURS: i64 = 72;

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

/// What became of a verified delivery.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WebhookAccepted {
    /// `queued`, `duplicate` (seen before) or `ignored` (nothing for Sortie to do).
    pub status: String,
}

fn unavailable() -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "pull_requests_unavailable",
        "this deployment takes no pull-request webhooks (it has no pull-request queue)",
    )
}

fn service(state: &AppState) -> Result<PullRequests, ApiError> {
    state.pull_requests().ok_or_else(unavailable)
}

/// The organisation a connection belongs to: a top-level group.
fn org_of(group: &GroupPath) -> Result<String, ApiError> {
    match group.org() {
        Some(org) if org == group.as_str() => Ok(org.to_string()),
        _ => Err(ApiError::field(
            "group",
            "a connection belongs to an organisation (a top-level group)",
        )),
    }
}

fn view(state: &AppState, headers: &HeaderMap, c: &VcsConnection) -> ConnectionView {
    ConnectionView {
        org: c.org.clone(),
        provider: c.provider.as_str().into(),
        app_id: c.app_id,
        api_url: c.api_url.clone(),
        webhook_url: format!(
            "{}/v1/vcs/github/{}/webhook",
            super::public_url(state, headers),
            c.org
        ),
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
    let org = org_of(&group)?;
    let principal = caller
        .authorize(
            &state,
            Action::Administer,
            &group,
            &format!("group `{org}`"),
        )
        .await?;
    let prs = service(&state)?;
    let mut doc = body.value()?;
    // The secrets are read out first, so that no problem ever quotes them.
    let mut take = |name: &str| -> Result<String, ApiError> {
        match doc.as_object_mut().and_then(|m| m.remove(name)) {
            Some(serde_json::Value::String(s)) if !s.trim().is_empty() => Ok(s),
            Some(_) => Err(ApiError::field(
                name.to_string(),
                "must be a non-empty string",
            )),
            None => Err(ApiError::field(name.to_string(), "is required")),
        }
    };
    let private_key = take("private_key")?;
    let webhook_secret = take("webhook_secret")?;
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
        .map_err(|e| match e {
            ConnectRefusal::Invalid(field, problem) => ApiError::field(field, problem),
            ConnectRefusal::Secrets(_) => ApiError::new(
                StatusCode::BAD_GATEWAY,
                "secrets_unavailable",
                e.to_string(),
            ),
            ConnectRefusal::Store(e) => e.into(),
        })?;
    state
        .pulls
        .as_ref()
        .expect("service() found it")
        .webhook_secrets
        .lock()
        .expect("not poisoned")
        .remove(&org);
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
    let connection = state
        .connections()
        .get(&org, VcsProvider::Github)
        .await
        .map_err(|e| match e {
            StoreError::NotFound { .. } => {
                ApiError::not_found(format!("a GitHub connection of `{org}`"))
            }
            other => other.into(),
        })?;
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
    let org = org_of(&group)?;
    caller
        .authorize(
            &state,
            Action::Administer,
            &group,
            &format!("group `{org}`"),
        )
        .await?;
    service(&state)?
        .disconnect(&org)
        .await
        .map_err(|e| match e {
            StoreError::NotFound { .. } => {
                ApiError::not_found(format!("a GitHub connection of `{org}`"))
            }
            other => other.into(),
        })?;
    if let Some(p) = &state.pulls {
        p.webhook_secrets.lock().expect("not poisoned").remove(&org);
    }
    Ok(StatusCode::NO_CONTENT)
}

/// The one answer to anything not signed by the organisation's connection: no detail,
/// so a forger learns nothing (not even whether the organisation is connected).
fn not_signed() -> ApiError {
    let mut e = ApiError::new(
        StatusCode::UNAUTHORIZED,
        "invalid_signature",
        "the delivery is not signed by this connection's webhook secret",
    );
    e.www_authenticate = Some(sortie_core::vcs::webhook::SIGNATURE_HEADER);
    e
}

/// The organisation's webhook secret, from this instance's cache when read lately.
async fn webhook_secret(state: &AppState, org: &str) -> Result<Option<String>, ApiError> {
    let parts = state.pulls.as_ref().ok_or_else(unavailable)?;
    if let Some((secret, at)) = parts.webhook_secrets.lock().expect("not poisoned").get(org) {
        if at.elapsed() < WEBHOOK_SECRET_TTL {
            return Ok(Some(secret.clone()));
        }
    }
    let secret = service(state)?.webhook_secret(org).await.map_err(|e| {
        warn!(org, error = %e, "a webhook secret could not be read");
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "secrets_unavailable",
            "the connection's webhook secret could not be read; GitHub may redeliver",
        )
    })?;
    if let Some(s) = &secret {
        let mut cache = parts.webhook_secrets.lock().expect("not poisoned");
        if cache.len() >= 1024 {
            cache.clear();
        }
        cache.insert(org.to_string(), (s.clone(), Instant::now()));
    }
    Ok(secret)
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
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
    let bytes = axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                format!("a delivery is at most {MAX_BODY_BYTES} bytes"),
            )
        })?;
    let Some(secret) = webhook_secret(&state, &org).await? else {
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
    let content_type = header(&headers, "content-type").unwrap_or_default();
    let essence = content_type.split(';').next().unwrap_or_default().trim();
    if !essence.eq_ignore_ascii_case("application/json") {
        let mut e = ApiError::unsupported_media_type(content_type);
        e.message = format!(
            "a delivery of type `{content_type}` is not read: set the GitHub App's webhook content type to application/json"
        );
        return Err(e);
    }
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
    let accepted = |status: &str| {
        Ok(Reply::new(
            StatusCode::ACCEPTED,
            WebhookAccepted {
                status: status.into(),
            },
        ))
    };
    let Some(work) = work_of(&org, &parsed) else {
        return accepted("ignored");
    };
    let connections = state.connections();
    let until = Utc::now() + Duration::hours(DELIVERY_MEMORY_HOURS);
    if !connections
        .claim_delivery(VcsProvider::Github, delivery, until)
        .await?
    {
        return accepted("duplicate");
    }
    let queue = &state.pulls.as_ref().ok_or_else(unavailable)?.queue;
    if let Err(e) = queue.send_work(&work).await {
        // Not queued: forget the delivery, so GitHub's redelivery (or the reconcile) is
        // handled, and say the work was not taken.
        if let Err(forget) = connections
            .forget_delivery(VcsProvider::Github, delivery)
            .await
        {
            warn!(error = %forget, "a delivery whose work was not queued could not be forgotten");
        }
        warn!(org, delivery, error = %e, "a delivery's work could not be queued");
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "queue_unavailable",
            "the delivery's work could not be queued; GitHub may redeliver it",
        ));
    }
    info!(org, delivery, event, "webhook delivery queued");
    accepted("queued")
}
