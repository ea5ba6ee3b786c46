use std::collections::{BTreeMap, BTreeSet};

use chrono::{TimeZone, Utc};
use proptest::prelude::*;

use super::*;
use crate::environment::{EnvSettings, RunnerLink};
use crate::names::{EnvPath, RunnerId};

fn env(env_type: &str, labels: &[(&str, &str)]) -> Environment {
    Environment {
        path: EnvPath::parse("acme/payments/prod").unwrap(),
        env_type: env_type.into(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        tags: BTreeSet::new(),
        runner: RunnerLink {
            runner_id: RunnerId::parse("acme/r").unwrap(),
            rule_id: "default".into(),
            linked_by: "admin".into(),
            linked_at: Utc.timestamp_opt(1_700_000_000, 0).unwrap(),
        },
        settings: EnvSettings::default(),
    }
}

fn set(modules: Vec<PolicyModule>) -> PolicySet {
    PolicySet {
        name: "tags".into(),
        description: None,
        modules,
        enforcement: Enforcement::Mandatory,
        criteria: None,
        on_unavailable: OnUnavailable::Fail,
    }
}

fn module(name: &str, rego: &str) -> PolicyModule {
    PolicyModule {
        name: name.into(),
        rego: rego.into(),
    }
}

#[test]
fn parses_yaml_with_defaults_and_refuses_unknown_fields() {
    let s = PolicySet::parse(
        "name: tags\nenforcement: review\nmodules:\n  - name: tags.rego\n    rego: |\n      package tags\n",
    )
    .unwrap();
    assert_eq!(s.enforcement, Enforcement::Review);
    assert_eq!(s.on_unavailable, OnUnavailable::Fail);
    assert!(s.criteria.is_none());
    let e = PolicySet::parse(
        "name: tags\nenforcement: review\nenforce: x\nmodules:\n  - name: a\n    rego: package a\n",
    )
    .unwrap_err();
    assert!(e.to_string().contains("enforce"), "{e}");
    let e = PolicySet::parse("name: tags\nenforcement: hard\nmodules: []\n").unwrap_err();
    assert!(e.to_string().contains("hard"), "{e}");
}

#[test]
fn validation_names_each_problem() {
    let mut s = set(vec![]);
    s.name = "bad name!".into();
    let problems = s.validate().unwrap_err();
    let paths: Vec<&str> = problems.iter().map(|p| p.path.as_str()).collect();
    assert!(paths.contains(&"name"), "{problems:?}");
    assert!(paths.contains(&"modules"), "{problems:?}");

    let s = set(vec![
        module("a.rego", "package a"),
        module("a.rego", " "),
        module(".x", "package x"),
        module("a/b", "package x"),
    ]);
    let problems = s.validate().unwrap_err();
    assert!(problems
        .iter()
        .any(|p| p.path == "modules[1].name" && p.problem.contains("twice")));
    assert!(problems.iter().any(|p| p.path == "modules[1].rego"));
    assert!(problems.iter().any(|p| p.path == "modules[2].name"));
    assert!(problems.iter().any(|p| p.path == "modules[3].name"));
    assert!(!problems.iter().any(|p| p.path == "modules[0].name"));
}

#[test]
fn an_empty_criterion_matches_everything() {
    let c = PolicyCriteria::default();
    assert!(c.matches(&env("production", &[])));
    assert!(set(vec![module("a", "package a")]).applies_to(&env("dev", &[("x", "y")])));
}

#[test]
fn overall_status_follows_enforcement() {
    let r = |enforcement, deny: &[&str], warn: &[&str], error: Option<&str>| SetResult {
        set: "s".into(),
        group: "acme".into(),
        enforcement,
        deny: deny.iter().map(|s| s.to_string()).collect(),
        warn: warn.iter().map(|s| s.to_string()).collect(),
        error: error.map(str::to_string),
    };
    assert_eq!(overall_status(&[]), PolicyStatus::Passed);
    assert_eq!(
        overall_status(&[r(Enforcement::Advisory, &["no"], &[], None)]),
        PolicyStatus::Warned
    );
    assert_eq!(
        overall_status(&[r(Enforcement::Mandatory, &[], &["hm"], None)]),
        PolicyStatus::Warned
    );
    assert_eq!(
        overall_status(&[r(Enforcement::Review, &[], &[], Some("timeout"))]),
        PolicyStatus::Denied
    );
    assert_eq!(
        overall_status(&[
            r(Enforcement::Advisory, &[], &[], None),
            r(Enforcement::Mandatory, &["no"], &[], None)
        ]),
        PolicyStatus::Denied
    );
}

fn arb_word() -> impl Strategy<Value = String> {
    "[a-c]{1,2}"
}

proptest! {
    /// Criteria match exactly when the type is listed (or none is) and every label agrees.
    #[test]
    fn criteria_match_is_the_conjunction(
        env_types in prop::collection::vec(arb_word(), 0..3),
        want in prop::collection::btree_map(arb_word(), arb_word(), 0..3),
        have in prop::collection::btree_map(arb_word(), arb_word(), 0..4),
        env_type in arb_word(),
    ) {
        let e = env(&env_type, &have.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect::<Vec<_>>());
        let c = PolicyCriteria { env_types: env_types.clone(), labels: want.clone() };
        let type_ok = env_types.is_empty() || env_types.contains(&env_type);
        let labels_ok = want.iter().all(|(k, v)| have.get(k) == Some(v));
        prop_assert_eq!(c.matches(&e), type_ok && labels_ok);
        // Adding a label the criteria ask for never turns a match into a miss.
        let mut more = have.clone();
        more.insert("zz".into(), "1".into());
        let e2 = env(&env_type, &more.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect::<Vec<_>>());
        if c.matches(&e) { prop_assert!(c.matches(&e2)); }
    }

    /// The bounds: valid exactly when 1..=20 modules and at most 256 KiB in all.
    #[test]
    fn bounds_on_modules_and_bytes(count in 0usize..26, size in 1usize..20_000) {
        let modules: Vec<PolicyModule> = (0..count)
            .map(|i| module(&format!("m{i}"), &"x".repeat(size)))
            .collect();
        let s = set(modules);
        let ok = (1..=MAX_MODULES).contains(&count) && count * size <= MAX_SET_BYTES;
        prop_assert_eq!(s.validate().is_ok(), ok, "count {} size {}", count, size);
    }

    /// A set survives a JSON round trip unchanged.
    #[test]
    fn round_trips_through_json(
        labels in prop::collection::btree_map(arb_word(), arb_word(), 0..3),
        skip in any::<bool>(),
    ) {
        let mut s = set(vec![module("a.rego", "package a")]);
        s.criteria = Some(PolicyCriteria { env_types: vec!["production".into()], labels: labels.clone() });
        s.on_unavailable = if skip { OnUnavailable::Skip } else { OnUnavailable::Fail };
        let back = PolicySet::from_value(serde_json::to_value(&s).unwrap()).unwrap();
        prop_assert_eq!(back, s);
        let _ = BTreeMap::<String, String>::new();
    }
}
