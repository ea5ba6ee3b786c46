//! Compile errors with their place, deny and warn messages, the bounds on hostile
//! policies, and the cache.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sortie_core::policy::Enforcement;

use crate::common::{job, set};
use sortie_policy::{
    build_input, check_plan_size, compile, evaluate, evaluate_one, evaluate_prepared, CompiledSet,
    Limits, PlanInput, PreparedInput, SetCache, MAX_MESSAGES, MAX_PLAN_BYTES,
};

/// A plan of `n` resource changes: every third a delete, the rest creates.
fn plan(n: usize) -> Value {
    let changes: Vec<Value> = (0..n)
        .map(|i| {
            let action = if i % 3 == 0 { "delete" } else { "create" };
            json!({
                "address": format!("terraform_data.r{i}"),
                "type": "terraform_data",
                "name": format!("r{i}"),
                "change": {"actions": [action], "before": {"input": i}, "after": {"input": i + 1}},
            })
        })
        .collect();
    json!({"format_version": "1.2", "resource_changes": changes})
}

fn input(n: usize) -> Value {
    build_input(&plan(n), &job(), &json!({"id": "acme/r", "type": "local"}))
}

fn one(set: &CompiledSet, input: &Value, limits: Limits) -> sortie_core::policy::SetResult {
    evaluate(&[("acme".to_string(), set)], input, limits)
        .pop()
        .unwrap()
}

const NO_DELETES: &str = r#"package sortie.deletes

deny contains msg if {
    some rc in input.plan.resource_changes
    "delete" in rc.change.actions
    msg := sprintf("%s would be deleted", [rc.address])
}

warn contains msg if {
    input.job.env_type == "production"
    msg := sprintf("apply to %s by %s", [input.job.environment, input.job.requested_by])
}
"#;

/// The mandatory set `deletes` of [`NO_DELETES`].
fn deletes() -> sortie_core::policy::PolicySet {
    set("deletes", Enforcement::Mandatory, &[("d.rego", NO_DELETES)])
}

#[test]
fn deny_and_warn_give_messages_from_the_input() {
    let compiled = compile(&deletes()).unwrap();
    assert_eq!(compiled.packages(), ["data.sortie.deletes".to_string()]);
    let r = one(&compiled, &input(4), Limits::default());
    assert_eq!(r.error, None);
    assert_eq!(
        r.deny,
        vec![
            "terraform_data.r0 would be deleted",
            "terraform_data.r3 would be deleted"
        ]
    );
    assert_eq!(r.warn, vec!["apply to acme/payments/prod by alice"]);
    assert_eq!((r.set.as_str(), r.group.as_str()), ("deletes", "acme"));
    assert_eq!(r.enforcement, Enforcement::Mandatory);

    // No deletes, not production: nothing.
    let mut j = job();
    j.env_type = "development".into();
    let quiet = build_input(&json!({"resource_changes": []}), &j, &json!({}));
    let r = one(&compiled, &quiet, Limits::default());
    assert!(
        r.deny.is_empty() && r.warn.is_empty() && r.error.is_none(),
        "{r:?}"
    );
}

#[test]
fn every_package_of_a_set_is_read_and_modules_may_share_one() {
    let compiled = compile(&set(
        "two",
        Enforcement::Review,
        &[
            (
                "a.rego",
                "package a\ndeny contains \"from a\" if { true }\n",
            ),
            (
                "b.rego",
                "package b\nwarn contains \"from b\" if { true }\n",
            ),
            (
                "c.rego",
                "package a\ndeny contains \"also a\" if { input.job.operation == \"apply\" }\n",
            ),
        ],
    ))
    .unwrap();
    let r = one(&compiled, &input(1), Limits::default());
    let mut deny = r.deny.clone();
    deny.sort();
    assert_eq!(deny, vec!["also a", "from a"]);
    assert_eq!(r.warn, vec!["from b"]);
}

