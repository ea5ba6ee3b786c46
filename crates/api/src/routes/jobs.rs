//! Jobs: `/v1/environments/{environment}/-/jobs`, `/v1/jobs/{id}` and its cancel.

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use serde::Deserialize;
use sortie_core::{Action, JobId, Principal};
use sortie_lifecycle::{Cancellation, JobOrder, SubmitError};
use sortie_store::{IdempotencyKey, JobRecord, StoreError};
use utoipa::IntoParams;

use super::Reply;
use crate::error::ApiError;
use crate::extract::{query_field, Caller, Document, EnvParam, JobIdParam, QueryParams};
use crate::model::{DecisionBody, JobListPage, JobView, OutputValue, OutputsView};
use crate::openapi::errors::*;
use crate::AppState;

/// The query of the job list.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct JobListQuery {
    /// Page size: 1 to 100, default 20.
    #[serde(default, deserialize_with = "limit")]
    #[param(value_type = Option<u32>, minimum = 1, maximum = 100)]
    limit: Option<u32>,
    /// The `next` of the previous page.
    #[serde(default)]
    cursor: Option<String>,
}

fn limit<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    query_field(d, "limit", "must be a whole number from 1 to 100", |s| {
        s.parse::<u32>().ok().filter(|l| (1..=100).contains(l))
    })
}

/// An environment's jobs, newest first.
#[utoipa::path(get, path = "/v1/environments/{environment}/-/jobs", tag = "jobs",
    params(("environment" = String, Path, description = "Environment path"), JobListQuery),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "Jobs, newest first, and the next cursor", body = JobListPage),
        BadRequest, Unauthorized, NotFound, BadGateway, Unavailable))]
pub(crate) async fn list_jobs(
    State(state): State<AppState>,
    EnvParam(path): EnvParam,
    caller: Caller,
    query: QueryParams<JobListQuery>,
) -> Result<Reply<JobListPage>, ApiError> {
    caller
        .authorize(
            &state,
            Action::Read,
            path.group(),
            &format!("environment `{path}`"),
        )
        .await?;
    let query = query.get()?;
    // A missing environment is 404 (with the nearest names), never an empty list.
    let env = state.environments().get(&path).await;
    super::job_views::or_environment_not_found(&state, &caller, &path, env).await?;
    let page = state
        .jobs
        .list(&path, query.limit.unwrap_or(20), query.cursor.as_deref())
        .await
        .map_err(|e| match e {
            StoreError::NotFound { kind: "cursor", .. } => {
                ApiError::field("query.cursor", "is not a cursor this API returned")
            }
            other => other.into(),
        })?;
    let mut reads = super::job_views::WaitReads::default();
    let mut jobs = Vec::with_capacity(page.jobs.len());
    for record in page.jobs {
        // A list names each job's inline files; their contents are the job's own answer's.
        jobs.push(reads.view(&state, record).await.listed());
    }
    Ok(Reply::ok(JobListPage {
        jobs,
        next: page.next,
    }))
}

/// The hash an Idempotency-Key binds to: the request as parsed, with every sensitive
/// variable's value left out (only its name counts), so that no digest of a secret value is
/// ever stored beside the key.
fn request_hash(request: &serde_json::Value) -> String {
    let mut request = request.clone();
    if let Some(values) = request
        .get_mut("sensitive_variables")
        .and_then(|v| v.as_object_mut())
    {
        for value in values.values_mut() {
            *value = serde_json::Value::Null;
        }
    }
    sortie_core::tokens::sha256_hex(request.to_string().as_bytes())
}

fn idempotency_key(
    headers: &HeaderMap,
    request: &serde_json::Value,
) -> Result<Option<IdempotencyKey>, ApiError> {
    let Some(v) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    let key = v
        .to_str()
        .map_err(|_| ApiError::field("Idempotency-Key", "must be printable ASCII"))?;
    if key.is_empty() || key.len() > 255 || !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ApiError::field(
            "Idempotency-Key",
            "must be 1 to 255 printable ASCII characters without spaces",
        ));
    }
    Ok(Some(IdempotencyKey {
        key: key.to_string(),
        request_hash: request_hash(request),
    }))
}

/// Submits a job; it runs when the environment is free.
#[utoipa::path(post, path = "/v1/environments/{environment}/-/jobs", tag = "jobs",
    params(("environment" = String, Path, description = "Environment path"),
        ("Idempotency-Key" = Option<String>, Header, description = "A retry with the same key and body returns the same job")),
    request_body(description = "The job, YAML or JSON: operation, source (git | s3 | inline), variables, sensitive_variables (values kept in Secrets Manager for the job's life, never returned), files, secret_refs (ARNs)",
        content((sortie_core::JobRequest = "application/json"), (sortie_core::JobRequest = "application/yaml"))),
    security(("bearerAuth" = [])),
    responses((status = 201, description = "Queued; it runs when the environment is free", body = JobView),
        (status = 200, description = "A replay of an earlier submit with the same Idempotency-Key", body = JobView,
            headers(("idempotent-replayed" = String, description = "`true`"))),
        BadRequest, Unauthorized, Forbidden, NotFound, Conflict, PayloadTooLarge, UnsupportedMediaType, BadGateway, Unavailable))]
