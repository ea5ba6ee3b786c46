//! Rule resolution: the one precedence, its explanation, and its properties.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use sortie_core::rule::{precedence, RuleVerdict};
use sortie_core::rule_index::Tally;
use sortie_core::{
    resolve, Criteria, EnvFacts, EnvPath, GroupPath, RuleIndex, RunnerId, RunnerRule,
};

fn rule(id: &str, scope: &str, runner: &str) -> RunnerRule {
    RunnerRule {
        id: id.into(),
        scope: GroupPath::parse(scope).unwrap(),
        runner_id: RunnerId::parse(runner).unwrap(),
        criteria: Criteria::default(),
        priority: 0,
    }
}

#[derive(Debug, Clone)]
struct Env {
    path: EnvPath,
    env_type: String,
    labels: BTreeMap<String, String>,
    tags: BTreeSet<String>,
}

impl Env {
    fn new(path: &str, env_type: &str) -> Self {
        Self {
            path: EnvPath::parse(path).unwrap(),
            env_type: env_type.into(),
            labels: BTreeMap::new(),
            tags: BTreeSet::new(),
        }
    }
    fn facts(&self) -> EnvFacts<'_> {
        EnvFacts {
            path: &self.path,
            env_type: &self.env_type,
            labels: &self.labels,
            tags: &self.tags,
        }
    }
}

#[test]
fn same_group_beats_ancestor_beats_shared() {
    let env = Env::new("acme/payments/prod", "production");
    let rules = vec![
        rule("shared", "", "fargate-shared"),
        rule("org", "acme", "acme/org-runner"),
        rule("team", "acme/payments", "acme/payments/team-runner"),
    ];
    let r = resolve(&env.facts(), &rules).unwrap();
    assert_eq!(r.rule.id, "team");
    assert_eq!(r.runner_id().to_string(), "acme/payments/team-runner");
    let r = resolve(&env.facts(), &rules[..2]).unwrap();
    assert_eq!(r.rule.id, "org");
    let r = resolve(&env.facts(), &rules[..1]).unwrap();
    assert_eq!(r.rule.id, "shared");
}

#[test]
fn more_criteria_then_priority_then_id_break_ties_within_a_scope() {
    let env = Env::new("acme/payments/prod", "production");
    let mut typed = rule("typed", "acme", "acme/a");
    typed.criteria.env_type = Some("production".into());
    let mut high = rule("high", "acme", "acme/b");
    high.priority = 10;
    let r = resolve(&env.facts(), &[high.clone(), typed.clone()]).unwrap();
    assert_eq!(r.rule.id, "typed", "criteria count beats priority");
    let low = rule("low", "acme", "acme/c");
    let r = resolve(&env.facts(), &[low.clone(), high.clone()]).unwrap();
    assert_eq!(r.rule.id, "high");
    let r = resolve(
        &env.facts(),
        &[rule("b", "acme", "acme/x"), rule("a", "acme", "acme/y")],
    )
    .unwrap();
    assert_eq!(r.rule.id, "a", "id ascending breaks the last tie");
}

#[test]
fn the_explanation_says_why_each_rule_lost_or_did_not_match() {
    let mut env = Env::new("acme/payments/prod", "production");
    env.labels.insert("tier".into(), "gold".into());
    env.tags.insert("spot".into());
    let mut wrong_type = rule("dev-only", "acme/payments", "acme/dev");
    wrong_type.criteria.env_type = Some("development".into());
    let mut labelled = rule("gold", "acme", "acme/gold");
    labelled
        .criteria
        .labels
        .insert("tier".into(), "gold".into());
    let mut tagged = rule("needs-gpu", "acme", "acme/gpu");
    tagged.criteria.tags.insert("gpu".into());
    let mut path_glob = rule("eu-only", "acme", "acme/eu");
    path_glob.criteria.env_path = Some("acme/*/eu-*".into());
    let rules = vec![
        rule("shared", "", "fargate-shared"),
        wrong_type,
        labelled,
        tagged,
        path_glob,
        rule("other-org", "globex", "globex/r"),
    ];
    let r = resolve(&env.facts(), &rules).unwrap();
    assert_eq!(r.rule.id, "gold");
    let verdict = |id: &str| {
        r.explanation
            .iter()
            .find(|c| c.rule_id == id)
            .unwrap()
            .verdict
            .clone()
    };
    assert_eq!(verdict("gold"), RuleVerdict::Won);
    assert!(
        matches!(verdict("shared"), RuleVerdict::Lost { to, because } if to == "gold" && because.contains("deeper scope"))
    );
    assert!(
        matches!(verdict("dev-only"), RuleVerdict::NotMatched { reason } if reason.contains("env_type"))
    );
    assert!(
        matches!(verdict("needs-gpu"), RuleVerdict::NotMatched { reason } if reason.contains("gpu"))
    );
    assert!(
        matches!(verdict("eu-only"), RuleVerdict::NotMatched { reason } if reason.contains("env_path"))
    );
    assert_eq!(verdict("other-org"), RuleVerdict::OutOfScope);
    assert_eq!(r.explanation.len(), rules.len(), "every rule is explained");
}

