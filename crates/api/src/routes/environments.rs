//! Environments: `/v1/groups/{group}/-/environments`, `/v1/environments/{environment}`
//! and its refresh-runner.

use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use sortie_core::environment::EnvironmentInput;
use sortie_core::{Action, EnvPath};
use sortie_lifecycle::{EnvironmentRefusal, Resolved};
use utoipa::IntoParams;

use super::Reply;
use crate::error::ApiError;
use crate::extract::{query_field, Caller, Document, EnvParam, GroupParam, IfMatch, QueryParams};
use crate::model::{
    EnvironmentCreate, EnvironmentCreated, EnvironmentList, EnvironmentPatch, EnvironmentView,
    RefreshRunnerAnswer, ResolutionAnswer, ENVIRONMENTS_UNDER_MAX, EXPLANATION_PAGE,
};
use crate::openapi::errors::*;
use crate::AppState;

/// How much of the resolution to explain: counts by default, every rule with `full`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ExplainQuery {
    /// `full` lists every rule's fate (paginated); by default only counts are given.
    #[serde(default, deserialize_with = "explain")]
    #[param(value_type = Option<String>, pattern = "^(counts|full)$")]
    explain: Option<bool>,
    /// With `explain=full`: where the page of the explanation starts.
    #[serde(default, deserialize_with = "explain_offset")]
    #[param(value_type = Option<u32>, minimum = 0)]
    explain_offset: Option<usize>,
}

fn explain<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    query_field(d, "explain", "is not `counts` or `full`", |s| match s {
        "full" => Some(true),
        "counts" => Some(false),
        _ => None,
    })
}

fn explain_offset<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    query_field(d, "explain_offset", "must be a whole number", |s| {
        s.parse().ok()
    })
}

/// The answer's resolution: the winner, why, and counts; with `explain=full` also one page
/// of every rule's fate.
fn resolution_answer(resolved: Resolved, explain: &ExplainQuery) -> ResolutionAnswer {
    let mut answer = ResolutionAnswer {
        rule: resolved.rule.clone(),
        why: resolved.why.clone(),
        counts: resolved.counts,
        explanation: None,
        explanation_next: None,
    };
    if explain.explain == Some(true) {
        let full = resolved.explanation();
        let from = explain.explain_offset.unwrap_or(0).min(full.len());
        let to = (from + EXPLANATION_PAGE).min(full.len());
        answer.explanation_next = (to < full.len()).then_some(to);
        answer.explanation = Some(full[from..to].to_vec());
    }
    answer
}

/// The answer to a refused resolution or write.
fn refused(e: EnvironmentRefusal) -> ApiError {
    match e {
        EnvironmentRefusal::NoRunnerMatched(e) => no_match(e),
        e @ EnvironmentRefusal::Disagreed => {
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
        }
        e @ EnvironmentRefusal::RunnerMissing { .. } => {
            ApiError::new(StatusCode::CONFLICT, "runner_missing", e.to_string())
        }
        EnvironmentRefusal::Store(e) => e.into(),
    }
}

/// At most this many rules are named in a "no rule matches" error's fields.
const NO_MATCH_FIELDS: usize = 100;

fn no_match(e: sortie_core::NoRunnerMatched) -> ApiError {
    let mut err = ApiError::new(StatusCode::CONFLICT, "no_runner_matched", e.to_string());
    err.fields = e
        .explanation
        .iter()
        .take(NO_MATCH_FIELDS)
        .map(|c| sortie_core::Problem {
            path: format!("rules.{}:{}", c.scope.as_str(), c.rule_id),
            problem: format!("{:?}", c.verdict),
        })
        .collect();
    if e.explanation.len() > NO_MATCH_FIELDS {
        err.fields.push(sortie_core::Problem {
            path: "rules".into(),
            problem: format!(
                "and {} more rules that do not match",
                e.explanation.len() - NO_MATCH_FIELDS
            ),
        });
    }
    err
}

/// The query of the environment list.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct EnvListQuery {
    /// `true` lists the environments of every group below too, by path.
    #[serde(default, deserialize_with = "recursive")]
    #[param(value_type = Option<bool>)]
    recursive: Option<bool>,
}

fn recursive<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    query_field(d, "recursive", "is not `true` or `false`", |s| match s {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    })
}

/// The group's environments and a count of those below it; with `recursive=true`, those of
/// every group below it too, by path (a role on a group holds below it, so the caller may
/// read them all), at most [`ENVIRONMENTS_UNDER_MAX`] and saying when cut. Neither reads
/// another organisation's items: both Query the organisation's index (gsi4).
#[utoipa::path(get, path = "/v1/groups/{group}/-/environments", tag = "environments",
    params(("group" = String, Path, description = "Group path"), EnvListQuery),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "The group's environments", body = EnvironmentList),
        BadRequest, Unauthorized, NotFound, BadGateway, Unavailable))]
