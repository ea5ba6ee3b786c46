use criterion::{criterion_group, criterion_main, Criterion};
fn b(c: &mut Criterion) { c.bench_function("x", |b| b.iter(|| 1)); }
criterion_group!(benches, b);
criterion_main!(benches);
