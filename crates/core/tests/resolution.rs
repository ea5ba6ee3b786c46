//! Rule resolution: the one precedence, its explanation, and its properties.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use sortie_core::rule::{precedence, Verdict};
use sortie_core::{resolve, Criteria, EnvFacts, EnvPath, GroupPath, RunnerId, RunnerRule};

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
    assert_eq!(verdict("gold"), Verdict::Won);
    assert!(
        matches!(verdict("shared"), Verdict::Lost { to, because } if to == "gold" && because.contains("deeper scope"))
    );
    assert!(
        matches!(verdict("dev-only"), Verdict::NotMatched { reason } if reason.contains("env_type"))
    );
    assert!(
        matches!(verdict("needs-gpu"), Verdict::NotMatched { reason } if reason.contains("gpu"))
    );
    assert!(
        matches!(verdict("eu-only"), Verdict::NotMatched { reason } if reason.contains("env_path"))
    );
    assert_eq!(verdict("other-org"), Verdict::OutOfScope);
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
        .any(|c| c.rule_id == "bad" && c.verdict == Verdict::RunnerNotVisible));
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
