//! The contract between the API and `sortie-runner`: what a runner fetches with its
//! job token (`GET /v1/jobs/{id}/spec`) and what it reports back
//! (`PUT /v1/jobs/{id}/summary`). Logs and the plan go to S3 under the locations given.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::job::{Operation, Source};
use crate::names::EnvPath;
use crate::runner::StateStorageConfiguration;

/// An S3 location for a job's logs or artifacts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactLocation {
    /// Bucket.
    pub bucket: String,
    /// Key prefix, ending with `/`: `logs/<job id>/` or `artifacts/<job id>/`.
    pub prefix: String,
    /// Bucket region.
    pub region: String,
}

/// Everything a runner needs to run one job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobSpec {
    /// The job.
    pub job_id: crate::JobId,
    /// The environment it runs against.
    pub environment: EnvPath,
    /// Plan, apply or destroy.
    pub operation: Operation,
    /// Where the configuration comes from.
    pub source: Source,
    /// Terraform variables, for `terraform.tfvars.json`.
    #[serde(default)]
    pub variables: BTreeMap<String, Value>,
    /// Extra files by relative path.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// Secret references (ARNs) by environment variable name; resolved by the runner.
    #[serde(default)]
    pub secret_refs: BTreeMap<String, String>,
    /// The runner's state storage.
    pub state_storage: StateStorageConfiguration,
    /// For `s3` storage: the state object's key, `<key_prefix><environment path>/terraform.tfstate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_key: Option<String>,
    /// Where to stream the log: chunks named `<prefix><start offset, 12 digits>.log`.
    pub logs: ArtifactLocation,
    /// Where to upload the plan file (`plan.tfplan`) and `summary.json`.
    pub artifacts: ArtifactLocation,
}

/// What a plan, apply or destroy changed, reported by the runner. Unknown fields are refused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChangeSummary {
    /// Resources to add (or added).
    pub add: u32,
    /// Resources to change (or changed).
    pub change: u32,
    /// Resources to destroy (or destroyed).
    pub destroy: u32,
}

/// The log chunk key for bytes starting at `offset`.
pub fn log_chunk_key(prefix: &str, offset: u64) -> String {
    format!("{prefix}{offset:012}.log")
}

/// The start offset encoded in a log chunk key, if it is one.
pub fn log_chunk_offset(prefix: &str, key: &str) -> Option<u64> {
    key.strip_prefix(prefix)?.strip_suffix(".log")?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_keys_sort_by_offset_and_round_trip() {
        let a = log_chunk_key("logs/j/", 9);
        let b = log_chunk_key("logs/j/", 10);
        assert!(a < b, "lexicographic order is offset order");
        assert_eq!(log_chunk_offset("logs/j/", &b), Some(10));
        assert_eq!(log_chunk_offset("logs/j/", "logs/j/done"), None);
    }
}
