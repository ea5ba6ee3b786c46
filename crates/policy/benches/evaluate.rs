//! 20 policy sets (cached, compiled once) evaluated over a 1,000-resource plan: the whole
//! check of one plan as the gate does it, from the stored `plan.json` BYTES (parsed once
//! into regorus's value) to the sets' results. Prints the p50 and p99 of 300 checks first
//! (the parse, the evaluation and the whole, each wall and on-CPU; the evaluation without
//! the index by type; and the floor: 20 sets that only scan the resources), then
//! criterion's figures.
//!
//! `cargo bench -p sortie-policy --bench evaluate`

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion};
use serde_json::{json, Value};
use sortie_core::policy::{Enforcement, OnUnavailable, PolicyModule, PolicySet};
use sortie_policy::{
    build_input, evaluate_prepared, JobInput, Limits, PlanInput, PreparedInput, SetCache,
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
    set_of(i, rego)
}

/// The floor: set `i` is a bare scan of the resources (one field compared, nothing
/// matches, not the type, so no index applies), the least a set that looks at every
/// resource can do.
fn bare_scan(i: usize) -> PolicySet {
    PolicySet {
        // Named apart from the 20 sets above: the cache keys a set by its name.
        name: format!("scan-{i}"),
        ..set_of(
            i,
            "deny contains msg if {\n  some rc in input.plan.resource_changes\n  rc.name == \"none\"\n  msg := rc.address\n}\n",
        )
    }
}

