//! Pull requests on their hosts: an organisation's connection to each host
//! (`/v1/groups/{group}/-/vcs/github` and `/-/vcs/gitlab`, owners only: they hold the
//! host's credential) and the webhook each host delivers to
//! (`POST /v1/vcs/github/{org}/webhook`, `POST /v1/vcs/gitlab/{org}/webhook`; no JWT:
//! verified by the connection's webhook secret before anything else is read). What the
//! hosts share is here; `github` and `gitlab` read each host's own headers and bodies.

mod github;
mod gitlab;

pub(crate) use github::*;
pub use github::{ConnectionBody, ConnectionView, GithubPayload, GithubRepository};
pub(crate) use gitlab::*;
pub use gitlab::{GitlabConnectionBody, GitlabConnectionView, GitlabPayload, GitlabProject};

use std::time::Instant;

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode};
use chrono::{Duration, Utc};
use serde::{Deserialize, Serialize};
use sortie_core::vcs::work::PullWork;
use sortie_core::vcs::VcsProvider;
use sortie_core::{Action, GroupPath};
use sortie_lifecycle::pull_requests::{ConnectRefusal, PullRequests};
use sortie_store::StoreError;
use tracing::{info, warn};
use utoipa::ToSchema;

use super::Reply;
use crate::error::ApiError;
use crate::extract::Caller;
use crate::{AppState, WEBHOOK_SECRET_TTL};

/// How long a delivery id is remembered: a host's redeliveries of the last days are
/// handled once (a manual redelivery after that runs again, harmlessly: plans are keyed
/// by commit).
const DELIVERY_MEMORY_HOURS: i64 = 72;

/// The most webhook secrets an instance keeps in memory before it forgets them all.
const SECRETS_CACHED_MAX: usize = 1024;

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

/// Where `provider` must deliver `org`'s webhooks: an absolute URL, the API's own as this
/// request reached it (its `Host` and `X-Forwarded-Proto`, as API Gateway sets them).
fn webhook_url(state: &AppState, headers: &HeaderMap, provider: VcsProvider, org: &str) -> String {
    format!(
        "{}/v1/vcs/{}/{org}/webhook",
        super::public_url(state, headers),
        provider.as_str()
    )
}

/// The caller may administer `org` (a connection holds its host's credential); `org` is
/// the group's organisation.
async fn owner_of(
    state: &AppState,
    caller: &Caller,
    group: &GroupPath,
) -> Result<(String, sortie_core::auth::Principal), ApiError> {
    let org = org_of(group)?;
    let principal = caller
        .authorize(state, Action::Administer, group, &format!("group `{org}`"))
        .await?;
    Ok((org, principal))
}

/// Takes the secret field `name` out of a connect's body before anything else reads it,
/// so that no problem ever quotes it.
fn take_secret(doc: &mut serde_json::Value, name: &str) -> Result<String, ApiError> {
    match doc.as_object_mut().and_then(|m| m.remove(name)) {
        Some(serde_json::Value::String(s)) if !s.trim().is_empty() => Ok(s),
        Some(_) => Err(ApiError::field(
            name.to_string(),
            "must be a non-empty string",
        )),
        None => Err(ApiError::field(name.to_string(), "is required")),
    }
}

/// A refused connect, as the API answers it.
fn refused(e: ConnectRefusal) -> ApiError {
    match e {
        ConnectRefusal::Invalid(field, problem) => ApiError::field(field, problem),
        ConnectRefusal::Secrets(_) => ApiError::new(
            StatusCode::BAD_GATEWAY,
            "secrets_unavailable",
            e.to_string(),
        ),
        ConnectRefusal::Store(e) => e.into(),
    }
}

/// Forgets this instance's copy of `org`'s webhook secret for `provider` (a reconnect or
/// a disconnect changed it).
fn forget_cached_secret(state: &AppState, provider: VcsProvider, org: &str) {
    if let Some(p) = &state.pulls {
        p.webhook_secrets
            .lock()
            .expect("not poisoned")
            .remove(&(provider, org.to_string()));
    }
}

/// `org`'s connection to `provider`, or a 404 naming it.
async fn connection_of(
    state: &AppState,
    org: &str,
    provider: VcsProvider,
) -> Result<sortie_core::vcs::connection::VcsConnection, ApiError> {
    state
        .connections()
        .get(org, provider)
        .await
        .map_err(|e| match e {
            StoreError::NotFound { .. } => {
                ApiError::not_found(format!("a {} connection of `{org}`", provider.name()))
            }
            other => other.into(),
        })
}

