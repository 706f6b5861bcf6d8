//! A shared host, event by event: M CPUs under a fair scheduler, processes with thread pools
//! that run **the library's own policy code** ([`cotenant::Policy::decide`]), and open-loop
//! CPU-bound work (issue 10 item 2; seed 000 §5, Figure 7, at sizes this machine lacks).
//!
//! **Scheduler** (an idealised CFS). One run queue for the whole host (idealised load
//! balancing: a thread runs on any CPU that is free). Fairness is by virtual runtime: every
//! running thread's `vruntime` grows with the CPU time it gets. With [`Fairness::Processes`]
//! (one cgroup per process, equal weights, as containers are) the choice is two-level, as in
//! CFS group scheduling: first the process that holds the fewest CPUs (ties: the least group
//! `vruntime`, its threads' CPU time while it competed), then its thread with the least
//! `vruntime`; with [`Fairness::Threads`] (all processes in one cgroup) every thread competes
//! alone. (Fewest CPUs first is the idealised equal-weight share that CFS reaches with per-CPU
//! group entities and load balancing; see `Sim::lead` in `host/run.rs`.)
//! - A CPU that frees up takes the first thread in that order.
//! - **Ticks** (every `tick`, from a per-CPU phase) charge the running thread; when it has run
//!   its slice, `max(latency / runnable-per-CPU, min_granularity)`, and a waiting thread comes
//!   first in the order, the waiting thread takes the CPU.
//! - **Wake-ups**: a woken thread takes an idle CPU at once; otherwise it is placed at no less
//!   than `min_vruntime - latency / 2` (the sleeper credit; `min_vruntime` follows the least
//!   vruntime of the threads running or waiting, and never goes back) and preempts the
//!   running thread it leads by the most, if that lead exceeds `wakeup_granularity`.
//! - A thread whose item ends at a tick or a preemption finishes it there (it is not put back
//!   on the queue with nothing left to run). If it takes its next item on the CPU instead of
//!   yielding it to the woken thread that preempted it, the woken thread waits for the next
//!   tick (its lead over the other CPUs is not scanned again).
//! - Constants are the kernel's defaults (`sched_latency` 6 ms, `min_granularity` 0.75 ms,
//!   `wakeup_granularity` 1 ms, each scaled by `1 + log2(min(CPUs, 8))`), ticks at 250 Hz.
//!
//! **Pools**, as `crates/cotenant/src/pool` builds them (its README, steps P, S, T and W):
//! `threads` workers indexed from 0, of which those below `target` may run. A task that
//! arrives wakes the lowest-index parked worker below the target, if any; a worker takes the
//! first queued task when it *runs* (so tasks start in arrival order, and a worker that finds
//! the queue empty parks again); after a task it takes the next one if it is still below the
//! target and the queue has one, and parks otherwise. Raising the target wakes the newly
//! allowed parked workers, at most one per queued task. Every `period` (10 ms) a controller
//! builds a [`Sample`] from the simulated counters (the process's CPU time, the allowed CPUs'
//! busy and idle time, the workers' busy time, CPU time and run-queue wait, the queue length)
//! and asks the pool's [`Policy`] for the next target: the same call the library's controller
//! makes. Like the library's, the controller's first tick only records the counters. Not
//! modelled: the workers' brief spin before parking, the submitting thread, caches.
//!
//! **Work**: per process, items of `service` CPU time arriving open-loop (Poisson or evenly
//! spaced) from a seeded generator; latencies are taken from the intended arrival, as in the
//! lab (`crates/cotenant-lab/src/workload.rs`). Arrivals stop at `duration`; the run goes
//! on until every item has finished (or `10 × duration`, whichever comes first).
//!
//! Deterministic: integer nanoseconds, ordered containers, one seeded generator per process.
//!
//! | file | what it owns |
//! |---|---|
//! | `host/sched.rs` | the scheduler: [`Fairness`], [`SchedParams`], threads, groups, ticks, wake-ups |
//! | `host/pool.rs` | the pools: workers that park and wake, the host's CPU tokens, the controller |
//! | `host/workload.rs` | the work: [`ProcessConfig`], [`Arrivals`], the next arrival |
//! | `host/run.rs` | the runner: [`HostConfig`], the event loop, [`HostRun`], [`quantile`] |
//!
//! [`Sample`]: cotenant::policy::Sample
//! [`Policy`]: cotenant::Policy

mod pool;
mod run;
mod sched;
mod workload;

pub use run::{quantile, simulate, HostConfig, HostRun, ProcessRun};
pub use sched::{Fairness, SchedParams};
pub use workload::{Arrivals, ProcessConfig};

const MS: u64 = 1_000_000;

#[cfg(test)]
mod tests;
