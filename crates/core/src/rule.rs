//! Runner rules and rule resolution: the one precedence of the design (`docs/design.md`).
//!
//! For an environment E in group G, every rule whose scope is G or an ancestor
//! and whose criteria all hold is a candidate. Candidates are ordered by the
//! deepest scope, then the most criteria set, then the highest priority, then
//! the rule id (ascending); the first one wins. [`resolve`] is a pure function
//! that also explains the fate of every rule it was given.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::document::parse_any;
use crate::environment::EnvFacts;
use crate::names::{check_segment, GroupPath, RunnerId};
use crate::problems::{Fields, Problems};
use crate::ValidationError;

/// Optional conditions a rule places on an environment. All that are set must hold.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Criteria {
    /// The environment's type must equal this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_type: Option<String>,
    /// A glob over the environment's full path; `*` stays within one segment, `**` spans segments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_path: Option<String>,
    /// Every label here must be on the environment with the same value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Every tag here must be among the environment's tags (a subset test, as Tharsis's runner tags).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub tags: BTreeSet<String>,
}

impl Criteria {
    /// How many criteria are set: one each for `env_type` and `env_path`, plus one per label and per tag.
    pub fn count(&self) -> usize {
        usize::from(self.env_type.is_some())
            + usize::from(self.env_path.is_some())
            + self.labels.len()
            + self.tags.len()
    }

    /// Checks each criterion against an environment; `Err` says which one failed and why.
    pub fn check(&self, env: &EnvFacts<'_>) -> Result<(), String> {
        if let Some(t) = &self.env_type {
            if t != env.env_type {
                return Err(format!("env_type `{t}` ≠ environment's `{}`", env.env_type));
            }
        }
        if let Some(glob) = &self.env_path {
            if !env_path_matches(glob, &env.path.to_string()) {
                return Err(format!("env_path `{glob}` does not match `{}`", env.path));
            }
        }
        for (k, v) in &self.labels {
            match env.labels.get(k) {
                Some(actual) if actual == v => {}
                Some(actual) => return Err(format!("label {k}={v} ≠ environment's {k}={actual}")),
                None => return Err(format!("label {k}={v} is not on the environment")),
            }
        }
        let missing: Vec<&str> = self
            .tags
            .iter()
            .filter(|t| !env.tags.contains(*t))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "tags [{}] are not on the environment",
                missing.join(", ")
            ));
        }
        Ok(())
    }
}

/// True when the `env_path` glob matches a full environment path.
pub fn env_path_matches(glob: &str, path: &str) -> bool {
    let options = glob::MatchOptions {
        case_sensitive: true,
        require_literal_separator: true,
        require_literal_leading_dot: false,
    };
    glob::Pattern::new(glob).is_ok_and(|p| p.matches_with(path, options))
}

/// A runner rule: at `scope`, environments meeting `criteria` use `runner_id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunnerRule {
    /// The rule's id, unique within its scope.
    pub id: String,
    /// The group the rule applies in (and below).
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub scope: GroupPath,
    /// The runner it picks; visible at `scope` by construction.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub runner_id: RunnerId,
    /// Conditions on the environment.
    #[serde(default)]
    pub criteria: Criteria,
    /// Breaks ties between rules of the same depth and criteria count; higher wins.
    #[serde(default)]
    pub priority: i32,
}

impl RunnerRule {
    /// Parses a rule from YAML or JSON (`id`, `scope`, `runner_id`, `criteria`, `priority`)
    /// and validates it, reporting every problem.
    pub fn parse(text: &str) -> Result<Self, ValidationError> {
        Self::from_value(&parse_any(text)?)
    }

