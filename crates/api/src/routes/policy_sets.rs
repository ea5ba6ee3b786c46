//! Policy sets: `/v1/groups/{group}/-/policy-sets[/{id}]` (`{id}` is the set's name).
//! Each set has its own version: its ETag, checked by `If-Match` on update and delete.
//! A set whose Rego does not compile is refused with a 400 naming the module, line and column.

use axum::extract::State;
use axum::http::StatusCode;
use sortie_core::policy::PolicySet;
use sortie_core::{Action, GroupPath};
use sortie_lifecycle::PolicySetRefusal;

use super::{manage_action, Reply};
use crate::error::ApiError;
use crate::extract::{Caller, Document, GroupParam, IdParam, IfMatch};
use crate::model::{PolicySetEntry, PolicySetList};
use crate::openapi::errors::*;
use crate::AppState;

/// The answer to a refused policy set write.
fn refused(e: PolicySetRefusal, doc: Option<&serde_json::Value>) -> ApiError {
    match e {
        PolicySetRefusal::Invalid(e) => e.into(),
        PolicySetRefusal::Field { field, problem } => ApiError::field(field, problem),
        PolicySetRefusal::Compile(e) => {
            let index = doc
                .and_then(|d| d["modules"].as_array())
                .and_then(|m| m.iter().position(|m| m["name"] == e.module.as_str()))
                .unwrap_or(0);
            ApiError::field(
                format!("modules[{index}].rego"),
                format!(
                    "module `{}` does not compile: line {} column {}: {}",
                    e.module, e.line, e.column, e.message
                ),
            )
        }
        PolicySetRefusal::Store(e) => e.into(),
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

/// The policy sets of exactly this group (not its ancestors').
#[utoipa::path(get, path = "/v1/groups/{group}/-/policy-sets", tag = "policy-sets",
    params(("group" = String, Path, description = "Group path")),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "The group's policy sets", body = PolicySetList),
        BadRequest, Unauthorized, NotFound, BadGateway, Unavailable))]
pub(crate) async fn list_policy_sets(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    caller: Caller,
) -> Result<Reply<PolicySetList>, ApiError> {
    may(&state, &caller, Action::Read, &group).await?;
    let sets = state.policy_sets().list(&group).await?;
    Ok(Reply::ok(PolicySetList {
        policy_sets: sets
            .into_iter()
            .map(|v| PolicySetEntry {
                version: v.version,
                set: v.item,
            })
            .collect(),
    }))
}

/// Creates a policy set in the group; its `name` is the one in the URL (or absent).
#[utoipa::path(post, path = "/v1/groups/{group}/-/policy-sets/{id}", tag = "policy-sets",
    params(("group" = String, Path, description = "Group path"), ("id" = String, Path, description = "Policy set name")),
    request_body(description = "The policy set, YAML or JSON", content((PolicySet = "application/json"), (PolicySet = "application/yaml"))),
    security(("bearerAuth" = [])),
    responses((status = 201, description = "Created; ETag is its version", body = PolicySet, headers(("etag" = String, description = "The set's version"))),
        BadRequest, Unauthorized, Forbidden, NotFound, Conflict, PayloadTooLarge, UnsupportedMediaType, BadGateway, Unavailable))]
pub(crate) async fn create_policy_set(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    IdParam(name): IdParam,
    caller: Caller,
    body: Document,
) -> Result<Reply<PolicySet>, ApiError> {
    may(&state, &caller, manage_action(&group), &group).await?;
    let doc = body.value()?;
    let created = state
        .policy_sets()
        .create(&group, Some(&name), doc.clone())
        .await
        .map_err(|e| refused(e, Some(&doc)))?;
    Ok(Reply::new(StatusCode::CREATED, created.item).etag(created.version))
}

/// One policy set.
#[utoipa::path(get, path = "/v1/groups/{group}/-/policy-sets/{id}", tag = "policy-sets",
    params(("group" = String, Path, description = "Group path"), ("id" = String, Path, description = "Policy set name")),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "The set; ETag is its version", body = PolicySet, headers(("etag" = String, description = "The set's version"))),
        BadRequest, Unauthorized, NotFound, BadGateway, Unavailable))]
pub(crate) async fn get_policy_set(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    IdParam(name): IdParam,
    caller: Caller,
) -> Result<Reply<PolicySet>, ApiError> {
    may(&state, &caller, Action::Read, &group).await?;
    let set = state
        .policy_sets()
        .get(&group, &name)
        .await
        .map_err(|e| match e {
            sortie_store::StoreError::NotFound { .. } => {
                ApiError::not_found(format!("policy set `{name}` in `{}`", group.as_str()))
            }
            e => e.into(),
        })?;
    Ok(Reply::ok(set.item).etag(set.version))
}

/// Replaces a policy set; jobs whose plans are checked after this see the new version.
#[utoipa::path(put, path = "/v1/groups/{group}/-/policy-sets/{id}", tag = "policy-sets",
    params(("group" = String, Path, description = "Group path"), ("id" = String, Path, description = "Policy set name"),
        ("If-Match" = Option<String>, Header, description = "The set's ETag")),
    request_body(description = "The set's new content, YAML or JSON", content((PolicySet = "application/json"), (PolicySet = "application/yaml"))),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "Updated; ETag is its new version", body = PolicySet, headers(("etag" = String, description = "The set's version"))),
        BadRequest, Unauthorized, Forbidden, NotFound, PreconditionFailed, PayloadTooLarge, UnsupportedMediaType, BadGateway, Unavailable))]
pub(crate) async fn update_policy_set(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    IdParam(name): IdParam,
    caller: Caller,
    if_match: IfMatch,
    body: Document,
) -> Result<Reply<PolicySet>, ApiError> {
    may(&state, &caller, manage_action(&group), &group).await?;
    let expected = if_match.version()?;
    let doc = body.value()?;
    let updated = state
        .policy_sets()
        .update(&group, &name, doc.clone(), expected)
        .await
        .map_err(|e| refused(e, Some(&doc)))?;
    Ok(Reply::ok(updated.item).etag(updated.version))
}

/// Deletes a policy set.
#[utoipa::path(delete, path = "/v1/groups/{group}/-/policy-sets/{id}", tag = "policy-sets",
    params(("group" = String, Path, description = "Group path"), ("id" = String, Path, description = "Policy set name"),
        ("If-Match" = Option<String>, Header, description = "The set's ETag")),
    security(("bearerAuth" = [])),
    responses((status = 204, description = "Deleted"),
        BadRequest, Unauthorized, Forbidden, NotFound, PreconditionFailed, BadGateway, Unavailable))]
pub(crate) async fn delete_policy_set(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    IdParam(name): IdParam,
    caller: Caller,
    if_match: IfMatch,
) -> Result<StatusCode, ApiError> {
    may(&state, &caller, manage_action(&group), &group).await?;
    state
        .policy_sets()
        .delete(&group, &name, if_match.version()?)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
