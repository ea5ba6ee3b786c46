//! `POST /v1/jobs/{id}/log-uploads`: presigned PUTs for several log chunks in one call,
//! and the presigned GET of the job's follow marker, for the pilot's job token.
//!
//! Chunks stay named by their start offset (`logs/<job id>/<offset>.log`), so a retried
//! chunk overwrites its own key and the log never loses or reorders a byte; one call
//! presigns every chunk of a flush ([`MAX_CHUNKS_PER_GRANT`]).

use axum::extract::State;
use axum::http::HeaderMap;
use sortie_core::protocol::logs::MAX_CHUNKS_PER_GRANT;

use super::pilot_callbacks::{job_by_token, UPLOAD_URL_TTL};
use super::Reply;
use crate::error::ApiError;
use crate::extract::{Document, JobIdParam};
use crate::model::{LogUploadGrants, UploadGrant};
use crate::openapi::errors::*;
use crate::AppState;

/// The first offset a 12-digit chunk name cannot hold.
const OFFSET_LIMIT: u64 = 1_000_000_000_000;

/// Reads `{offsets}`, naming the field of each problem.
fn offsets(body: serde_json::Value) -> Result<Vec<u64>, ApiError> {
    let serde_json::Value::Object(fields) = body else {
        return Err(ApiError::field("body", "must be an object with `offsets`"));
    };
    if let Some(other) = fields.keys().find(|k| *k != "offsets") {
        return Err(ApiError::field(
            other.clone(),
            "unknown field; expected `offsets`",
        ));
    }
    let Some(serde_json::Value::Array(items)) = fields.get("offsets") else {
        return Err(ApiError::field(
            "offsets",
            "is required: a list of chunk start offsets",
        ));
    };
    if items.len() > MAX_CHUNKS_PER_GRANT {
        return Err(ApiError::field(
            "offsets",
            format!("at most {MAX_CHUNKS_PER_GRANT} chunks a call"),
        ));
    }
    let mut out: Vec<u64> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = item.as_u64().filter(|n| *n < OFFSET_LIMIT).ok_or_else(|| {
            ApiError::field(
                format!("offsets[{i}]"),
                "must be a whole number of bytes below 10^12",
            )
        })?;
        if out.last().is_some_and(|prev| *prev >= at) {
            return Err(ApiError::field(
                format!("offsets[{i}]"),
                "must be greater than the offset before it",
            ));
        }
        out.push(at);
    }
    Ok(out)
}

/// Presigned PUTs for the job's log chunks starting at `offsets`, and a presigned GET of
/// its follow marker; every URL works for ten minutes.
#[utoipa::path(post, path = "/v1/jobs/{id}/log-uploads", tag = "pilot",
    params(("id" = String, Path, description = "Job id")),
    request_body(description = "The chunks' start offsets", content((crate::model::LogUploadRequest = "application/json"))),
    security(("jobToken" = [])),
    responses((status = 200, description = "One grant per offset, in order, and the follow marker's URL", body = LogUploadGrants),
        BadRequest, InvalidToken, PayloadTooLarge, UnsupportedMediaType, BadGateway, Unavailable))]
pub(crate) async fn create_log_uploads(
    State(state): State<AppState>,
    JobIdParam(id): JobIdParam,
    headers: HeaderMap,
    body: Document,
) -> Result<Reply<LogUploadGrants>, ApiError> {
    let record = job_by_token(&state, &headers, &id).await?;
    let offsets = offsets(body.value()?)?;
    let signed = state
        .logs()
        .upload_grants(&record.job.id, &offsets, UPLOAD_URL_TTL)
        .await?;
    let grants = signed
        .chunks
        .into_iter()
        .map(|(key, signed)| UploadGrant {
            url: signed.url,
            method: signed.method,
            headers: signed.headers,
            expires_at: signed.expires_at,
            key,
        })
        .collect();
    let (follow_url, expires_at) = (signed.follow_url, signed.expires_at);
    let live = signed.live.map(|(key, signed)| UploadGrant {
        url: signed.url,
        method: signed.method,
        headers: signed.headers,
        expires_at: signed.expires_at,
        key,
    });
    Ok(Reply::ok(LogUploadGrants {
        grants,
        follow_url,
        expires_at,
        live,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn offsets_are_checked_field_by_field() {
        assert_eq!(
            offsets(json!({"offsets": [0, 10, 4096]})).unwrap(),
            [0, 10, 4096]
        );
        assert!(offsets(json!({"offsets": []})).unwrap().is_empty());
        for (body, field) in [
            (json!([]), "body"),
            (json!({}), "offsets"),
            (json!({"offsets": [1], "name": "x"}), "name"),
            (json!({"offsets": [-1]}), "offsets[0]"),
            (json!({"offsets": [0, 0]}), "offsets[1]"),
            (json!({"offsets": [1_000_000_000_000u64]}), "offsets[0]"),
            (json!({"offsets": (0..17).collect::<Vec<_>>()}), "offsets"),
        ] {
            let e = offsets(body.clone()).unwrap_err();
            assert_eq!(e.fields[0].path, field, "{body}");
        }
    }
}
