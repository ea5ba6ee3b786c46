//! Environments: a path, a type, labels and tags, and the runner linked to it.
//!
//! The runner is resolved when the environment is created and stays linked when
//! rules change, until a refresh, so that a rule change never cuts an
//! environment off from its state.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use serde_json::Value;

use crate::limits;
use crate::names::{EnvPath, RunnerId};
use crate::problems::{index, key_path, Fields, Problems};
use crate::ValidationError;

/// What rule resolution needs to know about an environment.
#[derive(Debug, Clone, Copy)]
pub struct EnvFacts<'a> {
    /// The environment's path (its group is `path.group()`).
    pub path: &'a EnvPath,
    /// The environment's type, such as `production`.
    pub env_type: &'a str,
    /// The environment's labels.
    pub labels: &'a BTreeMap<String, String>,
    /// The environment's tags.
    pub tags: &'a BTreeSet<String>,
}

/// Who linked an environment to its runner, by which rule, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunnerLink {
    /// The linked runner.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub runner_id: RunnerId,
    /// The rule that picked it.
    pub rule_id: String,
    /// The subject of the principal who created or refreshed the link.
    pub linked_by: String,
    /// When the link was made.
    pub linked_at: DateTime<Utc>,
}

/// An environment and its sticky runner link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Environment {
    /// The environment's path, such as `acme/payments/prod`.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub path: EnvPath,
    /// The environment's type, such as `development` or `production`.
    pub env_type: String,
    /// Labels for rule criteria.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Tags for rule criteria (rules hold when their tags are a subset of these).
    #[serde(default)]
    pub tags: BTreeSet<String>,
    /// The linked runner.
    pub runner: RunnerLink,
    /// Approval, drift detection, and the tool and version.
    #[serde(flatten)]
    pub settings: EnvSettings,
}

/// Whether an apply or destroy waits for a person's approval between its plan and its apply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Approval {
    /// The job plans and applies that plan at once (one task).
    #[default]
    Auto,
    /// The job plans, then waits in `awaiting_approval` (holding the lock) until approved
    /// (a second task applies the saved plan), discarded, or timed out.
    Required,
}

impl Approval {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Required => "required",
        }
    }
}

/// What a detected drift does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DriftRemediation {
    /// Nothing: the drift is reported.
    #[default]
    Off,
    /// An apply is submitted (by `sortie:drift`), subject to the approval setting.
    Apply,
}

/// The default approval timeout: 24 hours.
pub const APPROVAL_TIMEOUT_DEFAULT_SECONDS: u32 = 24 * 3600;
/// The shortest approval timeout: 5 minutes.
pub const APPROVAL_TIMEOUT_MIN_SECONDS: u32 = 300;
/// The longest approval timeout: 30 days.
pub const APPROVAL_TIMEOUT_MAX_SECONDS: u32 = 30 * 24 * 3600;

/// An environment's settings for reviewed applies, drift detection and the tool.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EnvSettings {
    /// `auto` (default) or `required`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub approval: Approval,
    /// How long a job may await approval before the sweeper discards it (default 24 h).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_timeout_seconds: Option<u32>,
    /// When true, the approver must not be the job's requester.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub four_eyes: bool,
    /// A 5-field cron expression, in UTC, for drift checks (at least 15 minutes apart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_schedule: Option<String>,
    /// What a detected drift does: `off` (default) or `apply`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub drift_remediation: DriftRemediation,
    /// The tool its jobs run; wins over the runner's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<crate::tool::ToolName>,
    /// The tool version its jobs run (exact or a constraint); wins over the runner's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_version: Option<String>,
    /// Upstream environments (same organisation): a successful apply of one whose outputs
    /// changed submits a job here ([`crate::triggers`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub triggers: Vec<EnvPath>,
    /// What a trigger submits: `plan` (default) or `apply`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub trigger_operation: crate::triggers::TriggerOperation,
    /// Upstream output names given to a triggered job as `TF_VAR_<name>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trigger_inputs: Vec<String>,
    /// A fixed end: the environment is destroyed by `sortie:expiry` then ([`crate::expiry`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
    /// A lifetime such as `72h`, counted from `ttl_from` (ignored while `expires_at` is set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<String>,
    /// Where `ttl` counts from: `created` (default) or `last_apply`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub ttl_from: crate::expiry::TtlFrom,
    /// Its binding to a repository directory: pull requests that touch it are planned
    /// there ([`crate::vcs::VcsBinding`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vcs: Option<crate::vcs::VcsBinding>,
    /// An extension of an end that a group's default TTL gives it (`sortie env extend`):
    /// the later of the two counts while that default applies, and goes with it. Written
    /// only by an extension, never by a request's body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extended_to: Option<chrono::DateTime<chrono::Utc>>,
}

