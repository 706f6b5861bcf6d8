//! `--global-pool`: the cost of a CPU budget's global pool under many threads, with the pool
//! behind a lock-free atomic (cotenant's [`cotenant::internal::bandwidth::Bandwidth`]), a `Mutex`, or a
//! test-and-test-and-set spinlock like the kernel's `cfs_b->lock` (seed 001 §III-B and its
//! Figure 9, in user space; issue 7, item 4).
//!
//! Each thread loops: take a slice from the pool, "run" it (busy-wait on the wall clock for the
//! slice length), charge what it used (the measured run, a little more than the slice). The time spent inside take + charge is the accounting
//! cost; it includes two `Instant::now` calls (about 20-40 ns here), the same for every kind.
//! The quota is set far above what the threads can use, so nobody is ever throttled: only the
//! pool's synchronisation is measured. With more threads than CPUs, a spinlock's holder can be
//! preempted while the others spin out their time slices: that is the case the seed's atomic
//! pool removes.
//!
//! Kinds are interleaved in rounds (round `r` runs them in an order rotated by `r`), and the
//! tables give medians, spreads and ratios to the best kind of the same run.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use cotenant::internal::bandwidth::{Bandwidth, Slice};

use crate::report::{self, Better};

/// How the global pool is synchronised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Atomic,
    Mutex,
    Spinlock,
}

impl Kind {
    const ALL: [Kind; 3] = [Kind::Atomic, Kind::Mutex, Kind::Spinlock];

    fn name(self) -> &'static str {
        match self {
            Kind::Atomic => "atomic (cotenant::internal::bandwidth)",
            Kind::Mutex => "std Mutex",
            Kind::Spinlock => "spinlock (TTAS)",
        }
    }
}

/// The locked pools' state: the same accounting as `Bandwidth` without the slush fund.
struct State {
    period: u64,
    balance: i64,
}

/// A test-and-test-and-set spinlock: spins on a load, then tries the swap; never yields.
struct SpinLock<T> {
    locked: AtomicBool,
    value: std::cell::UnsafeCell<T>,
}

// SAFETY: access to `value` is serialised by `locked` (acquire on lock, release on unlock).
unsafe impl<T: Send> Sync for SpinLock<T> {}

impl<T> SpinLock<T> {
    fn new(value: T) -> Self {
        SpinLock { locked: AtomicBool::new(false), value: std::cell::UnsafeCell::new(value) }
    }

    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        loop {
            if !self.locked.load(Ordering::Relaxed) && !self.locked.swap(true, Ordering::Acquire) {
                break;
            }
            std::hint::spin_loop();
        }
        // SAFETY: we hold the lock until the store below.
        let out = f(unsafe { &mut *self.value.get() });
        self.locked.store(false, Ordering::Release);
        out
    }
}

/// One global pool of either kind.
enum Pool {
    Atomic(Bandwidth),
    Mutex(Mutex<State>, i64, u64),
    Spin(SpinLock<State>, i64, u64),
}

/// Refill and take, the logic shared by the two locked kinds.
fn take_locked(state: &mut State, quota: i64, period_ns: u64, slice_ns: u64, now_ns: u64) -> Option<u64> {
    let now_period = now_ns / period_ns;
    if now_period > state.period {
        state.balance = (state.balance + quota).min(quota);
        state.period = now_period;
    }
    if state.balance <= 0 {
        return None;
    }
    let ns = slice_ns.min(state.balance as u64);
    state.balance -= ns as i64;
    Some(ns)
}

impl Pool {
    fn new(kind: Kind, slice_ns: u64) -> Pool {
        // A quota no thread can exhaust: 10^5 CPUs per 100 ms period.
        const CPUS: f64 = 1e5;
        const PERIOD_NS: u64 = 100_000_000;
        let quota = (CPUS * PERIOD_NS as f64) as i64;
        let state = || State { period: 0, balance: quota };
        match kind {
            Kind::Atomic => {
                Pool::Atomic(Bandwidth::new(CPUS, PERIOD_NS, slice_ns, true).expect("a valid budget"))
            }
            Kind::Mutex => Pool::Mutex(Mutex::new(state()), quota, PERIOD_NS),
            Kind::Spinlock => Pool::Spin(SpinLock::new(state()), quota, PERIOD_NS),
        }
    }

    /// Takes a slice and charges `used` for it afterwards: one slice's accounting.
    fn take(&self, slice_ns: u64, now_ns: u64) -> Option<Slice> {
        match self {
            Pool::Atomic(b) => b.take(now_ns).ok(),
            Pool::Mutex(m, quota, period) => {
                let ns = take_locked(&mut m.lock().unwrap(), *quota, *period, slice_ns, now_ns)?;
                Some(Slice { ns, period: 0 })
            }
            Pool::Spin(s, quota, period) => {
                let ns = s.with(|state| take_locked(state, *quota, *period, slice_ns, now_ns))?;
                Some(Slice { ns, period: 0 })
            }
        }
    }

