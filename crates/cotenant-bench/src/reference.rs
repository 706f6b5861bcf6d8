//! `reference`: the seed's public friendlypool design (seed 000 §5), re-implemented as the
//! baseline cotenant's pool has to beat, **with its documented weaknesses kept on purpose**.
//!
//! Fixing them here would flatter the baseline and hide what cotenant's pool is for, so this module
//! is deliberately not a good pool. Do not "improve" it; do not use it outside the benchmark.
//!
//! The design, step by step:
//!
//! 1. [`Pool::submit`] sends the boxed task on a **rendezvous** channel
//!    (`crossbeam_channel::bounded(0)`): the caller blocks until a worker takes the task.
//! 2. `n` worker threads take tasks with `recv_timeout(PERIOD)`, so that each re-checks, at least
//!    once per period, whether it may still run.
//! 3. A control thread, every [`PERIOD`], reads the user + system ticks of the aggregate `cpu`
//!    line of `/proc/stat` ("all") and this process's utime + stime from `/proc/self/stat`
//!    ("self"), and stores `active = max(1, ceil(Δself / Δall × cpus))` in an `AtomicUsize`.
//! 4. Worker `i` runs while `i <= active`; otherwise it sleeps one period and checks again.
//! 5. [`Pool::shutdown`] sets a stop flag, drops the `Sender` and joins every thread.
//!
//! The weaknesses kept:
//!
//! - **Rendezvous submit** (step 1): there is no queue. Every submit waits for a worker to be idle
//!   and awake; a burst cannot be absorbed and the submitter runs at the pace of the hand-off.
//! - **A 500 ms period** (step 3): the period is `1000 / libc::_SC_CLK_TCK` ms. `_SC_CLK_TCK` is
//!   the *name* that `sysconf` takes (2 on Linux), not the tick rate `sysconf` returns (usually
//!   100 Hz), so the control loop runs every 500 ms instead of every 10 ms clock tick.
//! - **An off-by-one** (step 4): `i <= active` lets `active + 1` workers run: the pool never
//!   shrinks to one worker and overcommits by one thread whenever it shrinks at all.
//! - **Timed polling** (steps 2 and 4): a "parked" worker is a worker in `thread::sleep(PERIOD)`.
//!   It notices new room up to a period late, and every idle worker wakes once per period to poll.
//! - **Coarse accounting** (step 3): "all" counts only the user and system columns of `/proc/stat`
//!   (not nice, irq, softirq or steal), and the first sample is compared against zero, i.e.
//!   against the whole time since boot. `active` starts at 0 (worker 0 alone) until that sample.

use std::fs;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use cotenant::internal::procfs::pidstat;

/// The control period: `1000 / libc::_SC_CLK_TCK` milliseconds, i.e. 500 ms on Linux, where the
/// design meant one clock tick (10 ms at 100 Hz). Kept on purpose: see the module doc.
pub const PERIOD: Duration = Duration::from_millis(1000 / libc::_SC_CLK_TCK as u64);

/// A boxed task, as the channel carries it.
type Job = Box<dyn FnOnce() + Send + 'static>;

/// The friendlypool, weaknesses included (see the module doc).
pub struct Pool {
    /// The rendezvous sender; `None` once shut down, which disconnects the workers.
    tx: Option<Sender<Job>>,
    /// Set by shutdown; every thread checks it at least once per period.
    stop: Arc<AtomicBool>,
    /// The workers and the control thread.
    threads: Vec<JoinHandle<()>>,
}

impl Pool {
    /// Starts `workers` worker threads and the control thread, which scales by `cpus` (the
    /// number of CPUs the `/proc/stat` totals cover).
    pub fn new(workers: usize, cpus: usize) -> std::io::Result<Self> {
        let (tx, rx) = crossbeam_channel::bounded::<Job>(0);
        let stop = Arc::new(AtomicBool::new(false));
        let active = Arc::new(AtomicUsize::new(0));
        // Built first so that, if a spawn fails, dropping it stops and joins what was started.
        let mut pool =
            Self { tx: Some(tx), stop: Arc::clone(&stop), threads: Vec::with_capacity(workers + 1) };
        for index in 0..workers {
            let (rx, stop, active) = (rx.clone(), Arc::clone(&stop), Arc::clone(&active));
            let handle = thread::Builder::new()
                .name(format!("reference-{index}"))
                .spawn(move || worker(index, &rx, &stop, &active))?;
            pool.threads.push(handle);
        }
        let handle = thread::Builder::new()
            .name("reference-ctl".to_owned())
            .spawn(move || control(cpus, &stop, &active))?;
        pool.threads.push(handle);
        Ok(pool)
    }

    /// Hands `f` to a worker, blocking until one takes it (the channel has no capacity).
    ///
    /// # Panics
    ///
    /// If every worker thread has exited, which only a panicking task can cause.
    pub fn submit<F>(&self, f: F)
    where
        F: FnOnce() + Send + 'static,
    {
        let tx = self.tx.as_ref().expect("the pool is shut down only by consuming it");
        tx.send(Box::new(f)).expect("reference pool: every worker has exited");
    }

