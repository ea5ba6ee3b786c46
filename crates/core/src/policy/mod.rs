//! Policy sets: Rego modules a group holds, checked against every plan of its
//! environments (and its descendants' environments).
//!
//! This module holds the data (the set, its criteria, enforcement levels, the result of
//! a check) and the pure rules over it: criteria matching and the bounds of a set. The
//! Rego compiler and evaluator live in `sortie-policy`; the gate (what a result does to
//! a job) lives in [`gate`].

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::document::parse_any;
use crate::environment::Environment;
use crate::names::check_segment;
use crate::problems::{Problem, Problems};
use crate::ValidationError;

pub mod gate;

/// The most Rego modules one set holds.
pub const MAX_MODULES: usize = 20;
/// The most bytes of Rego (all modules together) one set holds: 256 KiB.
pub const MAX_SET_BYTES: usize = 256 * 1024;
/// The most policy sets one group holds.
pub const MAX_SETS_PER_GROUP: usize = 50;
/// The longest description, in bytes.
pub const MAX_DESCRIPTION_BYTES: usize = 1024;
/// The most entries in each of a set's criteria (env types, labels).
pub const MAX_CRITERIA: usize = 32;

/// A policy set: one or more Rego modules, how a deny is enforced, which environments
/// it applies to, and what happens when there is no plan data to check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct PolicySet {
    /// The set's name, unique within its group (one path segment).
    pub name: String,
    /// A sentence for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The Rego modules (at least one, at most [`MAX_MODULES`]).
    pub modules: Vec<PolicyModule>,
    /// What a deny does to the job.
    pub enforcement: Enforcement,
    /// Which environments the set applies to; none means all of the group's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub criteria: Option<PolicyCriteria>,
    /// What happens when a plan has no data to check (Terraform 0.11, a plan too large).
    #[serde(default)]
    pub on_unavailable: OnUnavailable,
}

/// One Rego module of a set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct PolicyModule {
    /// The module's name (such as `tags.rego`: letters, digits, `.`, `_`, `-`), used in compile errors.
    pub name: String,
    /// The Rego source.
    pub rego: String,
}

/// Conditions on the environment; an empty list or map places no condition.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct PolicyCriteria {
    /// The environment's type must be one of these (any when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_types: Vec<String>,
    /// Every label here must be on the environment with the same value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// What a set's deny does to the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Enforcement {
    /// A deny fails the job.
    Mandatory,
    /// A deny sends the job to a person (`awaiting_approval`), even with approval `auto`.
    Review,
    /// A deny is recorded only.
    Advisory,
}

impl Enforcement {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Mandatory => "mandatory",
            Self::Review => "review",
            Self::Advisory => "advisory",
        }
    }
}

/// What a set does when the plan has no data to check.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum OnUnavailable {
    /// The set counts as denied (with its enforcement level).
    #[default]
    Fail,
    /// The set is skipped.
    Skip,
}

/// The outcome of checking one plan against every applicable set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub struct PolicyResult {
    /// The overall verdict.
    pub status: PolicyStatus,
    /// When the check ran.
    pub checked_at: DateTime<Utc>,
    /// One result per set checked.
    #[serde(default)]
    pub sets: Vec<SetResult>,
    /// Why, when the status needs one (such as "plan data unavailable for Terraform 0.11").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Set when messages were left out to fit the job item and the event
    /// ([`gate::summary`]): how many, each set's full counts, and where the whole result is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<Truncated>,
}

/// What a summarised [`PolicyResult`] left out ([`gate::summary`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub struct Truncated {
    /// How many messages (deny, warn) were left out in all.
    pub omitted_messages: u32,
    /// Each set's full message counts, `[deny, warn]`, in the order of `sets`.
    pub counts: Vec<[u32; 2]>,
    /// The artifacts key of the whole result (`jobs/<id>/policy.json`), when stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_result_key: Option<String>,
}

/// The overall verdict of a policy check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum PolicyStatus {
    /// No set denied or warned.
    Passed,
    /// Some set warned (or an advisory set denied), none denied.
    Warned,
    /// A mandatory or review set denied.
    Denied,
    /// There was no plan data to check.
    Unavailable,
}

/// The outcome of one set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub struct SetResult {
    /// The set's name.
    pub set: String,
    /// The group that holds the set.
    pub group: String,
    /// The set's enforcement level.
    pub enforcement: Enforcement,
    /// The messages of its `deny` rules.
    #[serde(default)]
    pub deny: Vec<String>,
    /// The messages of its `warn` rules.
    #[serde(default)]
    pub warn: Vec<String>,
    /// Evaluation failed (a timeout, a limit, a runtime error): counts as a deny with this message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl SetResult {
    /// True when the set denied: a `deny` message or an evaluation error.
    pub fn denied(&self) -> bool {
        !self.deny.is_empty() || self.error.is_some()
    }
}