    fn charge(&self, slice: Slice, used_ns: u64, now_ns: u64) {
        let diff = slice.ns as i64 - used_ns as i64;
        match self {
            Pool::Atomic(b) => b.charge(slice, used_ns, now_ns),
            Pool::Mutex(m, ..) => m.lock().unwrap().balance += diff,
            Pool::Spin(s, ..) => s.with(|state| state.balance += diff),
        }
    }
}

/// One measurement: `threads` threads for `window`; returns the mean accounting cost per
/// slice (ns) and the share of the threads' time it took.
fn measure(kind: Kind, threads: usize, slice: Duration, window: Duration) -> (f64, f64) {
    let slice_ns = slice.as_nanos() as u64;
    let pool = Arc::new(Pool::new(kind, slice_ns));
    let epoch = Instant::now();
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let pool = pool.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                let start = Instant::now();
                let (mut slices, mut accounting_ns) = (0u64, 0u64);
                while start.elapsed() < window {
                    let t0 = Instant::now();
                    let Some(taken) = pool.take(slice_ns, (t0 - epoch).as_nanos() as u64) else {
                        continue;
                    };
                    let t1 = Instant::now();
                    // "Run" the slice.
                    let run_until = t1 + Duration::from_nanos(taken.ns);
                    while Instant::now() < run_until {
                        std::hint::spin_loop();
                    }
                    let t2 = Instant::now();
                    // Charge what the "run" really took (a little more than the slice), as a
                    // worker charging its CPU clock would.
                    pool.charge(taken, (t2 - t1).as_nanos() as u64, (t2 - epoch).as_nanos() as u64);
                    let t3 = Instant::now();
                    accounting_ns += ((t1 - t0) + (t3 - t2)).as_nanos() as u64;
                    slices += 1;
                }
                (slices, accounting_ns, start.elapsed().as_nanos() as u64)
            })
        })
        .collect();
    let (mut slices, mut accounting, mut total) = (0u64, 0u64, 0u64);
    for handle in handles {
        let (s, a, t) = handle.join().expect("a benchmark thread panicked");
        slices += s;
        accounting += a;
        total += t;
    }
    (accounting as f64 / slices.max(1) as f64, accounting as f64 / total.max(1) as f64)
}

/// Runs every kind at every slice length and thread count, `rounds` times, and prints the tables.
pub fn run(window: Duration, rounds: usize, cpus: usize) -> Result<(), String> {
    let slices = [Duration::from_millis(5), Duration::from_millis(1), Duration::from_micros(1)];
    let mut thread_counts = vec![1, cpus, 4 * cpus];
    thread_counts.dedup();
    for slice in slices {
        for &threads in &thread_counts {
            let mut per_kind: Vec<(Vec<f64>, Vec<f64>)> = vec![(Vec::new(), Vec::new()); Kind::ALL.len()];
            for round in 0..rounds {
                for offset in 0..Kind::ALL.len() {
                    let index = (round + offset) % Kind::ALL.len();
                    eprintln!(
                        "global-pool: slice {slice:?}, {threads} threads, {}, round {}/{rounds}",
                        Kind::ALL[index].name(),
                        round + 1
                    );
                    let (cost, share) = measure(Kind::ALL[index], threads, slice, window);
                    per_kind[index].0.push(cost);
                    per_kind[index].1.push(share);
                }
            }
            let rows: Vec<(&str, Vec<f64>)> =
                Kind::ALL.iter().zip(&per_kind).map(|(k, v)| (k.name(), v.0.clone())).collect();
            let title = format!(
                "global pool, slice {slice:?}, {threads} threads on {cpus} CPUs: ns of accounting per slice"
            );
            println!("{}", report::table(&title, Better::Lower, |v| format!("{v:.0} ns"), &rows));
            let shares: Vec<String> = Kind::ALL
                .iter()
                .zip(&per_kind)
                .map(|(k, v)| {
                    let mut s = v.1.clone();
                    s.sort_by(f64::total_cmp);
                    format!("{} {:.4}%", k.name(), 100.0 * s[s.len() / 2])
                })
                .collect();
            println!("share of the threads' time spent accounting (median): {}\n", shares.join(", "));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_locked_pools_refill_each_period_and_refuse_when_empty() {
        let mut state = State { period: 0, balance: 10 };
        assert_eq!(take_locked(&mut state, 10, 100, 4, 0), Some(4));
        assert_eq!(take_locked(&mut state, 10, 100, 4, 50), Some(4));
        assert_eq!(take_locked(&mut state, 10, 100, 4, 60), Some(2));
        assert_eq!(take_locked(&mut state, 10, 100, 4, 99), None);
        assert_eq!(take_locked(&mut state, 10, 100, 4, 100), Some(4));
        assert_eq!(state.period, 1);
    }

    #[test]
    fn every_kind_hands_out_slices_and_takes_charges() {
        for kind in Kind::ALL {
            let pool = Pool::new(kind, 1_000);
            let slice = pool.take(1_000, 0).expect("a slice");
            assert_eq!(slice.ns, 1_000, "{kind:?}");
            pool.charge(slice, 400, 10);
        }
    }

    #[test]
    fn the_spinlock_serialises_its_users() {
        let lock = Arc::new(SpinLock::new(0u64));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let lock = lock.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        lock.with(|v| *v += 1);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(lock.with(|v| *v), 40_000);
    }
}