/// Set `i` of one module holding `rego` under `package set<i>`.
fn set_of(i: usize, rego: &str) -> PolicySet {
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

/// The 20 sets, the plan's JSON bytes (as stored in `plan.json`), the job and the runner.
struct Setup {
    cache: SetCache,
    sets: Vec<PolicySet>,
    bytes: Vec<u8>,
    job: JobInput,
    runner: Value,
}

fn setup() -> Setup {
    Setup {
        cache: SetCache::default(),
        sets: (0..20).map(set).collect(),
        bytes: serde_json::to_vec(&plan(1_000)).unwrap(),
        job: JobInput {
            operation: "apply".into(),
            requested_by: "alice".into(),
            environment: "acme/payments/prod".into(),
            env_type: "production".into(),
            labels: Default::default(),
            tags: Default::default(),
            drift_check: false,
        },
        runner: json!({"id": "acme/r", "type": "local"}),
    }
}

/// The input the gate builds from the stored bytes: parsed once, the job and runner added.
fn parse(s: &Setup) -> PreparedInput {
    match PlanInput::from_artifact(Some(&s.bytes)) {
        PlanInput::Available(plan) => PreparedInput::from_parts(plan, &s.job, &s.runner),
        PlanInput::Unavailable(reason) => panic!("{reason}"),
    }
}

/// The 20 sets from the cache, evaluated against `input`: the number of messages.
fn evaluation(s: &Setup, input: &PreparedInput) -> usize {
    evaluate_sets(s, &s.sets, input)
}

/// `sets` from the cache, evaluated against `input`: the number of messages.
fn evaluate_sets(s: &Setup, sets: &[PolicySet], input: &PreparedInput) -> usize {
    let compiled: Vec<_> = sets
        .iter()
        .map(|set| s.cache.get_or_compile("acme", set, "1").unwrap())
        .collect();
    let refs: Vec<(String, &sortie_policy::CompiledSet)> = compiled
        .iter()
        .map(|c| ("acme".to_string(), c.as_ref()))
        .collect();
    let results = evaluate_prepared(&refs, input, Limits::default());
    results.iter().map(|r| r.deny.len() + r.warn.len()).sum()
}

/// One whole check, from the plan's bytes to the sets' results.
fn check(s: &Setup) -> usize {
    evaluation(s, &parse(s))
}

fn twenty_sets(c: &mut Criterion) {
    let s = setup();
    check(&s);
    let input = parse(&s);
    c.bench_function(
        "policy/20 sets x 1000 resources, evaluation (input parsed)",
        |b| b.iter(|| black_box(evaluation(black_box(&s), black_box(&input)))),
    );
    c.bench_function(
        "policy/20 sets x 1000 resources, from plan.json bytes",
        |b| b.iter(|| black_box(check(black_box(&s)))),
    );
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

/// Nanoseconds of CPU this thread has used, from the kernel's per-thread CPU clock
/// (`CLOCK_THREAD_CPUTIME_ID`, exact to the nanosecond; schedstat's figure above is only
/// brought up to date at a scheduler tick, 4 ms here, so short phases read 0 or 4 ms).
fn thread_cpu() -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// Wall, schedstat on-CPU and thread-CPU-clock times of one phase, over every check.
#[derive(Default)]
struct Times {
    wall: Vec<Duration>,
    cpu: Vec<Duration>,
    clock: Vec<Duration>,
}

impl Times {
    fn time<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let (t, c, k) = (Instant::now(), on_cpu(), thread_cpu());
        let out = f();
        self.wall.push(t.elapsed());
        if let (Some(before), Some(after)) = (c, on_cpu()) {
            self.cpu
                .push(Duration::from_nanos(after.saturating_sub(before)));
        }
        if let (Some(before), Some(after)) = (k, thread_cpu()) {
            self.clock
                .push(Duration::from_nanos(after.saturating_sub(before)));
        }
        out
    }

    fn print(mut self, what: &str) {
        let at = |times: &mut Vec<Duration>, q: f64| {
            times.sort();
            times[((times.len() as f64 * q) as usize).min(times.len() - 1)]
        };
        let mut line = format!(
            "  {what}: wall p50 {:?} p99 {:?}",
            at(&mut self.wall, 0.50),
            at(&mut self.wall, 0.99)
        );
        for (name, times) in [
            ("on-CPU (schedstat)", &mut self.cpu),
            ("thread CPU clock", &mut self.clock),
        ] {
            if !times.is_empty() {
                line += &format!(
                    "; {name} p50 {:?} p99 {:?}",
                    at(times, 0.50),
                    at(times, 0.99)
                );
            }
        }
        println!("{line}");
    }
}

/// 300 checks from the plan's bytes, each phase timed apart and the whole timed around both.
fn p99() {
    let s = setup();
    let messages = check(&s);
    let vm = s
        .sets
        .iter()
        .filter(|set| s.cache.get_or_compile("acme", set, "1").unwrap().on_vm())
        .count();
    let indexed = s
        .sets
        .iter()
        .filter(|set| {
            let compiled = s.cache.get_or_compile("acme", set, "1").unwrap();
            compiled.resource_types().is_some()
        })
        .count();
    let (mut parsing, mut evaluating, mut whole) =
        (Times::default(), Times::default(), Times::default());
    let (mut before, mut floor, mut unindexed) =
        (Times::default(), Times::default(), Times::default());
    let bare: Vec<PolicySet> = (0..20).map(bare_scan).collect();
    let prepared = parse(&s);
    // The same 20 sets, each over every resource (no index by type).
    let whole_plan: Vec<sortie_policy::CompiledSet> = s
        .sets
        .iter()
        .map(|set| {
            let compiled = s.cache.get_or_compile("acme", set, "1").unwrap();
            compiled.as_ref().clone().without_index()
        })
        .collect();
    let whole_plan: Vec<(String, &sortie_policy::CompiledSet)> =
        whole_plan.iter().map(|c| ("acme".to_string(), c)).collect();
    for _ in 0..300 {
        floor.time(|| black_box(evaluate_sets(&s, &bare, &prepared)));
        unindexed.time(|| black_box(evaluate_prepared(&whole_plan, &prepared, Limits::default())));
        // The gate's path before slice P: bytes -> serde_json tree -> `json!` -> text -> value.
        before.time(|| {
            let doc = sortie_core::plan::PlanData::from_artifact(Some(&s.bytes));
            let tree = build_input(doc.document().unwrap(), &s.job, &s.runner);
            black_box(PreparedInput::new(&tree))
        });
        whole.time(|| {
            let input = parsing.time(|| parse(&s));
            black_box(evaluating.time(|| evaluation(&s, &input)));
        });
    }
    println!(
        "policy check, 20 sets ({vm} on the VM, {indexed} indexed by type) x 1000 resources ({} KB of plan.json, {messages} messages), 300 checks:",
        s.bytes.len() / 1024
    );
    before.print("before: bytes -> serde_json tree -> text -> input");
    parsing.print("parse (plan.json bytes -> input)");
    evaluating.print("20 sets' evaluation");
    whole.print("whole check");
    unindexed.print("20 sets' evaluation without the index (each over every resource)");
    floor.print("floor: 20 bare scans' evaluation (one field compared per resource)");
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
    benches();
    Criterion::default().configure_from_args().final_summary();
}
