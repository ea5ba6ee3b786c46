//! Environments: a path, a type, labels and tags, and the runner linked to it.
//!
//! The runner is resolved when the environment is created and stays linked when
//! rules change, until a refresh, so that a rule change never cuts an
//! environment off from its state.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::names::{EnvPath, RunnerId};
use crate::rule::EnvFacts;

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
