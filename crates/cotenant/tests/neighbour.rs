//! The adaptive pool on a real host: a neighbour process with as many busy threads as we have
//! CPUs starts, our target drops to 1; it exits, our target comes back. The neighbour is this
//! test binary re-executed to run the ignored `burn_helper`, killed (and reaped) on every exit
//! path by a guard.
//!
//! What is asserted is that the target moves, within deadlines generous enough for a loaded CI
//! host. How fast it moves (the "within 100 ms on the 2-CPU test machine") is a
//! product claim, a measurement for a quiet host rather than a unit test's assertion: the
//! times are printed, and asserted only when `COTENANT_NEIGHBOUR_DEADLINE_MS` asks for it.
//!
//! The test needs a host that is quiet apart from it: a pool next to other busy processes
//! shrinks before our neighbour arrives, and cannot show it arriving. It measures the other
//! processes' CPU use and skips, saying so, when they use half a CPU or more.
//!
//! Alone in its own test binary: nothing else of ours runs while it measures.

// The host sampler reads Linux's /proc: under the fallback for other systems a pool keeps
// every worker (`tests/fallback.rs`), and there is no neighbour to follow.
#![cfg(not(cotenant_force_fallback))]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cotenant::internal::sampler::{HostCounters, HostDelta, HostSampler};
use cotenant::{Policy, Pool};

const BURN_ENV: &str = "COTENANT_TEST_BURN_THREADS";
const READY: &str = "cotenant-neighbour-ready";
/// How long the target may take to move: generous, so that a loaded host does not fail the
/// test; a controller that never reacts still does.
const GENEROUS: Duration = Duration::from_secs(30);
/// Milliseconds: when set, the reaction times are also asserted against it (the product
/// claim, 100 on the project's quiet 2-CPU machine).
const DEADLINE_ENV: &str = "COTENANT_NEIGHBOUR_DEADLINE_MS";
/// Other processes using this many CPUs or more make the host too busy for this test.
const BUSY_HOST_CPUS: f64 = 0.5;
/// How long the other processes' CPU use is measured before the test starts.
const QUIET_WINDOW: Duration = Duration::from_secs(1);

/// The neighbour's body, not a test: ignored, so that it never counts as a passing test, and
/// run by `Neighbour::start` with `--ignored --exact burn_helper` and `BURN_ENV` set.
#[test]
#[ignore = "the neighbour process of adaptive_target_follows_a_busy_neighbour, started by it"]
fn burn_helper() {
    let Ok(threads) = std::env::var(BURN_ENV) else {
        eprintln!(
            "burn_helper is the neighbour of adaptive_target_follows_a_busy_neighbour: nothing to do alone"
        );
        return;
    };
    let threads: usize = threads.parse().expect("thread count");
    for _ in 0..threads {
        std::thread::spawn(|| loop {
            std::hint::black_box(0u64.wrapping_add(1));
        });
    }
    println!("\n{READY}");
    // Until killed; exit if the parent died (stdin closes).
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    std::process::exit(0);
}

struct Neighbour(Child);

