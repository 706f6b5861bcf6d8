//! A rayon thread pool sized by [`cotenant::cpus::get`] rather than by rayon's default.
//!
//! ```text
//! cargo run -p cotenant-examples --bin rayon_sized
//! ```

use std::process::ExitCode;

use rayon::prelude::*;

/// The primes below this bound are counted; there are 9 592 of them.
const BOUND: u64 = 100_000;

fn main() -> ExitCode {
    // rayon starts one thread per CPU it sees (`available_parallelism`). Recent Rust counts the
    // cgroup quota there too; older Rust, `num_cpus` and most other runtimes do not, and in a
    // container limited to 1.5 CPUs on a 64-CPU host they say 64: 64 busy threads use the quota
    // up early in each period and are throttled for the rest of it, which shows as tail latency.
    // `cotenant::cpus::get` counts the cgroup quota of the process and of every ancestor,
    // rounded down (1 here), says why through `cpus::detect`, and never fails (it falls back to
    // `available_parallelism`).
    let threads = cotenant::cpus::get();
    let pool = match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
        Ok(pool) => pool,
        Err(error) => {
            eprintln!("rayon_sized: cannot start the thread pool: {error}");
            return ExitCode::FAILURE;
        }
    };
    let primes = pool.install(|| (2..BOUND).into_par_iter().filter(|&n| is_prime(n)).count());
    println!("rayon_sized: {threads} threads (cotenant::cpus::get), {primes} primes below {BOUND}");
    if primes != 9_592 {
        eprintln!("rayon_sized: expected 9592 primes below {BOUND}, counted {primes}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

fn is_prime(n: u64) -> bool {
    n >= 2 && (2..).take_while(|d| d * d <= n).all(|d| n % d != 0)
}
