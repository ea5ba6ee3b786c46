//! A compiled rule index: the one precedence of [`crate::rule::resolve`], fast.
//!
//! [`RuleIndex::compile`] does, once per rule set, everything that does not
//! depend on the environment: it computes each rule's precedence key, compiles
//! its `env_path` glob, and files it in a bucket by scope and `env_type`, each
//! bucket sorted by precedence. [`RuleIndex::resolve`] then visits only the
//! buckets of the environment's group and its ancestors, deepest first, and in
//! each only the rules with the environment's `env_type` or none, merged in
//! precedence order. The first rule whose remaining criteria (`env_path`,
//! labels, tags) hold wins; the rules it outranks are counted, never checked
//! or formatted.
//!
//! [`crate::rule::resolve`] stays the reference: the index picks the same rule
//! (property-tested), and [`RuleIndex::explain`] gives its full explanation.
//!
//! Split by concept: the index and its resolution here, what it answers (the
//! [`Pick`] or [`NoRuleMatched`], each with its [`Tally`]) in `answer`, and its
//! look-up tables' hasher in `fx`.

mod answer;
mod fx;

pub use answer::{ByCriterion, ByStep, NoRuleMatched, Pick, Tally};
use fx::FxMap;

use std::cmp::Ordering;
use std::ops::Range;

use crate::environment::EnvFacts;
use crate::rule::{resolve, NoRunnerMatched, Resolution, RunnerRule};

/// No glob on a rule.
const NO_GLOB: u32 = u32::MAX;

/// One rule that can be a candidate: its precedence keys and compiled criteria.
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Index of the rule in [`RuleIndex::rules`] (the order it was given in).
    rule: u32,
    /// How many criteria it sets.
    count: u32,
    /// Its priority.
    priority: i32,
    /// Its `env_path` glob in [`RuleIndex::globs`], or [`NO_GLOB`].
    glob: u32,
    /// Its precedence within the scope packed in one number, smaller first:
    /// fewer criteria (saturated at 65,535), lower priority, then the first 10
    /// bytes of its id. Equal keys need the whole ids compared.
    key: u128,
}

/// The rules of one scope.
#[derive(Debug, Clone, Default)]
struct ScopeSlot {
    /// Rules without `env_type`, in [`RuleIndex::entries`], by precedence.
    untyped: Range<u32>,
    /// Rules with an `env_type` (by interned type id, ascending), each by precedence.
    typed: Vec<(u32, Range<u32>)>,
    /// Rules whose runner is visible at the scope.
    visible: u32,
    /// Rules whose runner is not visible at the scope: never candidates.
    invisible: u32,
}

impl ScopeSlot {
    fn typed(&self, env_type: Option<u32>) -> Range<u32> {
        env_type
            .and_then(|t| {
                self.typed
                    .binary_search_by_key(&t, |(id, _)| *id)
                    .ok()
                    .map(|i| self.typed[i].1.clone())
            })
            .unwrap_or(0..0)
    }
}

/// A rule set compiled for fast resolution; see the [module docs](self).
///
/// Build it once per rule set with [`RuleIndex::compile`], then call
/// [`RuleIndex::resolve`] for each environment.
#[derive(Debug, Clone)]
pub struct RuleIndex {
    rules: Vec<RunnerRule>,
    entries: Vec<Entry>,
    /// Distinct `env_path` globs; `None` for one that does not compile (it never matches).
    globs: Vec<Option<glob::Pattern>>,
    scopes: FxMap<String, ScopeSlot>,
    env_types: FxMap<String, u32>,
}

#[derive(Debug, Clone, Copy)]
enum Failed {
    EnvPath,
    Labels,
    Tags,
}

/// What one resolution learns about the environment as it goes.
struct Probe<'e> {
    env: &'e EnvFacts<'e>,
    /// The environment's full path, for the globs.
    path: String,
    /// Per glob: 0 unknown, 1 matches, 2 does not.
    glob_memo: Vec<u8>,
}

