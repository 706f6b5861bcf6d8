//! Prints one Prometheus exposition of N pools run in this process, for a real parser to check
//! (`tools/promcheck`, `make metrics-check`):
//!
//! ```text
//! cargo run -p cotenant --example exposition -- 3 > metrics.txt
//! ```
//!
//! Each pool (`pool-0`, `pool-1`, ...) has a fixed policy of two workers and its task-time
//! histograms on, and runs a known number of tasks, some of which panic (their panics are
//! caught by the pool and not printed here). The pools are shut down before the render, so
//! every counter is final: `cotenant_pool_completed_total` is `TASKS` and both histograms
//! count as many tasks. The pools keep the builder's host-token default, so where they share a
//! token set its gauges are in the text too.

use std::process::ExitCode;

use cotenant::metrics::Registry;
use cotenant::{JoinError, Policy, Pool};

/// Tasks each pool runs.
const TASKS: u64 = 40;
/// Every `PANIC_EVERY`-th of them panics.
const PANIC_EVERY: u64 = 8;
/// The most pools the example builds.
const MAX_POOLS: usize = 16;

fn main() -> ExitCode {
    let pools = match pool_count(std::env::args().nth(1).as_deref()) {
        Ok(pools) => pools,
        Err(message) => {
            eprintln!("exposition: {message}");
            eprintln!("usage: exposition [POOLS]   (POOLS: 1 to {MAX_POOLS}, default 1)");
            return ExitCode::from(2);
        }
    };
    // The pools catch the deliberate panics; the default hook would still print each one.
    std::panic::set_hook(Box::new(|_| {}));
    match run(pools) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("exposition: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The pool count given on the command line.
fn pool_count(arg: Option<&str>) -> Result<usize, String> {
    let Some(arg) = arg else { return Ok(1) };
    match arg.parse::<usize>() {
        Ok(n) if (1..=MAX_POOLS).contains(&n) => Ok(n),
        _ => Err(format!("POOLS must be a number from 1 to {MAX_POOLS}, not {arg:?}")),
    }
}

/// Builds `count` pools, runs `TASKS` tasks on each, and renders them.
fn run(count: usize) -> Result<String, String> {
    let registry = Registry::new();
    let mut pools = Vec::with_capacity(count);
    for i in 0..count {
        let name = format!("pool-{i}");
        let pool = Pool::builder()
            .policy(Policy::fixed(2))
            .threads(2)
            .task_histograms(true)
            .name(name.as_str())
            .build()
            .map_err(|e| format!("building {name}: {e}"))?;
        registry.register(&name, &pool).map_err(|e| e.to_string())?;
        pools.push(pool);
    }
    for (i, pool) in pools.iter().enumerate() {
        let tasks: Vec<_> = (0..TASKS)
            .map(|n| {
                pool.spawn(move || {
                    if n % PANIC_EVERY == PANIC_EVERY - 1 {
                        panic!("a deliberate panic (task {n})");
                    }
                    (0..1_000 * (n + 1)).fold(0u64, |sum, x| sum.wrapping_add(x * x))
                })
            })
            .collect();
        let panicked = tasks
            .into_iter()
            .map(|task| task.join())
            .filter(|result| matches!(result, Err(JoinError::Panicked(_))))
            .count();
        let expected = (TASKS / PANIC_EVERY) as usize;
        if panicked != expected {
            return Err(format!("pool-{i}: {panicked} tasks panicked, expected {expected}"));
        }
        // Every worker gone: the counters are final.
        pool.shutdown();
    }
    Ok(registry.render())
}
