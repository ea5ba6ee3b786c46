//! The routes the pilot calls with its job token instead of a user's JWT:
//! `GET /v1/jobs/{id}/spec`, `PUT /v1/jobs/{id}/summary`, `POST /v1/jobs/{id}/uploads`
//! (a presigned URL for one of the job's own objects) and
//! `PUT /v1/jobs/{id}/upload-problems` (what it could not upload).

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use sortie_core::protocol::pilot::JobSpec;
use sortie_core::JobId;
use sortie_lifecycle::{SpecParts, SpecRefusal};
use sortie_store::{JobRecord, StoreError};

use super::Reply;
use crate::error::ApiError;
use crate::extract::{bearer_token, Document, JobIdParam};
use crate::model::{JobView, SensitiveVariables, UploadGrant, UploadProblems, UploadRequest};
use crate::openapi::errors::*;
use crate::AppState;

/// Checks the pilot's job token: valid for this one job, and only while it is not terminal.
pub(super) async fn job_by_token(
    state: &AppState,
    headers: &HeaderMap,
    id: &JobId,
) -> Result<JobRecord, ApiError> {
    job_by_token_in(state, headers, id, false).await
}

/// [`job_by_token`], also for a terminal job when `ended_too` (the final callback, which
/// may arrive after the sweeper ended the job).
async fn job_by_token_in(
    state: &AppState,
    headers: &HeaderMap,
    id: &JobId,
    ended_too: bool,
) -> Result<JobRecord, ApiError> {
    // The body's code is `invalid_token` either way (no hint whether the job exists);
    // the challenge names `invalid_token` only when a bearer token was sent (RFC 6750).
    let message = "the job token is not valid for this job";
    let sent = bearer_token(headers);
    let refuse = || match sent {
        Some(_) => ApiError::invalid_token("invalid_token", message),
        None => ApiError::unauthenticated("invalid_token", message),
    };
    let token = sent.filter(|t| !t.is_empty()).ok_or_else(refuse)?;
    let record = match state.jobs.get(id).await {
        Ok(r) => r,
        Err(StoreError::NotFound { .. }) => return Err(refuse()),
        Err(e) => return Err(e.into()),
    };
    let matches = record
        .token_hash
        .as_deref()
        .is_some_and(|h| sortie_core::tokens::token_matches(h, token));
    // A token works while its task may run (`dispatching`, `running`): it dies when the task
    // ends, so a reviewed job's plan task cannot write once the job awaits approval, nor a
    // requeued attempt's. Only the final callback (`ended_too`) is answered afterwards.
    let launched = matches!(
        record.job.state,
        sortie_core::JobState::Dispatching | sortie_core::JobState::Running
    );
    if !matches || !(launched || ended_too) {
        return Err(refuse());
    }
    Ok(record)
}

/// The job spec the pilot runs.
#[utoipa::path(get, path = "/v1/jobs/{id}/spec", tag = "pilot",
    params(("id" = String, Path, description = "Job id")),
    security(("jobToken" = [])),
    responses((status = 200, description = "The job spec the pilot runs", body = sortie_core::protocol::pilot::JobSpec),
        BadRequest, InvalidToken, Conflict, BadGateway, Unavailable))]
pub(crate) async fn get_job_spec(
    State(state): State<AppState>,
    JobIdParam(id): JobIdParam,
    headers: HeaderMap,
) -> Result<Reply<JobSpec>, ApiError> {
    let record = job_by_token(&state, &headers, &id).await?;
    let job = &record.job;
    // A pull request's commit: a token that reads only its repository, minted now.
    let source_access = match &job.request.source {
        source if source.commit_of().is_some() => {
            let prs = state.pull_requests().ok_or_else(|| {
                ApiError::new(
                    StatusCode::CONFLICT,
                    "pull_requests_unavailable",
                    "the job's source is a commit of a code host, and this deployment has no pull-request connection",
                )
            })?;
            prs.source_access(job).await.map_err(|e| {
                let status = if e.is_retryable() {
                    StatusCode::BAD_GATEWAY
                } else {
                    StatusCode::CONFLICT
                };
                ApiError::new(
                    status,
                    "source_unavailable",
                    format!("the job's source cannot be read: {e}"),
                )
            })?
        }
        _ => None,
    };
    let restore_state_url = match &job.restore {
        Some(restore) => Some(restore_url(&state, job, &restore.version_id).await?),
        None => None,
    };
    let parts = SpecParts {
        source_access,
        restore_state_url,
        saved_plan_ttl: SAVED_PLAN_URL_TTL,
    };
    let spec = state
        .jobs
        .spec_for(&record, &state.job_artifacts(), &state.logs(), parts)
        .await
        .map_err(|e| match e {
            SpecRefusal::RunnerMissing => {
                ApiError::new(StatusCode::CONFLICT, "runner_missing", e.to_string())
            }
            SpecRefusal::NoSavedPlan(why) => {
                ApiError::new(StatusCode::CONFLICT, "no_saved_plan", why)
            }
            SpecRefusal::Store(e) => e.into(),
        })?;
    Ok(Reply::ok(spec))
}

