//! What a plan, apply or destroy changed (its summary).

use serde::{Deserialize, Serialize};

/// What a plan, apply or destroy changed, reported by the pilot. Unknown fields are refused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ChangeSummary {
    /// Resources to add (or added).
    pub add: u32,
    /// Resources to change (or changed).
    pub change: u32,
    /// Resources to destroy (or destroyed).
    pub destroy: u32,
    /// What `-detailed-exitcode` said of a drift check's plan: true when it has changes
    /// (resources or outputs). Absent for every other job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_changes: Option<bool>,
}
