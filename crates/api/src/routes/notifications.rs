//! Notification destinations: `/v1/groups/{group}/-/notifications[/{id}]` (`{id}` is the
//! destination's name), with their deliveries, a redelivery and a test. A destination's
//! version is its ETag, checked by `If-Match` on update and delete. Reading needs `read` on
//! the group; everything else, including a test or a redelivery (they send), needs what
//! managing the group needs.

use axum::extract::State;
use axum::http::StatusCode;
use sortie_core::{Action, GroupPath};
use sortie_lifecycle::{Attempted, NotificationRefusal};
use sortie_store::StoreError;

use super::{manage_action, Reply};
use crate::error::ApiError;
use crate::extract::{Caller, DeliveryParam, Document, GroupParam, IdParam, IfMatch};
use crate::model::{DeliveryAttempt, DeliveryList, Destination, DestinationBody, DestinationList};
use crate::openapi::errors::*;
use crate::AppState;

/// The answer to a refused destination read or write.
fn refused(e: NotificationRefusal, group: &GroupPath, name: &str) -> ApiError {
    match e {
        NotificationRefusal::Invalid(e) => e.into(),
        NotificationRefusal::Field { field, problem } => ApiError::field(field, problem),
        NotificationRefusal::Secret(why) => ApiError::new(
            StatusCode::BAD_GATEWAY,
            "secret_unavailable",
            format!("the destination's secret could not be kept or read: {why}"),
        ),
        NotificationRefusal::Store(StoreError::NotFound {
            kind: "notification destination",
            ..
        }) => ApiError::not_found(format!(
            "notification destination `{name}` in `{}`",
            group.as_str()
        )),
        NotificationRefusal::Store(e) => e.into(),
    }
}

async fn may(
    state: &AppState,
    caller: &Caller,
    action: Action,
    group: &GroupPath,
) -> Result<(), ApiError> {
    caller
        .authorize(state, action, group, &format!("group `{}`", group.as_str()))
        .await
        .map(|_| ())
}

/// The notification destinations of exactly this group (not its ancestors').
#[utoipa::path(get, path = "/v1/groups/{group}/-/notifications", tag = "notifications",
    params(("group" = String, Path, description = "Group path")),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "The group's destinations", body = DestinationList),
        BadRequest, Unauthorized, NotFound, BadGateway, Unavailable))]
pub(crate) async fn list_notifications(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    caller: Caller,
) -> Result<Reply<DestinationList>, ApiError> {
    may(&state, &caller, Action::Read, &group).await?;
    let destinations = state.notifications().list(&group).await?;
    Ok(Reply::ok(DestinationList {
        destinations: destinations
            .into_iter()
            .map(|d| Destination::of(d, None))
            .collect(),
    }))
}

/// Makes a destination: a `webhook` (its signing secret is in this answer, and never again)
/// or a `slack` incoming webhook (`slack_webhook_url`, kept as a secret, never shown).
#[utoipa::path(post, path = "/v1/groups/{group}/-/notifications/{id}", tag = "notifications",
    params(("group" = String, Path, description = "Group path"), ("id" = String, Path, description = "Destination name")),
    request_body(description = "The destination, YAML or JSON: `type` (`webhook` with `url`, or `slack` with `slack_webhook_url`), `events`, `environments`, `description`", content((DestinationBody = "application/json"), (DestinationBody = "application/yaml"))),
    security(("bearerAuth" = [])),
    responses((status = 201, description = "Created; ETag is its version; a webhook's `signing_secret` is shown this once", body = Destination, headers(("etag" = String, description = "The destination's version"))),
        BadRequest, Unauthorized, Forbidden, NotFound, Conflict, PayloadTooLarge, UnsupportedMediaType, BadGateway, Unavailable))]
pub(crate) async fn create_notification(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    IdParam(name): IdParam,
    caller: Caller,
    body: Document,
) -> Result<Reply<Destination>, ApiError> {
    may(&state, &caller, manage_action(&group), &group).await?;
    let doc = body.value()?;
    let made = state
        .notifications()
        .create(&group, &name, &doc, &caller.0.subject, chrono::Utc::now())
        .await
        .map_err(|e| refused(e, &group, &name))?;
    let version = made.destination.version;
    Ok(Reply::new(
        StatusCode::CREATED,
        Destination::of(made.destination, made.signing_secret),
    )
    .etag(version))
}