/// How long a restore's state version URL works. It is signed when the task fetches its
/// spec, so the job's wait in the queue and its launch are behind it; the pilot downloads it
/// right after `init` (its tool, its source and `init` first), so it asks for 15 minutes and
/// needs 10. It is signed with fresh credentials and lives no longer than they do (a
/// launcher session lasts 15 minutes); a URL that could not live 10 minutes is not given,
/// and the spec fetch answers 409 `no_state_version` saying why: the pilot fails the job
/// before it starts, with that reason.
const RESTORE_URL_LIFE: sortie_launch::state_history::UrlLife =
    sortie_launch::state_history::UrlLife {
        wanted: std::time::Duration::from_secs(15 * 60),
        needed: std::time::Duration::from_secs(10 * 60),
    };

/// A restore job's presigned GET of its state version, signed in the runner's account.
async fn restore_url(
    state: &AppState,
    job: &sortie_core::Job,
    version: &str,
) -> Result<String, ApiError> {
    let refused = |e: String| {
        ApiError::new(
            StatusCode::CONFLICT,
            "no_state_version",
            format!(
                "state version `{version}` of environment `{}` cannot be read: {e}",
                job.environment
            ),
        )
    };
    let runner = job
        .runner_spec
        .as_ref()
        .ok_or_else(|| refused("the job has no runner".into()))?;
    let runner_id = job.runner_id.to_string();
    let at = sortie_launch::state_history::StateAt {
        environment: &job.environment,
        runner_id: &runner_id,
        runner,
    };
    state
        .state_history
        .presign_get(at, version, RESTORE_URL_LIFE)
        .await
        .map_err(|e| refused(e.to_string()))
}

/// The values of the job's sensitive variables, read from their secrets: answered only to
/// the job's own token, while its task may run. Neither the values nor the answer are
/// logged.
#[utoipa::path(get, path = "/v1/jobs/{id}/sensitive-variables", tag = "pilot",
    params(("id" = String, Path, description = "Job id")),
    security(("jobToken" = [])),
    responses((status = 200, description = "Each value by its variable name", body = SensitiveVariables),
        BadRequest, InvalidToken, BadGateway, Unavailable))]
pub(crate) async fn get_job_sensitive_variables(
    State(state): State<AppState>,
    JobIdParam(id): JobIdParam,
    headers: HeaderMap,
) -> Result<Reply<SensitiveVariables>, ApiError> {
    let record = job_by_token(&state, &headers, &id).await?;
    let values = state
        .jobs
        .sensitive_values(&record.job)
        .await
        .map_err(|e| ApiError::new(StatusCode::BAD_GATEWAY, "secrets_unavailable", e))?;
    Ok(Reply::ok(SensitiveVariables {
        variables: values.into_inner(),
    }))
}

/// How long the apply phase's link to its saved plan works.
pub const SAVED_PLAN_URL_TTL: std::time::Duration = std::time::Duration::from_secs(60 * 60);

/// Records the tool and exact version the pilot picked.
#[utoipa::path(put, path = "/v1/jobs/{id}/tool", tag = "pilot",
    params(("id" = String, Path, description = "Job id")),
    request_body(description = "The tool and its exact version", content((sortie_core::ToolUsed = "application/json"))),
    security(("jobToken" = [])),
    responses((status = 200, description = "Recorded on the job", body = JobView),
        BadRequest, InvalidToken, Conflict, PayloadTooLarge, UnsupportedMediaType, BadGateway, Unavailable))]
