//! Unit tests of the control thread's ticks and schedstat reading.

use super::schedstat::read_runq_waits;
use super::*;
use crate::metrics::Degradation;
use crate::sampler::SampleError;
use crate::Pool;

/// `pool`'s entry as `register` makes it, but due now, with the adaptive policy starting at a
/// target of one, and its schedstat files closed (opened at the first reading).
fn entry_for(pool: &Pool) -> Entry {
    let entry = Entry::new(
        u64::MAX,
        &pool.shared,
        Policy::adaptive(),
        None,
        Duration::from_millis(10),
        pool.threads(),
    );
    Entry { state: PolicyState::new(1), next_due: Instant::now(), schedstat: None, ..entry }
}

#[test]
fn a_failed_sample_falls_back_to_every_worker_and_is_counted() {
    let pool = Pool::builder().policy(Policy::fixed(1)).threads(3).build().unwrap();
    assert_eq!(pool.target(), 1);
    let mut entry = entry_for(&pool);
    let failure = Err(SampleError("cannot read /proc/loadavg: gone".into()));
    tick(&mut entry, &pool.shared, &failure, None);
    tick(&mut entry, &pool.shared, &failure, None);
    assert_eq!(pool.target(), 3, "fallback: every worker");
    let metrics = pool.metrics();
    assert_eq!((metrics.sample_errors, metrics.decisions), (2, 0));
    assert!(WARNED.load(Ordering::Relaxed), "the first failure is logged");
    // A coasting pool whose sample fails is sampled every period again.
    entry.stride = crate::policy::coast::MAX_STRIDE;
    tick(&mut entry, &pool.shared, &failure, None);
    assert_eq!(entry.stride, 1, "a failed sample is not calm");
    // The pool still works.
    assert_eq!(pool.spawn(|| 5).join().unwrap(), 5);
}

/// The samples `tick` records (`COTENANT_RECORD_SAMPLES`) into `file`, in order.
fn recorded_waits(file: &std::path::Path) -> Vec<Option<u64>> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|line| {
            let field = line.split("\"workers_runq_wait_ns\": ").nth(1).expect("the field");
            field.split([',', '}']).next().unwrap().trim().parse().ok()
        })
        .collect()
}

#[test]
#[cfg_attr(cotenant_force_fallback, ignore = "needs Linux: the host sampler and System V token sets")]
fn with_shared_tokens_only_the_holders_wait_is_contention() {
    let mut sampler = HostSampler::system().expect("this Linux host's /proc can be sampled");
    if !std::path::Path::new("/proc/thread-self/schedstat").exists() {
        eprintln!("skipped: a kernel without schedstat (the wait is estimated otherwise)");
        return;
    }
    let name = format!("cotenant-test-control-holders-{}", std::process::id());
    /// Removes the recording however the test ends.
    struct RemoveFile(std::path::PathBuf);
    impl Drop for RemoveFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let path = std::env::temp_dir().join(format!("{name}.jsonl"));
    let _cleanup = (crate::tokens::RemoveNamed(name.clone()), RemoveFile(path.clone()));
    let set = Arc::new(crate::tokens::HostTokens::open(&name, 2).unwrap());
    // A fixed policy: the process's controller leaves the pool alone (it would count
    // fallback periods of its own); the entry below gets the adaptive policies.
    let pool = Pool::builder().policy(Policy::fixed(2)).host_tokens(set).build().unwrap();
    // The schedstat files are opened once every worker has said who it is.
    let started = Instant::now();
    while pool.shared.workers.iter().any(|w| w.tid.load(std::sync::atomic::Ordering::Acquire) == 0) {
        assert!(started.elapsed() < Duration::from_secs(10), "the workers did not start");
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut entry = entry_for(&pool);
    entry.policy = Policy::adaptive().sharing_host_tokens();
    entry.unshared_policy = Some(Policy::adaptive());
    entry.schedstat = Some(Vec::new());
    // create_new (O_EXCL): a file or link planted at the name fails the test, never
    // written through.
    let file = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path).unwrap()
    };
    let mut recorder = std::io::BufWriter::new(file);
    let mut tick_now = |entry: &mut Entry, recorder: &mut std::io::BufWriter<std::fs::File>| {
        std::thread::sleep(Duration::from_millis(2));
        tick(entry, &pool.shared, &sampler.read(), Some(recorder));
    };
    tick_now(&mut entry, &mut recorder); // baseline (and the workers' schedstat files)
    tick_now(&mut entry, &mut recorder);
    // 3 ms of wait while holding tokens: what the policy sees while the tokens are trusted.
    pool.shared.workers[0].token_wait_total.fetch_add(3_000_000, Ordering::Relaxed);
    tick_now(&mut entry, &mut recorder);
    // A task ran without a token: this period the wait of every worker counts again.
    pool.shared.host_tokens.as_ref().unwrap().ran_without.fetch_add(1, Ordering::Relaxed);
    pool.shared.workers[0].token_wait_total.fetch_add(3_000_000, Ordering::Relaxed);
    tick_now(&mut entry, &mut recorder);
    drop(recorder);
    let waits = recorded_waits(&path);
    assert_eq!(waits.len(), 3, "{waits:?}");
    assert!(waits.iter().all(Option::is_some), "{waits:?}");
    assert_eq!(waits[1], Some(3_000_000), "the holders' wait, and nothing else");
    assert_ne!(waits[2], Some(3_000_000), "the fallback period counts every worker's wait");
    assert_eq!(pool.metrics().token_fallback_periods, 1);
}

