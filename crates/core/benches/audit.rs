//! Verifying an organisation's audit chain of 100,000 entries (issue 44's goal: under 5 s):
//! every stored entry's digest recomputed and every link rehashed.
//!
//! `cargo bench -p sortie-core --bench audit`

use std::hint::black_box;
use std::time::Duration;

use chrono::TimeZone;
use criterion::{criterion_main, Criterion};
use sortie_core::audit::{
    body_digest, entry_json, seal, verify, Actor, AuditEntry, CredentialKind, Stored,
};

/// `n` sealed entries of organisation `acme`, shaped as the API writes them.
fn chain(n: u64) -> Vec<Stored> {
    let start = chrono::Utc.with_ymd_and_hms(2026, 11, 30, 0, 0, 0).unwrap();
    let bodies: Vec<String> = (0..n)
        .map(|i| {
            entry_json(&AuditEntry {
                org: "acme".into(),
                id: format!("01JNX6V4K2M8Q9R3S5{i:08}"),
                at: start + chrono::Duration::seconds(i as i64),
                actor: Actor {
                    subject: format!("user-{}", i % 50),
                    issuer: Some("https://token.actions.githubusercontent.com".into()),
                    credential: CredentialKind::User,
                },
                action: "update_environment".into(),
                target: format!("/v1/environments/acme%2Fteam-{}%2Fprod", i % 300),
                request_id: format!("req-{i}"),
                source_ip: Some("203.0.113.7".into()),
                user_agent: Some("sortie/0.1".into()),
                before: Some(body_digest(format!("before {i}").as_bytes())),
                after: Some(body_digest(format!("after {i}").as_bytes())),
            })
        })
        .collect();
    let refs: Vec<&str> = bodies.iter().map(String::as_str).collect();
    seal("acme", None, &refs)
        .into_iter()
        .zip(bodies)
        .map(|(seal, body)| Stored { body, seal })
        .collect()
}

fn bench(c: &mut Criterion) {
    let links = chain(100_000);
    let mut g = c.benchmark_group("audit");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    g.bench_function("verify 100,000 entries", |b| {
        b.iter(|| black_box(verify("acme", black_box(&links)).expect("the chain verifies")))
    });
    g.finish();
}

#[allow(missing_docs)]
mod group {
    criterion::criterion_group!(benches, super::bench);
}
criterion_main!(group::benches);