pub(crate) async fn put_job_tool(
    State(state): State<AppState>,
    JobIdParam(id): JobIdParam,
    headers: HeaderMap,
    body: Document,
) -> Result<Reply<JobView>, ApiError> {
    record_by_token::<sortie_core::ToolUsed>(&state, &headers, &id, body).await
}

/// Records the state (serial and lineage) the job ended with: what matches a state
/// version to the job that wrote it.
#[utoipa::path(put, path = "/v1/jobs/{id}/state", tag = "pilot",
    params(("id" = String, Path, description = "Job id")),
    request_body(description = "The serial and lineage of the state after the job wrote it", content((sortie_core::state_version::StateStamp = "application/json"))),
    security(("jobToken" = [])),
    responses((status = 200, description = "Recorded on the job", body = JobView),
        BadRequest, InvalidToken, Conflict, PayloadTooLarge, UnsupportedMediaType, BadGateway, Unavailable))]
pub(crate) async fn put_job_state(
    State(state): State<AppState>,
    JobIdParam(id): JobIdParam,
    headers: HeaderMap,
    body: Document,
) -> Result<Reply<JobView>, ApiError> {
    record_by_token::<sortie_core::state_version::StateStamp>(&state, &headers, &id, body).await
}

/// A report the pilot sends about its own job (`PUT /v1/jobs/{id}/tool`, `/state`,
/// `/summary`): the body it is decoded from, and the job update it makes.
trait PilotReport: serde::de::DeserializeOwned {
    /// The update this report makes on the job, or a 400 naming the field at fault.
    fn into_update(self) -> Result<sortie_store::JobUpdate, ApiError>;
}

impl PilotReport for sortie_core::ToolUsed {
    fn into_update(self) -> Result<sortie_store::JobUpdate, ApiError> {
        self.check().map_err(|e| ApiError::field("version", e))?;
        Ok(sortie_store::JobUpdate {
            tool_used: Some(self),
            ..Default::default()
        })
    }
}

impl PilotReport for sortie_core::state_version::StateStamp {
    fn into_update(self) -> Result<sortie_store::JobUpdate, ApiError> {
        if let Some(problem) = self.problem() {
            return Err(ApiError::field("lineage", problem));
        }
        Ok(sortie_store::JobUpdate {
            state_written: Some(self),
            ..Default::default()
        })
    }
}

impl PilotReport for sortie_core::ChangeSummary {
    fn into_update(self) -> Result<sortie_store::JobUpdate, ApiError> {
        Ok(sortie_store::JobUpdate {
            summary: Some(self),
            ..Default::default()
        })
    }
}

/// The pilot's report recorded on its job: the job token checked, the body decoded as `T`
/// (400 naming `body` otherwise), and the update it makes ([`PilotReport::into_update`]) written.
async fn record_by_token<T: PilotReport>(
    state: &AppState,
    headers: &HeaderMap,
    id: &JobId,
    body: Document,
) -> Result<Reply<JobView>, ApiError> {
    let record = job_by_token(state, headers, id).await?;
    let report: T = serde_json::from_value(body.value()?)
        .map_err(|e| ApiError::field("body", e.to_string()))?;
    let updated = state
        .jobs
        .mark(&record.job.id, report.into_update()?)
        .await?;
    Ok(Reply::ok(updated.into()))
}

/// Records the pilot's change summary on the job.
#[utoipa::path(put, path = "/v1/jobs/{id}/summary", tag = "pilot",
    params(("id" = String, Path, description = "Job id")),
    request_body(description = "What the plan, apply or destroy changed", content((sortie_core::ChangeSummary = "application/json"))),
    security(("jobToken" = [])),
    responses((status = 200, description = "Recorded on the job", body = JobView),
        BadRequest, InvalidToken, PayloadTooLarge, UnsupportedMediaType, BadGateway, Unavailable))]
pub(crate) async fn put_job_summary(
    State(state): State<AppState>,
    JobIdParam(id): JobIdParam,
    headers: HeaderMap,
    body: Document,
) -> Result<Reply<JobView>, ApiError> {
    record_by_token::<sortie_core::ChangeSummary>(&state, &headers, &id, body).await
}