impl RuleIndex {
    /// Compiles a rule set. Rules are kept in the order given; the order does
    /// not change any resolution.
    ///
    /// # Panics
    ///
    /// With more than `u32::MAX` rules.
    pub fn compile(rules: Vec<RunnerRule>) -> Self {
        assert!(
            u32::try_from(rules.len()).is_ok(),
            "too many rules for one index"
        );
        let mut index = Self {
            rules: Vec::new(),
            entries: Vec::new(),
            globs: Vec::new(),
            scopes: FxMap::default(),
            env_types: FxMap::default(),
        };
        let mut glob_ids: FxMap<&str, u32> = FxMap::default();
        // Scopes, numbered as first seen, and how many rules in each name an
        // invisible runner.
        let mut slot_names: Vec<&str> = Vec::new();
        let mut slot_of: FxMap<&str, u32> = FxMap::default();
        let mut invisible: Vec<u32> = Vec::new();
        let mut entries: Vec<Entry> = Vec::with_capacity(rules.len());
        // Buckets, numbered as first seen: (slot, env_type + 1 or 0) → number;
        // each bucket's (slot, env_type + 1 or 0) and size; each entry's bucket.
        let mut bucket_of: FxMap<(u32, Option<&str>), u32> = FxMap::default();
        let mut buckets: Vec<(u32, u32, u32)> = Vec::new();
        let mut entry_bucket: Vec<u32> = Vec::with_capacity(rules.len());
        // Rules usually come grouped by scope (one stored rule set per scope).
        let mut last: (&str, u32) = ("", u32::MAX);
        for (k, rule) in rules.iter().enumerate() {
            let scope = rule.scope.as_str();
            let slot = if last.1 != u32::MAX && last.0 == scope {
                last.1
            } else {
                let slot = *slot_of.entry(scope).or_insert_with(|| {
                    slot_names.push(scope);
                    invisible.push(0);
                    (slot_names.len() - 1) as u32
                });
                last = (scope, slot);
                slot
            };
            if !rule.runner_id.is_visible_at(&rule.scope) {
                invisible[slot as usize] += 1;
                continue;
            }
            let c = &rule.criteria;
            let glob = match &c.env_path {
                None => NO_GLOB,
                Some(g) => *glob_ids.entry(g.as_str()).or_insert_with(|| {
                    index.globs.push(glob::Pattern::new(g).ok());
                    (index.globs.len() - 1) as u32
                }),
            };
            // One look-up per rule; the env_type is interned once per new bucket.
            let b = match bucket_of.get(&(slot, c.env_type.as_deref())) {
                Some(&b) => b,
                None => {
                    let bucket = match &c.env_type {
                        None => 0,
                        Some(t) => {
                            let next = index.env_types.len() as u32;
                            1 + *index.env_types.entry(t.clone()).or_insert(next)
                        }
                    };
                    buckets.push((slot, bucket, 0));
                    let b = (buckets.len() - 1) as u32;
                    bucket_of.insert((slot, c.env_type.as_deref()), b);
                    b
                }
            };
            buckets[b as usize].2 += 1;
            entry_bucket.push(b);
            let count = c.count();
            entries.push(Entry {
                rule: k as u32,
                count: count as u32,
                priority: rule.priority,
                glob,
                key: precedence_key(count, rule.priority, &rule.id),
            });
        }
        // A counting sort into buckets, then each (small) bucket by precedence.
        let mut slots: Vec<ScopeSlot> = invisible
            .iter()
            .map(|&n| ScopeSlot {
                invisible: n,
                ..ScopeSlot::default()
            })
            .collect();
        let mut next = Vec::with_capacity(buckets.len());
        let mut start = 0u32;
        for &(slot, bucket, size) in &buckets {
            next.push(start);
            let range = start..start + size;
            start += size;
            let s = &mut slots[slot as usize];
            s.visible += size;
            if bucket == 0 {
                s.untyped = range;
            } else {
                s.typed.push((bucket - 1, range));
            }
        }
        let mut sorted = entries.clone();
        for (e, &b) in entries.iter().zip(&entry_bucket) {
            sorted[next[b as usize] as usize] = *e;
            next[b as usize] += 1;
        }
        for s in &mut slots {
            s.typed.sort_unstable_by_key(|(t, _)| *t);
            for range in std::iter::once(&s.untyped).chain(s.typed.iter().map(|(_, r)| r)) {
                let bucket = &mut sorted[range.start as usize..range.end as usize];
                bucket.sort_unstable_by_key(|e| e.key);
                // Equal keys (rare): by the whole ids, then the order given.
                for run in bucket.chunk_by_mut(|a, b| a.key == b.key) {
                    if run.len() > 1 {
                        run.sort_unstable_by(|a, b| by_precedence(&rules, a, b));
                    }
                }
            }
        }
        index.entries = sorted;
        index.scopes = slot_names
            .iter()
            .zip(slots)
            .map(|(name, slot)| ((*name).to_string(), slot))
            .collect();
        index.rules = rules;
        index
    }