#[test]
fn a_syntax_error_names_module_line_and_column() {
    let e = compile(&set(
        "bad",
        Enforcement::Mandatory,
        &[
            ("ok.rego", "package ok\ndeny contains \"x\" if { true }\n"),
            (
                "broken.rego",
                "package broken\n\ndeny contains msg if {\n    msg := ]\n}\n",
            ),
        ],
    ))
    .unwrap_err();
    assert_eq!(e.module, "broken.rego");
    assert_eq!(e.line, 4, "{e:?}");
    assert!(e.column >= 5, "{e:?}");
    assert!(!e.message.is_empty() && !e.message.contains("-->"), "{e:?}");
}

#[test]
fn an_undefined_function_is_refused_at_compile_time() {
    let e = compile(&set(
        "bad",
        Enforcement::Mandatory,
        &[(
            "f.rego",
            "package f\n\ndeny contains msg if {\n  msg := no_such_function(1)\n}\n",
        )],
    ))
    .unwrap_err();
    assert_eq!(e.module, "f.rego", "{e:?}");
    assert_eq!(e.line, 4, "{e:?}");
}

#[test]
fn rego_v0_syntax_is_refused() {
    let e = compile(&set(
        "v0",
        Enforcement::Mandatory,
        &[("v0.rego", "package v0\n\ndeny[msg] {\n  msg := \"x\"\n}\n")],
    ))
    .unwrap_err();
    assert_eq!(e.module, "v0.rego");
    assert!(e.line >= 3, "{e:?}");
}

#[test]
fn a_message_that_is_not_a_string_is_an_error() {
    let compiled = compile(&set(
        "num",
        Enforcement::Mandatory,
        &[("n.rego", "package n\ndeny contains 42 if { true }\n")],
    ))
    .unwrap();
    let r = one(&compiled, &input(1), Limits::default());
    assert!(r.error.as_deref().unwrap().contains("string"), "{r:?}");
    assert!(r.denied());
}

#[test]
fn messages_are_bounded() {
    let compiled = compile(&set(
        "many",
        Enforcement::Advisory,
        &[("m.rego", "package m\ndeny contains sprintf(\"%d %s\", [i, concat(\"\", [\"x\" | some _ in numbers.range(1, 3000)])]) if { some i in numbers.range(1, 500) }\n")],
    ))
    .unwrap();
    // 1.5 M string pieces: near the default 1 s in an unoptimised build on a loaded
    // machine; this test is about the message bounds, not the timer.
    let limits = Limits {
        time_per_set: Duration::from_secs(30),
        ..Limits::default()
    };
    let r = one(&compiled, &input(1), limits);
    assert_eq!(r.error, None);
    assert_eq!(r.deny.len(), MAX_MESSAGES);
    assert!(r
        .deny
        .iter()
        .all(|m| m.len() <= sortie_policy::MAX_MESSAGE_BYTES + 3));
}

#[test]
fn a_comprehension_over_a_large_plan_is_stopped_by_the_time_limit() {
    // Every pair of every pair of 1,000 resources: 10^12 steps, unbounded without the timer.
    let hostile = r#"package hostile

deny contains msg if {
    n := count([1 |
        some a in input.plan.resource_changes
        some b in input.plan.resource_changes
        some c in input.plan.resource_changes
        a.address != b.address
        b.address != c.address
    ])
    msg := sprintf("%d", [n])
}
"#;
    let compiled = compile(&set(
        "hostile",
        Enforcement::Mandatory,
        &[("h.rego", hostile)],
    ))
    .unwrap();
    let limits = Limits {
        time_per_set: Duration::from_millis(200),
        ..Limits::default()
    };
    let started = Instant::now();
    let r = one(&compiled, &input(1_000), limits);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "took {took:?}");
    let error = r.error.as_deref().expect("an error");
    assert!(error.contains("time limit"), "{error}");
    assert!(r.denied());
}