impl Neighbour {
    fn start(threads: usize) -> Neighbour {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "burn_helper", "--nocapture", "--test-threads", "1"])
            .env(BURN_ENV, threads.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the neighbour");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let neighbour = Neighbour(child);
        while let Some(Ok(line)) = lines.next() {
            if line.contains(READY) {
                return neighbour;
            }
        }
        panic!("the neighbour exited before it was ready");
    }

    fn stop(mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Neighbour {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Polls `pool.target()` every 200 µs until `want` or `limit`; returns how long it took.
fn time_until_target(pool: &Pool, want: usize, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if pool.target() == want {
            return Some(start.elapsed());
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    None
}

/// CPUs (of those this process may use) that other processes used between `before` and now.
fn others_cpus(sampler: &mut HostSampler, before: &HostCounters) -> f64 {
    let now = sampler.read().expect("reading the host's CPU counters");
    let delta = HostDelta::between(before, &now).expect("the allowed CPUs changed during the test");
    delta.busy_ns.saturating_sub(delta.self_ns) as f64 / delta.elapsed_ns as f64
}

/// The reaction-time bound asked for in `DEADLINE_ENV`, if any.
fn claimed_deadline() -> Option<Duration> {
    let text = std::env::var(DEADLINE_ENV).ok()?;
    let ms: u64 =
        text.trim().parse().unwrap_or_else(|_| panic!("{DEADLINE_ENV}={text:?}: not a number of ms"));
    Some(Duration::from_millis(ms))
}

#[test]
fn adaptive_target_follows_a_busy_neighbour() {
    let cpus = cotenant::cpus::detect().unwrap().allowed_cpus() as usize;
    if cpus < 2 {
        eprintln!("skipped: needs at least 2 CPUs, this process may use {cpus}");
        return;
    }
    // A Linux host with /proc: sampling it must work (the controller depends on it).
    let mut sampler = HostSampler::system().expect("HostSampler::system on this host");
    let quiet_from = sampler.read().expect("reading the host's CPU counters");
    std::thread::sleep(QUIET_WINDOW);
    let others = others_cpus(&mut sampler, &quiet_from);
    if others >= BUSY_HOST_CPUS {
        eprintln!(
            "skipped: other processes used {others:.2} of this process's {cpus} CPUs over {QUIET_WINDOW:?}; \
             next to them the pool shrinks before our neighbour arrives, which it then cannot show"
        );
        return;
    }

    let pool = Arc::new(Pool::builder().policy(Policy::adaptive()).threads(cpus).build().unwrap());
    // Keep the pool saturated: a feeder keeps the queue non-empty with 1 ms busy tasks.
    let stop = Arc::new(AtomicBool::new(false));
    let feeder = {
        let (pool, stop) = (pool.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                pool.execute(|| {
                    let until = Instant::now() + Duration::from_millis(1);
                    while Instant::now() < until {
                        std::hint::spin_loop();
                    }
                });
            }
        })
    };
    /// Stops the feeder however the test ends (it would otherwise feed a pool nobody drains).
    struct StopFeeder(Arc<AtomicBool>);
    impl Drop for StopFeeder {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let stop_feeder = StopFeeder(stop);

    // Alone and saturated, the controller runs every worker: wait for 20 decisions, then the
    // target must be all of them or get there. A snapshot alone was flaky (one CI run in many
    // saw a momentary 1/2 at decision 20, from a burst of host noise); the property is that
    // alone the pool runs every CPU, not that no single decision ever reacts to the host.
    let alone_from = sampler.read().expect("reading the host's CPU counters");
    let start = Instant::now();
    while pool.metrics().decisions < 20 && start.elapsed() < GENEROUS {
        std::thread::sleep(Duration::from_millis(5));
    }
    let alone = pool.metrics();
    assert!(alone.decisions >= 20, "the controller made only {} decisions in {GENEROUS:?}", alone.decisions);
    if time_until_target(&pool, cpus, GENEROUS).is_none() {
        let others = others_cpus(&mut sampler, &alone_from);
        if others >= BUSY_HOST_CPUS {
            eprintln!("skipped: the host got busy (other processes used {others:.2} CPUs) before the neighbour came");
            return;
        }
        panic!(
            "alone and saturated (other processes used {others:.2} CPUs), the target should be every CPU: {}",
            pool.metrics()
        );
    }

    let neighbour = Neighbour::start(cpus);
    let shrink = time_until_target(&pool, 1, GENEROUS);
    let after_shrink = pool.target();
    neighbour.stop();
    let gone_from = sampler.read().expect("reading the host's CPU counters");
    let grow = time_until_target(&pool, cpus, GENEROUS);
    let others_after = others_cpus(&mut sampler, &gone_from);
    drop(stop_feeder);
    feeder.join().unwrap();
    let metrics = pool.metrics();
    pool.shutdown_now();

    eprintln!("shrink to 1 after {shrink:?}, back to {cpus} after {grow:?}; {metrics}");
    let shrink =
        shrink.unwrap_or_else(|| panic!("target never dropped to 1 in {GENEROUS:?} (it was {after_shrink})"));
    let Some(grow) = grow else {
        if others_after >= BUSY_HOST_CPUS {
            eprintln!("skipped the growth check: other processes used {others_after:.2} CPUs after the neighbour left");
            return;
        }
        panic!(
            "target never came back to {cpus} in {GENEROUS:?} (other processes used {others_after:.2} CPUs)"
        );
    };
    if let Some(deadline) = claimed_deadline() {
        assert!(shrink <= deadline, "took {shrink:?} to drop to 1; {DEADLINE_ENV} asks for {deadline:?}");
        assert!(
            grow <= deadline,
            "took {grow:?} to come back to {cpus}; {DEADLINE_ENV} asks for {deadline:?}"
        );
    }
    assert_eq!(metrics.sample_errors, 0);
}