/// How long a presigned upload URL works: long enough to start one upload, short enough
/// that a leaked URL is soon useless. The pilot asks for a new one per object.
pub const UPLOAD_URL_TTL: std::time::Duration = std::time::Duration::from_secs(10 * 60);

/// The most problems one report may carry, and the longest one.
pub const MAX_UPLOAD_PROBLEMS: usize = 32;
/// The longest problem, in characters.
pub const MAX_UPLOAD_PROBLEM_CHARS: usize = 1000;

/// Reads `{kind, name}`, naming the field of each problem.
fn upload_request(
    body: serde_json::Value,
) -> Result<(sortie_core::protocol::pilot::UploadKind, Option<String>), ApiError> {
    let serde_json::Value::Object(fields) = body else {
        return Err(ApiError::field(
            "body",
            "must be an object with `kind` and `name`",
        ));
    };
    if let Some(other) = fields.keys().find(|k| *k != "kind" && *k != "name") {
        return Err(ApiError::field(
            other.clone(),
            "unknown field; expected `kind` or `name`",
        ));
    }
    let kinds = sortie_core::protocol::pilot::UploadKind::ALL
        .map(|k| k.as_str())
        .join(", ");
    let kind = match fields.get("kind") {
        None => {
            return Err(ApiError::field(
                "kind",
                format!("is required: one of {kinds}"),
            ))
        }
        Some(serde_json::Value::String(k)) => sortie_core::protocol::pilot::UploadKind::ALL
            .into_iter()
            .find(|x| x.as_str() == k)
            .ok_or_else(|| ApiError::field("kind", format!("must be one of {kinds}")))?,
        Some(_) => {
            return Err(ApiError::field(
                "kind",
                format!("must be a string: one of {kinds}"),
            ))
        }
    };
    let name = match fields.get("name") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(n)) => Some(n.clone()),
        Some(_) => return Err(ApiError::field("name", "must be a string")),
    };
    Ok((kind, name))
}

/// A presigned URL that writes one of the job's own objects: a log chunk, the plan, the
/// summary or the outputs. The key is derived from the job and the kind; no request can
/// name another job's key, or anything outside the job's prefixes.
#[utoipa::path(post, path = "/v1/jobs/{id}/uploads", tag = "pilot",
    params(("id" = String, Path, description = "Job id")),
    request_body(description = "What to upload", content((UploadRequest = "application/json"))),
    security(("jobToken" = [])),
    responses((status = 200, description = "Send `method` to `url` with `headers` and the bytes before `expires_at`", body = UploadGrant),
        BadRequest, InvalidToken, PayloadTooLarge, UnsupportedMediaType, BadGateway, Unavailable))]
pub(crate) async fn create_upload(
    State(state): State<AppState>,
    JobIdParam(id): JobIdParam,
    headers: HeaderMap,
    body: Document,
) -> Result<Reply<UploadGrant>, ApiError> {
    let record = job_by_token(&state, &headers, &id).await?;
    let (kind, name) = upload_request(body.value()?)?;
    let key = sortie_core::protocol::pilot::upload_key(&record.job.id, kind, name.as_deref())
        .map_err(|problem| ApiError::field("name", problem))?;
    let signed = state
        .job_artifacts()
        .upload_grant(&key, kind, UPLOAD_URL_TTL)
        .await?;
    Ok(Reply::ok(UploadGrant {
        url: signed.url,
        method: signed.method,
        headers: signed.headers,
        expires_at: signed.expires_at,
        key,
    }))
}

/// Records what the pilot could not upload (replacing an earlier report), so a job whose
/// log or summary did not arrive says so while keeping its outcome.
#[utoipa::path(put, path = "/v1/jobs/{id}/upload-problems", tag = "pilot",
    params(("id" = String, Path, description = "Job id")),
    request_body(description = "What was not uploaded, one line each", content((UploadProblems = "application/json"))),
    security(("jobToken" = [])),
    responses((status = 200, description = "Recorded on the job", body = JobView),
        BadRequest, InvalidToken, PayloadTooLarge, UnsupportedMediaType, BadGateway, Unavailable))]