    /// Decodes and validates a parsed rule document.
    pub fn from_value(value: &Value) -> Result<Self, ValidationError> {
        let mut p = Problems::default();
        let Some(mut f) = Fields::new(value, "", &mut p) else {
            return Err(ValidationError { problems: p.0 });
        };
        let id = f.required_str("id", &mut p);
        if let Some(id) = &id {
            if let Err(e) = check_segment(id) {
                p.push("id", format!("rule id {e}"));
            }
        }
        let scope =
            f.required::<String>("scope", &mut p)
                .and_then(|s| match GroupPath::parse(&s) {
                    Ok(g) => Some(g),
                    Err(e) => {
                        p.push("scope", e.first_problem());
                        None
                    }
                });
        let runner_id =
            f.required_str("runner_id", &mut p)
                .and_then(|s| match RunnerId::parse(&s) {
                    Ok(r) => Some(r),
                    Err(e) => {
                        p.push("runner_id", e.first_problem());
                        None
                    }
                });
        let criteria = match f.raw("criteria") {
            Some(v) => decode_criteria(v, &mut p),
            None => Some(Criteria::default()),
        };
        let priority = f.optional("priority", &mut p).unwrap_or(0);
        f.finish(&mut p);
        let rule = match (id, scope, runner_id, criteria) {
            (Some(id), Some(scope), Some(runner_id), Some(criteria)) => Some(Self {
                id,
                scope,
                runner_id,
                criteria,
                priority,
            }),
            _ => None,
        };
        if let Some(rule) = &rule {
            rule.check_visibility(&mut p);
        }
        match rule {
            Some(rule) if p.is_empty() => Ok(rule),
            _ => Err(ValidationError { problems: p.0 }),
        }
    }

    /// Validates a rule built in code, with the same checks as [`RunnerRule::parse`].
    pub fn validate(&self) -> Result<(), ValidationError> {
        let mut p = Problems::default();
        if let Err(e) = check_segment(&self.id) {
            p.push("id", format!("rule id {e}"));
        }
        check_criteria(&self.criteria, &mut p);
        self.check_visibility(&mut p);
        p.finish(())
    }

    fn check_visibility(&self, p: &mut Problems) {
        if !self.runner_id.is_visible_at(&self.scope) {
            p.push(
                "runner_id",
                format!(
                    "runner `{}` belongs to group `{}`, which is not `{}` or one of its ancestors, so a rule there cannot use it",
                    self.runner_id,
                    self.runner_id.group(),
                    self.scope
                ),
            );
        }
    }
}

fn check_criteria(c: &Criteria, p: &mut Problems) {
    if let Some(glob) = &c.env_path {
        if !crate::problems::refuse_control(p, "criteria.env_path", glob) {
            if let Err(e) = glob::Pattern::new(glob) {
                p.push(
                    "criteria.env_path",
                    format!("`{glob}` is not a valid glob: {e}"),
                );
            }
        }
    }
    if let Some(t) = &c.env_type {
        crate::problems::refuse_blank_or_control(p, "criteria.env_type", t);
    }
    crate::environment::check_labels(&c.labels, "criteria.labels", p);
    crate::environment::check_tags(&c.tags, "criteria.tags", p);
}

fn decode_criteria(value: &Value, p: &mut Problems) -> Option<Criteria> {
    let mut f = Fields::new(value, "criteria", p)?;
    let c = Criteria {
        env_type: f.optional("env_type", p),
        env_path: f.optional("env_path", p),
        labels: f.optional("labels", p).unwrap_or_default(),
        tags: f.optional("tags", p).unwrap_or_default(),
    };
    f.finish(p);
    check_criteria(&c, p);
    Some(c)
}

/// Why a considered rule did not win.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum RuleVerdict {
    /// This rule won.
    Won,
    /// It matched but lost to the winner at the first precedence step where they differ.
    Lost {
        /// The winning rule's id.
        to: String,
        /// The precedence step that decided it.
        because: String,
    },
    /// Its scope is not the environment's group or an ancestor of it.
    OutOfScope,
    /// Its runner is not visible at its scope (such a rule should never have been stored).
    RunnerNotVisible,
    /// One of its criteria does not hold.
    NotMatched {
        /// The criterion that failed.
        reason: String,
    },
}

/// One rule's line in a resolution's explanation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Considered {
    /// The rule's id.
    pub rule_id: String,
    /// The rule's scope.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub scope: GroupPath,
    /// The runner it names.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub runner_id: RunnerId,
    /// How many criteria it sets.
    pub criteria_count: usize,
    /// Its priority.
    pub priority: i32,
    /// What happened to it.
    #[serde(flatten)]
    pub verdict: RuleVerdict,
}

