//! The routes a runner calls with its job token instead of a user's JWT:
//! `GET /v1/jobs/{id}/spec` and `PUT /v1/jobs/{id}/summary`.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use chrono::Utc;
use sortie_core::{JobId, JobSpec};
use sortie_store::{JobRecord, StoreError};

use super::Reply;
use crate::error::ApiError;
use crate::extract::{bearer_token, Document, JobIdParam};
use crate::model::{domain, JobView};
use crate::openapi::errors::*;
use crate::AppState;

/// Checks a runner's job token: valid for this one job, and only while it is not terminal.
async fn job_by_token(
    state: &AppState,
    headers: &HeaderMap,
    id: &JobId,
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
    let record = match state.store.get_job(id).await {
        Ok(r) => r,
        Err(StoreError::NotFound { .. }) => return Err(refuse()),
        Err(e) => return Err(e.into()),
    };
    let presented = sortie_store::sha256_hex(token.as_bytes());
    let matches = record
        .token_hash
        .as_deref()
        .is_some_and(|h| constant_time_eq(h.as_bytes(), presented.as_bytes()));
    if !matches || record.job.state.is_terminal() {
        return Err(refuse());
    }
    Ok(record)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The job spec the runner runs.
#[utoipa::path(get, path = "/v1/jobs/{id}/spec", tag = "runner",
    params(("id" = String, Path, description = "Job id")),
    security(("jobToken" = [])),
    responses((status = 200, description = "The job spec the runner runs", body = domain::JobSpec),
        BadRequest, InvalidToken, Conflict, BadGateway, Unavailable))]
pub(crate) async fn get_job_spec(
    State(state): State<AppState>,
    JobIdParam(id): JobIdParam,
    headers: HeaderMap,
) -> Result<Reply<JobSpec>, ApiError> {
    let record = job_by_token(&state, &headers, &id).await?;
    let job = &record.job;
    let runner = job.runner_spec.as_ref().ok_or_else(|| {
        ApiError::new(
            StatusCode::CONFLICT,
            "runner_missing",
            "the job has no runner configuration",
        )
    })?;
    let state_key = match &runner.state_storage_configuration {
        sortie_core::StateStorageConfiguration::S3(s3) => Some(s3.state_key(&job.environment)),
        _ => None,
    };
    let location = |kind: &str| sortie_core::ArtifactLocation {
        bucket: state.bucket.name.clone(),
        prefix: format!("{kind}/{}/", job.id),
        region: state.bucket.region.clone(),
    };
    Ok(Reply::ok(JobSpec {
        job_id: job.id.clone(),
        environment: job.environment.clone(),
        operation: job.request.operation,
        source: job.request.source.clone(),
        variables: job.request.variables.clone(),
        files: job.request.files.clone(),
        secret_refs: job.request.secret_refs.clone(),
        state_storage: runner.state_storage_configuration.clone(),
        state_key,
        logs: location("logs"),
        artifacts: location("artifacts"),
    }))
}

/// Records the runner's change summary on the job.
#[utoipa::path(put, path = "/v1/jobs/{id}/summary", tag = "runner",
    params(("id" = String, Path, description = "Job id")),
    request_body(description = "What the plan, apply or destroy changed", content((domain::ChangeSummary = "application/json"))),
    security(("jobToken" = [])),
    responses((status = 200, description = "Recorded on the job", body = JobView),
        BadRequest, InvalidToken, PayloadTooLarge, UnsupportedMediaType, BadGateway, Unavailable))]
pub(crate) async fn put_job_summary(
    State(state): State<AppState>,
    JobIdParam(id): JobIdParam,
    headers: HeaderMap,
    body: Document,
) -> Result<Reply<JobView>, ApiError> {
    let record = job_by_token(&state, &headers, &id).await?;
    let summary: sortie_core::ChangeSummary = serde_json::from_value(body.value()?)
        .map_err(|e| ApiError::field("body", e.to_string()))?;
    let updated = state
        .store
        .mark_job(
            &record.job.id,
            Utc::now(),
            sortie_store::JobUpdate {
                summary: Some(summary),
                ..Default::default()
            },
        )
        .await?;
    Ok(Reply::ok(updated.into()))
}
