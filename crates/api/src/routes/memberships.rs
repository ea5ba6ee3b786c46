//! Memberships: `/v1/groups/{group}/-/memberships[/{id}]`.

use axum::extract::State;
use axum::http::StatusCode;
use sortie_core::Action;
use sortie_lifecycle::MembershipRefusal;
use sortie_store::MembershipRecord;

use super::Reply;
use crate::error::ApiError;
use crate::extract::{Caller, Document, GroupParam, IdParam};
use crate::model::{MembershipGrant, MembershipList};
use crate::openapi::errors::*;
use crate::AppState;

/// The memberships granted on exactly this group.
#[utoipa::path(get, path = "/v1/groups/{group}/-/memberships", tag = "memberships",
    params(("group" = String, Path, description = "Group path")),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "Memberships granted on exactly this group", body = MembershipList),
        BadRequest, Unauthorized, NotFound, BadGateway, Unavailable))]
pub(crate) async fn list_memberships(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    caller: Caller,
) -> Result<Reply<MembershipList>, ApiError> {
    caller
        .authorize(
            &state,
            Action::Read,
            &group,
            &format!("group `{}`", group.as_str()),
        )
        .await?;
    Ok(Reply::ok(MembershipList {
        memberships: state.memberships().list(&group).await?,
    }))
}

/// Grants a role on the group to a subject or a claim pattern.
#[utoipa::path(post, path = "/v1/groups/{group}/-/memberships", tag = "memberships",
    params(("group" = String, Path, description = "Group path")),
    request_body(description = "role and grantee, YAML or JSON", content((MembershipGrant = "application/json"), (MembershipGrant = "application/yaml"))),
    security(("bearerAuth" = [])),
    responses((status = 201, description = "Granted", body = sortie_store::MembershipRecord),
        BadRequest, Unauthorized, Forbidden, NotFound, PayloadTooLarge, UnsupportedMediaType, BadGateway, Unavailable))]
pub(crate) async fn grant_membership(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    caller: Caller,
    body: Document,
) -> Result<Reply<MembershipRecord>, ApiError> {
    let principal = caller
        .authorize(
            &state,
            Action::Administer,
            &group,
            &format!("group `{}`", group.as_str()),
        )
        .await?;
    let record = state
        .memberships()
        .grant(&group, &body.value()?, &principal.subject)
        .await
        .map_err(|e| match e {
            MembershipRefusal::Invalid(e) => ApiError::from(e),
            MembershipRefusal::Store(e) => e.into(),
        })?;
    state.memberships.invalidate(group.org());
    Ok(Reply::new(StatusCode::CREATED, record))
}

/// Revokes a membership.
#[utoipa::path(delete, path = "/v1/groups/{group}/-/memberships/{id}", tag = "memberships",
    params(("group" = String, Path, description = "Group path"), ("id" = String, Path, description = "Membership id")),
    security(("bearerAuth" = [])),
    responses((status = 204, description = "Revoked"),
        BadRequest, Unauthorized, Forbidden, NotFound, BadGateway, Unavailable))]
pub(crate) async fn revoke_membership(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    IdParam(id): IdParam,
    caller: Caller,
) -> Result<StatusCode, ApiError> {
    caller
        .authorize(
            &state,
            Action::Administer,
            &group,
            &format!("group `{}`", group.as_str()),
        )
        .await?;
    state.memberships().revoke(&group, &id).await?;
    state.memberships.invalidate(group.org());
    Ok(StatusCode::NO_CONTENT)
}
