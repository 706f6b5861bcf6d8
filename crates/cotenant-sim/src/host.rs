//! A shared host, event by event: M CPUs under a fair scheduler, processes with thread pools
//! that run **the library's own policy code** ([`cotenant::Policy::decide`]), and open-loop
//! CPU-bound work (issue 10 item 2; seed 000 §5, Figure 7, at sizes this machine lacks).
//! [`HostConfig::scheduler`] chooses the scheduler model: the idealised one below (the default)
//! or Linux's (issue 40), so that results compare side by side.
//!
//! **Scheduler** (an idealised CFS, [`SchedulerModel::Idealised`]). One run queue for the whole host (idealised load
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
//! **Scheduler (Linux)** ([`SchedulerModel::Linux`]: Linux 6.6 and later, with three rules as
//! traced on the 6.18 kernel of the validation host; `host/linux/`; each rule names the
//! function of kernel/sched/fair.c it models). Every CPU has its own run queue.
//! - **EEVDF**: a CPU runs the *eligible* entity (`vruntime` at most the queue's weighted
//!   average `V`: it has not had more than its share) with the earliest virtual deadline
//!   (`vruntime` + base slice / weight; the base slice is 0.7 ms scaled as above, as measured
//!   on Linux 6.18: [`SchedParams::base_slice`]). At a tick, a thread whose `vruntime` has
//!   passed its deadline gets a new one and the CPU reschedules; until then (`RUN_TO_PARITY`)
//!   it keeps the CPU while eligible, so a 5 ms item runs in slices of whole ticks when others
//!   wait.
//! - **Wake-ups**: a woken thread keeps the lag it had when it slept (`V - vruntime`, clamped
//!   to a slice plus a tick as measured on 6.18, not decayed however long it slept) and is
//!   placed at `V` minus that lag, scaled for its own weight, with a fresh deadline; it preempts the running thread only if
//!   the EEVDF pick, the running thread's protection included, now prefers it. Its CPU:
//!   `wake_affine` between the waker's CPU and its previous one, then the first idle of that
//!   target, its previous CPU, its recently used CPU, or an idle CPU found by a scan whose
//!   length shrinks as the host gets busier (none from about 85 % busy; 60 % on 2 CPUs);
//!   failing all, the busy target: so a woken thread can queue behind a busy one while
//!   another CPU idles.
//! - **Balancing**: a CPU about to idle pulls one waiting thread from the busiest CPU; a busy
//!   CPU balances every `CPUs` ms to twice that, times 16, at its tick; idle CPUs are balanced
//!   from a busy CPU's tick when due. A thread that ran within 0.5 ms is not moved until
//!   balances have failed twice; an idle CPU takes threads by count, a busy one by load.
//! - **Groups** ([`Fairness::Processes`]): on each CPU, a process's threads queue under its
//!   group entity, whose weight is the process's (1024) times its share of the process's
//!   runnable threads on that CPU (at least 2; [`GroupShares::Loads`]: from load averages, as
//!   the kernel computes it), brought up to date at that CPU's ticks, wake-ups and departures;
//!   the pick is EEVDF among the group entities, then among the threads of the group picked. A
//!   waiting group entity whose weight changes keeps its real lag; the *running* one is
//!   reweighted as Linux 6.18 was traced doing it ([`RunningReweight::AsMeasured`]: at each
//!   change its lag comes out about 1.2 times what keeping it would give, so a group whose
//!   threads wake and sleep while it runs keeps the CPU from the other groups there for tens of
//!   milliseconds). [`Fairness::Threads`]: one level.
//! - The control threads of the processes are not simulated threads, nor, by default, their
//!   submitting threads: the CPU a worker is woken from is placed as such a thread waking from
//!   a timer would be. With [`HostConfig::submit_ns`] each process has its submitting thread,
//!   a simulated thread in its group: an arrival wakes it, it runs that long, queues the items
//!   and wakes the workers from its own CPU (so it reweights its group as it wakes and sleeps).
//!
//! **Pools**, as `crates/cotenant/src/pool` builds them (its README, steps P, S, T and W):
//! `threads` workers indexed from 0, of which those below `target` may run. A task that
//! arrives wakes the lowest-index parked worker below the target, if any; a worker takes the
//! first queued task when it *runs* (so tasks start in arrival order, and a worker that finds
//! the queue empty parks again); after a task it takes the next one if it is still below the
//! target and the queue has one, and parks otherwise. Raising the target wakes the newly
//! allowed parked workers, at most one per queued task. A controller builds a [`Sample`] from
//! the simulated counters (the process's CPU time, the allowed CPUs' busy and idle time, the
//! workers' busy time, CPU time and run-queue wait, the queue length) and asks the pool's
//! [`Policy`] for the next target: the same call the library's controller makes. When it
//! samples is the library's decision too (`cotenant::internal::coast`): every `period` (10 ms)
//! while anything may change, every two then four periods while the pool coasts (every worker
//! running, alone, nobody waiting for a token), and not at all once it has been idle for a
//! nap's ten periods, until the next item arrives. Like the library's, the controller's first
//! sample (and its first after a nap) only records the counters.
//!
//! **Host tokens** (`ProcessConfig::uses_tokens`, the default pool when it has neighbours):
//! as many as CPUs, shared by the processes that use them; a worker takes one with its task
//! and gives it back after it, handing it to the first waiter (woken from the CPU the token
//! came from), and a worker that finds none sleeps until one is handed to it. The policy is
//! `Policy::sharing_host_tokens`, and its sample's run-queue wait is the token holders' only,
//! as the library's controller counts it while the tokens are shared. **CPU leases**
//! (`ProcessConfig::uses_leases`; the Linux model only, where CPUs have their own queues): with
//! its token a worker leases the CPU it is on if free, else the next free one, and moves
//! there (`sched_setaffinity`), so holders do not share a CPU while another idles
//! ([`HostRun::holder_wait_beside_idle_ns`] measures the time they do). Not modelled: the
//! take-back of a token whose task blocks (simulated tasks never block), the token wait limit,
//! the workers' brief spin before parking, the controller's thread (and, unless
//! [`HostConfig::submit_ns`], the submitting one), system calls, caches, and
//! the spread of an item's CPU time on a real host (every item costs exactly `service`).
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
//! | `host/sched.rs` | the scheduler: [`Fairness`], [`SchedParams`], [`SchedulerModel`], threads, groups, ticks, wake-ups; the hand-over to the Linux model |
//! | `host/linux/` | the Linux model: `eevdf.rs` (one run queue), `group.rs` (the levels and shares), `placement.rs` (wake-up placement), `balance.rs` (load balancing), its tests |
//! | `host/pool.rs` | the pools: workers that park and wake, the host's CPU tokens, the controller |
//! | `host/workload.rs` | the work: [`ProcessConfig`], [`Arrivals`], the next arrival |
//! | `host/run.rs` | the runner: [`HostConfig`], the event loop, [`HostRun`], [`quantile`] |
//!
//! [`Sample`]: cotenant::policy::Sample
//! [`Policy`]: cotenant::Policy

mod linux;
mod pool;
mod run;
mod sched;
mod workload;

pub use linux::{GroupShares, RunningReweight};
pub use run::{quantile, simulate, HostConfig, HostRun, ProcessRun};
pub use sched::{Fairness, SchedParams, SchedulerModel};
pub use workload::{Arrivals, ProcessConfig};

const MS: u64 = 1_000_000;

#[cfg(test)]
mod tests;