    /// Stops the control thread and the workers and joins them all. A task handed over has
    /// already been taken by a worker (the channel holds none), and runs to completion first.
    ///
    /// Takes up to one [`PERIOD`]: sleeping threads only notice the stop flag when they wake.
    pub fn shutdown(mut self) -> Result<(), String> {
        self.stop_and_join()
    }

    /// Shared by [`Pool::shutdown`] and `Drop`; does nothing the second time.
    fn stop_and_join(&mut self) -> Result<(), String> {
        self.stop.store(true, Ordering::Relaxed);
        // Dropping the only sender wakes workers blocked in `recv_timeout` with `Disconnected`.
        self.tx = None;
        let panicked = self.threads.drain(..).map(JoinHandle::join).filter(Result::is_err).count();
        if panicked == 0 {
            Ok(())
        } else {
            Err(format!("reference pool: {panicked} thread(s) panicked"))
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // Errors were reported by `shutdown` if it was called; a plain drop has no one to tell.
        let _ = self.stop_and_join();
    }
}

/// Worker `index`: run tasks while `index <= active`, otherwise poll by sleeping.
fn worker(index: usize, rx: &Receiver<Job>, stop: &AtomicBool, active: &AtomicUsize) {
    while !stop.load(Ordering::Relaxed) {
        // The original's off-by-one, kept: `<=` lets `active + 1` workers run.
        if index > active.load(Ordering::Relaxed) {
            thread::sleep(PERIOD);
            continue;
        }
        match rx.recv_timeout(PERIOD) {
            Ok(job) => job(),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
}

/// The control thread: every [`PERIOD`], `active = max(1, ceil(Δself / Δall × cpus))`.
fn control(cpus: usize, stop: &AtomicBool, active: &AtomicUsize) {
    // (self, all) at the previous sample; zero at first, as in the original, so the first sample
    // measures the process against everything since boot.
    let mut previous = (0_u64, 0_u64);
    while !stop.load(Ordering::Relaxed) {
        // A failed read skips this period (the original would panic); the baseline is kept.
        if let (Some(own), Some(all)) = (process_ticks(), host_user_system_ticks()) {
            let own_delta = own.saturating_sub(previous.0);
            let all_delta = all.saturating_sub(previous.1);
            if all_delta > 0 {
                let share = own_delta as f64 / all_delta as f64;
                let wanted = (share * cpus as f64).ceil() as usize;
                active.store(wanted.max(1), Ordering::Relaxed);
            }
            previous = (own, all);
        }
        thread::sleep(PERIOD);
    }
}

/// This process's utime + stime, in clock ticks.
fn process_ticks() -> Option<u64> {
    pidstat::parse(&fs::read_to_string("/proc/self/stat").ok()?).ok().map(|p| p.cpu_ticks)
}

/// The host's user + system ticks, summed over all CPUs.
fn host_user_system_ticks() -> Option<u64> {
    user_system_ticks(&fs::read_to_string("/proc/stat").ok()?)
}

/// User + system ticks of the aggregate `cpu` line of a `/proc/stat` text (columns 1 and 3;
/// nice, column 2, is left out as the original leaves it out).
fn user_system_ticks(proc_stat: &str) -> Option<u64> {
    let line = proc_stat.lines().find(|line| line.starts_with("cpu "))?;
    let mut columns = line.split_ascii_whitespace().skip(1);
    let user: u64 = columns.next()?.parse().ok()?;
    let system: u64 = columns.nth(1)?.parse().ok()?;
    user.checked_add(system)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn the_period_keeps_the_sysconf_name_mistake() {
        // 1000 / _SC_CLK_TCK (the name, 2), not 1000 / sysconf(_SC_CLK_TCK) (the rate, ~100).
        assert_eq!(PERIOD, Duration::from_millis(500));
    }

    #[test]
    fn all_counts_user_and_system_of_the_aggregate_line_only() {
        let text = "cpu  100 5 50 1000 3 7 2 9 0 0\ncpu0 60 5 30 500 1 3 1 4 0 0\nintr 1\n";
        assert_eq!(user_system_ticks(text), Some(150));
        assert_eq!(user_system_ticks("cpu0 1 2 3\n"), None);
    }

    #[test]
    fn runs_every_task_submitted_and_shuts_down() {
        let pool = Pool::new(2, 2).unwrap();
        let ran = Arc::new(AtomicU64::new(0));
        for _ in 0..200 {
            let ran = Arc::clone(&ran);
            pool.submit(move || {
                ran.fetch_add(1, Ordering::Relaxed);
            });
        }
        pool.shutdown().unwrap();
        assert_eq!(ran.load(Ordering::Relaxed), 200);
    }
}
