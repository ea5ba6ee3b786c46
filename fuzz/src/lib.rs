//! What the fuzz targets share: the API's way from request bytes to a document,
//! the API glue around the core validators (pinning URL fields into a rule,
//! reading an environment body), fixture rules, and the resolution cross-check.
//!
//! `pin_field` is copied from `crates/api/src/routes/rules.rs`, which is private to
//! the API crate; keep it in step. Environment bodies go through core's
//! `EnvironmentInput`, exactly as the API reads them.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};
use sortie_core::document::parse_any as parse_document;
use sortie_core::{
    resolve, Criteria, EnvFacts, GroupPath, RuleIndex, RunnerId, RunnerRule, ValidationError,
};

/// The request body as the API reads it (`Document::value`): UTF-8 text, then one
/// YAML-or-JSON parser. `None` where the API answers 400 before any validation.
pub fn document(data: &[u8]) -> Option<Value> {
    let text = std::str::from_utf8(data).ok()?;
    let result = parse_document(text);
    if let Err(e) = &result {
        check_error(e);
    }
    result.ok()
}

/// Every validation error names at least one problem, each with a sentence, and displays.
pub fn check_error(e: &ValidationError) {
    assert!(!e.problems.is_empty(), "a validation error with no problem");
    for p in &e.problems {
        assert!(!p.problem.is_empty(), "a problem with no sentence at `{}`", p.path);
    }
    let _ = e.to_string();
}

/// `pin_field` of crates/api/src/routes/rules.rs: fills `field` with the URL's
/// `value`, or refuses a different one (`None`, a 400 in the API).
pub fn pin_field(doc: &mut Value, field: &str, value: &str) -> Option<()> {
    if let Some(o) = doc.as_object_mut() {
        match o.get(field) {
            None => {
                o.insert(field.into(), json!(value));
            }
            Some(s) if s.as_str() == Some(value) => {}
            Some(_) => return None,
        }
    }
    Some(())
}

/// An environment create or patch body, decoded as the API decodes it: core's
/// `EnvironmentInput` (the API calls exactly this).
pub fn env_fields(
    doc: &Value,
    creating: bool,
) -> Result<sortie_core::environment::EnvironmentInput, ValidationError> {
    sortie_core::environment::EnvironmentInput::from_value(doc, creating)
}

fn rule(id: &str, scope: &str, runner: &str, criteria: Criteria, priority: i32) -> RunnerRule {
    RunnerRule {
        id: id.into(),
        scope: GroupPath::parse(scope).expect("fixture scope"),
        runner_id: RunnerId::parse(runner).expect("fixture runner"),
        criteria,
        priority,
    }
}

/// A small rule set over the root, `acme` and `acme/payments`, with criteria of every kind.
pub fn fixture_rules() -> Vec<RunnerRule> {
    vec![
        rule("shared", "", "fargate-shared", Criteria::default(), 0),
        rule(
            "org-prod",
            "acme",
            "acme/prod-runner",
            Criteria {
                env_type: Some("production".into()),
                env_path: Some("acme/**/prod*".into()),
                ..Criteria::default()
            },
            5,
        ),
        rule(
            "team",
            "acme/payments",
            "acme/payments/team",
            Criteria {
                labels: BTreeMap::from([("tier".into(), "1".into())]),
                tags: BTreeSet::from(["pci".into()]),
                ..Criteria::default()
            },
            0,
        ),
        rule("team-any", "acme/payments", "acme/payments/team", Criteria::default(), -1),
    ]
}

/// The reference `resolve` and the compiled `RuleIndex` must pick the same rule,
/// and `RuleIndex::explain` must agree with `resolve` on the winner.
pub fn check_resolution(env: &EnvFacts<'_>, rules: &[RunnerRule]) {
    let reference = resolve(env, rules);
    let index = RuleIndex::from_slice(rules);
    let picked = index.resolve(env);
    let explained = index.explain(env);
    match (&reference, &picked) {
        (Ok(r), Ok(p)) => {
            assert_eq!(
                (&r.rule.scope, &r.rule.id),
                (&p.rule.scope, &p.rule.id),
                "resolve and RuleIndex picked different rules"
            );
            assert_eq!(explained.as_ref().map(|e| &e.rule), Ok(&r.rule));
        }
        (Err(_), Err(_)) => assert!(explained.is_err()),
        _ => panic!(
            "resolve and RuleIndex disagree on whether a rule matches: {reference:?} vs {picked:?}"
        ),
    }
}
