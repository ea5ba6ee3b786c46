//! A job's plan as data: `GET /v1/jobs/{id}/plan`, read from the redacted `plan.json` its
//! runner uploaded (`artifacts/<job id>/plan.json`), one entry per resource, paged.

use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use sortie_core::plan::{PlanData, PlanPage, PlanView, NO_ARTIFACT, PAGE_MAX};
use sortie_core::Action;
use utoipa::IntoParams;

use super::jobs::read_job_for;
use super::Reply;
use crate::error::ApiError;
use crate::extract::{query_field, Caller, JobIdParam, QueryParams};
use crate::openapi::errors::*;
use crate::AppState;

/// The query of a plan page.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct PlanQuery {
    /// Resource changes per page: 1 to 1000, default 1000.
    #[serde(default, deserialize_with = "limit")]
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    limit: Option<usize>,
    /// The `next_cursor` of the previous page.
    #[serde(default)]
    cursor: Option<String>,
}

fn limit<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    query_field(d, "limit", "must be a whole number from 1 to 1000", |s| {
        s.parse::<usize>()
            .ok()
            .filter(|l| (1..=PAGE_MAX).contains(l))
    })
}

/// The job's plan: its resource changes (one entry per resource: address, module, type,
/// name, action, the changed attributes before and after, redacted, and those that force a
/// replacement), its output changes and counts. `available: false` with the `reason` when
/// the job's plan has no data (Terraform 0.11, a plan over 50 MiB); 404 when the job has
/// uploaded no plan data (it has not planned yet, or did not get that far).
#[utoipa::path(get, path = "/v1/jobs/{id}/plan", tag = "jobs",
    params(("id" = String, Path, description = "Job id"), PlanQuery),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "One page of the plan's resource changes, with its output changes, counts and the next cursor", body = PlanPage),
        BadRequest, Unauthorized, NotFound, BadGateway, Unavailable))]
pub(crate) async fn get_job_plan(
    State(state): State<AppState>,
    JobIdParam(id): JobIdParam,
    caller: Caller,
    query: QueryParams<PlanQuery>,
) -> Result<Reply<PlanPage>, ApiError> {
    let (record, _) = read_job_for(&state, &caller, &id, Action::Read).await?;
    let query = query.get()?;
    let job = &record.job;
    let data = state.job_artifacts().plan_data(&job.id).await?;
    let doc = match data {
        PlanData::Available(doc) => doc,
        PlanData::Unavailable(reason) if reason == NO_ARTIFACT => {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found",
                format!(
                    "job `{}` has no plan data: its runner uploaded none (the job is in state `{}`; a plan is recorded when its plan step succeeds)",
                    job.id, job.state
                ),
            ))
        }
        PlanData::Unavailable(reason) => return Ok(Reply::ok(PlanPage::unavailable(reason))),
    };
    let page = PlanView::from_document(&doc)
        .page(query.cursor.as_deref(), query.limit.unwrap_or(PAGE_MAX))
        .map_err(|problem| ApiError::field("query.cursor", problem))?;
    Ok(Reply::ok(page))
}