/// A successful resolution: the winning rule, and the fate of every rule considered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolution {
    /// The rule that won.
    pub rule: RunnerRule,
    /// Every rule given, in precedence order for those that matched, then the rest.
    pub explanation: Vec<Considered>,
}

impl Resolution {
    /// The runner the winning rule picks.
    pub fn runner_id(&self) -> &RunnerId {
        &self.rule.runner_id
    }
}

/// No rule matched an environment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("no runner rule matches environment `{environment}`; scopes searched: {}", display_scopes(.scopes_searched))]
pub struct NoRunnerMatched {
    /// The environment that found no runner.
    pub environment: String,
    /// The scopes searched, deepest first, ending with the root.
    pub scopes_searched: Vec<GroupPath>,
    /// Every rule considered and why it did not match.
    pub explanation: Vec<Considered>,
}

pub(crate) fn display_scopes(scopes: &[GroupPath]) -> String {
    scopes
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The precedence order: deeper scope, then more criteria, then higher priority, then lower id.
pub fn precedence(a: &RunnerRule, b: &RunnerRule) -> Ordering {
    b.scope
        .depth()
        .cmp(&a.scope.depth())
        .then_with(|| b.criteria.count().cmp(&a.criteria.count()))
        .then_with(|| b.priority.cmp(&a.priority))
        .then_with(|| a.id.cmp(&b.id))
        .then_with(|| a.scope.cmp(&b.scope))
}

fn why_lost(winner: &RunnerRule, loser: &RunnerRule) -> String {
    if winner.scope.depth() != loser.scope.depth() {
        format!(
            "deeper scope: `{}` is nearer to the environment than `{}`",
            winner.scope, loser.scope
        )
    } else if winner.criteria.count() != loser.criteria.count() {
        format!(
            "more criteria: {} set against {}",
            winner.criteria.count(),
            loser.criteria.count()
        )
    } else if winner.priority != loser.priority {
        format!(
            "higher priority: {} against {}",
            winner.priority, loser.priority
        )
    } else {
        "tie broken by rule id".to_string()
    }
}

/// Picks the runner rule for an environment by the one precedence, explaining every rule.
///
/// The result depends only on the set of rules, never on their order.
pub fn resolve(env: &EnvFacts<'_>, rules: &[RunnerRule]) -> Result<Resolution, NoRunnerMatched> {
    let group = env.path.group();
    let mut matched: Vec<&RunnerRule> = Vec::new();
    let mut rejected: Vec<Considered> = Vec::new();
    let line = |r: &RunnerRule, verdict: RuleVerdict| Considered {
        rule_id: r.id.clone(),
        scope: r.scope.clone(),
        runner_id: r.runner_id.clone(),
        criteria_count: r.criteria.count(),
        priority: r.priority,
        verdict,
    };
    for rule in rules {
        let verdict = if !rule.scope.contains(group) {
            Some(RuleVerdict::OutOfScope)
        } else if !rule.runner_id.is_visible_at(&rule.scope) {
            Some(RuleVerdict::RunnerNotVisible)
        } else {
            rule.criteria
                .check(env)
                .err()
                .map(|reason| RuleVerdict::NotMatched { reason })
        };
        match verdict {
            Some(v) => rejected.push(line(rule, v)),
            None => matched.push(rule),
        }
    }
    matched.sort_by(|a, b| precedence(a, b));
    rejected.sort_by(|a, b| (&a.scope, &a.rule_id).cmp(&(&b.scope, &b.rule_id)));
    let Some(winner) = matched.first().copied() else {
        return Err(NoRunnerMatched {
            environment: env.path.to_string(),
            scopes_searched: group.self_and_ancestors(),
            explanation: rejected,
        });
    };
    let mut explanation: Vec<Considered> = matched
        .iter()
        .map(|r| {
            if std::ptr::eq(*r, winner) {
                line(r, RuleVerdict::Won)
            } else {
                line(
                    r,
                    RuleVerdict::Lost {
                        to: winner.id.clone(),
                        because: why_lost(winner, r),
                    },
                )
            }
        })
        .collect();
    explanation.extend(rejected);
    Ok(Resolution {
        rule: winner.clone(),
        explanation,
    })
}
