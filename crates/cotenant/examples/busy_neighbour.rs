//! The default pool next to a process that does not cooperate (issue 33, "non-members still
//! count"): a neighbour with 1 or 2 busy threads starts while the pool is saturated; how soon
//! the pool's target falls below the CPU count, and its service p99 against a fixed pool of one
//! thread per CPU, the two alternated round by round in one run.
//!
//! ```sh
//! cargo run --release -p cotenant --example busy_neighbour -- --rounds 3 --seconds 5
//! ```
//!
//! Items are a fixed amount of CPU work (about 2.5 ms alone, calibrated at start), so that a
//! preempted item takes longer; a submitter keeps two items per CPU in flight (spawn, then
//! join them all). The neighbour is this program re-executed with `--burn N`, killed (and
//! reaped) when a round ends or the program exits.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cotenant::{Policy, Pool};

struct Neighbour(Child);

impl Neighbour {
    fn start(threads: usize) -> Neighbour {
        let mut child = Command::new(std::env::current_exe().expect("own path"))
            .args(["--burn", &threads.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the neighbour");
        let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
        let neighbour = Neighbour(child);
        match lines.next() {
            Some(Ok(line)) if line == "ready" => neighbour,
            other => panic!("the neighbour did not start: {other:?}"),
        }
    }
}

impl Drop for Neighbour {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The neighbour's body: `threads` busy threads until stdin closes or it is killed.
fn burn(threads: usize) {
    for _ in 0..threads {
        std::thread::spawn(|| loop {
            std::hint::black_box(0u64.wrapping_add(1));
        });
    }
    println!("ready");
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
}

/// A fixed amount of work: `iterations` rounds of an arithmetic loop.
fn work(iterations: u64) -> u64 {
    let mut x = 0u64;
    for i in 0..iterations {
        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
    }
    x
}

/// Iterations that take about `target` alone.
fn calibrate(target: Duration) -> u64 {
    let mut iterations = 1_000u64;
    loop {
        let start = Instant::now();
        work(iterations);
        let took = start.elapsed();
        if took >= Duration::from_millis(20) {
            return (iterations as f64 * target.as_secs_f64() / took.as_secs_f64()) as u64;
        }
        iterations *= 2;
    }
}

struct Outcome {
    /// From the neighbour's start until the target fell below the CPU count (None: never).
    shrink: Option<Duration>,
    service_p50_ms: f64,
    service_p99_ms: f64,
    items_per_s: f64,
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * q).round() as usize]
}

fn measure(pool: Pool, cpus: usize, busy: usize, iterations: u64, seconds: u64) -> Outcome {
    let pool = Arc::new(pool);
    let stop = Arc::new(AtomicBool::new(false));
    let submitter = {
        let (pool, stop) = (pool.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut services = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let tasks: Vec<_> = (0..2 * cpus)
                    .map(|_| {
                        pool.spawn(move || {
                            let start = Instant::now();
                            work(iterations);
                            start.elapsed()
                        })
                    })
                    .collect();
                services.extend(tasks.into_iter().map(|t| t.join().expect("item").as_secs_f64() * 1e3));
            }
            services
        })
    };
    // Saturated and alone for a moment, then the neighbour starts.
    std::thread::sleep(Duration::from_millis(300));
    let neighbour = Neighbour::start(busy);
    let started = Instant::now();
    let mut shrink = None;
    while started.elapsed() < Duration::from_secs(seconds) {
        if shrink.is_none() && pool.target() < cpus {
            shrink = Some(started.elapsed());
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    stop.store(true, Ordering::Relaxed);
    let mut services = submitter.join().expect("submitter");
    drop(neighbour);
    services.sort_by(f64::total_cmp);
    Outcome {
        shrink,
        service_p50_ms: percentile(&services, 0.5),
        service_p99_ms: percentile(&services, 0.99),
        items_per_s: services.len() as f64 / (seconds as f64 + 0.3),
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str, default: u64| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .map(|v| v.parse().unwrap_or_else(|_| panic!("{flag}: not a number: {v}")))
            .unwrap_or(default)
    };
    if args.iter().any(|a| a == "--burn") {
        burn(value("--burn", 1) as usize);
        return;
    }
    let (rounds, seconds) = (value("--rounds", 3), value("--seconds", 5));
    let cpus = cotenant::cpus::detect().expect("CPU count").allowed_cpus() as usize;
    let iterations = calibrate(Duration::from_micros(2500));
    println!("{cpus} CPUs; items of ~2.5 ms alone ({iterations} iterations); {rounds} rounds of {seconds} s");
    println!("| busy threads | round | pool | target below {cpus} after | service p50 ms | service p99 ms | items/s |");
    println!("|---:|---:|---|---:|---:|---:|---:|");
    for busy in [1, 2] {
        let mut p99 = [Vec::new(), Vec::new()];
        for round in 0..rounds {
            // Alternated: the default pool first in even rounds, the fixed one in odd ones.
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for which in order {
                let (name, pool) = match which {
                    0 => ("default", Pool::builder().build()),
                    _ => {
                        ("fixed(CPUs)", Pool::builder().policy(Policy::fixed(cpus)).host_tokens_off().build())
                    }
                };
                let outcome = measure(pool.expect("pool"), cpus, busy, iterations, seconds);
                let shrink = outcome.shrink.map_or("never".to_owned(), |d| format!("{} ms", d.as_millis()));
                println!(
                    "| {busy} | {round} | {name} | {shrink} | {:.2} | {:.2} | {:.0} |",
                    outcome.service_p50_ms, outcome.service_p99_ms, outcome.items_per_s
                );
                p99[which].push(outcome.service_p99_ms);
            }
        }
        let (default, fixed) = (median(p99[0].clone()), median(p99[1].clone()));
        println!(
            "\n{busy} busy thread(s): median service p99 default {default:.2} ms, fixed {fixed:.2} ms: fixed / default = {:.2}x\n",
            fixed / default
        );
    }
}
