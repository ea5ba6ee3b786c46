//! What the index answers: the rule it picked, or that none matched, each with the
//! tally of the rules that did not win.

use serde::{Deserialize, Serialize};

use crate::names::{GroupPath, RunnerId};
use crate::rule::{display_scopes, RunnerRule};

#[cfg(doc)]
use super::RuleIndex;
#[cfg(doc)]
use crate::rule::resolve;

/// How many rules did not win, and why; every rule given is counted exactly once.
///
/// Rules ranked below the winner are [`Tally::outranked`]: their `env_path`,
/// labels and tags are never checked, because matching or not they cannot win.
/// So `outranked` counts both the rules that [`resolve`] reports as `lost` and
/// the rules below the winner that it reports as not matching on `env_path`,
/// labels or tags, while [`Tally::not_matched`] counts those only above the
/// winner (and every rule whose `env_type` differs). `won`,
/// `runner_not_visible`, `out_of_scope` and `not_matched.env_type` always equal
/// [`resolve`]'s counts; when no rule matches nothing is outranked, and every
/// count equals [`resolve`]'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Tally {
    /// 1 if a rule won, else 0.
    pub won: u32,
    /// Rules ranked below the winner, by the precedence step that puts them there.
    pub outranked: ByStep,
    /// Rules in scope whose runner is visible but one of whose criteria fails, by the first one that fails.
    pub not_matched: ByCriterion,
    /// Rules in scope whose runner is not visible at their scope.
    pub runner_not_visible: u32,
    /// Rules whose scope is neither the environment's group nor one of its ancestors.
    pub out_of_scope: u32,
}

impl Tally {
    /// Every rule counted: equals the number of rules in the index.
    pub fn total(&self) -> usize {
        self.won as usize
            + self.outranked.total()
            + self.not_matched.total()
            + self.runner_not_visible as usize
            + self.out_of_scope as usize
    }
}

/// Counts by the precedence step at which a rule ranks below the winner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ByStep {
    /// The winner's scope is deeper.
    pub deeper_scope: u32,
    /// Same scope; the winner sets more criteria.
    pub more_criteria: u32,
    /// Same scope and criteria count; the winner has the higher priority.
    pub higher_priority: u32,
    /// Same scope, criteria count and priority; the winner's rule id sorts first.
    pub rule_id: u32,
}

impl ByStep {
    /// The sum of the counts.
    pub fn total(&self) -> usize {
        [
            self.deeper_scope,
            self.more_criteria,
            self.higher_priority,
            self.rule_id,
        ]
        .iter()
        .map(|&n| n as usize)
        .sum()
    }
}

/// Counts by the first criterion that fails, in the order [`crate::Criteria::check`] checks them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ByCriterion {
    /// `env_type` differs.
    pub env_type: u32,
    /// `env_path` glob does not match.
    pub env_path: u32,
    /// A label is missing or has another value.
    pub labels: u32,
    /// A tag is missing.
    pub tags: u32,
}

impl ByCriterion {
    /// The sum of the counts.
    pub fn total(&self) -> usize {
        [self.env_type, self.env_path, self.labels, self.tags]
            .iter()
            .map(|&n| n as usize)
            .sum()
    }
}

/// The rule a [`RuleIndex`] picked for an environment, and why it won.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pick<'a> {
    /// The winning rule: in scope, runner visible, every criterion holds, first by precedence.
    pub rule: &'a RunnerRule,
    /// Its scope's depth (0 for the root): no matching rule is deeper.
    pub scope_depth: usize,
    /// How many criteria it sets: no matching rule at its scope sets more.
    pub criteria_count: usize,
    /// What happened to every other rule.
    pub tally: Tally,
}

impl Pick<'_> {
    /// The runner the winning rule picks.
    pub fn runner_id(&self) -> &RunnerId {
        &self.rule.runner_id
    }

    /// Why the rule won, in the precedence's own words: no matching rule is in a deeper
    /// scope, none at its scope sets more criteria, then its priority and id.
    pub fn why(&self) -> String {
        let scope = if self.rule.scope.is_root() {
            "(root)"
        } else {
            self.rule.scope.as_str()
        };
        let outranked = &self.tally.outranked;
        format!(
            "rule `{}` in `{scope}` (depth {}) is the deepest matching scope, sets {} criteria \
             and has priority {}; it outranks {} rules in shallower scopes, {} with fewer criteria, \
             {} with a lower priority and {} by rule id",
            self.rule.id,
            self.scope_depth,
            self.criteria_count,
            self.rule.priority,
            outranked.deeper_scope,
            outranked.more_criteria,
            outranked.higher_priority,
            outranked.rule_id,
        )
    }
}

/// No rule in a [`RuleIndex`] matched an environment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("no runner rule matches environment `{environment}`; scopes searched: {}", display_scopes(.scopes_searched))]
pub struct NoRuleMatched {
    /// The environment that found no runner.
    pub environment: String,
    /// The scopes searched, deepest first, ending with the root.
    pub scopes_searched: Vec<GroupPath>,
    /// Why each rule did not match (all counts exact: nothing is outranked).
    pub tally: Tally,
}
