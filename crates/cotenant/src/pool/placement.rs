//! Where and at which priority the workers run: `Builder::pin_workers` and
//! `Builder::background` (issue 6).
//!
//! - **Pinning** (seed 003, "pinning pays even with no neighbour, through warm caches"): worker
//!   `i` is bound to the `i`-th CPU the process may run on (round robin when there are more
//!   workers than CPUs). The choice is the pure [`cpu_for`]; the binding is
//!   `sched_setaffinity` on the worker's own thread (`crate::affinity`, any CPU id the kernel
//!   has), made by the worker itself before its first task. A CPU mask that cannot be read at
//!   build leaves the workers unpinned, counted in `Metrics::degradations` and logged once.
//! - **Background** (batch work that must never delay a latency-sensitive neighbour): the
//!   workers run at `SCHED_IDLE`, which the kernel runs only when nothing else wants the CPU;
//!   where that is refused (a seccomp filter, an old kernel, a container without the right),
//!   they fall back to nice 19, and where that fails too they run as they are. What happened
//!   is reported ([`Pool::placement`](super::Pool::placement)) and logged, never silent.
//!
//! Each worker applies its own placement when it starts and reports it on a channel; `build`
//! waits for every report, so a built pool's placement is known.

use std::fmt;

/// How a background pool's workers ended up running.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Background {
    /// `SCHED_IDLE`: they run only on CPUs nothing else wants.
    SchedIdle,
    /// `SCHED_IDLE` was refused (the error is given); they run at nice 19.
    Nice19 {
        /// Why `SCHED_IDLE` was refused.
        sched_idle_error: String,
    },
    /// Both were refused: they run at the priority they inherited.
    Unchanged {
        /// Why `SCHED_IDLE` was refused.
        sched_idle_error: String,
        /// Why nice 19 was refused.
        nice_error: String,
    },
}

impl fmt::Display for Background {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Background::SchedIdle => f.write_str("SCHED_IDLE"),
            Background::Nice19 { sched_idle_error } => {
                write!(f, "nice 19 (SCHED_IDLE refused: {sched_idle_error})")
            }
            Background::Unchanged { sched_idle_error, nice_error } => write!(
                f,
                "unchanged priority (SCHED_IDLE refused: {sched_idle_error}; nice 19 refused: {nice_error})"
            ),
        }
    }
}

/// Where a pool's workers run, as they reported it when they started.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Placement {
    /// Per worker, the CPU it is pinned to; empty when pinning was not asked for, `None` for a
    /// worker whose binding was refused (logged).
    pub pinned: Vec<Option<u32>>,
    /// For a background pool, how its workers run (the weakest outcome of any worker);
    /// `None` when the pool is not a background pool.
    pub background: Option<Background>,
}

/// What one worker is asked to do when it starts.
#[derive(Debug, Clone, Default)]
pub(crate) struct Request {
    /// The CPU to bind to.
    pub cpu: Option<u32>,
    /// Lower the worker's priority.
    pub background: bool,
}

/// What one worker did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Outcome {
    pub index: usize,
    pub cpu: Option<u32>,
    pub background: Option<Background>,
}

/// The CPU worker `index` is pinned to: the `index`-th of `allowed` (ascending CPU ids), round
/// robin beyond its length; `None` when nothing is allowed.
pub fn cpu_for(index: usize, allowed: &[u32]) -> Option<u32> {
    if allowed.is_empty() {
        None
    } else {
        Some(allowed[index % allowed.len()])
    }
}

/// The weakest of the workers' background outcomes (what the pool as a whole can promise).
pub(crate) fn weakest(outcomes: impl IntoIterator<Item = Background>) -> Option<Background> {
    let rank = |b: &Background| match b {
        Background::SchedIdle => 0,
        Background::Nice19 { .. } => 1,
        Background::Unchanged { .. } => 2,
    };
    outcomes.into_iter().max_by_key(rank)
}