#[test]
fn an_unreadable_worker_schedstat_is_counted_once_and_opened_again_later() {
    if !std::path::Path::new("/proc/thread-self/schedstat").exists() {
        eprintln!("skipped: this kernel keeps no per-thread schedstat (CONFIG_SCHED_INFO)");
        return;
    }
    let pool = Pool::builder().policy(Policy::fixed(1)).threads(1).host_tokens_off().build().unwrap();
    let worker = &pool.shared.workers[0];
    let started = Instant::now();
    while worker.tid.load(Ordering::Acquire) == 0 {
        assert!(started.elapsed() < Duration::from_secs(60), "the worker did not start");
        std::thread::sleep(Duration::from_millis(1));
    }
    let tid = worker.tid.load(Ordering::Acquire);
    let mut entry = entry_for(&pool);
    // A thread id no thread has (beyond any pid_max): its schedstat cannot be opened.
    worker.tid.store(u64::from(u32::MAX), Ordering::Release);
    assert!(read_runq_waits(&mut entry, &pool.shared).is_none());
    assert_eq!(pool.metrics().degradations, 1, "the failure is counted");
    assert!(Degradation::WorkerSchedstat.logged(), "and logged");
    // Tried again when due, failing still: the same stretch, not counted again.
    entry.schedstat_retry_at = Some(Instant::now());
    assert!(read_runq_waits(&mut entry, &pool.shared).is_none());
    assert_eq!(pool.metrics().degradations, 1, "a stretch of failures counts once");
    // The file can be opened again: read again, not turned off for good.
    worker.tid.store(tid, Ordering::Release);
    entry.schedstat_retry_at = Some(Instant::now());
    assert!(read_runq_waits(&mut entry, &pool.shared).is_some(), "read again after the failures");
    assert!(read_runq_waits(&mut entry, &pool.shared).is_some());
    assert_eq!(pool.metrics().degradations, 1);
}

#[test]
#[cfg_attr(cotenant_force_fallback, ignore = "needs Linux: the host sampler and System V token sets")]
fn the_first_reading_only_sets_the_baseline() {
    let mut sampler = HostSampler::system().expect("this Linux host's /proc can be sampled");
    let pool = Pool::builder().policy(Policy::fixed(2)).threads(2).build().unwrap();
    let mut entry = entry_for(&pool);
    tick(&mut entry, &pool.shared, &sampler.read(), None);
    assert_eq!(pool.metrics().decisions, 0);
    std::thread::sleep(Duration::from_millis(5));
    tick(&mut entry, &pool.shared, &sampler.read(), None);
    assert_eq!(pool.metrics().decisions, 1);
    assert!((1..=2).contains(&pool.target()));
}

#[test]
fn a_pool_sampled_every_period_keeps_its_phase_and_never_catches_up() {
    let epoch = Instant::now();
    let ms = |n: u64| Duration::from_millis(n);
    let period = ms(10);
    // On time: one period after its due time, whatever the instant it ticked at.
    assert_eq!(next_due(epoch + ms(13), epoch + ms(14), period, 1, epoch), epoch + ms(23));
    // Fell behind by more than a period: one period from now, not a burst of catch-up ticks.
    assert_eq!(next_due(epoch + ms(13), epoch + ms(40), period, 1, epoch), epoch + ms(50));
}

#[test]
fn coasting_pools_with_the_same_stride_are_due_at_the_same_instants() {
    let epoch = Instant::now();
    let ms = |n: u64| Duration::from_millis(n);
    let period = ms(10);
    // Two pools out of phase (due at 13 and 17 ms), both coasting at four periods: the next
    // multiple of 40 ms after each tick, so both at 40 ms, then both at 80 ms.
    let first = next_due(epoch + ms(13), epoch + ms(13), period, 4, epoch);
    let second = next_due(epoch + ms(17), epoch + ms(17), period, 4, epoch);
    assert_eq!((first, second), (epoch + ms(40), epoch + ms(40)));
    assert_eq!(next_due(first, first, period, 4, epoch), epoch + ms(80));
    // At least a period ahead: ticked at 39 ms, the next multiple of 40 ms is 1 ms away, so
    // the sample after it, at 80 ms.
    assert_eq!(next_due(epoch + ms(39), epoch + ms(39), period, 4, epoch), epoch + ms(80));
    // Stride two lands on every other multiple of 20 ms, which includes those of 40 ms.
    assert_eq!(next_due(epoch + ms(41), epoch + ms(41), period, 2, epoch), epoch + ms(60));
    // Always after now, even ticked exactly on a grid point.
    assert!(next_due(epoch + ms(80), epoch + ms(80), period, 4, epoch) > epoch + ms(80));
}