/// One destination.
#[utoipa::path(get, path = "/v1/groups/{group}/-/notifications/{id}", tag = "notifications",
    params(("group" = String, Path, description = "Group path"), ("id" = String, Path, description = "Destination name")),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "The destination; ETag is its version", body = Destination, headers(("etag" = String, description = "The destination's version"))),
        BadRequest, Unauthorized, NotFound, BadGateway, Unavailable))]
pub(crate) async fn get_notification(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    IdParam(name): IdParam,
    caller: Caller,
) -> Result<Reply<Destination>, ApiError> {
    may(&state, &caller, Action::Read, &group).await?;
    let found = state
        .notifications()
        .get(&group, &name)
        .await
        .map_err(|e| refused(e.into(), &group, &name))?;
    let version = found.version;
    Ok(Reply::ok(Destination::of(found, None)).etag(version))
}

/// Replaces a destination's specification. Its type stays; a Slack destination's URL is
/// replaced when `slack_webhook_url` is given, and kept otherwise.
#[utoipa::path(put, path = "/v1/groups/{group}/-/notifications/{id}", tag = "notifications",
    params(("group" = String, Path, description = "Group path"), ("id" = String, Path, description = "Destination name"),
        ("If-Match" = Option<String>, Header, description = "The destination's ETag")),
    request_body(description = "The destination's new specification, YAML or JSON", content((DestinationBody = "application/json"), (DestinationBody = "application/yaml"))),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "Updated; ETag is its new version", body = Destination, headers(("etag" = String, description = "The destination's version"))),
        BadRequest, Unauthorized, Forbidden, NotFound, PreconditionFailed, PayloadTooLarge, UnsupportedMediaType, BadGateway, Unavailable))]
pub(crate) async fn update_notification(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    IdParam(name): IdParam,
    caller: Caller,
    if_match: IfMatch,
    body: Document,
) -> Result<Reply<Destination>, ApiError> {
    may(&state, &caller, manage_action(&group), &group).await?;
    let expected = if_match.version()?;
    let doc = body.value()?;
    let updated = state
        .notifications()
        .update(&group, &name, &doc, expected)
        .await
        .map_err(|e| refused(e, &group, &name))?;
    let version = updated.version;
    Ok(Reply::ok(Destination::of(updated, None)).etag(version))
}

/// Deletes a destination and its secret; its deliveries still queued are dropped.
#[utoipa::path(delete, path = "/v1/groups/{group}/-/notifications/{id}", tag = "notifications",
    params(("group" = String, Path, description = "Group path"), ("id" = String, Path, description = "Destination name"),
        ("If-Match" = Option<String>, Header, description = "The destination's ETag")),
    security(("bearerAuth" = [])),
    responses((status = 204, description = "Deleted"),
        BadRequest, Unauthorized, Forbidden, NotFound, PreconditionFailed, BadGateway, Unavailable))]
pub(crate) async fn delete_notification(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    IdParam(name): IdParam,
    caller: Caller,
    if_match: IfMatch,
) -> Result<StatusCode, ApiError> {
    may(&state, &caller, manage_action(&group), &group).await?;
    state
        .notifications()
        .delete(&group, &name, if_match.version()?)
        .await
        .map_err(|e| refused(e, &group, &name))?;
    Ok(StatusCode::NO_CONTENT)
}

/// Gives a webhook a new signing secret, shown in this answer only; the old one stops
/// signing at once.
#[utoipa::path(post, path = "/v1/groups/{group}/-/notifications/{id}/rotate-secret", tag = "notifications",
    params(("group" = String, Path, description = "Group path"), ("id" = String, Path, description = "Destination name")),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "Rotated; `signing_secret` is shown this once", body = Destination, headers(("etag" = String, description = "The destination's version"))),
        BadRequest, Unauthorized, Forbidden, NotFound, PreconditionFailed, BadGateway, Unavailable))]
