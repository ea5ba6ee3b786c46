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
use crate::rule::EnvFacts;
use crate::ValidationError;

/// Who linked an environment to its runner, by which rule, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunnerLink {
    /// The linked runner.
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
pub struct Environment {
    /// The environment's path, such as `acme/payments/prod`.
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
        if k.is_empty() {
            p.push(
                at,
                "a label key must not be empty (DynamoDB refuses empty map keys)",
            );
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
        if t.is_empty() || limits::has_control(t) {
            p.push(
                index(path, i),
                "a tag must not be empty or contain control characters",
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
            .is_some_and(|t| t.trim().is_empty() || limits::has_control(t))
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
        f.finish(&mut p);
        p.finish(Self {
            name,
            env_type,
            labels,
            tags,
        })
    }
}