    /// Compiles a copy of a slice of rules; see [`RuleIndex::compile`].
    pub fn from_slice(rules: &[RunnerRule]) -> Self {
        Self::compile(rules.to_vec())
    }

    /// The rules, in the order given to [`RuleIndex::compile`].
    pub fn rules(&self) -> &[RunnerRule] {
        &self.rules
    }

    /// How many rules the index holds.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// True when the index holds no rule.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Picks the runner rule for an environment by the one precedence: the same
    /// rule as [`resolve`] over the same rules, with counts instead of an
    /// explanation.
    pub fn resolve<'a>(&'a self, env: &EnvFacts<'_>) -> Result<Pick<'a>, NoRuleMatched> {
        let env_type = self.env_types.get(env.env_type).copied();
        let mut probe = Probe {
            env,
            path: env.path.to_string(),
            glob_memo: vec![0; self.globs.len()],
        };
        let mut tally = Tally::default();
        let mut in_scope = 0usize;
        let mut winner: Option<&Entry> = None;
        let mut scope_depth = 0usize;
        let group = env.path.group().as_str();
        let mut scope = group;
        let mut depth = env.path.group().depth();
        loop {
            if let Some(slot) = self.scopes.get(scope) {
                in_scope += (slot.visible + slot.invisible) as usize;
                tally.runner_not_visible += slot.invisible;
                let typed = slot.typed(env_type);
                let untyped = slot.untyped.clone();
                tally.not_matched.env_type +=
                    slot.visible - typed.len() as u32 - untyped.len() as u32;
                if winner.is_some() {
                    tally.outranked.deeper_scope += (typed.len() + untyped.len()) as u32;
                } else if let Some(w) = self.walk(typed, untyped, &mut probe, &mut tally) {
                    winner = Some(w);
                    scope_depth = depth;
                }
            }
            if scope.is_empty() {
                break;
            }
            scope = scope.rfind('/').map_or("", |i| &scope[..i]);
            depth -= 1;
        }
        tally.out_of_scope = (self.rules.len() - in_scope) as u32;
        match winner {
            Some(w) => {
                tally.won = 1;
                Ok(Pick {
                    rule: &self.rules[w.rule as usize],
                    scope_depth,
                    criteria_count: w.count as usize,
                    tally,
                })
            }
            None => Err(NoRuleMatched {
                environment: probe.path,
                scopes_searched: env.path.group().self_and_ancestors(),
                tally,
            }),
        }
    }

    /// Resolves with the full per-rule explanation: exactly [`resolve`] over the
    /// index's rules (slower; for showing a user why).
    pub fn explain(&self, env: &EnvFacts<'_>) -> Result<Resolution, NoRunnerMatched> {
        resolve(env, &self.rules)
    }