#[test]
fn no_match_names_the_environment_and_the_scopes_searched() {
    let env = Env::new("acme/payments/prod", "production");
    let mut dev = rule("dev", "acme", "acme/dev");
    dev.criteria.env_type = Some("development".into());
    let err = resolve(&env.facts(), &[dev]).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("acme/payments/prod"), "{msg}");
    assert!(msg.contains("acme/payments, acme, (root)"), "{msg}");
    assert_eq!(err.explanation.len(), 1);
}

#[test]
fn env_path_globs_keep_star_within_a_segment() {
    assert!(sortie_core::rule::env_path_matches(
        "acme/*/prod",
        "acme/payments/prod"
    ));
    assert!(!sortie_core::rule::env_path_matches(
        "acme/*/prod",
        "acme/payments/eu/prod"
    ));
    assert!(sortie_core::rule::env_path_matches(
        "acme/**/prod",
        "acme/payments/eu/prod"
    ));
}

#[test]
fn a_stored_rule_naming_an_invisible_runner_never_wins() {
    let env = Env::new("acme/payments/prod", "production");
    let bad = rule("bad", "acme/payments", "globex/stolen");
    assert!(bad.validate().is_err());
    let r = resolve(&env.facts(), &[bad, rule("ok", "", "fargate-shared")]).unwrap();
    assert_eq!(r.rule.id, "ok");
    assert!(r
        .explanation
        .iter()
        .any(|c| c.rule_id == "bad" && c.verdict == RuleVerdict::RunnerNotVisible));
}

// ---- properties ----

const GROUPS: &[&str] = &[
    "",
    "acme",
    "acme/payments",
    "acme/payments/eu",
    "acme/web",
    "globex",
];
const ENVS: &[&str] = &[
    "acme/payments/eu/prod",
    "acme/payments/prod",
    "acme/web/dev",
    "globex/prod",
];

fn arb_rule() -> impl Strategy<Value = RunnerRule> {
    (
        0..GROUPS.len(),
        0..GROUPS.len(),
        proptest::option::of(prop::sample::select(vec!["production", "development"])),
        proptest::option::of(prop::sample::select(vec![
            "acme/**",
            "*/prod",
            "acme/*/prod",
            "globex/*",
        ])),
        prop::collection::btree_map(
            prop::sample::select(vec!["tier", "team"]),
            prop::sample::select(vec!["gold", "blue"]),
            0..2,
        ),
        prop::collection::btree_set(prop::sample::select(vec!["spot", "gpu"]), 0..2),
        -3i32..3,
    )
        .prop_map(
            |(scope, owner, env_type, env_path, labels, tags, priority)| {
                let scope = GroupPath::parse(GROUPS[scope]).unwrap();
                // Pick an owner visible at the scope: the scope itself or one of its ancestors.
                let chain = scope.self_and_ancestors();
                let owner = chain[owner % chain.len()].clone();
                RunnerRule {
                    id: String::new(),
                    runner_id: RunnerId::new(owner, "runner").unwrap(),
                    scope,
                    criteria: Criteria {
                        env_type: env_type.map(Into::into),
                        env_path: env_path.map(Into::into),
                        labels: labels
                            .into_iter()
                            .map(|(k, v)| (k.into(), v.into()))
                            .collect(),
                        tags: tags.into_iter().map(Into::into).collect(),
                    },
                    priority,
                }
            },
        )
}

fn arb_rules() -> impl Strategy<Value = Vec<RunnerRule>> {
    prop::collection::vec(arb_rule(), 0..12).prop_map(|mut rules| {
        for (i, r) in rules.iter_mut().enumerate() {
            r.id = format!("r{:02}", (i * 7) % 13);
        }
        // Ids are unique within a scope, as the store enforces.
        let mut seen = BTreeSet::new();
        rules.retain(|r| seen.insert((r.scope.clone(), r.id.clone())));
        rules
    })
}