/// Moves the calling thread to the background exactly as a background pool moves its workers
/// (`SCHED_IDLE`, else nice 19, else unchanged) and says which happened.
///
/// For the thread that *feeds* a background pool, so that the whole batch job runs in the
/// background. Threads it starts afterwards inherit the setting. Like the workers' own
/// `SCHED_IDLE`, it ranks the thread only within its cgroup: `docs/background.md`.
pub fn background_current_thread() -> Background {
    lower_current_thread()
}

/// Applies `request` to the calling thread (a worker, before its first task).
pub(crate) fn apply(index: usize, request: &Request) -> Outcome {
    let cpu = request.cpu.and_then(|cpu| match pin_current_thread(cpu) {
        Ok(()) => Some(cpu),
        Err(e) => {
            tracing::warn!(worker = index, cpu, error = %e, "cotenant: cannot pin a worker; it runs unpinned");
            None
        }
    });
    let background = request.background.then(|| {
        let outcome = lower_current_thread();
        if outcome != Background::SchedIdle {
            tracing::warn!(worker = index, outcome = %outcome, "cotenant: background worker without SCHED_IDLE");
        }
        outcome
    });
    Outcome { index, cpu, background }
}

/// Lets the calling thread run on `cpu` only (`sched_setaffinity`, with a mask sized for
/// `cpu`: `crate::affinity`).
#[cfg(not(loom))]
fn pin_current_thread(cpu: u32) -> std::io::Result<()> {
    crate::affinity::pin_current_thread(cpu)
}

#[cfg(not(loom))]
fn lower_current_thread() -> Background {
    // SAFETY: sched_param is plain data (priority 0, as SCHED_IDLE requires); pid 0 is the
    // calling thread.
    let idle = unsafe {
        let param = libc::sched_param { sched_priority: 0 };
        libc::sched_setscheduler(0, libc::SCHED_IDLE, &param)
    };
    if idle == 0 {
        return Background::SchedIdle;
    }
    let sched_idle_error = std::io::Error::last_os_error().to_string();
    // On Linux, PRIO_PROCESS with a thread id sets that thread's nice value alone.
    // SAFETY: gettid has no preconditions; setpriority only reads its arguments.
    let nice = unsafe {
        let tid = libc::gettid() as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 19)
    };
    if nice == 0 {
        Background::Nice19 { sched_idle_error }
    } else {
        Background::Unchanged { sched_idle_error, nice_error: std::io::Error::last_os_error().to_string() }
    }
}

// Under loom the workers are model threads: nothing to bind or lower.
#[cfg(loom)]
fn pin_current_thread(_cpu: u32) -> std::io::Result<()> {
    Ok(())
}

#[cfg(loom)]
fn lower_current_thread() -> Background {
    Background::SchedIdle
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_take_the_allowed_cpus_in_order_then_round_robin() {
        let allowed = [0, 2, 5];
        let picked: Vec<Option<u32>> = (0..5).map(|i| cpu_for(i, &allowed)).collect();
        assert_eq!(picked, [Some(0), Some(2), Some(5), Some(0), Some(2)]);
        assert_eq!(cpu_for(0, &[]), None);
    }

    #[test]
    fn the_pool_promises_the_weakest_background_outcome() {
        let nice = Background::Nice19 { sched_idle_error: "EPERM".into() };
        assert_eq!(weakest([Background::SchedIdle, nice.clone(), Background::SchedIdle]), Some(nice));
        assert_eq!(weakest([Background::SchedIdle]), Some(Background::SchedIdle));
        assert_eq!(weakest(std::iter::empty()), None);
    }

    #[test]
    fn the_outcome_explains_itself() {
        let b = Background::Unchanged { sched_idle_error: "EPERM".into(), nice_error: "EACCES".into() };
        assert_eq!(b.to_string(), "unchanged priority (SCHED_IDLE refused: EPERM; nice 19 refused: EACCES)");
    }
}
