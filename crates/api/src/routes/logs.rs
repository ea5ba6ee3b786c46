//! A job's live log: `GET /v1/jobs/{id}/logs?offset=N`, one page read from the pilot's S3
//! chunks by [`sortie_lifecycle::Logs`] (which also marks the log followed, so the pilot
//! ships every second while someone reads a job that has not ended).

use axum::extract::State;
use serde::Deserialize;
use sortie_core::Action;
use utoipa::IntoParams;

use super::jobs::read_job_for;
use super::Reply;
use crate::error::ApiError;
use crate::extract::{query_field, Caller, JobIdParam, QueryParams};
use crate::model::{LiveLogUrl, LogsPage};
use crate::openapi::errors::*;
use crate::AppState;

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

/// The job's log from `offset`, up to the first gap (a chunk not written yet), at most
/// about 4 MB an answer.
#[utoipa::path(get, path = "/v1/jobs/{id}/logs", tag = "jobs",
    params(("id" = String, Path, description = "Job id"), LogsQuery),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "`data` from `offset`, `next_offset`, and `more`: whether more may come (the job has not ended, or the page was full)", body = LogsPage),
        BadRequest, Unauthorized, NotFound, BadGateway, Unavailable))]
pub(crate) async fn get_job_logs(
    State(state): State<AppState>,
    JobIdParam(id): JobIdParam,
    caller: Caller,
    query: QueryParams<LogsQuery>,
) -> Result<Reply<LogsPage>, ApiError> {
    let (record, _) = read_job_for(&state, &caller, &id, Action::Read).await?;
    let offset = query.get()?.offset.unwrap_or(0);
    let ended = record.job.state.is_terminal();
    let page = state.logs().page(&record.job.id, offset, ended).await?;
    Ok(Reply::ok(LogsPage {
        offset: page.offset,
        next_offset: page.next_offset,
        data: page.data,
        more: page.more,
        live: page.live.map(|l| LiveLogUrl {
            url: l.url,
            expires_at: l.expires_at,
        }),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The log engine's size checks (sortie-lifecycle's `logs_tests.rs`) count the page as
    /// `LogPage` serialises: the API's answer must be those bytes.
    #[test]
    fn a_log_page_is_answered_field_for_field() {
        let page = sortie_lifecycle::LogPage {
            offset: 3,
            next_offset: 9,
            data: "a\"\\\n\u{1}→".into(),
            more: true,
            live: Some(sortie_lifecycle::LiveUrl {
                url: "https://b--use1-az4--x-s3.s3express-use1-az4.us-east-1.amazonaws.com/logs/j/live?X-Amz-S3session-Token=t".into(),
                expires_at: chrono::Utc::now(),
            }),
        };
        let answered = LogsPage {
            offset: page.offset,
            next_offset: page.next_offset,
            data: page.data.clone(),
            more: page.more,
            live: page.live.clone().map(|l| LiveLogUrl {
                url: l.url,
                expires_at: l.expires_at,
            }),
        };
        assert_eq!(
            serde_json::to_string(&answered).unwrap(),
            serde_json::to_string(&page).unwrap()
        );
    }
}