pub(crate) async fn submit_job(
    State(state): State<AppState>,
    EnvParam(path): EnvParam,
    caller: Caller,
    headers: HeaderMap,
    body: Document,
) -> Result<Response, ApiError> {
    let principal = caller
        .authorize(
            &state,
            Action::Deploy,
            path.group(),
            &format!("environment `{path}`"),
        )
        .await?;
    let submitted = body.value()?;
    let idempotency = idempotency_key(&headers, &submitted)?;
    let (request, sensitive) = sortie_core::sensitive::parse_submitted(&submitted)?;
    drop(submitted);
    let env = state.environments().get(&path).await;
    let env = super::job_views::or_environment_not_found(&state, &caller, &path, env).await?;
    // A destroyed environment is refused by the submit's own write (`SubmitError::Destroyed`),
    // for this caller as for a trigger, a drift check or a restore.
    let order = JobOrder::submit(request, sensitive, principal.subject.clone(), idempotency);
    let submitted = state
        .jobs
        .submit_for(&env.item.environment, order)
        .await
        .map_err(submit_error)?;
    let status = if submitted.replayed {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    let view = submitted_view(&state, &submitted).await?;
    let mut response = Reply::new(status, view).into_response();
    if submitted.replayed {
        response
            .headers_mut()
            .insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    Ok(response)
}

/// The answer's view of a submitted job. A new job that took its environment's lock is
/// answered as written (`JobRecord::new`, the item the submit wrote) and known to hold
/// the lock: no read, so the answer never waits behind (nor slows) the claim that
/// dispatch makes at once. Any other is read again (a replay's job may have moved on) and
/// explained as a list's job is.
async fn submitted_view(
    state: &AppState,
    submitted: &sortie_store::Submitted,
) -> Result<crate::model::JobView, ApiError> {
    let job = &submitted.job;
    if submitted.took_lock && !submitted.replayed {
        let record = sortie_store::JobRecord::new(job);
        return Ok(
            super::job_views::WaitReads::holding(&job.environment, &job.id)
                .view(state, record)
                .await,
        );
    }
    let record = state.jobs.get(&job.id).await?;
    Ok(super::job_views::job_view(state, record).await)
}

/// The answer to a refused submit: a deleted runner is 409, Secrets Manager's failure 502.
pub(crate) fn submit_error(e: SubmitError) -> ApiError {
    match e {
        SubmitError::RunnerMissing { .. } => {
            ApiError::new(StatusCode::CONFLICT, "runner_missing", e.to_string())
        }
        SubmitError::SecretsUnavailable(_) => ApiError::new(
            StatusCode::BAD_GATEWAY,
            "secrets_unavailable",
            e.to_string(),
        ),
        SubmitError::Busy(_) => {
            ApiError::new(StatusCode::CONFLICT, "state_conflict", e.to_string())
        }
        SubmitError::Locked {
            ref environment,
            ref held,
        } => super::locks::locked(environment, held),
        SubmitError::Destroyed {
            ref environment,
            ref destroyed,
        } => super::expiry::destroyed(environment, destroyed),
        SubmitError::NotSpeculative(_) => ApiError::field("operation", e.to_string()),
        SubmitError::Store(e) => e.into(),
    }
}

/// Reads a job and checks the caller may do `action` in its environment's group.
pub(crate) async fn read_job_for(
    state: &AppState,
    caller: &Caller,
    id: &JobId,
    action: Action,
) -> Result<(JobRecord, Principal), ApiError> {
    let what = format!("job `{id}`");
    let record = match state.jobs.get(id).await {
        Ok(r) => r,
        Err(StoreError::NotFound { .. }) => {
            return Err(super::job_views::job_not_found(state, caller, id).await)
        }
        Err(e) => return Err(e.into()),
    };
    let principal = caller
        .authorize(state, action, record.job.environment.group(), &what)
        .await?;
    Ok((record, principal))
}

/// One job.
#[utoipa::path(get, path = "/v1/jobs/{id}", tag = "jobs",
    params(("id" = String, Path, description = "Job id")),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "The job with every transition, its time and reason", body = JobView),
        BadRequest, Unauthorized, NotFound, BadGateway, Unavailable))]
