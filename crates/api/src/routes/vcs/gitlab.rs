//! GitLab: an organisation's connection through an access token (GitLab.com or a
//! self-managed instance), and the webhook GitLab delivers to, verified by its
//! `X-Gitlab-Token` (<https://docs.gitlab.com/user/project/integrations/webhooks/#create-a-webhook>:
//! GitLab sends the webhook's secret token as it is, not a signature, so it is compared in
//! constant time with the connection's).

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sortie_core::vcs::connection::{GitlabConnectionInput, VcsConnection};
use sortie_core::vcs::VcsProvider;
use sortie_core::Action;
use sortie_gitlab::webhook::{
    delivery_key, parse, verify_token, EVENT_HEADER, EVENT_UUID_HEADER, IDEMPOTENCY_KEY_HEADER,
    MAX_PAYLOAD_BYTES, TOKEN_HEADER,
};
use sortie_lifecycle::pull_requests::issuer_of;
use tracing::info;
use utoipa::ToSchema;

use super::super::Reply;
use super::{
    connection_of, disconnect, forget_cached_secret, header, owner_of, queue_delivery, read_body,
    refused, require_json, service, take_secret, webhook_secret, webhook_url, WebhookAccepted,
};
use crate::error::ApiError;
use crate::extract::{Caller, Document, GroupParam};
use crate::openapi::errors::*;
use crate::AppState;

/// An organisation's GitLab connection, as shown (never its token or secret token).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct GitlabConnectionView {
    /// The organisation.
    pub org: String,
    /// `gitlab`.
    pub provider: String,
    /// The GitLab instance it calls: `https://gitlab.com` or a self-managed instance.
    pub instance_url: String,
    /// Where GitLab must deliver the webhooks (merge request, comment and push events),
    /// with the secret token given at connect: an absolute URL, the API's own as this
    /// request reached it.
    pub webhook_url: String,
    /// The issuer of the instance's users: grant a GitLab user a role with a membership
    /// for subject `<username>` of this issuer.
    pub issuer: String,
    /// Who connected it.
    pub created_by: String,
    /// When.
    pub created_at: DateTime<Utc>,
}

/// What a GitLab connect sends: the instance, an access token and the webhook's secret
/// token, which are kept in Secrets Manager and never shown.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct GitlabConnectionBody {
    /// The instance's URL; `https://gitlab.com` when absent.
    #[serde(default)]
    pub instance_url: Option<String>,
    /// A personal access token of a Maintainer of the projects, with the `api` scope (it
    /// writes commit statuses and notes, and mints each job a token that can only read
    /// its project: GitLab lets no group or project access token mint one).
    #[schema(format = Password, write_only)]
    pub token: String,
    /// The webhook's secret token (GitLab sends it as `X-Gitlab-Token`).
    #[schema(format = Password, write_only)]
    pub webhook_secret: String,
}

/// A GitLab webhook payload as GitLab sends it: its fields depend on the event
/// (`X-Gitlab-Event`); these are the ones every event Sortie acts on carries.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct GitlabPayload {
    /// `merge_request`, `note` or `push`.
    #[serde(default)]
    pub object_kind: Option<String>,
    /// The project it happened in.
    #[serde(default)]
    pub project: Option<GitlabProject>,
}

/// A payload's project.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct GitlabProject {
    /// Its full path, `group/subgroup/project`.
    pub path_with_namespace: String,
}

fn view(state: &AppState, headers: &HeaderMap, c: &VcsConnection) -> GitlabConnectionView {
    GitlabConnectionView {
        org: c.org.clone(),
        provider: c.provider.as_str().into(),
        instance_url: c.api_url.clone(),
        webhook_url: webhook_url(state, headers, VcsProvider::Gitlab, &c.org),
        issuer: issuer_of(c),
        created_by: c.created_by.clone(),
        created_at: c.created_at,
    }
}

/// Connects an organisation to GitLab through an access token, replacing its GitLab
/// connection if it had one. The token and the webhook's secret token go to Secrets
/// Manager; the answer never holds them.
#[utoipa::path(put, path = "/v1/groups/{group}/-/vcs/gitlab", tag = "pull requests",
    params(("group" = String, Path, description = "The organisation (a top-level group)")),
    request_body(description = "The instance's URL, an access token and the webhook's secret token", content((GitlabConnectionBody = "application/json"), (GitlabConnectionBody = "application/yaml"))),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "Connected", body = GitlabConnectionView),
        BadRequest, Unauthorized, Forbidden, NotFound, PayloadTooLarge, UnsupportedMediaType, BadGateway, Unavailable))]
pub(crate) async fn connect_gitlab(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    caller: Caller,
    headers: HeaderMap,
    body: Document,
) -> Result<Reply<GitlabConnectionView>, ApiError> {
    let (org, principal) = owner_of(&state, &caller, &group).await?;
    let prs = service(&state)?;
    let mut doc = body.value()?;
    let token = take_secret(&mut doc, "token")?;
    let webhook_secret = take_secret(&mut doc, "webhook_secret")?;
    let input = GitlabConnectionInput::from_value(&doc)?;
    let connection = prs
        .connect_gitlab(&org, input, &token, &webhook_secret, &principal.subject)
        .await
        .map_err(refused)?;
    forget_cached_secret(&state, VcsProvider::Gitlab, &org);
    info!(org = %org, instance = %connection.api_url, "organisation connected to GitLab");
    Ok(Reply::ok(view(&state, &headers, &connection)))
}