#[test]
fn recursive_functions_are_refused_at_compile_time() {
    // Directly, and through another function in another module and package.
    let e = compile(&set(
        "rec",
        Enforcement::Mandatory,
        &[(
            "r.rego",
            "package r\n\nf(x) := y if {\n  y := f(x)\n}\n\ndeny contains m if {\n  m := f(1)\n}\n",
        )],
    ))
    .unwrap_err();
    assert_eq!((e.module.as_str(), e.line), ("r.rego", 3), "{e:?}");
    assert!(e.message.contains("recursion"), "{e:?}");
    let e = compile(&set(
        "rec2",
        Enforcement::Mandatory,
        &[
            ("a.rego", "package a\n\nimport data.b\n\nping(x) := b.pong(x) if { x > 0 }\n"),
            ("b.rego", "package b\n\npong(x) := y if {\n  y := data.a.ping(x - 1)\n}\n\ndeny contains \"m\" if { pong(3) }\n"),
        ],
    ))
    .unwrap_err();
    assert!(e.message.contains("recursion"), "{e:?}");
    // A chain of functions is fine.
    compile(&set(
        "chain",
        Enforcement::Mandatory,
        &[("c.rego", "package c\n\ng(x) := x + 1\n\nf(x) := g(g(x))\n\ndeny contains sprintf(\"%d\", [f(1)]) if { true }\n")],
    ))
    .unwrap();
}

#[test]
fn a_recursive_rule_ends_in_an_error_not_a_crash() {
    let compiled = compile(&set(
        "rule",
        Enforcement::Mandatory,
        &[(
            "r.rego",
            "package rr\n\nx := y if { y := z }\nz := x\n\ndeny contains \"m\" if { x }\n",
        )],
    ));
    if let Ok(compiled) = compiled {
        let r = one(&compiled, &input(1), Limits::default());
        assert!(r.error.is_some(), "{r:?}");
    }
}

#[test]
fn deeply_nested_source_is_refused_not_a_stack_overflow() {
    let depth = 100_000;
    let rego = format!(
        "package deep\n\ndeny contains m if {{\n  m := {}1{}\n}}\n",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    // Kept within the set bound (256 KiB) but far deeper than any parser stack.
    let e = compile(&set(
        "deep",
        Enforcement::Mandatory,
        &[("deep.rego", &rego)],
    ))
    .unwrap_err();
    assert_eq!((e.module.as_str(), e.line), ("deep.rego", 4), "{e:?}");
    // The bound itself compiles and runs.
    let n = sortie_policy::MAX_NESTING - 1; // one level is the rule body
    let ok = format!(
        "package ok\n\ndeny contains \"m\" if {{\n  x := {}1{}\n  x != 2\n}}\n",
        "[".repeat(n),
        "]".repeat(n)
    );
    let compiled = compile(&set("ok", Enforcement::Mandatory, &[("ok.rego", &ok)])).unwrap();
    assert_eq!(one(&compiled, &input(1), Limits::default()).deny, vec!["m"]);
}

#[test]
fn the_plan_size_bound() {
    assert!(check_plan_size(MAX_PLAN_BYTES).is_ok());
    let e = check_plan_size(MAX_PLAN_BYTES + 1).unwrap_err();
    assert!(e.contains("limit"), "{e}");
}

#[test]
fn the_input_carries_plan_job_and_runner() {
    let i = input(2);
    assert_eq!(i["job"]["operation"], "apply");
    assert_eq!(i["job"]["labels"]["tier"], "gold");
    assert_eq!(i["job"]["tags"][0], "pci");
    assert_eq!(i["runner"]["id"], "acme/r");
    assert_eq!(i["plan"]["resource_changes"].as_array().unwrap().len(), 2);
}

#[test]
fn the_cache_keeps_a_version_and_drops_older_ones() {
    let cache = SetCache::default();
    let s = deletes();
    let a = cache.get_or_compile("acme", &s, "v1").unwrap();
    let b = cache.get_or_compile("acme", &s, "v1").unwrap();
    assert!(std::sync::Arc::ptr_eq(&a, &b));
    let c = cache.get_or_compile("acme", &s, "v2").unwrap();
    assert!(!std::sync::Arc::ptr_eq(&a, &c));
    assert_eq!(cache.len(), 1);
    cache.get_or_compile("acme/payments", &s, "v1").unwrap();
    assert_eq!(cache.len(), 2);
    let bad = set(
        "bad",
        Enforcement::Mandatory,
        &[("b.rego", "package b\ndeny contains if")],
    );
    assert!(cache.get_or_compile("acme", &bad, "v1").is_err());
    assert_eq!(cache.len(), 2);
}

#[test]
fn compiled_sets_can_be_shared_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<CompiledSet>();
    assert_send_sync::<SetCache>();
}

