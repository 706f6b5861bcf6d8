//! The cost of re-reading a CPU budget, which the pool does every clock tick.
//!
//! `refresh/system` re-reads this process's real budget (affinity by system call, the cpuset
//! file, every quota level); `detect/system` resolves everything from scratch, for comparison.
//! The `fixture-*` cases re-read a three-level v2 tree from the test vectors, on whatever file
//! system holds the checkout: they measure cotenant's own overhead, not cgroupfs.
//! The `file/*` pair compares, in the same run, the two ways of re-reading one cgroup file:
//! open+read+close by path, and `pread` at offset 0 on a file kept open (what refresh does).
//!
//! Run: `make bench` (or `cargo bench -p cotenant --bench refresh`).

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use cotenant::cpus::{self, Origin, Probe};
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::{fs::File, os::unix::fs::FileExt};

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

    // The file the binding quota level reads (on this process's real cgroup file system).
    let quota_file = budget.quotas().iter().find_map(|l| match l.quota.origin() {
        Some(Origin::File(p)) => Some(p.clone()),
        _ => None,
    });
    if let Some(path) = quota_file {
        eprintln!("file/* cases read {}", path.display());
        c.bench_function("file/open-read-close", |b| b.iter(|| black_box(std::fs::read(&path).unwrap())));
        let file = File::open(&path).unwrap();
        let mut buf = [0u8; 512];
        c.bench_function("file/pread-at-0", |b| b.iter(|| black_box(file.read_at(&mut buf, 0).unwrap())));
    }

    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/cpus/v2-leaf-lower");
    let probe = Probe::with_root(fixture);
    let mut budget = probe.detect().expect("fixture v2-leaf-lower");
    c.bench_function("refresh/fixture-v2-3-levels", |b| b.iter(|| black_box(budget.refresh()).unwrap()));
}

criterion_group!(benches, refresh);
criterion_main!(benches);
