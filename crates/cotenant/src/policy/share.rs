//! Seed 000 §5.2's friendlypool formula, faithfully: `active = ceil(O · Δcpu_self / Δcpu_all ·
//! CPUs)`, where `Δcpu_all` is the busy time of the CPUs we may use and `CPUs` their count. Kept
//! as the reference policy: it locks in (a process's share is capped by its own active count,
//! so any split is a fixed point; `docs/policy.md`).

use super::{clamp, Decision, Reason, Sample};

pub(super) fn decide(overcommit: f64, sample: &Sample) -> Decision {
    let cap = sample.cap();
    if sample.busy_ns == 0 || sample.cpus == 0 {
        // Nothing ran at all: the whole allowance is free.
        return Decision { target: cap, reason: Reason::Share };
    }
    let share = sample.self_ns.min(sample.busy_ns) as f64 / sample.busy_ns as f64;
    let active = (overcommit * share * f64::from(sample.cpus)).ceil();
    let active = if active.is_finite() { active.min(f64::from(u32::MAX)) as u32 } else { cap };
    Decision { target: clamp(active, sample.threads).min(cap), reason: Reason::Share }
}
