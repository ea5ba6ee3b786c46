//! The plan as data over a 1,000-resource plan (each resource with 20 attributes, a
//! sensitive one among them, and a nested map): `redact` (what the runner does before the
//! upload), `PlanView::from_document` and one 1,000-entry page (what `GET /v1/jobs/{id}/plan`
//! does per request after its S3 read).
//!
//! `cargo bench -p sortie-core --bench plan`

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_main, BatchSize, Criterion};
use serde_json::{json, Map, Value};
use sortie_core::plan::{redact, PlanView};

fn attributes(i: usize, version: usize) -> Value {
    let mut a = Map::new();
    for k in 0..18 {
        a.insert(
            format!("attr_{k}"),
            json!(format!("value-{i}-{k}-{version}")),
        );
    }
    a.insert("password".into(), json!(format!("secret-{i}-{version}")));
    a.insert(
        "tags".into(),
        json!({"env": "prod", "team": "payments", "rev": version}),
    );
    Value::Object(a)
}

fn plan(resources: usize) -> Value {
    let changes: Vec<Value> = (0..resources)
        .map(|i| {
            let actions = match i % 4 {
                0 => json!(["create"]),
                1 => json!(["update"]),
                2 => json!(["delete", "create"]),
                _ => json!(["no-op"]),
            };
            json!({
                "address": format!("module.m{}.aws_instance.r[{i}]", i % 10),
                "module_address": format!("module.m{}", i % 10),
                "type": "aws_instance", "name": "r",
                "change": {
                    "actions": actions,
                    "before": attributes(i, 1), "after": attributes(i, 2),
                    "before_sensitive": {"password": true}, "after_sensitive": {"password": true},
                    "after_unknown": {"id": true},
                    "replace_paths": [["attr_3"]]
                }
            })
        })
        .collect();
    json!({"format_version": "1.2", "resource_changes": changes, "output_changes": {}})
}

fn bench(c: &mut Criterion) {
    let doc = plan(1000);
    let mut g = c.benchmark_group("plan_1000_resources");
    g.measurement_time(Duration::from_secs(5)).sample_size(20);
    g.bench_function("redact", |b| {
        b.iter_batched(
            || doc.clone(),
            |mut d| {
                redact(&mut d, &["db_password".to_string()]);
                d
            },
            BatchSize::LargeInput,
        )
    });
    let mut redacted = doc.clone();
    redact(&mut redacted, &[]);
    g.bench_function("view_and_first_page", |b| {
        b.iter(|| {
            let view = PlanView::from_document(black_box(&redacted));
            view.page(None, 1000).unwrap()
        })
    });
    g.finish();
}

#[allow(missing_docs)]
mod group {
    criterion::criterion_group!(benches, super::bench);
}
criterion_main!(group::benches);