impl PolicyCriteria {
    /// True when every criterion holds for `env` (an empty criterion holds for all).
    pub fn matches(&self, env: &Environment) -> bool {
        (self.env_types.is_empty() || self.env_types.contains(&env.env_type))
            && self
                .labels
                .iter()
                .all(|(k, v)| env.labels.get(k).is_some_and(|actual| actual == v))
    }
}

impl PolicySet {
    /// True when the set applies to `env` by its criteria (the group's ancestry is the caller's).
    pub fn applies_to(&self, env: &Environment) -> bool {
        self.criteria.as_ref().is_none_or(|c| c.matches(env))
    }

    /// Parses a set from YAML or JSON and checks its bounds, reporting every problem.
    pub fn parse(text: &str) -> Result<Self, ValidationError> {
        Self::from_value(parse_any(text)?)
    }

    /// Decodes a parsed document (unknown fields refused) and checks its bounds.
    pub fn from_value(value: Value) -> Result<Self, ValidationError> {
        let set: Self = serde_json::from_value(value)
            .map_err(|e| ValidationError::single("", format!("not a policy set: {e}")))?;
        set.validate()
            .map_err(|problems| ValidationError { problems })?;
        Ok(set)
    }

    /// Checks the bounds: the name, 1 to [`MAX_MODULES`] modules with distinct names,
    /// at most [`MAX_SET_BYTES`] of Rego, the description and criteria sizes.
    /// Whether the Rego compiles is `sortie-policy`'s check.
    pub fn validate(&self) -> Result<(), Vec<Problem>> {
        let mut p = Problems::default();
        if let Err(e) = check_segment(&self.name) {
            p.push("name", format!("policy set name {e}"));
        }
        if let Some(d) = &self.description {
            if d.len() > MAX_DESCRIPTION_BYTES {
                p.push(
                    "description",
                    format!("must be at most {MAX_DESCRIPTION_BYTES} bytes"),
                );
            }
        }
        if self.modules.is_empty() {
            p.push("modules", "a policy set needs at least one module");
        }
        if self.modules.len() > MAX_MODULES {
            p.push(
                "modules",
                format!(
                    "a policy set holds at most {MAX_MODULES} modules, not {}",
                    self.modules.len()
                ),
            );
        }
        let total: usize = self.modules.iter().map(|m| m.rego.len()).sum();
        if total > MAX_SET_BYTES {
            p.push(
                "modules",
                format!("a policy set holds at most {MAX_SET_BYTES} bytes of Rego, not {total}"),
            );
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, m) in self.modules.iter().enumerate() {
            let path = format!("modules[{i}].name");
            if !module_name_ok(&m.name) {
                p.push(
                    path.clone(),
                    format!(
                        "module name `{}` must be 1 to {MAX_MODULE_NAME} letters, digits, `.`, `_` or `-`, not starting with `.`",
                        m.name
                    ),
                );
            }
            if !seen.insert(m.name.as_str()) {
                p.push(path, format!("module `{}` is given twice", m.name));
            }
            if m.rego.trim().is_empty() {
                p.push(format!("modules[{i}].rego"), "must not be blank");
            }
        }
        if let Some(c) = &self.criteria {
            if c.env_types.len() > MAX_CRITERIA {
                p.push(
                    "criteria.env_types",
                    format!("at most {MAX_CRITERIA} types"),
                );
            }
            if c.labels.len() > MAX_CRITERIA {
                p.push("criteria.labels", format!("at most {MAX_CRITERIA} labels"));
            }
            for (i, t) in c.env_types.iter().enumerate() {
                if t.trim().is_empty() {
                    p.push(format!("criteria.env_types[{i}]"), "must not be blank");
                }
            }
            crate::environment::check_labels(&c.labels, "criteria.labels", &mut p);
        }
        if p.is_empty() {
            Ok(())
        } else {
            Err(p.0)
        }
    }
}

/// The longest module name.
pub const MAX_MODULE_NAME: usize = 128;

/// A module name such as `tags.rego`: 1 to [`MAX_MODULE_NAME`] ASCII letters, digits,
/// `.`, `_` or `-`, not starting with `.`.
fn module_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_MODULE_NAME
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The overall status of a check from its set results: `denied` when a mandatory or
/// review set denied, `warned` when any set warned or an advisory set denied, `passed` otherwise.
pub fn overall_status(sets: &[SetResult]) -> PolicyStatus {
    if sets
        .iter()
        .any(|s| s.denied() && s.enforcement != Enforcement::Advisory)
    {
        PolicyStatus::Denied
    } else if sets.iter().any(|s| s.denied() || !s.warn.is_empty()) {
        PolicyStatus::Warned
    } else {
        PolicyStatus::Passed
    }
}

#[cfg(test)]
mod tests;
