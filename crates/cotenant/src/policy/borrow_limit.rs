//! Borrowing an idle CPU between two decisions: the part of the pool's behaviour that a
//! once-per-period target cannot express.
//!
//! The controller decides the target from what the neighbours used over the last periods
//! (seed 000 §5.2 decides once a clock tick). A neighbour at 70 % of its share leaves about a
//! third of its CPU idle, but in gaps much shorter than a period; a pool that grew into them
//! would be overcommitted whenever the neighbour's work returns, so the target stays at the
//! fair share (`docs/policy.md`, "Open-loop, bursty neighbours"), and tasks queue behind one
//! busy worker while a CPU sits idle. In the lab's `neighbours` experiment at 70 % load this
//! made the end-to-end p99 worse than the CPU-ignorant pool's.
//!
//! Borrowing closes that gap at task granularity instead of period granularity:
//!
//! 1. A submit that finds every allowed worker busy wakes one worker beyond the target if
//!    a CPU is idle at that instant ([`cpu_idle_now`]) and the [`limit`] allows one more.
//! 2. The borrowed worker runs queued tasks; after each one it checks again and goes back to
//!    sleep as soon as another task waits for a CPU or the queue is empty. It holds a CPU
//!    that someone else wants for at most the task it is running.
//!
//! Borrowing is also gated on the CPUs having been idle *on average* lately (at least
//! [`MIN_IDLE_AVERAGE`] over about 8 periods). On a host that is busy all the time, a CPU that
//! is idle at one instant is a short gap between a neighbour's tasks: a borrowed worker would
//! take it just before the neighbour's next task arrives and then share a CPU with it, which
//! raises the neighbour's service time. Measured in the lab at 100 % load (P = 2 on 2 CPUs):
//! without the gate, adaptive's service p99 went from 0.96x to 1.24x `optimal`'s.
//!
//! "Idle now" comes from the host's runnable-task count (`/proc/loadavg`'s `running` field,
//! computed by the kernel at the time of the read), which counts tasks on every online CPU.
//! It says nothing about a subset, so borrowing is off when the process may not run on every
//! online CPU (cpuset or affinity), and never exceeds what the quota pays for
//! ([`Sample::cap`]): a borrowed worker the quota cannot pay for would be throttled.

use super::Sample;

/// The weight of the newest period in `PolicyState::idle_average` (about 8 periods).
pub const IDLE_SMOOTHING: f64 = 0.125;

/// Borrow only while at least this many CPUs were idle on average lately.
pub const MIN_IDLE_AVERAGE: f64 = 0.25;

/// How many workers may run, counting borrowed ones, after the period described by
/// `sample`, when `idle_average` CPUs were idle on average lately; 0 turns borrowing off.
/// `online_cpus` is the host's online CPU count (0 when unknown, which also turns it off).
pub fn limit(sample: &Sample, idle_average: f64, online_cpus: u32) -> u32 {
    if online_cpus == 0 || sample.cpus != online_cpus || idle_average < MIN_IDLE_AVERAGE {
        return 0;
    }
    sample.cap()
}

/// Whether a CPU is free for one more worker, given that `/proc/loadavg` counted `runnable`
/// tasks running or waiting on a host of `cpus` CPUs at the instant of the read. The reader
/// is one of them. `reader_stays`: the reader keeps its CPU alongside the worker in question
/// (a worker that submits), so that worker needs a CPU of its own; otherwise the reader is
/// about to hand its CPU over (a submitter returning to its event loop) or *is* the worker in
/// question (a borrowed worker deciding whether to go on).
pub fn cpu_idle_now(runnable: u64, cpus: u32, reader_stays: bool) -> bool {
    runnable.saturating_add(u64::from(reader_stays)) <= u64::from(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(cpus: u32, quota: Option<f64>, threads: u32) -> Sample {
        Sample { elapsed_ns: 10_000_000, threads, cpus, quota_cpus: quota, ..Sample::default() }
    }

    const IDLE: f64 = 0.6;

    #[test]
    fn borrowing_is_off_unless_the_process_may_use_every_online_cpu() {
        assert_eq!(limit(&sample(2, None, 4), IDLE, 2), 2);
        assert_eq!(limit(&sample(2, None, 4), IDLE, 4), 0, "a cpuset of 2 of 4 CPUs");
        assert_eq!(limit(&sample(2, None, 4), IDLE, 0), 0, "online CPUs unknown");
    }

    #[test]
    fn borrowing_is_off_on_a_host_that_has_been_busy() {
        assert_eq!(limit(&sample(2, None, 4), 0.1, 2), 0);
        assert_eq!(limit(&sample(2, None, 4), MIN_IDLE_AVERAGE, 2), 2);
    }

    #[test]
    fn borrowing_never_exceeds_what_the_quota_pays_for() {
        assert_eq!(limit(&sample(4, Some(1.5), 8), IDLE, 4), 1);
        assert_eq!(limit(&sample(4, Some(3.0), 8), IDLE, 4), 3);
        assert_eq!(limit(&sample(4, None, 2), IDLE, 4), 2, "nor the pool's threads");
    }

    #[test]
    fn the_idle_average_follows_the_samples() {
        use crate::policy::{Policy, PolicyState};
        let policy =
            Policy::adaptive_with(crate::policy::AdaptiveConfig { borrow: true, ..Default::default() });
        let mut state = PolicyState::new(1);
        let mut idle = Sample { idle_ns: 10_000_000, ..sample(2, None, 2) };
        idle.busy_ns = 10_000_000;
        for _ in 0..40 {
            policy.decide(&idle, &mut state);
        }
        assert!((state.idle_average - 1.0).abs() < 0.01, "{}", state.idle_average);
        assert_eq!(policy.borrow_limit(&idle, &state, 2), 2);
        assert_eq!(Policy::share(1.0).borrow_limit(&idle, &state, 2), 0, "only adaptive borrows");
        assert_eq!(Policy::adaptive().borrow_limit(&idle, &state, 2), 0, "off by default");
    }

    #[test]
    fn a_submitter_hands_over_its_cpu() {
        // 2 CPUs: the submitter and one busy worker leave one CPU free once the submitter
        // returns to its loop; the submitter and two busy threads do not.
        assert!(cpu_idle_now(2, 2, false));
        assert!(!cpu_idle_now(3, 2, false));
        assert!(cpu_idle_now(1, 2, false));
    }

    #[test]
    fn a_worker_that_submits_keeps_its_cpu() {
        assert!(!cpu_idle_now(2, 2, true));
        assert!(cpu_idle_now(1, 2, true));
    }

    #[test]
    fn a_borrowed_worker_goes_on_only_while_nobody_waits() {
        // The borrowed worker is the reader: 2 runnable on 2 CPUs means nobody waits.
        assert!(cpu_idle_now(2, 2, false));
        assert!(!cpu_idle_now(3, 2, false));
    }
}
