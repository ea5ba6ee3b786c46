//! 20 policy sets (cached, compiled once) evaluated over a 1,000-resource plan: the whole
//! check of one plan, input conversion included. Prints the p99 of 300 checks first (and
//! of the two phases apart), then criterion's figures.
//!
//! `cargo bench -p sortie-policy --bench evaluate`

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion};
use serde_json::{json, Value};
use sortie_core::policy::{Enforcement, OnUnavailable, PolicyModule, PolicySet};
use sortie_policy::{
    build_input, evaluate, evaluate_prepared, JobInput, Limits, PreparedInput, SetCache,
};

/// A plan of `n` resource changes of a few types, every tenth a delete.
fn plan(n: usize) -> Value {
    let types = [
        "aws_s3_bucket",
        "aws_instance",
        "aws_iam_role",
        "terraform_data",
    ];
    let changes: Vec<Value> = (0..n)
        .map(|i| {
            let action = if i % 10 == 0 { "delete" } else { "update" };
            json!({
                "address": format!("module.m{}.{}.r{i}", i % 7, types[i % 4]),
                "module_address": format!("module.m{}", i % 7),
                "type": types[i % 4],
                "name": format!("r{i}"),
                "change": {
                    "actions": [action],
                    "before": {"tags": {"owner": "team", "cost_center": "42"}, "size": i},
                    "after": {"tags": {"owner": "team"}, "size": i + 1, "public": i % 13 == 0},
                    "replace_paths": [],
                },
            })
        })
        .collect();
    json!({"format_version": "1.2", "resource_changes": changes, "output_changes": {}})
}

/// Set `i`: a mix of the rules teams write (deletes, tags, public buckets, counts).
fn set(i: usize) -> PolicySet {
    let rego = match i % 4 {
        0 => "deny contains msg if {\n  some rc in input.plan.resource_changes\n  \"delete\" in rc.change.actions\n  rc.type == \"aws_iam_role\"\n  msg := sprintf(\"%s would be deleted\", [rc.address])\n}\n",
        1 => "warn contains msg if {\n  some rc in input.plan.resource_changes\n  not rc.change.after.tags.cost_center\n  rc.type == \"aws_s3_bucket\"\n  rc.name == \"r1\"\n  msg := sprintf(\"%s has no cost_center tag\", [rc.address])\n}\n",
        2 => "deny contains msg if {\n  some rc in input.plan.resource_changes\n  rc.change.after.public == true\n  input.job.env_type == \"production\"\n  rc.type == \"aws_instance\"\n  msg := sprintf(\"%s is public\", [rc.address])\n}\n",
        _ => "deletes := count([rc | some rc in input.plan.resource_changes; \"delete\" in rc.change.actions])\n\nwarn contains msg if {\n  deletes > 500\n  msg := sprintf(\"%d deletes\", [deletes])\n}\n",
    };
    PolicySet {
        name: format!("set-{i}"),
        description: None,
        modules: vec![PolicyModule {
            name: "main.rego".into(),
            rego: format!("package set{i}\n\n{rego}"),
        }],
        enforcement: Enforcement::Mandatory,
        criteria: None,
        on_unavailable: OnUnavailable::Fail,
    }
}

fn setup() -> (SetCache, Vec<PolicySet>, Value) {
    let cache = SetCache::default();
    let sets: Vec<PolicySet> = (0..20).map(set).collect();
    let job = JobInput {
        operation: "apply".into(),
        requested_by: "alice".into(),
        environment: "acme/payments/prod".into(),
        env_type: "production".into(),
        labels: Default::default(),
        tags: Default::default(),
        drift_check: false,
    };
    let input = build_input(&plan(1_000), &job, &json!({"id": "acme/r"}));
    (cache, sets, input)
}