pub(crate) async fn rotate_notification_secret(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    IdParam(name): IdParam,
    caller: Caller,
) -> Result<Reply<Destination>, ApiError> {
    may(&state, &caller, manage_action(&group), &group).await?;
    let rotated = state
        .notifications()
        .rotate_secret(&group, &name)
        .await
        .map_err(|e| refused(e, &group, &name))?;
    let version = rotated.destination.version;
    Ok(Reply::ok(Destination::of(rotated.destination, rotated.signing_secret)).etag(version))
}

/// A destination's last deliveries, newest first (at most 100): when, which event, the
/// answer's status, its latency, the attempts and the first kilobyte of the answer.
#[utoipa::path(get, path = "/v1/groups/{group}/-/notifications/{id}/deliveries", tag = "notifications",
    params(("group" = String, Path, description = "Group path"), ("id" = String, Path, description = "Destination name")),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "The history, newest first", body = DeliveryList),
        BadRequest, Unauthorized, NotFound, BadGateway, Unavailable))]
pub(crate) async fn list_notification_deliveries(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    IdParam(name): IdParam,
    caller: Caller,
) -> Result<Reply<DeliveryList>, ApiError> {
    may(&state, &caller, Action::Read, &group).await?;
    let deliveries = state
        .notifications()
        .history(&group, &name)
        .await
        .map_err(|e| refused(e.into(), &group, &name))?;
    Ok(Reply::ok(DeliveryList { deliveries }))
}

/// The answer to a delivery made when asked: 200 with the delivery as its one attempt left
/// it, whether the receiver took it or not (its `state`, `status` and `reason` say).
fn attempted(a: Attempted) -> Reply<DeliveryAttempt> {
    Reply::ok(DeliveryAttempt { delivery: a.record })
}

/// Sends a delivery of the history again, once (the same event and `X-Sortie-Delivery`
/// id), and answers how it went; it is not retried.
#[utoipa::path(post, path = "/v1/groups/{group}/-/notifications/{id}/deliveries/{delivery}/redeliver", tag = "notifications",
    params(("group" = String, Path, description = "Group path"), ("id" = String, Path, description = "Destination name"),
        ("delivery" = String, Path, description = "The delivery's id (`X-Sortie-Delivery`)")),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "Sent once; `delivery.state` says whether the receiver took it", body = DeliveryAttempt),
        BadRequest, Unauthorized, Forbidden, NotFound, BadGateway, Unavailable))]
pub(crate) async fn redeliver_notification(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    IdParam(name): IdParam,
    DeliveryParam(delivery): DeliveryParam,
    caller: Caller,
) -> Result<Reply<DeliveryAttempt>, ApiError> {
    may(&state, &caller, manage_action(&group), &group).await?;
    let done = state
        .notifications()
        .redeliver(
            &group,
            &name,
            &delivery,
            state.notify.sender.as_ref(),
            &state.notify.console_url,
            chrono::Utc::now(),
        )
        .await
        .map_err(|e| refused(e, &group, &name))?;
    Ok(attempted(done))
}

/// Sends the destination a test event (`sortie.notification.test`), once, and answers how
/// it went: the receiver's status, latency and the first kilobyte of its answer.
#[utoipa::path(post, path = "/v1/groups/{group}/-/notifications/{id}/test", tag = "notifications",
    params(("group" = String, Path, description = "Group path"), ("id" = String, Path, description = "Destination name")),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "Sent once; `delivery.state` says whether the receiver took it", body = DeliveryAttempt),
        BadRequest, Unauthorized, Forbidden, NotFound, BadGateway, Unavailable))]
pub(crate) async fn test_notification(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    IdParam(name): IdParam,
    caller: Caller,
) -> Result<Reply<DeliveryAttempt>, ApiError> {
    may(&state, &caller, manage_action(&group), &group).await?;
    let done = state
        .notifications()
        .test_send(
            &group,
            &name,
            &caller.0.subject,
            state.notify.sender.as_ref(),
            &state.notify.console_url,
            chrono::Utc::now(),
        )
        .await
        .map_err(|e| refused(e, &group, &name))?;
    Ok(attempted(done))
}
