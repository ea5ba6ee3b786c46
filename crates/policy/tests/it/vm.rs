//! Sets on regorus's VM: the same results as on the interpreter, the interpreter kept for
//! sets whose rules may recurse, and the VM's instruction budget.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sortie_policy::{build_input, compile, evaluate, Limits};

use crate::common::{job, modules};

/// `n` resource changes of three types, deletes, replacements, tags and a public flag.
fn input(n: usize) -> Value {
    let types = ["aws_s3_bucket", "aws_iam_role", "terraform_data"];
    let changes: Vec<Value> = (0..n)
        .map(|i| {
            let actions = match i % 4 {
                0 => json!(["delete"]),
                1 => json!(["delete", "create"]),
                2 => json!(["create"]),
                _ => json!(["update"]),
            };
            json!({
                "address": format!("module.m{}.{}.r{i}", i % 3, types[i % 3]),
                "type": types[i % 3],
                "name": format!("r{i}"),
                "change": {
                    "actions": actions,
                    "before": {"tags": {"owner": "team", "cost_center": "42"}, "size": i},
                    "after": {"tags": {"owner": "team"}, "size": i + 1, "public": i % 5 == 0},
                },
            })
        })
        .collect();
    build_input(
        &json!({"format_version": "1.2", "resource_changes": changes, "output_changes": {"url": {"actions": ["create"]}}}),
        &job(),
        &json!({"id": "acme/r", "type": "local"}),
    )
}

/// Policies of the shapes teams write, over most of the language the sets use.
const POLICIES: &[&[&str]] = &[
    &["package a\n\ndeny contains msg if {\n  some rc in input.plan.resource_changes\n  \"delete\" in rc.change.actions\n  rc.type == \"aws_iam_role\"\n  msg := sprintf(\"%s would be deleted\", [rc.address])\n}\n"],
    &["package b\n\nwarn contains msg if {\n  some rc in input.plan.resource_changes\n  not rc.change.after.tags.cost_center\n  msg := sprintf(\"%s has no cost_center tag\", [rc.address])\n}\n"],
    &["package c\n\ndeletes := count([rc | some rc in input.plan.resource_changes; \"delete\" in rc.change.actions])\n\nwarn contains msg if {\n  deletes > 2\n  msg := sprintf(\"%d deletes\", [deletes])\n}\n\ndeny contains \"too many\" if { deletes > 10 }\n"],
    &["package d\n\nreplaced(rc) if rc.change.actions == [\"delete\", \"create\"]\n\ndeny contains msg if {\n  some rc in input.plan.resource_changes\n  replaced(rc)\n  input.job.labels.tier == \"gold\"\n  msg := concat(\" \", [rc.address, \"is replaced in\", input.job.environment])\n}\n"],
    &["package e\n\ndefault public_ok := false\n\npublic_ok if \"public\" in input.job.tags\n\nby_type := {t: n | some t in {rc.type | some rc in input.plan.resource_changes}; n := count([1 | some rc in input.plan.resource_changes; rc.type == t])}\n\nwarn contains msg if {\n  some t, n in by_type\n  n > 1\n  msg := sprintf(\"%s: %d\", [t, n])\n}\n\ndeny contains msg if {\n  not public_ok\n  some rc in input.plan.resource_changes\n  rc.change.after.public\n  msg := sprintf(\"%s is public\", [rc.name])\n}\n"],
    &[
        "package f.one\n\nimport data.f.two\n\ndeny contains msg if {\n  every rc in input.plan.resource_changes { rc.type != \"nothing\" }\n  some m in two.names\n  msg := upper(m)\n}\n",
        "package f.two\n\nnames contains n if {\n  some rc in input.plan.resource_changes\n  startswith(rc.address, \"module.m1.\")\n  n := rc.name\n}\n\nwarn contains \"outputs change\" if { input.plan.output_changes.url }\n",
    ],
    &["package g\n\nlevel := \"high\" if {\n  count(input.plan.resource_changes) > 5\n} else := \"low\"\n\nwarn contains level if { true }\n\ndeny contains input.runner.id if { input.runner.type == \"local\"; level == \"high\" }\n"],
];