impl EnvSettings {
    /// Its expiry setting, for [`crate::expiry::expires_at`] (a stored `ttl` that no longer
    /// parses counts as none).
    pub fn expiry(&self) -> crate::expiry::ExpirySetting {
        crate::expiry::ExpirySetting {
            expires_at: self.expires_at,
            ttl_seconds: self
                .ttl
                .as_deref()
                .and_then(|t| crate::expiry::parse_duration(t).ok()),
            ttl_from: self.ttl_from,
            extended_to: self.extended_to,
        }
    }
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

impl Environment {
    /// The facts rule resolution reads.
    pub fn facts(&self) -> EnvFacts<'_> {
        EnvFacts {
            path: &self.path,
            env_type: &self.env_type,
            labels: &self.labels,
            tags: &self.tags,
        }
    }
}

/// Checks an environment's labels (or a rule's label criteria) before they are stored as a
/// DynamoDB map: every key non-empty and at most [`limits::DYNAMODB_NAME_MAX`] bytes, and
/// no control character in a key or a value.
pub fn check_labels(labels: &BTreeMap<String, String>, path: &str, p: &mut Problems) {
    for (k, v) in labels {
        let at = key_path(path, k);
        if crate::problems::is_blank(k) {
            p.push(at, "a label key must not be blank (empty or only spaces)");
        } else if k.len() > limits::DYNAMODB_NAME_MAX {
            p.push(
                at,
                format!(
                    "a label key must be at most {} bytes",
                    limits::DYNAMODB_NAME_MAX
                ),
            );
        } else if limits::has_control(k) || limits::has_control(v) {
            p.push(at, "a label must not contain control characters");
        }
    }
}

/// Checks an environment's tags (or a rule's tag criteria): each non-empty, without
/// control characters.
pub fn check_tags(tags: &BTreeSet<String>, path: &str, p: &mut Problems) {
    for (i, t) in tags.iter().enumerate() {
        if crate::problems::is_blank(t) || limits::has_control(t) {
            p.push(
                index(path, i),
                "a tag must not be blank (empty or only spaces) or contain control characters",
            );
        }
    }
}