/// One whole check: the 20 sets from the cache, then their evaluation.
fn check(cache: &SetCache, sets: &[PolicySet], input: &Value) -> usize {
    let compiled: Vec<_> = sets
        .iter()
        .map(|s| {
            (
                "acme".to_string(),
                cache.get_or_compile("acme", s, "1").unwrap(),
            )
        })
        .collect();
    let refs: Vec<(String, &sortie_policy::CompiledSet)> = compiled
        .iter()
        .map(|(g, c)| (g.clone(), c.as_ref()))
        .collect();
    let results = evaluate(&refs, input, Limits::default());
    results.iter().map(|r| r.deny.len() + r.warn.len()).sum()
}

fn twenty_sets(c: &mut Criterion) {
    let (cache, sets, input) = setup();
    check(&cache, &sets, &input);
    c.bench_function("policy/20 sets x 1000 resources", |b| {
        b.iter(|| black_box(check(&cache, &sets, black_box(&input))))
    });
}

/// Nanoseconds this thread has run on a core (`/proc/thread-self/schedstat`, Linux), so a
/// check's own cost can be told from the time it waited for a core on a loaded host.
fn on_cpu() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn p99() {
    let (cache, sets, input) = setup();
    let messages = check(&cache, &sets, &input);
    let vm = sets
        .iter()
        .filter(|s| cache.get_or_compile("acme", s, "1").unwrap().on_vm())
        .count();
    let mut wall = Vec::with_capacity(300);
    let mut cpu = Vec::with_capacity(300);
    for _ in 0..300 {
        let (t, c) = (Instant::now(), on_cpu());
        black_box(check(&cache, &sets, &input));
        wall.push(t.elapsed());
        if let (Some(before), Some(after)) = (c, on_cpu()) {
            cpu.push(Duration::from_nanos(after.saturating_sub(before)));
        }
    }
    let at = |times: &mut Vec<Duration>, q: f64| {
        times.sort();
        times[((times.len() as f64 * q) as usize).min(times.len() - 1)]
    };
    println!(
        "policy check, 20 sets ({vm} on the VM) x 1000 resources ({messages} messages): wall p50 {:?} p99 {:?} max {:?}",
        at(&mut wall, 0.50),
        at(&mut wall, 0.99),
        at(&mut wall, 1.0)
    );
    if !cpu.is_empty() {
        println!(
            "  on-CPU time of the same checks: p50 {:?} p99 {:?} max {:?}",
            at(&mut cpu, 0.50),
            at(&mut cpu, 0.99),
            at(&mut cpu, 1.0)
        );
    }
}

// `criterion_group!` defines a public function that cannot carry a rustdoc line.
#[allow(missing_docs)]
mod group {
    use super::*;
    criterion_group! {
        name = benches;
        config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(7));
        targets = twenty_sets
    }
}
use group::benches;

fn main() {
    p99();
    phases();
    benches();
    Criterion::default().configure_from_args().final_summary();
}

/// The two phases of a check apart: the input's conversion, then the 20 sets.
fn phases() {
    let (cache, sets, input) = setup();
    let compiled: Vec<_> = sets
        .iter()
        .map(|s| cache.get_or_compile("acme", s, "1").unwrap())
        .collect();
    let refs: Vec<(String, &sortie_policy::CompiledSet)> = compiled
        .iter()
        .map(|c| ("acme".to_string(), c.as_ref()))
        .collect();
    let (mut convert, mut sets_only) = (Vec::new(), Vec::new());
    for _ in 0..100 {
        let t = Instant::now();
        let prepared = black_box(PreparedInput::new(&input));
        convert.push(t.elapsed());
        let t = Instant::now();
        black_box(evaluate_prepared(&refs, &prepared, Limits::default()));
        sets_only.push(t.elapsed());
    }
    for (what, mut times) in [
        ("input conversion", convert),
        ("20 sets' evaluation", sets_only),
    ] {
        times.sort();
        println!(
            "  {what}: p50 {:?} p99 {:?}",
            times[times.len() / 2],
            times[times.len() * 99 / 100]
        );
    }
}
