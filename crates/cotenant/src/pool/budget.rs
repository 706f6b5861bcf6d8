//! A pool's user-space CPU budget (issue 7, item 3; seed 001 §IV done in user space): the
//! workers of a pool built with [`Builder::cpu_budget`](super::Builder::cpu_budget) take a slice
//! of CPU time from a [`Bandwidth`] before running tasks, charge what their thread CPU clock
//! says they used, and park until the next refill when the budget is spent.
//!
//! A worker's slice lives in a thread-local [`Meter`], so that [`checkpoint`], called from
//! inside a long task, can charge the slice and park the thread mid-task: user space cannot
//! preempt a task, so without checkpoints a slice overruns by up to the rest of the task it
//! was running (the overrun is charged, and paid from the slush fund or the next period).
//!
//! Reading a thread's CPU clock is a system call (about 0.3 µs); the wall clock is not (vDSO).
//! A thread cannot have used more CPU time than wall time has passed, so a worker reads its
//! CPU clock only once the wall time since it took its slice exceeds the slice: short tasks
//! cost one `Instant::now` each.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::bandwidth::{Bandwidth, InvalidBudget, Slice};

/// The longest slice a worker takes: the kernel's default `sched_cfs_bandwidth_slice_us`.
const MAX_SLICE: Duration = Duration::from_millis(5);
/// The shortest slice: below this, taking and charging would cost a noticeable share of it.
const MIN_SLICE: Duration = Duration::from_micros(20);

/// The budget a pool's workers share.
pub(crate) struct Budget {
    pub(crate) bandwidth: Bandwidth,
    epoch: Instant,
    /// Set by `shutdown_now`: a worker waiting for the refill stops waiting.
    cancelled: AtomicBool,
    refill_lock: Mutex<()>,
    refill: Condvar,
}

impl Budget {
    /// `cpus` CPUs per `period` for `threads` workers. Slices are a quarter of a worker's
    /// fair share of the quota, between `MIN_SLICE` and `MAX_SLICE`, so that no worker can
    /// hold much of the quota while another is refused.
    pub(crate) fn new(
        cpus: f64,
        period: Duration,
        threads: usize,
        slush: bool,
    ) -> Result<Self, InvalidBudget> {
        let period_ns = u64::try_from(period.as_nanos()).unwrap_or(u64::MAX);
        let share = (cpus * period_ns as f64 / (4 * threads.max(1)) as f64).max(0.0) as u64;
        let slice_ns = share.clamp(MIN_SLICE.as_nanos() as u64, MAX_SLICE.as_nanos() as u64);
        Ok(Budget {
            bandwidth: Bandwidth::new(cpus, period_ns, slice_ns, slush)?,
            epoch: Instant::now(),
            cancelled: AtomicBool::new(false),
            refill_lock: Mutex::new(()),
            refill: Condvar::new(),
        })
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Periods started since the budget was built (the current one included).
    pub(crate) fn periods(&self) -> u64 {
        self.now_ns() / self.bandwidth.period_ns() + 1
    }

    /// `shutdown_now`: wake every worker waiting for the refill, and let none wait again.
    pub(crate) fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
        let _guard = self.refill_lock.lock().unwrap_or_else(|p| p.into_inner());
        self.refill.notify_all();
    }

    /// Sleeps until `until_ns` (the refill) or a cancel.
    fn wait_for_refill(&self, until_ns: u64) {
        let mut guard = self.refill_lock.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if self.cancelled.load(Ordering::SeqCst) {
                return;
            }
            let now = self.now_ns();
            if now >= until_ns {
                return;
            }
            guard = match self.refill.wait_timeout(guard, Duration::from_nanos(until_ns - now)) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }
}

/// The slice a worker holds, and where its clocks stood when it took it.
struct HeldSlice {
    slice: Slice,
    cpu_start_ns: u64,
    wall_start: Instant,
}

/// A worker's side of the budget (thread-local).
struct Meter {
    budget: Arc<Budget>,
    held: Option<HeldSlice>,
}

thread_local! {
    static METER: RefCell<Option<Meter>> = const { RefCell::new(None) };
}