pub(crate) async fn put_upload_problems(
    State(state): State<AppState>,
    JobIdParam(id): JobIdParam,
    headers: HeaderMap,
    body: Document,
) -> Result<Reply<JobView>, ApiError> {
    let record = job_by_token(&state, &headers, &id).await?;
    let report: UploadProblems = serde_json::from_value(body.value()?)
        .map_err(|e| ApiError::field("problems", e.to_string()))?;
    if report.problems.len() > MAX_UPLOAD_PROBLEMS {
        return Err(ApiError::field(
            "problems",
            format!("at most {MAX_UPLOAD_PROBLEMS} problems"),
        ));
    }
    for (i, p) in report.problems.iter().enumerate() {
        if p.trim().is_empty()
            || p.chars().count() > MAX_UPLOAD_PROBLEM_CHARS
            || p.chars().any(char::is_control)
        {
            return Err(ApiError::field(
                format!("problems[{i}]"),
                format!("must be one line of 1 to {MAX_UPLOAD_PROBLEM_CHARS} characters"),
            ));
        }
    }
    let updated = state
        .jobs
        .mark(
            &record.job.id,
            sortie_store::JobUpdate {
                upload_problems: Some(report.problems),
                ..Default::default()
            },
        )
        .await?;
    Ok(Reply::ok(updated.into()))
}

/// Reads `{exit_code, reason?}`, naming the field of each problem.
fn pilot_exit(
    body: serde_json::Value,
) -> Result<sortie_core::protocol::pilot::PilotExit, ApiError> {
    let serde_json::Value::Object(fields) = body else {
        return Err(ApiError::field(
            "body",
            "must be an object with `exit_code` and an optional `reason`",
        ));
    };
    if let Some(other) = fields.keys().find(|k| *k != "exit_code" && *k != "reason") {
        return Err(ApiError::field(
            other.clone(),
            "unknown field; expected `exit_code` or `reason`",
        ));
    }
    let exit_code = match fields.get("exit_code") {
        None => return Err(ApiError::field("exit_code", "is required")),
        Some(v) => v
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .ok_or_else(|| ApiError::field("exit_code", "must be an integer exit code"))?,
    };
    let reason = match fields.get("reason") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(r))
            if r.len() <= sortie_core::protocol::pilot::PILOT_EXIT_REASON_MAX
                && !r.chars().any(char::is_control) =>
        {
            Some(r.clone())
        }
        Some(_) => {
            return Err(ApiError::field(
                "reason",
                format!(
                    "must be one line of at most {} bytes",
                    sortie_core::protocol::pilot::PILOT_EXIT_REASON_MAX
                ),
            ))
        }
    };
    Ok(sortie_core::protocol::pilot::PilotExit { exit_code, reason })
}

/// The pilot's final callback: it is about to exit with `exit_code`. A running job ends
/// at once, as if its task had been seen stopped with that code (a cancel or timeout
/// Sortie asked for still names the end). For `eks` runners this is how a job completes
/// without waiting for the sweeper's poll; whichever comes first wins, and the second is a
/// no-op: a job already ended answers 200 with its view, unchanged.
#[utoipa::path(post, path = "/v1/jobs/{id}/events", tag = "pilot",
    params(("id" = String, Path, description = "Job id")),
    request_body(description = "How the pilot is about to exit", content((sortie_core::protocol::pilot::PilotExit = "application/json"))),
    security(("jobToken" = [])),
    responses((status = 200, description = "The job, ended (now or before)", body = JobView),
        BadRequest, InvalidToken, Conflict, PayloadTooLarge, UnsupportedMediaType, BadGateway, Unavailable))]
pub(crate) async fn report_job_exit(
    State(state): State<AppState>,
    JobIdParam(id): JobIdParam,
    headers: HeaderMap,
    body: Document,
) -> Result<Reply<JobView>, ApiError> {
    let record = job_by_token_in(&state, &headers, &id, true).await?;
    let exit = pilot_exit(body.value()?)?;
    match state.jobs.pilot_exited(&record, &exit).await? {
        sortie_lifecycle::EndReport::Ended(r) | sortie_lifecycle::EndReport::AlreadyEnded(r) => {
            Ok(Reply::ok(r.into()))
        }
        sortie_lifecycle::EndReport::NotRunning(s) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "not_running",
            format!("the job is {s}, not running: its launch is not recorded yet; the sweeper ends it from its task's status"),
        )),
    }
}
