//! Rule resolution at 10, 1,000 and 10,000 rules for a depth-8 environment:
//! `resolve` (the reference) against `RuleIndex::resolve`, plus the time to
//! compile a 10,000-rule index (rules in random scope order, and grouped by
//! scope).
//!
//! `cargo bench -p sortie-core --bench resolve`

use std::collections::{BTreeMap, BTreeSet};
use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use sortie_core::{
    resolve, Criteria, EnvFacts, EnvPath, GroupPath, RuleIndex, RunnerId, RunnerRule,
};

/// The environment's group: 8 segments, the most a group may have.
const GROUP: &str = "acme/platform/payments/eu/west/prod-stack/core/ledger";

/// A small deterministic generator (an LCG), so every run benches the same rules.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

/// Scopes: the environment's group and its 8 ancestors (about 40% of the
/// rules), and unrelated groups: siblings at every level and other
/// organisations (about 60%).
fn scopes() -> (Vec<GroupPath>, Vec<GroupPath>) {
    let group = GroupPath::parse(GROUP).unwrap();
    let ancestors = group.self_and_ancestors();
    let mut unrelated = Vec::new();
    for parent in ancestors.iter().filter_map(GroupPath::parent) {
        for sibling in ["alpha", "beta", "gamma"] {
            unrelated.push(parent.child(sibling).unwrap());
        }
    }
    for org in ["globex", "initech", "umbrella", "hooli"] {
        let mut g = GroupPath::parse(org).unwrap();
        for seg in ["apps", "eu", "prod"] {
            unrelated.push(g.clone());
            g = g.child(seg).unwrap();
        }
    }
    (ancestors, unrelated)
}

fn rules(n: usize) -> Vec<RunnerRule> {
    let (ancestors, unrelated) = scopes();
    let mut rng = Lcg(n as u64 ^ 0x5eed);
    let mut out = Vec::with_capacity(n + 1);
    for i in 0..n {
        let scope = if rng.below(10) < 4 {
            ancestors[rng.below(ancestors.len())].clone()
        } else {
            unrelated[rng.below(unrelated.len())].clone()
        };
        let env_type = match rng.below(10) {
            0..=3 => None,
            _ => Some(
                rng.pick(&["production", "development", "staging", "test"])
                    .to_string(),
            ),
        };
        let env_path = (rng.below(10) < 3).then(|| {
            rng.pick(&[
                "acme/**",
                "acme/**/ledger/*",
                "acme/platform/*/eu/**",
                "*/*/*/*/*/*/*/*/prod",
                "**/dev",
                "globex/**",
                "acme/platform/payments/us/**",
                "**/ledger/prod",
            ])
            .to_string()
        });
        let mut labels = BTreeMap::new();
        for _ in 0..rng.below(3) {
            labels.insert(
                rng.pick(&["tier", "team", "region"]).to_string(),
                rng.pick(&["gold", "silver", "blue", "eu", "us"])
                    .to_string(),
            );
        }
        let mut tags = BTreeSet::new();
        for _ in 0..rng.below(3) {
            tags.insert(rng.pick(&["spot", "gpu", "arm", "large"]).to_string());
        }
        out.push(RunnerRule {
            id: format!("rule-{i:05}"),
            runner_id: RunnerId::new(scope.clone(), "runner").unwrap(),
            scope,
            criteria: Criteria {
                env_type,
                env_path,
                labels,
                tags,
            },
            priority: rng.below(11) as i32 - 5,
        });
    }
    // A shared catch-all, so every environment resolves.
    out.push(RunnerRule {
        id: "shared".into(),
        scope: GroupPath::root(),
        runner_id: RunnerId::parse("fargate-shared").unwrap(),
        criteria: Criteria::default(),
        priority: 0,
    });
    out
}

fn bench(c: &mut Criterion) {
    let path = EnvPath::parse(&format!("{GROUP}/prod")).unwrap();
    let labels: BTreeMap<String, String> = [("tier", "gold"), ("team", "blue"), ("region", "eu")]
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
    let tags: BTreeSet<String> = ["spot", "arm"].into_iter().map(Into::into).collect();
    let env = EnvFacts {
        path: &path,
        env_type: "production",
        labels: &labels,
        tags: &tags,
    };

    let mut group = c.benchmark_group("resolve");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30);
    for n in [10, 1_000, 10_000] {
        let rules = rules(n);
        let index = RuleIndex::compile(rules.clone());
        // Both pick the same rule, or the comparison means nothing.
        let old = resolve(&env, &rules).unwrap();
        let new = index.resolve(&env).unwrap();
        assert_eq!(
            (&old.rule.id, &old.rule.scope),
            (&new.rule.id, &new.rule.scope)
        );
        group.bench_with_input(BenchmarkId::new("old", n), &rules, |b, rules| {
            b.iter(|| resolve(black_box(&env), black_box(rules)))
        });
        group.bench_with_input(BenchmarkId::new("index", n), &index, |b, index| {
            b.iter(|| black_box(index).resolve(black_box(&env)).map(|p| p.tally))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("compile");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30);
    // In random scope order, and grouped by scope as the store returns them
    // (one rule set per scope).
    let shuffled = rules(10_000);
    let mut grouped = shuffled.clone();
    grouped.sort_by(|a, b| a.scope.cmp(&b.scope));
    for (name, rules) in [("10000", shuffled), ("10000-by-scope", grouped)] {
        group.bench_function(name, |b| {
            b.iter_batched(
                || rules.clone(),
                |rules| RuleIndex::compile(black_box(rules)),
                // One fresh copy right before each compile: warm in the cache, as
                // rules just read from the store are (a large batch of copies
                // would evict each other and time cold reads instead).
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

// `criterion_group!` defines a public function that cannot carry a rustdoc line.
#[allow(missing_docs)]
mod group {
    use super::*;
    criterion_group!(benches, bench);
}
use group::benches;
criterion_main!(benches);