/// The calling thread's CPU time (ns), from `CLOCK_THREAD_CPUTIME_ID` (0 if unreadable).
fn thread_cpu_ns() -> u64 {
    crate::sampler::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID).unwrap_or(0)
}

/// A worker thread of a budgeted pool starts metering.
pub(crate) fn enter(budget: Arc<Budget>) {
    METER.with(|meter| *meter.borrow_mut() = Some(Meter { budget, held: None }));
}

/// A worker thread exits: its slice goes back and the thread stops metering.
pub(crate) fn leave() {
    release();
    let _ = METER.try_with(|meter| meter.borrow_mut().take());
}

/// Before a task: make sure the worker holds a slice, parking until the refill while the
/// budget is spent. False if the pool was cancelled meanwhile (the task must not run).
pub(crate) fn acquire() -> bool {
    METER
        .try_with(|meter| {
            let mut meter = meter.borrow_mut();
            let Some(meter) = meter.as_mut() else { return true };
            loop {
                if meter.budget.cancelled.load(Ordering::SeqCst) {
                    return false;
                }
                if meter.held.is_some() {
                    return true;
                }
                match meter.budget.bandwidth.take(meter.budget.now_ns()) {
                    Ok(slice) => {
                        meter.held = Some(HeldSlice {
                            slice,
                            cpu_start_ns: thread_cpu_ns(),
                            wall_start: Instant::now(),
                        })
                    }
                    Err(exhausted) => meter.budget.wait_for_refill(exhausted.until_ns),
                }
            }
        })
        .unwrap_or(true)
}

/// After a task (and at a checkpoint): if the slice may be used up, read the CPU clock and
/// charge it once it is.
pub(crate) fn after_task() {
    let _ = METER.try_with(|meter| {
        let mut meter = meter.borrow_mut();
        let Some(meter) = meter.as_mut() else { return };
        let Some(held) = &meter.held else { return };
        // CPU time cannot exceed wall time: no system call until the wall clock says it might.
        if (held.wall_start.elapsed().as_nanos() as u64) < held.slice.ns {
            return;
        }
        let used = thread_cpu_ns().saturating_sub(held.cpu_start_ns);
        if used >= held.slice.ns {
            meter.budget.bandwidth.charge(held.slice, used, meter.budget.now_ns());
            meter.held = None;
        }
    });
}

/// The worker goes idle: charge what it used of its slice and give the rest back.
pub(crate) fn release() {
    let _ = METER.try_with(|meter| {
        let mut meter = meter.borrow_mut();
        let Some(meter) = meter.as_mut() else { return };
        if let Some(held) = meter.held.take() {
            let used = thread_cpu_ns().saturating_sub(held.cpu_start_ns);
            meter.budget.bandwidth.charge(held.slice, used, meter.budget.now_ns());
        }
    });
}

/// A cooperative preemption point for long tasks in a pool with a
/// [`cpu_budget`](crate::Builder::cpu_budget): once the worker's slice is used up, charges it
/// and takes the next one, parking the calling thread until the next refill if the budget is
/// spent.
///
/// A thread pool in user space cannot interrupt a running task, so a task that runs for
/// 50 ms uses 50 ms whatever the budget says; the overrun is charged afterwards (paid from
/// the previous period's leftover, then from the next period). A long task that calls
/// `checkpoint()` every millisecond or so keeps the overrun within about a millisecond.
/// Called from any other thread it does nothing and costs a thread-local read.
///
/// ```
/// use std::time::Duration;
/// let pool = cotenant::Pool::builder()
///     .threads(1)
///     .cpu_budget(0.5, Duration::from_millis(20))
///     .build()
///     .unwrap();
/// let sum = pool.spawn(|| {
///     let mut sum = 0u64;
///     for i in 0..1_000_000u64 {
///         sum = sum.wrapping_add(i * i);
///         if i % 10_000 == 0 {
///             cotenant::checkpoint();
///         }
///     }
///     sum
/// });
/// assert!(sum.join().is_ok());
/// ```
pub fn checkpoint() {
    after_task();
    acquire();
}