#[test]
fn the_vm_gives_what_the_interpreter_gives() {
    for (i, regos) in POLICIES.iter().enumerate() {
        let compiled = compile(&modules(regos)).unwrap();
        assert!(compiled.on_vm(), "policy {i} runs on the VM");
        let interpreted = compiled.clone().on_interpreter();
        for n in [0, 1, 7, 60] {
            let input = input(n);
            let vm = evaluate(&[("acme".into(), &compiled)], &input, Limits::default());
            let tree = evaluate(&[("acme".into(), &interpreted)], &input, Limits::default());
            assert_eq!(vm, tree, "policy {i}, {n} resources");
            assert!(vm[0].error.is_none(), "policy {i}, {n}: {vm:?}");
        }
    }
    // And the results are not empty: the comparison compares something.
    let compiled = compile(&modules(POLICIES[0])).unwrap();
    let r = evaluate(&[("acme".into(), &compiled)], &input(7), Limits::default());
    assert_eq!(r[0].deny.len(), expected_roles_deleted(7), "{r:?}");
}

#[test]
fn rules_that_may_refer_to_each_other_in_a_cycle_stay_on_the_interpreter() {
    // On regorus 0.14.1's VM this overflows the stack (the process aborts); the
    // interpreter reports the recursion.
    let cyclic = compile(&modules(&[
        "package rr\n\nx := y if { y := z }\nz := x\n\ndeny contains \"m\" if { x }\n",
    ]));
    if let Ok(cyclic) = cyclic {
        assert!(!cyclic.on_vm());
        let r = evaluate(&[("acme".into(), &cyclic)], &input(1), Limits::default());
        assert!(r[0].error.is_some(), "{r:?}");
    }
    // A chain longer than the VM takes.
    let chain_len = sortie_policy::MAX_CHAIN + 2;
    let mut rego = String::from("package long\n\nr0 := 1\n");
    for i in 1..chain_len {
        rego.push_str(&format!("r{i} := r{} + 1\n", i - 1));
    }
    rego.push_str(&format!(
        "deny contains sprintf(\"%d\", [r{}]) if {{ true }}\n",
        chain_len - 1
    ));
    let long = compile(&modules(&[&rego])).unwrap();
    assert!(!long.on_vm());
    let r = evaluate(&[("acme".into(), &long)], &input(1), Limits::default());
    assert_eq!(r[0].deny, vec![chain_len.to_string()]);
    // A name that is only a variable does not make an edge... but a spurious one only
    // costs speed: the set still gives its messages.
    let shadow = compile(&modules(&[
        "package sh\n\nmsg := \"rule\"\n\ndeny contains msg if { msg := \"local\" }\n",
    ]));
    if let Ok(shadow) = shadow {
        let r = evaluate(&[("acme".into(), &shadow)], &input(1), Limits::default());
        assert!(r[0].error.is_none() || r[0].denied(), "{r:?}");
    }
}

#[test]
fn a_hostile_set_on_the_vm_is_stopped_by_its_instruction_budget() {
    let hostile = "package hostile\n\ndeny contains msg if {\n  n := count([1 |\n    some a in input.plan.resource_changes\n    some b in input.plan.resource_changes\n    some c in input.plan.resource_changes\n    a.address != b.address\n    b.address != c.address\n  ])\n  msg := sprintf(\"%d\", [n])\n}\n";
    let compiled = compile(&modules(&[hostile])).unwrap();
    assert!(compiled.on_vm());
    // A generous clock: the budget, not the timer, stops it.
    let limits = Limits {
        time_per_set: Duration::from_secs(60),
        instructions_per_set: 2_000_000,
    };
    let started = Instant::now();
    let r = evaluate(&[("acme".into(), &compiled)], &input(1_000), limits);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert_eq!(
        r[0].error.as_deref(),
        Some("policy evaluation exceeded its limit of 2000000 instructions")
    );
    assert!(r[0].denied());
    // The default budget runs an ordinary set over a large plan.
    let ordinary = compile(&modules(POLICIES[0])).unwrap();
    let r = evaluate(
        &[("acme".into(), &ordinary)],
        &input(5_000),
        Limits::default(),
    );
    assert_eq!(r[0].error, None);
    // Capped at the messages kept.
    assert_eq!(
        r[0].deny.len(),
        expected_roles_deleted(5_000).min(sortie_policy::MAX_MESSAGES)
    );
}

/// How many IAM roles `input(n)` deletes (a delete or a replacement): what POLICIES[0] names.
fn expected_roles_deleted(n: usize) -> usize {
    (0..n).filter(|i| i % 3 == 1 && i % 4 <= 1).count()
}
