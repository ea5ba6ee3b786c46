//! The pilot's upload bodies: presigned URLs for its log chunks and artifacts, and the
//! problems it reports when an upload did not arrive.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sortie_core::protocol::pilot::UploadKind;
use utoipa::ToSchema;

/// The body of `POST /v1/jobs/{id}/uploads`: which of the job's objects to write.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UploadRequest {
    /// `log` (a log chunk), `plan`, `summary` or `outputs`.
    #[schema(example = "log")]
    pub kind: UploadKind,
    /// For `log`: the chunk's start offset, exactly 12 digits. For the others: absent or
    /// their file name (`plan.tfplan`, `summary.json`, `outputs.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// A presigned request that writes one object of the job's (S3, signed with the API's
/// credentials): the pilot sends the bytes straight to S3, never through the API.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct UploadGrant {
    /// The URL, signature included.
    pub url: String,
    /// The method to use, `PUT`.
    pub method: String,
    /// Headers the signature covers: send them unchanged.
    pub headers: BTreeMap<String, String>,
    /// When the URL stops working.
    pub expires_at: DateTime<Utc>,
    /// The object's key (under `logs/<job id>/` or `artifacts/<job id>/`).
    pub key: String,
}

/// The body of `POST /v1/jobs/{id}/log-uploads`: the start offsets of the log chunks to
/// write (at most 16, increasing; none to renew only the follow URL).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LogUploadRequest {
    /// Each chunk's start offset in the job's log (below 10^12).
    pub offsets: Vec<u64>,
}

/// The answer of `POST /v1/jobs/{id}/log-uploads`: one presigned PUT per chunk, in the
/// order asked, and a presigned GET of the job's follow marker.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LogUploadGrants {
    /// One grant per offset asked, in that order.
    pub grants: Vec<UploadGrant>,
    /// Reads `logs/<job id>/following` (Unix milliseconds of the last read of the log by
    /// a person; missing when none): the pilot ships every second while it is recent.
    pub follow_url: String,
    /// When every URL of this answer stops working.
    pub expires_at: DateTime<Utc>,
    /// When the log has a live bucket: a presigned PUT of the job's live object
    /// (`logs/<job id>/live`), which the pilot rewrites every second while someone follows
    /// (a line `sortie-live 1 <start offset> <ended 0|1>`, then the bytes not shipped as
    /// chunks yet) instead of shipping a chunk each second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<UploadGrant>,
}

/// The body of `PUT /v1/jobs/{id}/upload-problems`: what the runner could not upload.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UploadProblems {
    /// One line per object or log range that did not arrive (at most 32, each at most
    /// 1000 characters); an empty list clears an earlier report.
    pub problems: Vec<String>,
}
