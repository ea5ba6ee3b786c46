//! State history: `/v1/environments/{environment}/-/state-versions`, one version
//! (redacted) and its restore. Thin: the use cases are `sortie_lifecycle`'s
//! (`JobService::state_versions`, `state_version`, `restore_state`).

use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sortie_core::{Action, EnvPath};
use sortie_lifecycle::HistoryRefusal;
use utoipa::{IntoParams, ToSchema};

use super::Reply;
use crate::error::ApiError;
use crate::extract::{query_field, Caller, Document, EnvParam, IdParam, QueryParams};
use crate::openapi::errors::*;
use crate::AppState;

/// The query of the state version list.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct StateVersionQuery {
    /// Page size: 1 to 50, default 20 (each version is read for its serial and lineage).
    #[serde(default, deserialize_with = "limit")]
    #[param(value_type = Option<u32>, minimum = 1, maximum = 50)]
    limit: Option<u32>,
    /// The `next` of the previous page.
    #[serde(default)]
    cursor: Option<String>,
}

fn limit<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    query_field(d, "limit", "must be a whole number from 1 to 50", |s| {
        s.parse::<u32>().ok().filter(|l| (1..=50).contains(l))
    })
}

/// One version of an environment's state.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct StateVersionView {
    /// The S3 version id.
    pub version_id: String,
    /// When it was written.
    pub last_modified: DateTime<Utc>,
    /// Its size in bytes.
    pub size: u64,
    /// True for the current state.
    pub is_latest: bool,
    /// The state's serial.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub serial: Option<u64>,
    /// The state's lineage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lineage: Option<String>,
    /// The Terraform version that wrote it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terraform_version: Option<String>,
    /// The job that wrote it; absent when no job of the environment's did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// How `job_id` was found: `serial` (the job recorded ending with this serial and
    /// lineage), `time` (by time alone: a long apply's earlier writes, or a job from before
    /// serials were recorded) or `none`.
    pub matched_by: sortie_core::state_version::MatchedBy,
}

/// One page of state versions, newest first.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct StateVersionPage {
    /// The environment.
    pub environment: String,
    /// The versions.
    pub versions: Vec<StateVersionView>,
    /// The cursor of the next page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// One state version with every sensitive value redacted.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct StateVersionContent {
    /// The environment.
    pub environment: String,
    /// The S3 version id.
    pub version_id: String,
    /// The state, each sensitive value replaced by `(sensitive)`.
    #[schema(value_type = Object)]
    pub state: serde_json::Value,
}

/// A restore's request: why.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RestoreRequest {
    /// Why the state is restored (recorded on the job).
    pub reason: String,
}

/// The answer to a restore: the job that writes the version back, then plans.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RestoreAnswer {
    /// The restore's job.
    pub job_id: String,
    /// Its state (`queued`).
    pub state: String,
    /// The version it writes back.
    pub version_id: String,
}

fn refused(e: HistoryRefusal) -> ApiError {
    match e {
        e @ HistoryRefusal::NoHistory { .. } => {
            ApiError::new(StatusCode::CONFLICT, "no_state_history", e.to_string())
        }
        e @ HistoryRefusal::NoConfiguration(_) => {
            ApiError::new(StatusCode::CONFLICT, "no_configuration", e.to_string())
        }
        e @ HistoryRefusal::NoSuchVersion { .. } => {
            ApiError::new(StatusCode::NOT_FOUND, "not_found", e.to_string())
        }
        HistoryRefusal::Invalid { field, problem } => ApiError::field(field, problem),
        e @ HistoryRefusal::TooLarge(_) => {
            ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", e.to_string())
        }
        e @ (HistoryRefusal::Unreadable(_) | HistoryRefusal::Bucket(_)) => {
            ApiError::new(StatusCode::BAD_GATEWAY, "state_bucket", e.to_string())
        }
        HistoryRefusal::Store(e) => e.into(),
        HistoryRefusal::Submit(e) => super::submit_error(e),
    }
}

async fn allowed(
    state: &AppState,
    caller: &Caller,
    action: Action,
    path: &EnvPath,
) -> Result<sortie_core::Principal, ApiError> {
    caller
        .authorize(
            state,
            action,
            path.group(),
            &format!("environment `{path}`"),
        )
        .await
}

/// The versions of the environment's state (`s3` state storage only), newest first, each
/// with the job that wrote it, its serial, lineage and size.
#[utoipa::path(get, path = "/v1/environments/{environment}/-/state-versions", tag = "environments",
    params(("environment" = String, Path, description = "Environment path"), StateVersionQuery),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "State versions, newest first, and the next cursor", body = StateVersionPage),
        BadRequest, Unauthorized, NotFound, Conflict, BadGateway, Unavailable))]
