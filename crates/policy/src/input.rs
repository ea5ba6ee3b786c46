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