/// The body of an environment create or update (`name`, `env_type`, `labels`, `tags`),
/// decoded field by field with every problem reported and unknown fields refused.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EnvironmentInput {
    /// The environment's name (create only; a patch cannot rename).
    pub name: Option<String>,
    /// The environment's type.
    pub env_type: Option<String>,
    /// Its labels, when given.
    pub labels: Option<BTreeMap<String, String>>,
    /// Its tags, when given.
    pub tags: Option<BTreeSet<String>>,
    /// `approval`, when given.
    pub approval: Option<Approval>,
    /// `approval_timeout_seconds`, when given (`null` clears it).
    pub approval_timeout_seconds: Option<Option<u32>>,
    /// `four_eyes`, when given.
    pub four_eyes: Option<bool>,
    /// `drift_schedule`, when given (`null` clears it).
    pub drift_schedule: Option<Option<String>>,
    /// `drift_remediation`, when given.
    pub drift_remediation: Option<DriftRemediation>,
    /// `tool`, when given (`null` clears it).
    pub tool: Option<Option<crate::tool::ToolName>>,
    /// `tool_version`, when given (`null` clears it).
    pub tool_version: Option<Option<String>>,
    /// `triggers`, when given (the cycle check is the service's: it needs the graph).
    pub triggers: Option<Vec<EnvPath>>,
    /// `trigger_operation`, when given.
    pub trigger_operation: Option<crate::triggers::TriggerOperation>,
    /// `trigger_inputs`, when given.
    pub trigger_inputs: Option<Vec<String>>,
    /// `expires_at`, when given (`null` clears it).
    pub expires_at: Option<Option<chrono::DateTime<chrono::Utc>>>,
    /// `ttl`, when given, in the canonical form (`null` clears it).
    pub ttl: Option<Option<String>>,
    /// `ttl_from`, when given.
    pub ttl_from: Option<crate::expiry::TtlFrom>,
    /// `vcs`, when given (`null` removes the binding).
    pub vcs: Option<Option<crate::vcs::VcsBinding>>,
}

impl EnvironmentInput {
    /// Applies the settings given to `settings`.
    pub fn apply_settings(&self, settings: &mut EnvSettings) {
        if let Some(v) = self.approval {
            settings.approval = v;
        }
        if let Some(v) = self.approval_timeout_seconds {
            settings.approval_timeout_seconds = v;
        }
        if let Some(v) = self.four_eyes {
            settings.four_eyes = v;
        }
        if let Some(v) = &self.drift_schedule {
            settings.drift_schedule = v.clone();
        }
        if let Some(v) = self.drift_remediation {
            settings.drift_remediation = v;
        }
        if let Some(v) = self.tool {
            settings.tool = v;
        }
        if let Some(v) = &self.tool_version {
            settings.tool_version = v.clone();
        }
        if let Some(v) = &self.triggers {
            settings.triggers = v.clone();
        }
        if let Some(v) = self.trigger_operation {
            settings.trigger_operation = v;
        }
        if let Some(v) = &self.trigger_inputs {
            settings.trigger_inputs = v.clone();
        }
        if let Some(v) = self.expires_at {
            settings.expires_at = v;
        }
        if let Some(v) = &self.ttl {
            settings.ttl = v.clone();
        }
        if let Some(v) = self.ttl_from {
            settings.ttl_from = v;
        }
        if let Some(v) = &self.vcs {
            settings.vcs = v.clone();
        }
    }
}

/// Reads an optional field where `null` means "clear": `None` absent, `Some(None)` null.
fn nullable<T: serde::de::DeserializeOwned>(
    f: &mut Fields<'_>,
    field: &'static str,
    p: &mut Problems,
) -> Option<Option<T>> {
    if f.is_null(field) {
        Some(None)
    } else {
        f.optional::<T>(field, p).map(Some)
    }
}