/// Disconnects `group`'s organisation from `provider` for an owner.
async fn disconnect(
    state: &AppState,
    caller: &Caller,
    group: &GroupPath,
    provider: VcsProvider,
) -> Result<StatusCode, ApiError> {
    let (org, _) = owner_of(state, caller, group).await?;
    service(state)?
        .disconnect(&org, provider)
        .await
        .map_err(|e| match e {
            StoreError::NotFound { .. } => {
                ApiError::not_found(format!("a {} connection of `{org}`", provider.name()))
            }
            other => other.into(),
        })?;
    forget_cached_secret(state, provider, &org);
    info!(org = %org, host = provider.as_str(), "organisation disconnected");
    Ok(StatusCode::NO_CONTENT)
}

/// The organisation's webhook secret for `provider`, from this instance's cache when read
/// lately.
async fn webhook_secret(
    state: &AppState,
    provider: VcsProvider,
    org: &str,
) -> Result<Option<String>, ApiError> {
    let parts = state.pulls.as_ref().ok_or_else(unavailable)?;
    let key = (provider, org.to_string());
    if let Some((secret, at)) = parts
        .webhook_secrets
        .lock()
        .expect("not poisoned")
        .get(&key)
    {
        if at.elapsed() < WEBHOOK_SECRET_TTL {
            return Ok(Some(secret.clone()));
        }
    }
    let secret = service(state)?
        .webhook_secret(org, provider)
        .await
        .map_err(|e| {
            warn!(org, error = %e, "a webhook secret could not be read");
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "secrets_unavailable",
                format!(
                    "the connection's webhook secret could not be read; {} may redeliver",
                    provider.name()
                ),
            )
        })?;
    if let Some(s) = &secret {
        let mut cache = parts.webhook_secrets.lock().expect("not poisoned");
        if cache.len() >= SECRETS_CACHED_MAX {
            cache.clear();
        }
        cache.insert(key, (s.clone(), Instant::now()));
    }
    Ok(secret)
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// A delivery's body, read to at most `max` bytes (413 past it, unread).
async fn read_body(body: Body, max: usize) -> Result<axum::body::Bytes, ApiError> {
    axum::body::to_bytes(body, max).await.map_err(|_| {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("a delivery is at most {max} bytes"),
        )
    })
}

/// Refuses a verified delivery that is not JSON, naming what to change on the host.
fn require_json(headers: &HeaderMap, fix: &str) -> Result<(), ApiError> {
    let content_type = header(headers, "content-type").unwrap_or_default();
    let essence = content_type.split(';').next().unwrap_or_default().trim();
    if essence.eq_ignore_ascii_case("application/json") {
        return Ok(());
    }
    let mut e = ApiError::unsupported_media_type(content_type);
    e.message = format!("a delivery of type `{content_type}` is not read: {fix}");
    Err(e)
}

fn accepted(status: &str) -> Result<Reply<WebhookAccepted>, ApiError> {
    Ok(Reply::new(
        StatusCode::ACCEPTED,
        WebhookAccepted {
            status: status.into(),
        },
    ))
}

/// Queues a verified delivery's work once: a delivery seen before is answered
/// `duplicate` and does nothing; one whose work cannot be queued is forgotten again, so
/// the host's redelivery (or the reconcile) is handled, and answered 503.
async fn queue_delivery(
    state: &AppState,
    org: &str,
    delivery: &str,
    event: &str,
    work: Option<PullWork>,
) -> Result<Reply<WebhookAccepted>, ApiError> {
    let Some(work) = work else {
        return accepted("ignored");
    };
    let provider = work.provider();
    let connections = state.connections();
    let until = Utc::now() + Duration::hours(DELIVERY_MEMORY_HOURS);
    if !connections
        .claim_delivery(provider, delivery, until)
        .await?
    {
        return accepted("duplicate");
    }
    let queue = &state.pulls.as_ref().ok_or_else(unavailable)?.queue;
    if let Err(e) = queue.send_work(&work).await {
        if let Err(forget) = connections.forget_delivery(provider, delivery).await {
            warn!(error = %forget, "a delivery whose work was not queued could not be forgotten");
        }
        warn!(org, delivery, error = %e, "a delivery's work could not be queued");
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "queue_unavailable",
            format!(
                "the delivery's work could not be queued; {} may redeliver it",
                provider.name()
            ),
        ));
    }
    info!(
        org,
        delivery,
        event,
        host = provider.as_str(),
        "webhook delivery queued"
    );
    accepted("queued")
}