pub(crate) async fn get_job(
    State(state): State<AppState>,
    JobIdParam(id): JobIdParam,
    caller: Caller,
) -> Result<Reply<JobView>, ApiError> {
    let (record, _) = read_job_for(&state, &caller, &id, Action::Read).await?;
    Ok(Reply::ok(super::job_views::job_view(&state, record).await))
}

/// Cancels a job: a waiting one at once, a launched one by stopping its task.
#[utoipa::path(post, path = "/v1/jobs/{id}/cancel", tag = "jobs",
    params(("id" = String, Path, description = "Job id")),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "A queued job is canceled at once", body = JobView),
        (status = 202, description = "A launched job's task is being stopped; it ends `canceled`", body = JobView),
        BadRequest, Unauthorized, Forbidden, NotFound, Conflict, BadGateway, Unavailable))]
pub(crate) async fn cancel_job(
    State(state): State<AppState>,
    JobIdParam(id): JobIdParam,
    caller: Caller,
) -> Result<Reply<JobView>, ApiError> {
    let (record, principal) = read_job_for(&state, &caller, &id, Action::Deploy).await?;
    match state.jobs.cancel(&record, &principal.subject).await? {
        Cancellation::Canceled(canceled) => Ok(Reply::ok(canceled.into())),
        Cancellation::Stopping(launched) => {
            // Dispatch stops the task (the API holds no ECS permissions), and task-events
            // finishes it as `canceled` when the task's STOPPED event arrives.
            let mut view = JobView::from(launched);
            view.cancel_requested_by = Some(principal.subject.clone());
            Ok(Reply::new(StatusCode::ACCEPTED, view))
        }
        Cancellation::AlreadyEnded(ended) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "state_conflict",
            format!("job `{}` already ended: {}", ended.job.id, ended.job.state),
        )),
    }
}

/// The optional body of a review: `{"comment": "..."}`, or nothing.
fn review_comment(body: Document) -> Result<Option<String>, ApiError> {
    if body.bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let value = body.value()?;
    if value.is_null() {
        return Ok(None);
    }
    let decoded: DecisionBody =
        serde_json::from_value(value).map_err(|e| ApiError::field("body", e.to_string()))?;
    match decoded.comment {
        Some(c) if c.len() > sortie_core::job::DECISION_COMMENT_MAX => Err(ApiError::field(
            "comment",
            format!(
                "must be at most {} bytes",
                sortie_core::job::DECISION_COMMENT_MAX
            ),
        )),
        Some(c) if c.chars().any(char::is_control) => Err(ApiError::field(
            "comment",
            "must not contain control characters",
        )),
        Some(c) if c.trim().is_empty() => Ok(None),
        other => Ok(other),
    }
}

/// Reviews a job for the caller: approves or discards it.
async fn review(
    state: &AppState,
    caller: &Caller,
    id: &JobId,
    body: Document,
    verdict: sortie_core::ReviewVerdict,
) -> Result<Reply<JobView>, ApiError> {
    let comment = review_comment(body)?;
    // A caller who may read the job but not deploy is told so (403 naming the role); one
    // who may not read it gets 404, as for another tenant's job.
    let (record, principal) = read_job_for(state, caller, id, Action::Deploy).await?;
    // Approving past a review-level policy deny overrides policy: it needs `manage`.
    if verdict == sortie_core::ReviewVerdict::Approved
        && sortie_core::policy::gate::approval_overrides_policy(record.policy.as_ref())
    {
        let what = format!("job `{id}` was held by a review-level policy deny; approving it");
        caller
            .authorize(state, Action::Manage, record.job.environment.group(), &what)
            .await?;
    }
    match state
        .jobs
        .review(&record, &principal.subject, verdict, comment, Utc::now())
        .await?
    {
        Ok(reviewed) => Ok(Reply::ok(reviewed.into())),
        Err(sortie_core::ReviewRefusal::NotAwaiting(current)) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "state_conflict",
            format!("job `{id}` is not awaiting approval: it is {current}"),
        )),
        Err(sortie_core::ReviewRefusal::AlreadyApproved) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "state_conflict",
            format!("job `{id}` is approved already: its apply waits for its pull request's requirements to be checked again (it can still be discarded)"),
        )),
        Err(sortie_core::ReviewRefusal::OwnJob) => Err(ApiError::forbidden(format!(
            "job `{id}`: the environment requires four eyes, and {} requested this job; another person with the deployer role must approve it",
            principal.subject
        ))),
    }
}

/// Approves a reviewed job: a second task applies exactly the plan it saved.
#[utoipa::path(post, path = "/v1/jobs/{id}/approve", tag = "jobs",
    params(("id" = String, Path, description = "Job id")),
    request_body(description = "An optional comment", content((DecisionBody = "application/json"))),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "Approved: the job is queued again to apply its saved plan (a pull request's apply stays awaiting_approval, its decision recorded, until its requirements are checked again)", body = JobView),
        BadRequest, Unauthorized, Forbidden, NotFound, Conflict, PayloadTooLarge, UnsupportedMediaType, BadGateway, Unavailable))]