pub(crate) async fn list_environments(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    caller: Caller,
    query: QueryParams<EnvListQuery>,
) -> Result<Reply<EnvironmentList>, ApiError> {
    caller
        .authorize(
            &state,
            Action::Read,
            &group,
            &format!("group `{}`", group.as_str()),
        )
        .await?;
    let recursive = query.get()?.recursive == Some(true);
    if recursive && group.is_root() {
        return Err(ApiError::field(
            "query.recursive",
            "cannot list the root group recursively: it spans every organisation; \
             list one organisation's environments instead",
        ));
    }
    if recursive {
        let under = state
            .environments()
            .list_under(&group, ENVIRONMENTS_UNDER_MAX)
            .await?;
        return Ok(Reply::ok(EnvironmentList {
            environments: under
                .environments
                .into_iter()
                .map(EnvironmentView::from)
                .collect(),
            in_subgroups: None,
            truncated: under.truncated,
        }));
    }
    // The group's own (one gsi1 Query) and a count of those below (one gsi4 COUNT Query).
    let own = state.environments().list(&group).await?;
    let in_subgroups = if group.is_root() {
        None
    } else {
        let all = state.environments().count_under(&group).await?;
        Some(all.saturating_sub(own.len() as u64))
    };
    Ok(Reply::ok(EnvironmentList {
        environments: own.into_iter().map(EnvironmentView::from).collect(),
        in_subgroups,
        truncated: false,
    }))
}

/// Creates an environment and links it to the runner the rules pick.
#[utoipa::path(post, path = "/v1/groups/{group}/-/environments", tag = "environments",
    params(("group" = String, Path, description = "Group path"), ExplainQuery),
    request_body(description = "The environment, YAML or JSON", content((EnvironmentCreate = "application/json"), (EnvironmentCreate = "application/yaml"))),
    security(("bearerAuth" = [])),
    responses((status = 201, description = "Created and linked; the answer explains the rule resolution", body = EnvironmentCreated, headers(("etag" = String, description = "The version"))),
        BadRequest, Unauthorized, Forbidden, NotFound, Conflict, PayloadTooLarge, UnsupportedMediaType, BadGateway, Unavailable))]
pub(crate) async fn create_environment(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    caller: Caller,
    query: QueryParams<ExplainQuery>,
    body: Document,
) -> Result<Reply<EnvironmentCreated>, ApiError> {
    let explain = query.get()?;
    let principal = caller
        .authorize(
            &state,
            Action::Manage,
            &group,
            &format!("group `{}`", group.as_str()),
        )
        .await?;
    let fields = EnvironmentInput::from_value(&body.value()?, true)?;
    let path = EnvPath::new(group.clone(), fields.name.as_deref().unwrap_or_default())
        .map_err(|e| ApiError::field("name", e.first_problem()))?;
    let (created, resolved) = state
        .environments()
        .create(path, fields, &principal.subject)
        .await
        .map_err(refused)?;
    let resolution = resolution_answer(resolved, &explain);
    let version = created.version;
    let body = EnvironmentCreated {
        environment: created.into(),
        resolution,
    };
    Ok(Reply::new(StatusCode::CREATED, body).etag(version))
}

/// One environment.
#[utoipa::path(get, path = "/v1/environments/{environment}", tag = "environments",
    params(("environment" = String, Path, description = "Environment path, slashes included")),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "The environment, its linked runner and its lock", body = EnvironmentView, headers(("etag" = String, description = "The version"))),
        BadRequest, Unauthorized, NotFound, BadGateway, Unavailable))]
pub(crate) async fn get_environment(
    State(state): State<AppState>,
    EnvParam(path): EnvParam,
    caller: Caller,
) -> Result<Reply<EnvironmentView>, ApiError> {
    caller
        .authorize(
            &state,
            Action::Read,
            path.group(),
            &format!("environment `{path}`"),
        )
        .await?;
    let e = state.environments().get(&path).await;
    let e = super::job_views::or_environment_not_found(&state, &caller, &path, e).await?;
    let version = e.version;
    let expiry = state.environments().expiry(&e.item).await?;
    let mut view = EnvironmentView::from(e);
    view.expiry = expiry;
    Ok(Reply::ok(view).etag(version))
}

/// Changes an environment's type, labels or tags; never its runner link.
#[utoipa::path(patch, path = "/v1/environments/{environment}", tag = "environments",
    params(("environment" = String, Path, description = "Environment path"),
        ("If-Match" = Option<String>, Header, description = "The ETag last read")),
    request_body(description = "Any subset of env_type, labels, tags, YAML or JSON", content((EnvironmentPatch = "application/json"), (EnvironmentPatch = "application/yaml"))),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "Updated", body = EnvironmentView, headers(("etag" = String, description = "The version"))),
        BadRequest, Unauthorized, Forbidden, NotFound, PreconditionFailed, PayloadTooLarge, UnsupportedMediaType, BadGateway, Unavailable))]