impl EnvironmentInput {
    /// Decodes a create (`creating`: `name` and `env_type` required) or patch body.
    pub fn from_value(doc: &Value, creating: bool) -> Result<Self, ValidationError> {
        let mut p = Problems::default();
        let Some(mut f) = Fields::new(doc, "", &mut p) else {
            return Err(ValidationError { problems: p.0 });
        };
        let name = if creating {
            f.required_str("name", &mut p)
        } else {
            None
        };
        let env_type = if creating {
            f.required_str("env_type", &mut p)
        } else {
            f.optional::<String>("env_type", &mut p)
        };
        if env_type
            .as_deref()
            .is_some_and(|t| crate::problems::is_blank(t) || limits::has_control(t))
        {
            p.push(
                "env_type",
                "must not be empty or contain control characters",
            );
        }
        let labels: Option<BTreeMap<String, String>> = f.optional("labels", &mut p);
        if let Some(labels) = &labels {
            check_labels(labels, "labels", &mut p);
        }
        let tags: Option<BTreeSet<String>> = f.optional("tags", &mut p);
        if let Some(tags) = &tags {
            check_tags(tags, "tags", &mut p);
        }
        let approval: Option<Approval> = f.optional("approval", &mut p);
        let approval_timeout_seconds: Option<Option<u32>> =
            nullable(&mut f, "approval_timeout_seconds", &mut p);
        if let Some(Some(t)) = approval_timeout_seconds {
            if !(APPROVAL_TIMEOUT_MIN_SECONDS..=APPROVAL_TIMEOUT_MAX_SECONDS).contains(&t) {
                p.push(
                    "approval_timeout_seconds",
                    format!("must be between {APPROVAL_TIMEOUT_MIN_SECONDS} (5 minutes) and {APPROVAL_TIMEOUT_MAX_SECONDS} (30 days)"),
                );
            }
        }
        let four_eyes: Option<bool> = f.optional("four_eyes", &mut p);
        let drift_schedule: Option<Option<String>> = nullable(&mut f, "drift_schedule", &mut p);
        if let Some(Some(expr)) = &drift_schedule {
            // Refused first: a newline inside passes the cron parser and would be stored.
            if !crate::problems::refuse_control(&mut p, "drift_schedule", expr) {
                if let Err(problem) = crate::drift::DriftSchedule::parse(expr) {
                    p.push("drift_schedule", problem);
                }
            }
        }
        let drift_remediation: Option<DriftRemediation> = f.optional("drift_remediation", &mut p);
        let tool: Option<Option<crate::tool::ToolName>> = nullable(&mut f, "tool", &mut p);
        let tool_version: Option<Option<String>> = nullable(&mut f, "tool_version", &mut p);
        if let Some(version) = tool_version.as_ref().and_then(|v| v.as_deref()) {
            if !crate::problems::refuse_control(&mut p, "tool_version", version) {
                if let Some(problem) = crate::tool::version_problem(version) {
                    p.push("tool_version", problem);
                }
            }
        }
        let triggers: Option<Vec<String>> = f.optional("triggers", &mut p);
        let triggers = triggers.map(|list| {
            list.iter()
                .enumerate()
                .filter_map(|(i, t)| match EnvPath::parse(t) {
                    Ok(path) => Some(path),
                    Err(e) => {
                        p.push(index("triggers", i), e.first_problem());
                        None
                    }
                })
                .collect::<Vec<_>>()
        });
        let trigger_operation: Option<crate::triggers::TriggerOperation> =
            f.optional("trigger_operation", &mut p);
        let trigger_inputs: Option<Vec<String>> = f.optional("trigger_inputs", &mut p);
        if let Some(inputs) = &trigger_inputs {
            crate::triggers::check_inputs(inputs, "trigger_inputs", &mut p);
        }
        let expires_at: Option<Option<chrono::DateTime<chrono::Utc>>> =
            nullable(&mut f, "expires_at", &mut p);
        let ttl: Option<Option<String>> = nullable(&mut f, "ttl", &mut p);
        let ttl = ttl.map(|t| {
            t.and_then(|text| match crate::expiry::parse_duration(&text) {
                Ok(seconds) => Some(crate::expiry::format_duration(seconds)),
                Err(problem) => {
                    p.push("ttl", problem);
                    None
                }
            })
        });
        let ttl_from: Option<crate::expiry::TtlFrom> = f.optional("ttl_from", &mut p);
        let vcs = if f.is_null("vcs") {
            Some(None)
        } else {
            f.raw("vcs")
                .map(|v| crate::vcs::VcsBinding::from_value(v, "vcs", &mut p))
        };
        f.finish(&mut p);
        p.finish(Self {
            name,
            env_type,
            labels,
            tags,
            approval,
            approval_timeout_seconds,
            four_eyes,
            drift_schedule,
            drift_remediation,
            tool,
            tool_version,
            triggers,
            trigger_operation,
            trigger_inputs,
            expires_at,
            ttl,
            ttl_from,
            vcs,
        })
    }
}
