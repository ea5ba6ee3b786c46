//! A job's plan as data, read from the `plan.json` artifact its runner uploaded
//! (`artifacts/<job id>/plan.json`): for the plan route and the policy gate, which read the
//! plan Sortie stored, never the runner's word.

use sortie_core::plan::{PlanData, PLAN_JSON_MAX_BYTES, TOO_LARGE};
use sortie_core::protocol::pilot::{upload_key, UploadKind};
use sortie_core::JobId;

use crate::{Artifacts, StoreError};

/// Job `job_id`'s plan data: [`PlanData::from_artifact`] of its `plan.json`. A missing
/// artifact is [`sortie_core::plan::NO_ARTIFACT`]; one over
/// [`PLAN_JSON_MAX_BYTES`] is [`TOO_LARGE`] and is not read. Errors are the bucket's.
pub async fn read_plan_data(
    artifacts: &dyn Artifacts,
    job_id: &JobId,
) -> Result<PlanData, StoreError> {
    read_plan_data_within(artifacts, job_id, PLAN_JSON_MAX_BYTES).await
}

/// [`read_plan_data`] for a reader that holds at most `max_bytes` of JSON (never more than
/// [`PLAN_JSON_MAX_BYTES`]): a larger artifact is unavailable, saying its size, and is
/// never read into memory.
pub async fn read_plan_data_within(
    artifacts: &dyn Artifacts,
    job_id: &JobId,
    max_bytes: usize,
) -> Result<PlanData, StoreError> {
    let key = upload_key(job_id, UploadKind::PlanJson, None).map_err(|_| StoreError::NotFound {
        kind: "object",
        id: job_id.to_string(),
    })?;
    // The size first, so an oversized plan is never read into memory.
    let listed = artifacts.list(&key).await?;
    match listed.iter().find(|o| o.key == key) {
        None => return Ok(PlanData::from_artifact(None)),
        Some(o) if o.size > PLAN_JSON_MAX_BYTES as u64 => {
            return Ok(PlanData::Unavailable(TOO_LARGE.into()))
        }
        Some(o) if o.size > max_bytes as u64 => {
            return Ok(PlanData::Unavailable(format!(
                "the plan's JSON is {} bytes, over the {max_bytes} read here",
                o.size
            )))
        }
        Some(_) => {}
    }
    match artifacts.get(&key).await {
        Ok(bytes) => Ok(PlanData::from_artifact(Some(&bytes))),
        Err(StoreError::NotFound { .. }) => Ok(PlanData::from_artifact(None)),
        Err(e) => Err(e),
    }
}
