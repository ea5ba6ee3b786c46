//! A job's files in the artifacts bucket, apart from its log ([`crate::Logs`]): the
//! presigned PUTs the pilot uploads its plan, summary, outputs and files with; the saved
//! plan the apply phase reads; `plan.json` as data; and the one reader of an apply's
//! outputs, which the API's views and the triggers both use.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};
use sortie_core::plan::PlanData;
use sortie_core::protocol::pilot::{upload_key, UploadKind};
use sortie_core::JobId;
use sortie_store::{Artifacts, PresignedPut, StoreError};

use crate::JobService;

/// A job's files, over the artifacts bucket.
#[derive(Clone)]
pub struct JobArtifacts {
    /// Where the pilot uploads and the API reads.
    pub artifacts: Arc<dyn Artifacts>,
}

/// Why an apply's outputs could not be read.
#[derive(Debug, thiserror::Error)]
pub enum OutputsError {
    /// `outputs.json` is not a JSON object.
    #[error("the outputs of job `{job}` are not a JSON object: {why}")]
    NotAnObject {
        /// The job.
        job: JobId,
        /// serde_json's words.
        why: String,
    },
    /// The bucket failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The outputs job `id` uploaded (`terraform output -json`), each by name: none when it
/// uploaded none.
pub async fn read_outputs(
    artifacts: &dyn Artifacts,
    id: &JobId,
) -> Result<Map<String, Value>, OutputsError> {
    let key = upload_key(id, UploadKind::Outputs, None).map_err(|problem| StoreError::Invalid {
        path: "outputs".into(),
        problem,
    })?;
    match artifacts.get(&key).await {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| OutputsError::NotAnObject {
            job: id.clone(),
            why: e.to_string(),
        }),
        Err(StoreError::NotFound { .. }) => Ok(Map::new()),
        Err(e) => Err(e.into()),
    }
}

impl JobArtifacts {
    /// The service over `artifacts`.
    pub fn new(artifacts: Arc<dyn Artifacts>) -> Self {
        Self { artifacts }
    }

    /// A presigned PUT of `key` (one of the job's upload keys) for `kind`, working for `ttl`.
    pub async fn upload_grant(
        &self,
        key: &str,
        kind: UploadKind,
        ttl: Duration,
    ) -> Result<PresignedPut, StoreError> {
        self.artifacts
            .presign_put(key, kind.content_type(), ttl)
            .await
    }

    /// A presigned GET of job `id`'s saved plan (the one its reviewer approved), working
    /// for `ttl`; the problem in words when there is none to give.
    pub async fn saved_plan_url(&self, id: &JobId, ttl: Duration) -> Result<String, String> {
        let key = upload_key(id, UploadKind::Plan, None)?;
        self.artifacts
            .presign_get(&key, ttl)
            .await
            .map_err(|e| format!("the saved plan of job `{id}` cannot be read: {e}"))
    }

    /// Job `id`'s `plan.json` as data, or why it is unavailable.
    pub async fn plan_data(&self, id: &JobId) -> Result<PlanData, StoreError> {
        sortie_store::read_plan_data(self.artifacts.as_ref(), id).await
    }

    /// The outputs job `id` uploaded ([`read_outputs`]).
    pub async fn outputs(&self, id: &JobId) -> Result<Map<String, Value>, OutputsError> {
        read_outputs(self.artifacts.as_ref(), id).await
    }
}

impl JobService {
    /// Records `update` on job `id` (the pilot's reports: tool, summary, upload problems,
    /// where the apply phase's log starts) and answers the job as it is now.
    pub async fn mark(
        &self,
        id: &JobId,
        update: sortie_store::JobUpdate,
    ) -> Result<sortie_store::JobRecord, StoreError> {
        self.store.mark_job(id, chrono::Utc::now(), update).await
    }
}
