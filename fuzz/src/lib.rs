//! What the fuzz targets share: the API's way from request bytes to a document,
//! the API glue around the core validators (pinning URL fields into a rule,
//! reading an environment body), fixture rules, and the resolution cross-check.
//!
//! The glue is copied from `crates/api/src/routes/{rules,environments}.rs`
//! (`pin_field`, `env_fields`), which are private to the API crate; the core
//! functions it calls are Sortie's own. Keep the copies in step with the API.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};
use sortie_core::problems::{parse_document, Fields, Problems};
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

/// The fields of an environment create or patch body.
#[derive(Debug)]
pub struct EnvFields {
    /// `name` (create only).
    pub name: Option<String>,
    /// `env_type`.
    pub env_type: Option<String>,
    /// `labels`.
    pub labels: Option<BTreeMap<String, String>>,
    /// `tags`.
    pub tags: Option<BTreeSet<String>>,
}

/// `env_fields` of crates/api/src/routes/environments.rs.
pub fn env_fields(doc: &Value, creating: bool) -> Result<EnvFields, ValidationError> {
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
    if env_type.as_deref().is_some_and(|t| t.trim().is_empty()) {
        p.push("env_type", "must not be empty");
    }
    let labels = f.optional("labels", &mut p);
    let tags = f.optional("tags", &mut p);
    f.finish(&mut p);
    p.finish(EnvFields {
        name,
        env_type,
        labels,
        tags,
    })
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
