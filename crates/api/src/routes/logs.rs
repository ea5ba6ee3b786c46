//! A job's live log: `GET /v1/jobs/{id}/logs?offset=N`, read from the runner's S3 chunks.

use axum::extract::State;
use serde::Deserialize;
use sortie_core::Action;
use utoipa::IntoParams;

use super::jobs::read_job_for;
use super::Reply;
use crate::error::ApiError;
use crate::extract::{query_field, Caller, JobIdParam, QueryParams};
use crate::model::LogsPage;
use crate::openapi::errors::*;
use crate::AppState;

/// Most log bytes answered at once.
const MAX_LOG_PAGE: usize = 1024 * 1024;

/// The query of the log.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct LogsQuery {
    /// The byte offset to read from (the `next_offset` of the previous answer); 0 when absent.
    #[serde(default, deserialize_with = "offset")]
    #[param(value_type = Option<u64>, minimum = 0)]
    offset: Option<u64>,
}

fn offset<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    query_field(d, "offset", "must be a whole number of bytes", |s| {
        s.parse::<u64>().ok()
    })
}

/// The job's log from `offset`, up to the first gap (a chunk not written yet).
#[utoipa::path(get, path = "/v1/jobs/{id}/logs", tag = "jobs",
    params(("id" = String, Path, description = "Job id"), LogsQuery),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "`data` from `offset`, `next_offset`, and `more`: whether more may come (the job has not ended)", body = LogsPage),
        BadRequest, Unauthorized, NotFound, BadGateway, Unavailable))]
pub(crate) async fn get_job_logs(
    State(state): State<AppState>,
    JobIdParam(id): JobIdParam,
    caller: Caller,
    query: QueryParams<LogsQuery>,
) -> Result<Reply<LogsPage>, ApiError> {
    let (record, _) = read_job_for(&state, &caller, &id, Action::Read).await?;
    let offset = query.get()?.offset.unwrap_or(0);
    let prefix = format!("logs/{}/", record.job.id);
    let mut data: Vec<u8> = Vec::new();
    let mut next = offset;
    for chunk in state.artifacts.list(&prefix).await? {
        let Some(start) = sortie_core::protocol::pilot::log_chunk_offset(&prefix, &chunk.key)
        else {
            continue;
        };
        if start + chunk.size <= next || start > next {
            // Already read, or a gap (a chunk not written yet): stop at the gap.
            if start > next {
                break;
            }
            continue;
        }
        let bytes = state.artifacts.get(&chunk.key).await?;
        let from = (next - start) as usize;
        data.extend_from_slice(bytes.get(from..).unwrap_or_default());
        next = start + bytes.len() as u64;
        if data.len() >= MAX_LOG_PAGE {
            break;
        }
    }
    let more = !record.job.state.is_terminal() || data.len() >= MAX_LOG_PAGE;
    Ok(Reply::ok(LogsPage {
        offset,
        next_offset: next,
        data: String::from_utf8_lossy(&data).into_owned(),
        more,
    }))
}
