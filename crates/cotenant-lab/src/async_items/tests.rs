//! Unit tests of the async items' executors: every item of a short schedule runs, after its
//! timer, on each of the three; a pool kind is refused.

use super::*;

/// Each executor runs every item of a schedule, after its timer, with its times recorded.
#[test]
fn every_executor_runs_every_item_after_its_timer() {
    let calibration = Calibration { chunks: 1, chunk_ns: 1.0, target_ns: 1, exact_cpu: false };
    let schedule = workload::schedule(workload::Arrivals::Uniform, 1000.0, Duration::from_millis(10), 0);
    let wait = Duration::from_millis(1);
    for kind in [PoolKind::TokioDefault, PoolKind::TokioOptimal, PoolKind::CotenantAsync] {
        let pool = || -> anyhow::Result<cotenant::Pool> {
            Ok(cotenant::Pool::builder().policy(cotenant::Policy::fixed(2)).host_tokens_off().build()?)
        };
        let executor = Executor::build(kind, 2, pool).unwrap();
        assert!(executor.workers() >= 1 && executor.pool().is_some() == (kind == PoolKind::CotenantAsync));
        let items = executor.run(calibration, &schedule, wait, None);
        executor.shutdown();
        assert_eq!(items.len(), schedule.len(), "{kind:?}");
        // A timer never fires early: every item starts at least `wait` after its arrival.
        let waited = |i: &ItemTimes| i.started >= i.intended + wait.as_nanos() as u64;
        assert!(items.iter().all(|i| waited(i) && i.ended >= i.started), "{kind:?}: {items:?}");
    }
}

#[test]
fn a_pool_kind_is_no_executor() {
    let error = Executor::build(PoolKind::Adaptive, 2, || unreachable!()).err().unwrap();
    assert_eq!(error.to_string(), "--pool adaptive: not an executor of async items");
}
