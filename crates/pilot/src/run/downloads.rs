//! What a phase fetches before it runs: the saved plan of an apply phase, and the state
//! version a restore writes back as the current state.

use std::path::Path;

use sortie_core::protocol::pilot::JobSpec;
use sortie_core::JobPhase;

use super::tool::Tool;
use super::PREFIX;
use crate::api::{without_query, ApiClient};
use crate::error::PilotError;
use crate::log::LogSink;
use crate::source;
use crate::terraform::PLAN_FILE;

/// The saved plan's URL for an apply phase (required there), `None` otherwise.
pub(super) fn saved_plan_url(spec: &JobSpec) -> Result<Option<&str>, PilotError> {
    match (spec.phase, spec.saved_plan_url.as_deref()) {
        (Some(JobPhase::Apply), Some(url)) if !url.trim().is_empty() => Ok(Some(url.trim())),
        (Some(JobPhase::Apply), _) => Err(PilotError::Spec(format!(
            "the apply phase of job {} has no saved_plan_url: there is no saved plan to apply",
            spec.job_id
        ))),
        _ => Ok(None),
    }
}

/// The file a restore's state version is written to before `terraform state push`.
const RESTORE_FILE: &str = "restore.tfstate";

/// A restore: downloads the state version and writes it back as the current state
/// (`terraform state push -force`: the version's serial and lineage may be older than the
/// current state's, which is the point), then the steps plan against it.
pub(super) async fn restore_state(
    api: &ApiClient,
    sink: &LogSink,
    tool: &Tool,
    url: &str,
    dir: &Path,
) -> Result<(), PilotError> {
    sink.line(&format!(
        "{PREFIX} downloading the state version to restore {}",
        without_query(url)
    ));
    let bytes = api.download_presigned(url).await.map_err(|e| {
        PilotError::SavedPlan(format!(
            "could not download the state version to restore: {e}"
        ))
    })?;
    if serde_json::from_slice::<serde_json::Value>(&bytes).is_err() {
        return Err(PilotError::SavedPlan(
            "the state version to restore is not a JSON state file".into(),
        ));
    }
    std::fs::write(dir.join(RESTORE_FILE), &bytes)
        .map_err(|e| PilotError::Workspace(format!("could not write {RESTORE_FILE}: {e}")))?;
    let args = ["state", "push", "-force", RESTORE_FILE]
        .map(String::from)
        .to_vec();
    tool.run(sink, args, &[]).await?;
    let _ = std::fs::remove_file(dir.join(RESTORE_FILE));
    sink.line(&format!(
        "{PREFIX} state restored: {} bytes, sha256 {}",
        bytes.len(),
        source::sha256_hex(&bytes)
    ));
    Ok(())
}

/// Downloads the saved plan of an apply phase to `dest`.
pub(super) async fn download_saved_plan(
    api: &ApiClient,
    sink: &LogSink,
    url: &str,
    dest: &Path,
) -> Result<(), PilotError> {
    sink.line(&format!(
        "{PREFIX} downloading the saved plan {}",
        without_query(url)
    ));
    let bytes = api
        .download_presigned(url)
        .await
        .map_err(|e| PilotError::SavedPlan(format!("could not download the saved plan: {e}")))?;
    if bytes.is_empty() {
        return Err(PilotError::SavedPlan(
            "the saved plan is empty: there is nothing to apply".into(),
        ));
    }
    std::fs::write(dest, &bytes).map_err(|e| {
        PilotError::SavedPlan(format!(
            "could not write the saved plan to {PLAN_FILE}: {e}"
        ))
    })?;
    sink.line(&format!(
        "{PREFIX} saved plan: {} bytes, sha256 {}",
        bytes.len(),
        source::sha256_hex(&bytes)
    ));
    Ok(())
}