    /// Merges one scope's two buckets in precedence order and returns the first
    /// rule that matches, counting the rules checked before it and ranked after it.
    fn walk(
        &self,
        typed: Range<u32>,
        untyped: Range<u32>,
        probe: &mut Probe<'_>,
        tally: &mut Tally,
    ) -> Option<&Entry> {
        let (mut i, mut j) = (typed.start as usize, untyped.start as usize);
        let (ie, je) = (typed.end as usize, untyped.end as usize);
        loop {
            let take_typed = if i < ie && j < je {
                by_precedence(&self.rules, &self.entries[i], &self.entries[j]) == Ordering::Less
            } else if i < ie {
                true
            } else if j < je {
                false
            } else {
                return None;
            };
            let at = if take_typed { &mut i } else { &mut j };
            let e = &self.entries[*at];
            *at += 1;
            match self.check(e, probe) {
                Ok(()) => {
                    count_outranked(e, &self.entries[i..ie], tally);
                    count_outranked(e, &self.entries[j..je], tally);
                    return Some(e);
                }
                Err(Failed::EnvPath) => tally.not_matched.env_path += 1,
                Err(Failed::Labels) => tally.not_matched.labels += 1,
                Err(Failed::Tags) => tally.not_matched.tags += 1,
            }
        }
    }

    /// The criteria other than `env_type` (the bucket already holds it), in [`crate::Criteria::check`]'s order.
    #[inline]
    fn check(&self, e: &Entry, probe: &mut Probe<'_>) -> Result<(), Failed> {
        if e.glob != NO_GLOB {
            let memo = &mut probe.glob_memo[e.glob as usize];
            if *memo == 0 {
                let options = glob::MatchOptions {
                    case_sensitive: true,
                    require_literal_separator: true,
                    require_literal_leading_dot: false,
                };
                let hit = self.globs[e.glob as usize]
                    .as_ref()
                    .is_some_and(|p| p.matches_with(&probe.path, options));
                *memo = if hit { 1 } else { 2 };
            }
            if *memo != 1 {
                return Err(Failed::EnvPath);
            }
        }
        let c = &self.rules[e.rule as usize].criteria;
        if !c
            .labels
            .iter()
            .all(|(k, v)| probe.env.labels.get(k) == Some(v))
        {
            return Err(Failed::Labels);
        }
        if !c.tags.iter().all(|t| probe.env.tags.contains(t)) {
            return Err(Failed::Tags);
        }
        Ok(())
    }
}

/// The precedence within one scope: more criteria, higher priority, lower id,
/// then the order given (as [`resolve`]'s stable sort).
#[inline]
fn by_precedence(rules: &[RunnerRule], a: &Entry, b: &Entry) -> Ordering {
    a.key
        .cmp(&b.key)
        .then_with(|| b.count.cmp(&a.count))
        .then_with(|| rules[a.rule as usize].id.cmp(&rules[b.rule as usize].id))
        .then(a.rule.cmp(&b.rule))
}

/// An [`Entry::key`]: ordered as [`by_precedence`] orders, except where it ties.
fn precedence_key(count: usize, priority: i32, id: &str) -> u128 {
    let count = u16::MAX - u16::try_from(count).unwrap_or(u16::MAX);
    let priority = (i64::from(i32::MAX) - i64::from(priority)) as u32;
    let mut bytes = [0u8; 16];
    bytes[0..2].copy_from_slice(&count.to_be_bytes());
    bytes[2..6].copy_from_slice(&priority.to_be_bytes());
    let n = id.len().min(10);
    bytes[6..6 + n].copy_from_slice(&id.as_bytes()[..n]);
    u128::from_be_bytes(bytes)
}

/// Counts the rules of `rest` (one bucket's tail, all ranked after `winner` in
/// the same scope) by the step that ranks them below it.
fn count_outranked(winner: &Entry, rest: &[Entry], tally: &mut Tally) {
    let same_count = rest.partition_point(|e| e.count == winner.count);
    let same_priority = rest[..same_count].partition_point(|e| e.priority == winner.priority);
    tally.outranked.more_criteria += (rest.len() - same_count) as u32;
    tally.outranked.higher_priority += (same_count - same_priority) as u32;
    tally.outranked.rule_id += same_priority as u32;
}