pub(crate) async fn list_state_versions(
    State(state): State<AppState>,
    EnvParam(path): EnvParam,
    caller: Caller,
    query: QueryParams<StateVersionQuery>,
) -> Result<Reply<StateVersionPage>, ApiError> {
    allowed(&state, &caller, Action::Read, &path).await?;
    let query = query.get()?;
    if let Some(c) = &query.cursor {
        if let Some(problem) = sortie_core::state_version::version_id_problem(c) {
            return Err(ApiError::field("query.cursor", problem));
        }
    }
    let list = state
        .jobs
        .state_versions(
            state.state_history.as_ref(),
            &path,
            query.cursor.as_deref(),
            query.limit.unwrap_or(20),
        )
        .await
        .map_err(refused)?;
    Ok(Reply::ok(StateVersionPage {
        environment: path.to_string(),
        versions: list
            .versions
            .into_iter()
            .map(|v| StateVersionView {
                version_id: v.object.version_id,
                last_modified: v.object.last_modified,
                size: v.object.size,
                is_latest: v.object.is_latest,
                serial: v.facts.serial,
                lineage: v.facts.lineage,
                terraform_version: v.facts.terraform_version,
                job_id: v.job_id.map(|j| j.to_string()),
                matched_by: v.matched_by,
            })
            .collect(),
        next: list.next,
    }))
}

/// One version of the environment's state, with every sensitive value redacted. Needs
/// `deploy`: non-sensitive state still shows what the infrastructure is.
#[utoipa::path(get, path = "/v1/environments/{environment}/-/state-versions/{id}", tag = "environments",
    params(("environment" = String, Path, description = "Environment path"), ("id" = String, Path, description = "State version id")),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "The version, redacted", body = StateVersionContent),
        BadRequest, Unauthorized, Forbidden, NotFound, Conflict, PayloadTooLarge, BadGateway, Unavailable))]
pub(crate) async fn get_state_version(
    State(state): State<AppState>,
    EnvParam(path): EnvParam,
    IdParam(version): IdParam,
    caller: Caller,
) -> Result<Reply<StateVersionContent>, ApiError> {
    allowed(&state, &caller, Action::Deploy, &path).await?;
    let redacted = state
        .jobs
        .state_version(state.state_history.as_ref(), &path, &version)
        .await
        .map_err(refused)?;
    Ok(Reply::ok(StateVersionContent {
        environment: path.to_string(),
        version_id: version,
        state: redacted,
    }))
}

/// Restores the environment's state to a version: a job (queued behind the environment's
/// lock) writes it back as the current state, then plans with the latest apply's
/// configuration, so its plan shows what the restore changed. Needs `manage`.
#[utoipa::path(post, path = "/v1/environments/{environment}/-/state-versions/{id}/restore", tag = "environments",
    params(("environment" = String, Path, description = "Environment path"), ("id" = String, Path, description = "State version id")),
    request_body(description = "Why", content((RestoreRequest = "application/json"))),
    security(("bearerAuth" = [])),
    responses((status = 202, description = "The restore's job, queued", body = RestoreAnswer),
        BadRequest, Unauthorized, Forbidden, NotFound, Conflict, PayloadTooLarge, UnsupportedMediaType, BadGateway, Unavailable))]
pub(crate) async fn restore_state_version(
    State(state): State<AppState>,
    EnvParam(path): EnvParam,
    IdParam(version): IdParam,
    caller: Caller,
    body: Document,
) -> Result<Reply<RestoreAnswer>, ApiError> {
    let principal = allowed(&state, &caller, Action::Manage, &path).await?;
    let value = body.value()?;
    let reason = match value.get("reason") {
        Some(serde_json::Value::String(r)) => r.clone(),
        Some(_) => return Err(ApiError::field("reason", "must be a string")),
        None => {
            return Err(ApiError::field(
                "reason",
                "is required: say why the state is restored",
            ))
        }
    };
    if let Some(other) = value
        .as_object()
        .and_then(|o| o.keys().find(|k| k.as_str() != "reason"))
    {
        return Err(ApiError::field(
            other.clone(),
            "is not a field of a restore",
        ));
    }
    let by = principal.subject;
    let submitted = state
        .jobs
        .restore_state(state.state_history.as_ref(), &path, &version, &reason, &by)
        .await
        .map_err(refused)?;
    Ok(Reply::new(
        StatusCode::ACCEPTED,
        RestoreAnswer {
            job_id: submitted.job.id.to_string(),
            state: submitted.job.state.to_string(),
            version_id: version,
        },
    ))
}
