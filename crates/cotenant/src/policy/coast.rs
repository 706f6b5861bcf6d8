//! How often the controller samples a plain pool: every period while anything may change, and
//! less often (up to every [`MAX_STRIDE`] periods) while the pool coasts: either it runs every
//! worker, no neighbour uses the CPUs, nobody waits for its host tokens, and the policy saw
//! nothing to change; or it has been idle long enough to nap ([`may_coast`]). Pure: fed by the
//! decision and the sample of the period just decided.
//!
//! Why: on a busy host a controller's wake-up costs more than its work (RESULTS.md, issue 38:
//! on the VM measured, a thread that only wakes every 10 ms costs 0.24 % of a CPU beside two
//! busy threads, the controller 0.8-0.9 %). A saturated pool alone wakes its controller 100
//! times a second to learn, every time, that nothing changed. Coasting keeps the reaction the
//! operators rely on: a neighbour that starts is seen at the next sample, at most
//! `MAX_STRIDE` periods later, and from then on the pool is sampled every period again (the
//! contention that follows is not calm), so a 10 ms period lowers the target within 40 ms plus
//! the policy's own periods; growing back is never slowed (a target below the threads is not
//! calm).
//!
//! Host tokens engaged (a cooperating neighbour shares the set): the sharing itself happens on
//! the task path, where a worker gives its token back at the end of a task when anyone waits
//! (`pool/host_tokens.rs`), so a calm engaged pool may coast as long as nobody waits for a
//! token when it is sampled. What coasting delays is the controller's take-back of a token
//! held by a task that blocked: a neighbour that starts waiting just after a calm sample gets
//! it up to `MAX_STRIDE` periods later than every period would give it. Without this, the
//! controller of every process that shares tokens wakes 100 times a second: 1.2 % of a CPU
//! saturated on the VM of RESULTS.md, against 0.2 % coasting.
//!
//! An idle pool in a process whose other pools work (so the process does not nap) is sampled
//! like a coasting one once it has been idle for the periods of a nap: its own submits run on
//! the workers its target already allows, and its next sample, at most `MAX_STRIDE` periods
//! later, sees the work and samples every period again.

use super::{Decision, Reason, Sample};

/// Periods that every pool of a process must have been idle (nothing queued, no worker busy)
/// before its control thread naps until the next submit; also the idle periods after which an
/// idle pool in a busy process coasts ([`may_coast`]).
pub const NAP_AFTER_PERIODS: u32 = 10;

/// The most periods between two samples of a coasting pool.
pub const MAX_STRIDE: u32 = 4;

/// Neighbours' CPU use (in CPUs) below which a period counts as alone.
pub const CALM_NEIGHBOUR_CPUS: f64 = 0.1;

/// Whether the period just decided was calm: the policy kept every worker running for nothing
/// it saw (`Steady`), no neighbour used a tenth of a CPU, and the pool's host tokens are quiet
/// ([`tokens_quiet`]).
pub fn is_calm(decision: &Decision, sample: &Sample, tokens_quiet: bool) -> bool {
    decision.reason == Reason::Steady
        && decision.target == sample.threads
        && sample.neighbour_cpus() < CALM_NEIGHBOUR_CPUS
        && tokens_quiet
}

/// Whether a pool's host tokens let it coast: no task ran without a token this period (the
/// set failed or none came in time: the policy sizes the pool against its neighbours again),
/// and, when the tokens are engaged, nobody waits for one (`waiting`: the set's count of
/// waiters, `None` when it could not be read).
pub fn tokens_quiet(engaged: bool, failed: bool, waiting: Option<u32>) -> bool {
    !failed && (!engaged || waiting == Some(0))
}

/// Whether the pool coasts after this period: it has been idle for `nap_after` periods (the
/// periods after which a process whose pools are all idle naps), or it worked this period
/// (`idle_periods == 0`) and the period was calm ([`is_calm`]). A pool that has just gone idle
/// is sampled every period until then, so that an idle process reaches its nap in time.
pub fn may_coast(idle_periods: u32, nap_after: u32, calm: bool) -> bool {
    idle_periods >= nap_after || (idle_periods == 0 && calm)
}

/// The periods until the next sample: doubled after each calm period up to [`MAX_STRIDE`],
/// back to one at the first period that is not.
pub fn next_stride(stride: u32, calm: bool) -> u32 {
    if calm {
        stride.saturating_mul(2).clamp(1, MAX_STRIDE)
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calm_periods_stretch_the_stride_to_its_maximum_and_any_other_resets_it() {
        let mut stride = 1;
        let mut seen = Vec::new();
        for _ in 0..4 {
            stride = next_stride(stride, true);
            seen.push(stride);
        }
        assert_eq!(seen, vec![2, 4, 4, 4]);
        assert_eq!(next_stride(stride, false), 1);
        assert_eq!(next_stride(0, true), 1, "a stride is never 0");
    }

    /// A period of 10 ms of a pool of 2 threads on 2 CPUs using `own` CPUs beside neighbours
    /// using `neighbours`.
    fn sample(own: f64, neighbours: f64) -> Sample {
        let ns = |cpus: f64| (cpus * 10_000_000.0) as u64;
        Sample {
            elapsed_ns: 10_000_000,
            threads: 2,
            cpus: 2,
            self_ns: ns(own),
            busy_ns: ns(own + neighbours),
            idle_ns: ns(2.0 - own - neighbours),
            ..Sample::default()
        }
    }

    #[test]
    fn only_a_steady_pool_running_every_worker_alone_with_quiet_tokens_is_calm() {
        let steady = |target| Decision { target, reason: Reason::Steady };
        assert!(is_calm(&steady(2), &sample(2.0, 0.0), true));
        assert!(is_calm(&steady(2), &sample(1.95, 0.05), true), "a little noise is still alone");
        assert!(!is_calm(&steady(1), &sample(1.0, 0.0), true), "below its threads: may grow back");
        assert!(!is_calm(&steady(2), &sample(1.5, 0.5), true), "a neighbour");
        assert!(!is_calm(&steady(2), &sample(2.0, 0.0), false), "host tokens not quiet");
        for reason in [Reason::Contention, Reason::Idle, Reason::Probe, Reason::Hold, Reason::Quota] {
            assert!(!is_calm(&Decision { target: 2, reason }, &sample(2.0, 0.0), true), "{reason:?}");
        }
    }

    #[test]
    fn engaged_tokens_are_quiet_only_while_nobody_waits_and_failed_ones_never() {
        assert!(tokens_quiet(false, false, None), "not engaged: the waiters do not matter");
        assert!(tokens_quiet(true, false, Some(0)));
        assert!(!tokens_quiet(true, false, Some(1)), "a neighbour waits for a token");
        assert!(!tokens_quiet(true, false, None), "the waiters could not be read");
        assert!(!tokens_quiet(false, true, Some(0)), "a task ran without a token");
        assert!(!tokens_quiet(true, true, Some(0)));
    }

    #[test]
    fn a_pool_coasts_when_calm_at_work_or_idle_for_a_naps_periods() {
        assert!(may_coast(0, 10, true));
        assert!(!may_coast(0, 10, false));
        assert!(!may_coast(3, 10, true), "gone idle: every period until it could nap");
        assert!(may_coast(10, 10, false), "idle as long as a nap asks: coasts");
        assert!(may_coast(25, 10, false));
    }
}