/// An organisation's GitLab connection.
#[utoipa::path(get, path = "/v1/groups/{group}/-/vcs/gitlab", tag = "pull requests",
    params(("group" = String, Path, description = "The organisation (a top-level group)")),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "The connection", body = GitlabConnectionView),
        BadRequest, Unauthorized, NotFound, BadGateway, Unavailable))]
pub(crate) async fn get_gitlab_connection(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    caller: Caller,
    headers: HeaderMap,
) -> Result<Reply<GitlabConnectionView>, ApiError> {
    let org = super::org_of(&group)?;
    caller
        .authorize(&state, Action::Read, &group, &format!("group `{org}`"))
        .await?;
    let connection = connection_of(&state, &org, VcsProvider::Gitlab).await?;
    Ok(Reply::ok(view(&state, &headers, &connection)))
}

/// Disconnects an organisation from GitLab: its connection and its secrets are deleted,
/// and deliveries to its webhook are refused from then on.
#[utoipa::path(delete, path = "/v1/groups/{group}/-/vcs/gitlab", tag = "pull requests",
    params(("group" = String, Path, description = "The organisation (a top-level group)")),
    security(("bearerAuth" = [])),
    responses((status = 204, description = "Disconnected"),
        BadRequest, Unauthorized, Forbidden, NotFound, BadGateway, Unavailable))]
pub(crate) async fn delete_gitlab_connection(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    caller: Caller,
) -> Result<StatusCode, ApiError> {
    disconnect(&state, &caller, &group, VcsProvider::Gitlab).await
}

/// The one answer to a delivery without the connection's secret token: no detail, so a
/// forger learns nothing (not even whether the organisation is connected).
fn not_verified() -> ApiError {
    let mut e = ApiError::new(
        StatusCode::UNAUTHORIZED,
        "invalid_token",
        "the delivery does not carry this connection's webhook secret token",
    );
    e.www_authenticate = Some(TOKEN_HEADER);
    e
}

/// Receives a GitLab webhook delivery for an organisation's connection. Its
/// `X-Gitlab-Token` is compared in constant time with the connection's secret token
/// before the body is parsed; a delivery seen before (its `Idempotency-Key`, else its
/// `X-Gitlab-Event-UUID`) is answered without doing anything; otherwise its work is
/// queued and the answer is 202 at once, well inside GitLab's 10 seconds.
#[utoipa::path(post, path = "/v1/vcs/gitlab/{org}/webhook", tag = "pull requests",
    params(("org" = String, Path, description = "The organisation whose connection the webhook delivers to"),
        ("X-Gitlab-Token" = String, Header, description = "The webhook's secret token"),
        ("X-Gitlab-Event" = String, Header, description = "The event's name, such as `Merge Request Hook`"),
        ("X-Gitlab-Event-UUID" = String, Header, description = "The delivery's unique id"),
        ("Idempotency-Key" = Option<String>, Header, description = "The same on every retry of one delivery (GitLab 17.4 and later)")),
    request_body(description = "GitLab's payload, as delivered", content((GitlabPayload = "application/json"))),
    responses((status = 202, description = "Verified: queued, a duplicate, or nothing to do", body = WebhookAccepted),
        BadRequest, NotSigned, PayloadTooLarge, UnsupportedMediaType, Unavailable))]
pub(crate) async fn gitlab_webhook(
    State(state): State<AppState>,
    Path(org): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Reply<WebhookAccepted>, ApiError> {
    let bytes = read_body(body, MAX_PAYLOAD_BYTES).await?;
    let Some(secret) = webhook_secret(&state, VcsProvider::Gitlab, &org).await? else {
        return Err(not_verified());
    };
    if !verify_token(secret.as_bytes(), header(&headers, TOKEN_HEADER)) {
        return Err(not_verified());
    }
    // From the connection's webhook: from here on the headers and the body are trusted
    // to be GitLab's, and still read as hostile text.
    require_json(&headers, "GitLab sends webhooks as application/json")?;
    let event = header(&headers, EVENT_HEADER)
        .filter(|e| !e.is_empty() && e.len() <= 64)
        .ok_or_else(|| ApiError::field("X-Gitlab-Event", "is required"))?;
    let delivery = delivery_key(
        header(&headers, IDEMPOTENCY_KEY_HEADER),
        header(&headers, EVENT_UUID_HEADER),
    )
    .filter(|d| d.len() <= sortie_store::DELIVERY_ID_MAX)
    .ok_or_else(|| {
        ApiError::field(
            "X-Gitlab-Event-UUID",
            format!(
                "is required (or Idempotency-Key): a unique id, at most {} characters",
                sortie_store::DELIVERY_ID_MAX
            ),
        )
    })?;
    let work = parse(event, &bytes, &org).map_err(|e| ApiError::field("body", e.to_string()))?;
    queue_delivery(&state, &org, &delivery, event, work).await
}