pub(crate) async fn approve_job(
    State(state): State<AppState>,
    JobIdParam(id): JobIdParam,
    caller: Caller,
    body: Document,
) -> Result<Reply<JobView>, ApiError> {
    review(
        &state,
        &caller,
        &id,
        body,
        sortie_core::ReviewVerdict::Approved,
    )
    .await
}

/// Discards a reviewed job's plan: it ends `discarded` and the environment is released.
#[utoipa::path(post, path = "/v1/jobs/{id}/discard", tag = "jobs",
    params(("id" = String, Path, description = "Job id")),
    request_body(description = "An optional comment", content((DecisionBody = "application/json"))),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "Discarded", body = JobView),
        BadRequest, Unauthorized, Forbidden, NotFound, Conflict, PayloadTooLarge, UnsupportedMediaType, BadGateway, Unavailable))]
pub(crate) async fn discard_job(
    State(state): State<AppState>,
    JobIdParam(id): JobIdParam,
    caller: Caller,
    body: Document,
) -> Result<Reply<JobView>, ApiError> {
    review(
        &state,
        &caller,
        &id,
        body,
        sortie_core::ReviewVerdict::Discarded,
    )
    .await
}

/// The outputs of job `record` (a successful apply), with every sensitive value dropped.
pub(crate) async fn outputs_of(
    state: &AppState,
    record: &JobRecord,
) -> Result<OutputsView, ApiError> {
    let job = &record.job;
    if job.request.operation != sortie_core::Operation::Apply
        || job.state != sortie_core::JobState::Succeeded
    {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!(
                "job `{}` has no outputs: only a succeeded apply has them (it is {} {} in state `{}`)",
                job.id,
                sortie_core::job::a_or_an(job.request.operation.as_str()),
                job.request.operation.as_str(),
                job.state
            ),
        ));
    }
    let raw = state
        .job_artifacts()
        .outputs(&job.id)
        .await
        .map_err(|e| match e {
            sortie_lifecycle::OutputsError::Store(e) => ApiError::from(e),
            e @ sortie_lifecycle::OutputsError::NotAnObject { .. } => {
                ApiError::new(StatusCode::BAD_GATEWAY, "bad_artifact", e.to_string())
            }
        })?;
    let outputs = raw
        .into_iter()
        .map(|(name, o)| {
            // Anything not plainly marked `sensitive: false` is treated as sensitive.
            let sensitive = o.get("sensitive").and_then(serde_json::Value::as_bool) != Some(false);
            let value = OutputValue {
                sensitive,
                value: (!sensitive).then(|| o.get("value").cloned()).flatten(),
                r#type: o.get("type").cloned(),
            };
            (name, value)
        })
        .collect();
    Ok(OutputsView {
        job_id: job.id.to_string(),
        environment: job.environment.to_string(),
        outputs,
    })
}

/// The outputs of a succeeded apply (`terraform output -json`); sensitive outputs carry
/// only `sensitive: true`, never a value.
#[utoipa::path(get, path = "/v1/jobs/{id}/outputs", tag = "jobs",
    params(("id" = String, Path, description = "Job id")),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "The apply's outputs", body = OutputsView),
        BadRequest, Unauthorized, NotFound, BadGateway, Unavailable))]
pub(crate) async fn get_job_outputs(
    State(state): State<AppState>,
    JobIdParam(id): JobIdParam,
    caller: Caller,
) -> Result<Reply<OutputsView>, ApiError> {
    let (record, _) = read_job_for(&state, &caller, &id, Action::Read).await?;
    Ok(Reply::ok(outputs_of(&state, &record).await?))
}

#[cfg(test)]
mod idempotency_tests {
    use super::request_hash;
    use serde_json::json;

    #[test]
    fn the_idempotency_hash_never_depends_on_a_sensitive_value() {
        let a = json!({"operation": "apply", "sensitive_variables": {"db_password": "hunter2"}});
        let b = json!({"operation": "apply", "sensitive_variables": {"db_password": "other"}});
        let c = json!({"operation": "apply", "sensitive_variables": {"api_key": "hunter2"}});
        let d = json!({"operation": "plan", "sensitive_variables": {"db_password": "hunter2"}});
        assert_eq!(request_hash(&a), request_hash(&b));
        assert_ne!(request_hash(&a), request_hash(&c), "the names still count");
        assert_ne!(
            request_hash(&a),
            request_hash(&d),
            "the rest of the request counts"
        );
        let no_value = json!({"operation": "apply", "sensitive_variables": {"db_password": null}});
        assert_eq!(request_hash(&a), request_hash(&no_value));
    }
}
