//! Splits the control thread's CPU cost into its parts, on this host: one `HostSampler::read`,
//! one `Limit::refresh` (inside it), the process clock, and the CPU a thread spends just to
//! sleep 10 ms and wake up (what any controller at one clock tick pays, whatever it does).
//!
//! `cargo run --release -p cotenant --example sampler_cost`

use std::time::{Duration, Instant};

/// CPU time of the calling thread, in nanoseconds.
fn thread_cpu() -> u64 {
    cotenant::internal::sampler::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID).expect("thread CPU clock")
}

fn main() {
    let mut sampler = cotenant::internal::sampler::HostSampler::system().expect("a Linux host with /proc");
    println!("{sampler:?}");
    let n = 2000u32;
    let (c0, t0) = (thread_cpu(), Instant::now());
    for _ in 0..n {
        sampler.read().expect("read");
    }
    println!(
        "HostSampler::read: {:?} wall, {} ns CPU per call",
        t0.elapsed() / n,
        (thread_cpu() - c0) / u64::from(n)
    );
    let mut budget = cotenant::cpus::detect().expect("detect");
    let c0 = thread_cpu();
    for _ in 0..n {
        budget.refresh().expect("refresh");
    }
    println!("  of which Limit::refresh: {} ns CPU per call", (thread_cpu() - c0) / u64::from(n));
    let c0 = thread_cpu();
    for _ in 0..n {
        cotenant::internal::sampler::process_cpu_ns().expect("process clock");
    }
    println!("  of which the process CPU clock: {} ns CPU per call", (thread_cpu() - c0) / u64::from(n));
    let wakes = 300u32;
    let (c0, t0) = (thread_cpu(), Instant::now());
    for _ in 0..wakes {
        std::thread::sleep(Duration::from_millis(10));
    }
    println!(
        "sleep(10 ms) and wake: {} ns CPU per wake-up ({:?} wall), {:.3} % of one CPU at 100 Hz",
        (thread_cpu() - c0) / u64::from(wakes),
        t0.elapsed() / wakes,
        (thread_cpu() - c0) as f64 / t0.elapsed().as_nanos() as f64 * 100.0
    );
}
