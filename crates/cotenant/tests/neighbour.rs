//! The adaptive pool on a real host: a neighbour process with as many busy threads as we have
//! CPUs starts, our target drops to 1; it exits, our target comes back. On this repository's
//! 2-CPU CI machine the issue asks for both within 100 ms. The neighbour is this test binary
//! re-executed in "burn" mode, killed (and reaped) on every exit path by a guard.
//!
//! Alone in its own test binary: nothing else of ours runs while it measures.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cotenant::{Policy, Pool};

const BURN_ENV: &str = "COTENANT_TEST_BURN_THREADS";
const READY: &str = "cotenant-neighbour-ready";
/// The deadline of the acceptance test.
const DEADLINE: Duration = Duration::from_millis(100);

/// Not a test: the neighbour's body when re-executed with `BURN_ENV` set.
#[test]
fn burn_helper() {
    let Ok(threads) = std::env::var(BURN_ENV) else { return };
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
            .args(["--exact", "burn_helper", "--nocapture", "--test-threads", "1"])
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

#[test]
fn adaptive_target_follows_a_busy_neighbour() {
    let cpus = cotenant::cpus::detect().unwrap().allowed_cpus() as usize;
    if cpus < 2 {
        eprintln!("skipped: needs at least 2 CPUs, this process may use {cpus}");
        return;
    }
    if std::env::var(BURN_ENV).is_ok() {
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
    // Alone and saturated, the controller runs every worker: wait for 20 decisions (200 ms at
    // the default period), then the target must be all of them or get there within 2 s. A
    // snapshot alone was flaky (one CI run in many saw a momentary 1/2 at decision 20, from a
    // burst of host noise); the property is that alone the pool runs every CPU, not that no
    // single decision ever reacts to the host.
    let start = Instant::now();
    while pool.metrics().decisions < 20 && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let alone = pool.metrics();
    assert!(alone.decisions >= 20, "the controller made only {} decisions in 10 s", alone.decisions);
    assert!(
        time_until_target(&pool, cpus, Duration::from_secs(2)).is_some(),
        "alone and saturated, the target should be every CPU: {}",
        pool.metrics()
    );

    let neighbour = Neighbour::start(cpus);
    let shrink = time_until_target(&pool, 1, Duration::from_secs(2));
    let after_shrink = pool.target();
    neighbour.stop();
    let grow = time_until_target(&pool, cpus, Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    feeder.join().unwrap();
    let metrics = pool.metrics();
    pool.shutdown_now();

    eprintln!("shrink to 1 after {shrink:?}, back to {cpus} after {grow:?}; {metrics}");
    let shrink = shrink.unwrap_or_else(|| panic!("target never dropped to 1 (it was {after_shrink})"));
    let grow = grow.unwrap_or_else(|| panic!("target never came back to {cpus}"));
    assert!(shrink <= DEADLINE, "took {shrink:?} to drop to 1; the deadline is {DEADLINE:?}");
    assert!(grow <= DEADLINE, "took {grow:?} to come back to {cpus}; the deadline is {DEADLINE:?}");
    assert_eq!(metrics.sample_errors, 0);
}
