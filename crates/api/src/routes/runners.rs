//! Runners: `/v1/groups/{group}/-/runners[/{name}]`.

use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use sortie_core::{Action, GroupPath, RunnerId};
use sortie_lifecycle::RunnerRefusal;
use utoipa::IntoParams;

use super::{manage_action, Reply};
use crate::error::ApiError;
use crate::extract::{Caller, Document, GroupParam, IfMatch, NameParam, QueryParams};
use crate::model::{RunnerCheckReport, RunnerList, RunnerView};
use crate::openapi::errors::*;
use crate::AppState;

fn runner_id(group: &GroupPath, name: &str) -> Result<RunnerId, ApiError> {
    RunnerId::new(group.clone(), name).map_err(|e| ApiError::field("name", e.first_problem()))
}

fn refused(e: RunnerRefusal) -> ApiError {
    match e {
        RunnerRefusal::Invalid(e) => e.into(),
        RunnerRefusal::Field { field, problem } => ApiError::field(field, problem),
        RunnerRefusal::Store(e) => e.into(),
    }
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
    let runners = state.runners().visible_from(&group).await?;
    Ok(Reply::ok(RunnerList {
        runners: runners
            .into_iter()
            .map(|r| RunnerView::new(r, &group))
            .collect(),
    }))
}

/// Creates a runner from a runner file.
#[utoipa::path(post, path = "/v1/groups/{group}/-/runners/{name}", tag = "runners",
    params(("group" = String, Path, description = "Owner group path"), ("name" = String, Path, description = "Runner name")),
    request_body(description = "A runner file, YAML or JSON: description, runner_configuration, state_storage_configuration",
        content((sortie_core::RunnerSpec = "application/yaml"), (sortie_core::RunnerSpec = "application/json"))),
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
    let created = state
        .runners()
        .create(id, &body.value()?)
        .await
        .map_err(refused)?;
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
    let r = state.runners().get(&id).await?;
    let version = r.version;
    Ok(Reply::ok(RunnerView::new(r, &group)).etag(version))
}

/// Replaces a runner's file.
#[utoipa::path(put, path = "/v1/groups/{group}/-/runners/{name}", tag = "runners",
    params(("group" = String, Path, description = "Owner group path"), ("name" = String, Path, description = "Runner name"),
        ("If-Match" = Option<String>, Header, description = "The ETag last read")),
    request_body(description = "The new runner file, YAML or JSON",
        content((sortie_core::RunnerSpec = "application/yaml"), (sortie_core::RunnerSpec = "application/json"))),
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
    let r = state
        .runners()
        .replace(id, &body.value()?, expected)
        .await
        .map_err(refused)?;
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
    state.runners().delete(&id, if_match.version()?).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The query of `runner check`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct CheckQuery {
    /// The organisation to check a shared runner for (its `sortie:org` session tag).
    /// Required for a shared runner; for any other runner it may only name the owner's.
    #[serde(default)]
    org: Option<String>,
}

/// Checks a runner against its platform without launching anything: assumes its role as a
/// launch would, then reads the cluster, capacity providers, task definition, network and
/// role passing. Writes nothing but an audit line.
#[utoipa::path(post, path = "/v1/groups/{group}/-/runners/{name}/check", tag = "runners",
    params(("group" = String, Path, description = "Owner group path"), ("name" = String, Path, description = "Runner name"), CheckQuery),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "Every check, passed, failed (the platform's words quoted) or skipped; `passed` is true only when all passed", body = RunnerCheckReport),
        BadRequest, Unauthorized, Forbidden, NotFound, BadGateway, Unavailable))]
pub(crate) async fn check_runner(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    NameParam(name): NameParam,
    caller: Caller,
    query: QueryParams<CheckQuery>,
) -> Result<Reply<RunnerCheckReport>, ApiError> {
    let id = runner_id(&group, &name)?;
    let principal = caller
        .authorize(
            &state,
            manage_action(&group),
            &group,
            &format!("runner `{id}`"),
        )
        .await?;
    let asked = query.get()?.org;
    let org = match (group.org(), asked) {
        (Some(owner), None) => owner.to_string(),
        (Some(owner), Some(asked)) if asked == owner => asked,
        (Some(owner), Some(_)) => {
            return Err(ApiError::field(
                "query.org",
                format!(
                    "runner `{id}` belongs to organisation `{owner}`; it is checked only for it"
                ),
            ))
        }
        (None, Some(asked)) => {
            let org = GroupPath::parse(&asked)
                .ok()
                .filter(|g| g.depth() == 1)
                .ok_or_else(|| ApiError::field("query.org", "is not an organisation name"))?;
            org.as_str().to_string()
        }
        (None, None) => {
            return Err(ApiError::field(
                "query.org",
                "is required for a shared runner: name the organisation to check it for",
            ))
        }
    };
    let runners = state.runners();
    let runner = runners.get(&id).await?.item;
    let mut checks = state.checker.check(&runner, &org).await;
    // When the pool of an agent runner last saw an agent: its jobs wait while none polls.
    checks.extend(runners.agent_seen(&runner, chrono::Utc::now()).await?);
    let passed = sortie_core::check::all_passed(&checks);
    let failed: Vec<&str> = checks
        .iter()
        .filter(|c| !c.is_passed())
        .map(|c| c.name.as_str())
        .collect();
    tracing::info!(
        audit = "runner_check",
        runner = %id,
        org = %org,
        subject = %principal.subject,
        issuer = %principal.issuer,
        passed,
        not_passed = %failed.join(","),
        "runner check"
    );
    Ok(Reply::ok(RunnerCheckReport {
        runner_id: id.to_string(),
        org,
        passed,
        checks,
    }))
}
