//! The cost of re-reading a CPU budget, which the pool does every clock tick.
//!
//! `refresh/system` re-reads this process's real budget (affinity by system call, the cpuset
//! file, every quota level); `detect/system` resolves everything from scratch, for comparison.
//! The `fixture-*` cases re-read a three-level v2 tree from the test vectors, on whatever file
//! system holds the checkout: they measure cotenant's own overhead, not cgroupfs.
//!
//! Run: `make bench` (or `cargo bench -p cotenant --bench refresh`).

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use cotenant::cpus::{self, Probe};
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;

fn refresh(c: &mut Criterion) {
    let mut budget = cpus::detect().expect("detect this process's CPU budget");
    eprintln!(
        "system budget: limit {} ({} quota levels, cgroup {})",
        budget.limit(),
        budget.quotas().len(),
        budget.cgroup_version()
    );
    c.bench_function("refresh/system", |b| b.iter(|| black_box(budget.refresh()).unwrap()));
    c.bench_function("detect/system", |b| b.iter(|| black_box(cpus::detect()).unwrap()));

    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/cpus/v2-leaf-lower");
    let probe = Probe::with_root(fixture);
    let mut budget = probe.detect().expect("fixture v2-leaf-lower");
    c.bench_function("refresh/fixture-v2-3-levels", |b| b.iter(|| black_box(budget.refresh()).unwrap()));
}

criterion_group!(benches, refresh);
criterion_main!(benches);
