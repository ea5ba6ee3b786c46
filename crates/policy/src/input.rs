//! The input a policy sees: the redacted plan, the job and the runner.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sortie_core::{Environment, Job};

/// Plans over this many bytes of JSON are not evaluated (50 MB); the set's
/// `on_unavailable` decides.
pub const MAX_PLAN_BYTES: usize = 50 * 1024 * 1024;

/// The job as a policy sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobInput {
    /// `plan`, `apply` or `destroy`.
    pub operation: String,
    /// Who asked for the job.
    pub requested_by: String,
    /// The environment's full path.
    pub environment: String,
    /// The environment's type.
    pub env_type: String,
    /// The environment's labels.
    pub labels: BTreeMap<String, String>,
    /// The environment's tags.
    pub tags: BTreeSet<String>,
    /// True for a drift check's plan.
    #[serde(default)]
    pub drift_check: bool,
}

impl JobInput {
    /// The input for `job` in `env`.
    pub fn new(job: &Job, env: &Environment) -> Self {
        let mut input = Self::for_env(env, job.request.operation.as_str(), &job.requested_by);
        input.drift_check = job.drift_check;
        input
    }

    /// The input for an `operation` by `requested_by` in `env` (what `sortie policy test` builds).
    pub fn for_env(env: &Environment, operation: &str, requested_by: &str) -> Self {
        Self {
            operation: operation.to_string(),
            requested_by: requested_by.to_string(),
            environment: env.path.to_string(),
            env_type: env.env_type.clone(),
            labels: env.labels.clone(),
            tags: env.tags.clone(),
            drift_check: false,
        }
    }
}

/// `{"plan": <redacted plan>, "job": {...}, "runner": {...}}`.
pub fn build_input(plan: &Value, job: &JobInput, runner: &Value) -> Value {
    json!({
        "plan": plan,
        "job": job,
        "runner": runner,
    })
}

/// Bytes of the evaluator's value per byte of a plan's JSON, with a margin: regorus keeps
/// every value as a 24-byte enum, every string and object as its own allocation; a 30 MiB
/// `show -json` of 20,000 resources parses into 157 MiB (BENCHMARKS.md), 5 bytes a byte.
pub const VALUE_BYTES_PER_JSON_BYTE: u64 = 6;

/// The share of a process's memory the plan's value may take (the rest: the runtime, the
/// evaluation, the S3 client's buffers).
pub const PLAN_MEMORY_SHARE_PERCENT: u64 = 60;

/// The largest plan's JSON, in bytes, that can be checked in a process of `memory` bytes
/// (`None`: unbounded, only [`MAX_PLAN_BYTES`]): [`PLAN_MEMORY_SHARE_PERCENT`] of the memory
/// over [`VALUE_BYTES_PER_JSON_BYTE`]. 128 MiB checks about 12.8 MiB of JSON; 512 MiB, the
/// whole [`MAX_PLAN_BYTES`].
pub fn max_plan_bytes_within(memory: Option<u64>) -> usize {
    let Some(memory) = memory else {
        return MAX_PLAN_BYTES;
    };
    let fits = memory / 100 * PLAN_MEMORY_SHARE_PERCENT / VALUE_BYTES_PER_JSON_BYTE;
    usize::try_from(fits)
        .unwrap_or(usize::MAX)
        .min(MAX_PLAN_BYTES)
}

/// `Err` with a reason when the plan's JSON text is over [`MAX_PLAN_BYTES`].
pub fn check_plan_size(bytes: usize) -> Result<(), String> {
    if bytes > MAX_PLAN_BYTES {
        Err(format!(
            "plan data is {bytes} bytes, over the {MAX_PLAN_BYTES}-byte limit for policy checks"
        ))
    } else {
        Ok(())
    }
}
