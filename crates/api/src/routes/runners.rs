//! Runners: `/v1/groups/{group}/-/runners[/{name}]`.

use axum::extract::State;
use axum::http::StatusCode;
use sortie_core::{Action, GroupPath, Runner, RunnerId, RunnerSpec};

use super::{manage_action, Reply};
use crate::error::ApiError;
use crate::extract::{Caller, Document, GroupParam, IfMatch, NameParam};
use crate::model::{domain, RunnerList, RunnerView};
use crate::openapi::errors::*;
use crate::AppState;

fn runner_id(group: &GroupPath, name: &str) -> Result<RunnerId, ApiError> {
    RunnerId::new(group.clone(), name).map_err(|e| ApiError::field("name", e.first_problem()))
}

/// Lists the group's runners, then the inherited and shared ones, each marked.
#[utoipa::path(get, path = "/v1/groups/{group}/-/runners", tag = "runners",
    params(("group" = String, Path, description = "Group path, slashes included; `-` alone for the root")),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "The group's runners, then inherited and shared ones, each marked", body = RunnerList),
        BadRequest, Unauthorized, NotFound, BadGateway, Unavailable))]
pub(crate) async fn list_runners(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    caller: Caller,
) -> Result<Reply<RunnerList>, ApiError> {
    caller
        .authorize(
            &state,
            Action::Read,
            &group,
            &format!("group `{}`", group.as_str()),
        )
        .await?;
    let mut runners = vec![];
    for g in group.self_and_ancestors() {
        for r in state.store.list_runners(&g).await? {
            runners.push(RunnerView::new(r, &group));
        }
    }
    Ok(Reply::ok(RunnerList { runners }))
}

/// Creates a runner from a runner file.
#[utoipa::path(post, path = "/v1/groups/{group}/-/runners/{name}", tag = "runners",
    params(("group" = String, Path, description = "Owner group path"), ("name" = String, Path, description = "Runner name")),
    request_body(description = "A runner file, YAML or JSON: description, runner_configuration, state_storage_configuration",
        content((domain::RunnerSpec = "application/yaml"), (domain::RunnerSpec = "application/json"))),
    security(("bearerAuth" = [])),
    responses((status = 201, description = "Created; ETag is the version", body = RunnerView, headers(("etag" = String, description = "The version"))),
        BadRequest, Unauthorized, Forbidden, NotFound, Conflict, PayloadTooLarge, UnsupportedMediaType, BadGateway, Unavailable))]
pub(crate) async fn create_runner(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    NameParam(name): NameParam,
    caller: Caller,
    body: Document,
) -> Result<Reply<RunnerView>, ApiError> {
    let id = runner_id(&group, &name)?;
    caller
        .authorize(
            &state,
            manage_action(&group),
            &group,
            &format!("group `{}`", group.as_str()),
        )
        .await?;
    let spec = RunnerSpec::from_value(&body.value()?)?;
    let created = state.store.create_runner(&Runner { id, spec }).await?;
    let version = created.version;
    Ok(Reply::new(StatusCode::CREATED, RunnerView::new(created, &group)).etag(version))
}

/// One runner.
#[utoipa::path(get, path = "/v1/groups/{group}/-/runners/{name}", tag = "runners",
    params(("group" = String, Path, description = "Owner group path"), ("name" = String, Path, description = "Runner name")),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "The runner; ETag is the version", body = RunnerView, headers(("etag" = String, description = "The version"))),
        BadRequest, Unauthorized, NotFound, BadGateway, Unavailable))]
pub(crate) async fn get_runner(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    NameParam(name): NameParam,
    caller: Caller,
) -> Result<Reply<RunnerView>, ApiError> {
    let id = runner_id(&group, &name)?;
    caller
        .authorize(&state, Action::Read, &group, &format!("runner `{id}`"))
        .await?;
    let r = state.store.get_runner(&id).await?;
    let version = r.version;
    Ok(Reply::ok(RunnerView::new(r, &group)).etag(version))
}

/// Replaces a runner's file.
#[utoipa::path(put, path = "/v1/groups/{group}/-/runners/{name}", tag = "runners",
    params(("group" = String, Path, description = "Owner group path"), ("name" = String, Path, description = "Runner name"),
        ("If-Match" = Option<String>, Header, description = "The ETag last read")),
    request_body(description = "The new runner file, YAML or JSON",
        content((domain::RunnerSpec = "application/yaml"), (domain::RunnerSpec = "application/json"))),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "Updated; ETag is the new version", body = RunnerView, headers(("etag" = String, description = "The version"))),
        BadRequest, Unauthorized, Forbidden, NotFound, PreconditionFailed, PayloadTooLarge, UnsupportedMediaType, BadGateway, Unavailable))]
pub(crate) async fn update_runner(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    NameParam(name): NameParam,
    caller: Caller,
    if_match: IfMatch,
    body: Document,
) -> Result<Reply<RunnerView>, ApiError> {
    let id = runner_id(&group, &name)?;
    caller
        .authorize(
            &state,
            manage_action(&group),
            &group,
            &format!("runner `{id}`"),
        )
        .await?;
    let expected = if_match.version()?;
    let spec = RunnerSpec::from_value(&body.value()?)?;
    let r = state
        .store
        .update_runner(&Runner { id, spec }, expected)
        .await?;
    let version = r.version;
    Ok(Reply::ok(RunnerView::new(r, &group)).etag(version))
}

/// Deletes a runner no environment is linked to.
#[utoipa::path(delete, path = "/v1/groups/{group}/-/runners/{name}", tag = "runners",
    params(("group" = String, Path, description = "Owner group path"), ("name" = String, Path, description = "Runner name"),
        ("If-Match" = Option<String>, Header, description = "The ETag last read")),
    security(("bearerAuth" = [])),
    responses((status = 204, description = "Deleted"),
        BadRequest, Unauthorized, Forbidden, NotFound, Conflict, PreconditionFailed, BadGateway, Unavailable))]
pub(crate) async fn delete_runner(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    NameParam(name): NameParam,
    caller: Caller,
    if_match: IfMatch,
) -> Result<StatusCode, ApiError> {
    let id = runner_id(&group, &name)?;
    caller
        .authorize(
            &state,
            manage_action(&group),
            &group,
            &format!("runner `{id}`"),
        )
        .await?;
    state.store.delete_runner(&id, if_match.version()?).await?;
    Ok(StatusCode::NO_CONTENT)
}