#[test]
fn one_prepared_input_gives_each_set_what_evaluate_gives_it() {
    let sets = [
        compile(&deletes()).unwrap(),
        compile(&set(
            "count",
            Enforcement::Advisory,
            &[(
                "c.rego",
                "package c\nwarn contains sprintf(\"%d changes\", [count(input.plan.resource_changes)]) if { input.job.env_type == \"production\" }\n",
            )],
        ))
        .unwrap(),
    ];
    let refs: Vec<(String, &CompiledSet)> = sets.iter().map(|s| ("acme".into(), s)).collect();
    let input = input(30);
    let whole = evaluate(&refs, &input, Limits::default());
    let prepared = PreparedInput::new(&input);
    let shared = evaluate_prepared(&refs, &prepared, Limits::default());
    let one_by_one: Vec<_> = refs
        .iter()
        .map(|(g, s)| evaluate_one(g, s, &prepared, Limits::default()))
        .collect();
    assert_eq!(whole, shared);
    assert_eq!(whole, one_by_one);
    assert_eq!(whole[0].deny.len(), 10, "{whole:?}");
    assert_eq!(whole[1].warn, vec!["30 changes".to_string()]);
    assert!(whole.iter().all(|r| r.error.is_none()));
}

#[test]
fn an_input_from_the_stored_bytes_gives_what_the_tree_gives() {
    let sets = [
        compile(&deletes()).unwrap(),
        compile(&set(
            "runner",
            Enforcement::Advisory,
            &[(
                "r.rego",
                "package r\nwarn contains sprintf(\"%s %s %d\", [input.runner.id, input.job.labels.tier, count(input.plan.resource_changes)]) if { \"pci\" in input.job.tags }\n",
            )],
        ))
        .unwrap(),
    ];
    let refs: Vec<(String, &CompiledSet)> = sets.iter().map(|s| ("acme".into(), s)).collect();
    let runner = json!({"id": "acme/r", "type": "local"});
    for n in [0, 1, 7, 40] {
        let bytes = serde_json::to_vec(&plan(n)).unwrap();
        let PlanInput::Available(parsed) = PlanInput::from_artifact(Some(&bytes)) else {
            panic!("a plan document is available");
        };
        let from_bytes = PreparedInput::from_parts(parsed, &job(), &runner);
        let got = evaluate_prepared(&refs, &from_bytes, Limits::default());
        let want = evaluate(&refs, &input(n), Limits::default());
        assert_eq!(got, want, "{n} resources");
        assert_eq!(got[0].deny.len(), n.div_ceil(3));
        assert_eq!(got[1].warn, vec![format!("acme/r gold {n}")]);
    }
}

#[test]
fn stored_bytes_without_plan_data_say_why() {
    let reason = |bytes: Option<&[u8]>| match PlanInput::from_artifact(bytes) {
        PlanInput::Unavailable(r) => r,
        PlanInput::Available(v) => panic!("unexpectedly available: {v:?}"),
    };
    // Each reason is the one the plan view gives for the same bytes.
    let same = |bytes: &[u8]| {
        let core = sortie_core::plan::PlanData::from_artifact(Some(bytes));
        assert_eq!(Some(reason(Some(bytes)).as_str()), core.unavailable());
    };
    assert_eq!(reason(None), sortie_core::plan::NO_ARTIFACT);
    let t011 = sortie_core::plan::PlanData::unavailable_artifact(sortie_core::plan::TERRAFORM_011);
    assert_eq!(reason(Some(&t011)), sortie_core::plan::TERRAFORM_011);
    same(&t011);
    let big = vec![b' '; MAX_PLAN_BYTES + 1];
    assert_eq!(reason(Some(&big)), sortie_core::plan::TOO_LARGE);
    same(&big);
    same(b"[1, 2]");
    assert!(reason(Some(b"{not json")).starts_with("the plan's JSON could not be read"));
    assert!(reason(Some(&[0xff, 0xfe])).starts_with("the plan's JSON could not be read"));
    // An object with more than the one field is a plan, not a reason.
    assert!(matches!(
        PlanInput::from_artifact(Some(br#"{"unavailable": "x", "resource_changes": []}"#)),
        PlanInput::Available(_)
    ));
}