pub(crate) async fn update_environment(
    State(state): State<AppState>,
    EnvParam(path): EnvParam,
    caller: Caller,
    if_match: IfMatch,
    body: Document,
) -> Result<Reply<EnvironmentView>, ApiError> {
    caller
        .authorize(
            &state,
            Action::Manage,
            path.group(),
            &format!("environment `{path}`"),
        )
        .await?;
    let fields = EnvironmentInput::from_value(&body.value()?, false)?;
    let expected = if_match.version()?;
    let updated = state.environments().update(&path, fields, expected).await?;
    let version = updated.version;
    Ok(Reply::ok(EnvironmentView::from(updated)).etag(version))
}

/// Deletes an idle environment.
#[utoipa::path(delete, path = "/v1/environments/{environment}", tag = "environments",
    params(("environment" = String, Path, description = "Environment path"),
        ("If-Match" = Option<String>, Header, description = "The ETag last read")),
    security(("bearerAuth" = [])),
    responses((status = 204, description = "Deleted"),
        BadRequest, Unauthorized, Forbidden, NotFound, Conflict, PreconditionFailed, BadGateway, Unavailable))]
pub(crate) async fn delete_environment(
    State(state): State<AppState>,
    EnvParam(path): EnvParam,
    caller: Caller,
    if_match: IfMatch,
) -> Result<StatusCode, ApiError> {
    caller
        .authorize(
            &state,
            Action::Manage,
            path.group(),
            &format!("environment `{path}`"),
        )
        .await?;
    state
        .environments()
        .delete(&path, if_match.version()?)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The query of refresh-runner.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct RefreshQuery {
    /// Answer without changing anything (`true`, `false`, or empty for true).
    #[serde(default, deserialize_with = "dry_run")]
    #[param(value_type = Option<bool>)]
    dry_run: Option<bool>,
}

fn dry_run<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    query_field(d, "dry_run", "is not true or false", |s| match s {
        "true" | "" => Some(true),
        "false" => Some(false),
        _ => None,
    })
}

/// Resolves the environment's runner again and relinks it, unless `dry_run`.
#[utoipa::path(post, path = "/v1/environments/{environment}/-/refresh-runner", tag = "environments",
    params(("environment" = String, Path, description = "Environment path"), RefreshQuery, ExplainQuery,
        ("If-Match" = Option<String>, Header, description = "The ETag last read")),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "The runner picked now, the rule that picked it and the explanation; relinked unless dry_run", body = RefreshRunnerAnswer),
        BadRequest, Unauthorized, Forbidden, NotFound, Conflict, PreconditionFailed, BadGateway, Unavailable))]
pub(crate) async fn refresh_runner(
    State(state): State<AppState>,
    EnvParam(path): EnvParam,
    caller: Caller,
    query: QueryParams<RefreshQuery>,
    explain: QueryParams<ExplainQuery>,
    if_match: IfMatch,
) -> Result<Reply<RefreshRunnerAnswer>, ApiError> {
    let dry_run = query.get()?.dry_run.unwrap_or(false);
    let explain = explain.get()?;
    let action = if dry_run {
        Action::Read
    } else {
        Action::Manage
    };
    let principal = caller
        .authorize(
            &state,
            action,
            path.group(),
            &format!("environment `{path}`"),
        )
        .await?;
    // A dry run changes nothing: its If-Match is not read.
    let expected = if dry_run { None } else { if_match.version()? };
    let refreshed = state
        .environments()
        .refresh_runner(&path, &principal.subject, dry_run, expected)
        .await
        .map_err(refused)?;
    let runner_id = refreshed.resolved.rule.runner_id.clone();
    let mut answer = RefreshRunnerAnswer {
        dry_run,
        previous_runner_id: refreshed.previous.to_string(),
        runner_id: runner_id.to_string(),
        changed: runner_id != refreshed.previous,
        resolution: resolution_answer(refreshed.resolved, &explain),
        environment: None,
    };
    let Some(updated) = refreshed.environment else {
        return Ok(Reply::ok(answer));
    };
    let version = updated.version;
    answer.environment = Some(updated.into());
    Ok(Reply::ok(answer).etag(version))
}

/// The outputs of the environment's latest successful apply.
#[utoipa::path(get, path = "/v1/environments/{environment}/-/outputs", tag = "environments",
    params(("environment" = String, Path, description = "Environment path, slashes included")),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "The latest successful apply's outputs", body = crate::model::OutputsView),
        BadRequest, Unauthorized, NotFound, BadGateway, Unavailable))]
pub(crate) async fn get_environment_outputs(
    State(state): State<AppState>,
    EnvParam(path): EnvParam,
    caller: Caller,
) -> Result<Reply<crate::model::OutputsView>, ApiError> {
    caller
        .authorize(
            &state,
            Action::Read,
            path.group(),
            &format!("environment `{path}`"),
        )
        .await?;
    let env = state.environments().get(&path).await?;
    let Some(last) = env.item.last_apply else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("environment `{path}` has no outputs: no apply has succeeded since it was created or last destroyed"),
        ));
    };
    let record = state.jobs.get(&last.job_id).await?;
    Ok(Reply::ok(super::jobs::outputs_of(&state, &record).await?))
}