fn arb_env() -> impl Strategy<Value = Env> {
    (
        prop::sample::select(ENVS.to_vec()),
        prop::sample::select(vec!["production", "development"]),
        prop::collection::btree_map(
            prop::sample::select(vec!["tier", "team"]),
            prop::sample::select(vec!["gold", "blue"]),
            0..3,
        ),
        prop::collection::btree_set(prop::sample::select(vec!["spot", "gpu"]), 0..3),
    )
        .prop_map(|(path, t, labels, tags)| {
            let mut env = Env::new(path, t);
            env.labels = labels
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect();
            env.tags = tags.into_iter().map(Into::into).collect();
            env
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn resolution_is_deterministic_and_independent_of_rule_order(env in arb_env(), rules in arb_rules(), seed in any::<u64>()) {
        let first = resolve(&env.facts(), &rules);
        let again = resolve(&env.facts(), &rules);
        prop_assert_eq!(&first, &again);
        let mut shuffled = rules.clone();
        // A seeded Fisher–Yates shuffle, so a failure reproduces.
        let mut s = seed;
        for i in (1..shuffled.len()).rev() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            shuffled.swap(i, (s >> 33) as usize % (i + 1));
        }
        let other = resolve(&env.facts(), &shuffled);
        match (&first, &other) {
            (Ok(a), Ok(b)) => prop_assert_eq!(&a.rule, &b.rule),
            (Err(a), Err(b)) => prop_assert_eq!(&a.scopes_searched, &b.scopes_searched),
            _ => prop_assert!(false, "order changed whether a rule matched"),
        }
    }

    #[test]
    fn a_deeper_matching_scope_always_beats_a_shallower_one(env in arb_env(), rules in arb_rules()) {
        if let Ok(r) = resolve(&env.facts(), &rules) {
            for other in &rules {
                let matches = other.scope.contains(env.path.group()) && other.criteria.check(&env.facts()).is_ok();
                if matches {
                    prop_assert!(other.scope.depth() <= r.rule.scope.depth(),
                        "rule {} at {} matched but lost to shallower {} at {}", other.id, other.scope, r.rule.id, r.rule.scope);
                    // And the winner is first by the precedence among all matches.
                    prop_assert!(precedence(&r.rule, other) != std::cmp::Ordering::Greater);
                }
            }
        } else {
            for other in &rules {
                prop_assert!(!(other.scope.contains(env.path.group()) && other.criteria.check(&env.facts()).is_ok()));
            }
        }
    }

    #[test]
    fn a_rule_never_names_a_runner_invisible_at_its_scope(scope in 0..GROUPS.len(), owner in 0..GROUPS.len(), env in arb_env(), rules in arb_rules()) {
        let scope = GroupPath::parse(GROUPS[scope]).unwrap();
        let owner = GroupPath::parse(GROUPS[owner]).unwrap();
        let candidate = RunnerRule { id: "candidate".into(), scope: scope.clone(), runner_id: RunnerId::new(owner.clone(), "r").unwrap(), criteria: Criteria::default(), priority: 0 };
        let visible = owner.contains(&scope);
        prop_assert_eq!(candidate.validate().is_ok(), visible, "owner {} scope {}", owner, scope);
        // Whatever rules are stored, the winner's runner is visible at the environment's group.
        let mut all = rules.clone();
        all.push(candidate);
        if let Ok(r) = resolve(&env.facts(), &all) {
            prop_assert!(r.runner_id().is_visible_at(env.path.group()));
            prop_assert!(r.runner_id().is_visible_at(&r.rule.scope));
        }
    }
}

// ---- the compiled index agrees with `resolve` ----

/// Rules with everything `arb_rule` has, plus what a corrupted or adversarial
/// store could hold: runners invisible at their scope, a glob that does not
/// compile, equal ids in one scope, deeper groups, and more rules.
fn arb_wild_rules() -> impl Strategy<Value = Vec<RunnerRule>> {
    const WILD_GROUPS: &[&str] = &[
        "",
        "acme",
        "acme/payments",
        "acme/payments/eu",
        "acme/payments/eu/de",
        "acme/web",
        "globex",
        "globex/prod",
    ];
    let wild_rule = (
        arb_rule(),
        0..WILD_GROUPS.len(),
        0..WILD_GROUPS.len(),
        prop::sample::select(vec![
            None,
            Some("acme/["),
            Some("**"),
            Some("acme/payments/*/*"),
        ]),
        0..5u8,
    )
        .prop_map(|(mut r, scope, owner, glob, id)| {
            r.scope = GroupPath::parse(WILD_GROUPS[scope]).unwrap();
            // Any owner at all: often invisible at the scope.
            r.runner_id =
                RunnerId::new(GroupPath::parse(WILD_GROUPS[owner]).unwrap(), "runner").unwrap();
            if glob.is_some() {
                r.criteria.env_path = glob.map(Into::into);
            }
            r.id = format!("w{id}");
            r
        });
    prop::collection::vec(prop_oneof![arb_rule(), wild_rule], 0..40).prop_map(|mut rules| {
        for (i, r) in rules.iter_mut().enumerate() {
            if r.id.is_empty() {
                r.id = format!("r{:02}", (i * 7) % 13);
            }
        }
        rules
    })
}

fn arb_wild_env() -> impl Strategy<Value = Env> {
    (
        arb_env(),
        prop::sample::select(vec![
            None,
            Some("acme/payments/eu/de/prod"),
            Some("globex/prod/db"),
            Some("acme/x"),
        ]),
    )
        .prop_map(|(mut env, path)| {
            if let Some(path) = path {
                env.path = EnvPath::parse(path).unwrap();
            }
            env
        })
}

/// How many rules of an explanation have each verdict, in the index's terms.
fn tally_of(explanation: &[sortie_core::Considered]) -> Tally {
    let mut t = Tally::default();
    for c in explanation {
        match &c.verdict {
            RuleVerdict::Won => t.won += 1,
            RuleVerdict::Lost { because, .. } => {
                let s = &mut t.outranked;
                if because.starts_with("deeper scope") {
                    s.deeper_scope += 1
                } else if because.starts_with("more criteria") {
                    s.more_criteria += 1
                } else if because.starts_with("higher priority") {
                    s.higher_priority += 1
                } else {
                    s.rule_id += 1
                }
            }
            RuleVerdict::OutOfScope => t.out_of_scope += 1,
            RuleVerdict::RunnerNotVisible => t.runner_not_visible += 1,
            RuleVerdict::NotMatched { reason } => {
                let n = &mut t.not_matched;
                if reason.starts_with("env_type") {
                    n.env_type += 1
                } else if reason.starts_with("env_path") {
                    n.env_path += 1
                } else if reason.starts_with("label") {
                    n.labels += 1
                } else {
                    n.tags += 1
                }
            }
        }
    }
    t
}

/// The index picks what `resolve` picks, and its counts agree with `resolve`'s explanation.
fn index_agrees(env: &Env, rules: &[RunnerRule]) -> Result<(), TestCaseError> {
    let index = RuleIndex::from_slice(rules);
    let oracle = resolve(&env.facts(), rules);
    prop_assert_eq!(&index.explain(&env.facts()), &oracle);
    match (&oracle, index.resolve(&env.facts())) {
        (Ok(old), Ok(pick)) => {
            prop_assert_eq!(&pick.rule.id, &old.rule.id);
            prop_assert_eq!(&pick.rule.scope, &old.rule.scope);
            prop_assert_eq!(pick.rule, &old.rule);
            prop_assert_eq!(pick.scope_depth, old.rule.scope.depth());
            prop_assert_eq!(pick.criteria_count, old.rule.criteria.count());
            let (t, o) = (pick.tally, tally_of(&old.explanation));
            prop_assert_eq!(t.total(), rules.len(), "{:?}", t);
            prop_assert_eq!(t.won, 1);
            prop_assert_eq!(t.out_of_scope, o.out_of_scope);
            prop_assert_eq!(t.runner_not_visible, o.runner_not_visible);
            prop_assert_eq!(t.not_matched.env_type, o.not_matched.env_type);
            // Ranked below the winner = lost, or not matched on a criterion never checked.
            prop_assert_eq!(
                t.outranked.total() + t.not_matched.total(),
                o.outranked.total() + o.not_matched.total()
            );
            prop_assert!(t.not_matched.env_path <= o.not_matched.env_path);
            prop_assert!(t.not_matched.labels <= o.not_matched.labels);
            prop_assert!(t.not_matched.tags <= o.not_matched.tags);
            prop_assert!(o.outranked.deeper_scope <= t.outranked.deeper_scope);
            prop_assert!(o.outranked.more_criteria <= t.outranked.more_criteria);
            prop_assert!(o.outranked.higher_priority <= t.outranked.higher_priority);
            prop_assert!(o.outranked.rule_id <= t.outranked.rule_id);
        }
        (Err(old), Err(err)) => {
            prop_assert_eq!(err.to_string(), old.to_string());
            prop_assert_eq!(&err.environment, &old.environment);
            prop_assert_eq!(&err.scopes_searched, &old.scopes_searched);
            // Nothing won, so nothing was skipped: every count is exact.
            prop_assert_eq!(err.tally, tally_of(&old.explanation));
            prop_assert_eq!(err.tally.total(), rules.len());
        }
        (old, new) => prop_assert!(false, "resolve {:?} but index {:?}", old, new),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_index_picks_the_same_rule_as_resolve(env in arb_env(), rules in arb_rules()) {
        index_agrees(&env, &rules)?;
    }

    #[test]
    fn the_index_agrees_with_resolve_on_wild_rule_sets(env in arb_wild_env(), rules in arb_wild_rules(), seed in any::<u64>()) {
        index_agrees(&env, &rules)?;
        // And compiling the rules in another order picks the same rule.
        let mut shuffled = rules.clone();
        let mut s = seed;
        for i in (1..shuffled.len()).rev() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            shuffled.swap(i, (s >> 33) as usize % (i + 1));
        }
        let a = RuleIndex::from_slice(&rules);
        let b = RuleIndex::compile(shuffled);
        match (a.resolve(&env.facts()), b.resolve(&env.facts())) {
            (Ok(x), Ok(y)) => {
                prop_assert_eq!(&x.rule.id, &y.rule.id);
                prop_assert_eq!(&x.rule.scope, &y.rule.scope);
                // Equal ids in one scope are tied to the end, so the order given
                // breaks the tie (as in `resolve`) and may move a count between them.
                let unique: BTreeSet<_> = rules.iter().map(|r| (&r.scope, &r.id)).collect();
                if unique.len() == rules.len() {
                    prop_assert_eq!(x.tally, y.tally);
                }
            }
            (Err(x), Err(y)) => prop_assert_eq!(x, y),
            _ => prop_assert!(false, "order changed whether a rule matched"),
        }
    }
}

#[test]
fn the_index_explains_the_examples_above_as_resolve_does() {
    let mut env = Env::new("acme/payments/prod", "production");
    env.labels.insert("tier".into(), "gold".into());
    env.tags.insert("spot".into());
    let mut wrong_type = rule("dev-only", "acme/payments", "acme/dev");
    wrong_type.criteria.env_type = Some("development".into());
    let mut labelled = rule("gold", "acme", "acme/gold");
    labelled
        .criteria
        .labels
        .insert("tier".into(), "gold".into());
    let mut tagged = rule("needs-gpu", "acme", "acme/gpu");
    tagged.criteria.tags.insert("gpu".into());
    let rules = vec![
        rule("shared", "", "fargate-shared"),
        wrong_type,
        labelled,
        tagged,
        rule("other-org", "globex", "globex/r"),
        rule("bad", "acme/payments", "globex/stolen"),
    ];
    let index = RuleIndex::compile(rules.clone());
    let pick = index.resolve(&env.facts()).unwrap();
    assert_eq!(pick.rule.id, "gold");
    assert_eq!(pick.runner_id().to_string(), "acme/gold");
    assert_eq!((pick.scope_depth, pick.criteria_count), (1, 1));
    let t = pick.tally;
    assert_eq!(t.not_matched.env_type, 1, "dev-only: {t:?}");
    assert_eq!(
        (t.not_matched.tags, t.outranked.rule_id),
        (0, 1),
        "needs-gpu sets 1 criterion, as gold does, and sorts after it by id: never checked"
    );
    assert_eq!(t.outranked.deeper_scope, 1, "shared");
    assert_eq!((t.out_of_scope, t.runner_not_visible), (1, 1));
    assert_eq!(t.total(), rules.len());
    assert_eq!(index.explain(&env.facts()), resolve(&env.facts(), &rules));

    let mut dev = rule("dev", "acme", "acme/dev");
    dev.criteria.env_type = Some("development".into());
    let err = RuleIndex::compile(vec![dev])
        .resolve(&env.facts())
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("acme/payments/prod"), "{msg}");
    assert!(msg.contains("acme/payments, acme, (root)"), "{msg}");
    assert_eq!(err.tally.not_matched.env_type, 1);
    assert!(RuleIndex::compile(Vec::new())
        .resolve(&env.facts())
        .is_err());
}
