//! How often the controller samples a plain pool: every period while anything may change, and
//! less often (up to every [`MAX_STRIDE`] periods) while the pool coasts: it runs every worker,
//! no neighbour uses the CPUs, its host tokens are not engaged, and the policy saw nothing to
//! change. Pure: fed by the decision and the sample of the period just decided.
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

use super::{Decision, Reason, Sample};

/// The most periods between two samples of a coasting pool.
pub const MAX_STRIDE: u32 = 4;

/// Neighbours' CPU use (in CPUs) below which a period counts as alone.
pub const CALM_NEIGHBOUR_CPUS: f64 = 0.1;

/// Whether the period just decided was calm: the policy kept every worker running for nothing
/// it saw (`Steady`), no neighbour used a tenth of a CPU, and (`sharing`) the pool's host tokens
/// are not engaged (a cooperating neighbour could take them back at any time).
pub fn is_calm(decision: &Decision, sample: &Sample, sharing: bool) -> bool {
    decision.reason == Reason::Steady
        && decision.target == sample.threads
        && sample.neighbour_cpus() < CALM_NEIGHBOUR_CPUS
        && !sharing
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
    fn only_a_steady_pool_running_every_worker_alone_and_not_sharing_tokens_is_calm() {
        let steady = |target| Decision { target, reason: Reason::Steady };
        assert!(is_calm(&steady(2), &sample(2.0, 0.0), false));
        assert!(is_calm(&steady(2), &sample(1.95, 0.05), false), "a little noise is still alone");
        assert!(!is_calm(&steady(1), &sample(1.0, 0.0), false), "below its threads: may grow back");
        assert!(!is_calm(&steady(2), &sample(1.5, 0.5), false), "a neighbour");
        assert!(!is_calm(&steady(2), &sample(2.0, 0.0), true), "engaged host tokens");
        for reason in [Reason::Contention, Reason::Idle, Reason::Probe, Reason::Hold, Reason::Quota] {
            assert!(!is_calm(&Decision { target: 2, reason }, &sample(2.0, 0.0), false), "{reason:?}");
        }
    }
}
