//! cotenant's controller (`Policy::adaptive`). The mechanism, the alternatives tried and their
//! numbers are in `docs/policy.md`. Each period, in order:
//!
//! 1. **Quota**: never more than [`Sample::cap`] workers (what the quota and CPUs pay for).
//! 2. **Hold**: the period after a change straddles it; decide nothing from it.
//! 3. **Contention**: our workers waited for a CPU (at least `wait_threads` of them on average
//!    and `wait_fraction` of the target), or the cgroup was throttled: shrink multiplicatively
//!    (`decrease`). Multiplicative, so that a bigger pool gives back more than a smaller one:
//!    repeated, it equalises neighbours (Chiu and Jain's AIMD argument).
//! 4. **Idle**: CPUs idle and work queued (or every allowed worker busy): grow into them,
//!    all of them when nobody else runs, half of them when neighbours run (they may grow too),
//!    but never past the CPUs the neighbours leave us. "Neighbours" here is their largest use
//!    over the last `neighbour_memory` periods, not the last period's: a neighbour with
//!    bursty open-loop load leaves CPUs idle between its bursts, and growing into them only
//!    makes both pools preempt each other at its next burst (the flapping the lab recorded,
//!    `RESULTS.md`).
//!    With [`AdaptiveConfig::neighbours_share_tokens`] (host CPU tokens) the neighbours count
//!    as absent here and in step 5.
//! 5. **Probe**: no idle CPU, work waiting, and the neighbours together use at least a CPU
//!    more than we do: every `probe_wait` periods try one more worker. If our fair share is
//!    larger, the neighbour (bigger, so waiting more) shrinks at step 3 and we keep it; if our
//!    workers still wait three periods later, we undo it and wait twice as long before the next
//!    probe. This is what breaks the lock-in
//!    of the share formula, where a small pool stays small because it is small.

use super::{Decision, PolicyState, Reason, Sample, NEIGHBOUR_MEMORY_MAX};

/// The adaptive controller's constants (defaults chosen with the simulator and measured on a
/// real host; `docs/policy.md` has the numbers).
#[derive(Debug, Clone, PartialEq)]
pub struct AdaptiveConfig {
    /// Shrink when at least this many of our workers waited, on average, for a CPU...
    pub wait_threads: f64,
    /// ...and that is at least this fraction of the target (filters host noise on big pools).
    pub wait_fraction: f64,
    /// Shrink when the cgroup was throttled this fraction of the period or more.
    pub throttled_fraction: f64,
    /// The largest share of the target given back in one period (guards against a spike in
    /// the measurement); the usual decrease is the number of workers that waited.
    pub max_decrease: f64,
    /// Grow only when at least this many CPUs were idle.
    pub idle_cpus: f64,
    /// Neighbours using less than this many CPUs count as absent (grow into all idle CPUs).
    pub neighbour_cpus: f64,
    /// Over how many periods the neighbours' CPU use is remembered (their largest use in that
    /// window counts; at most `NEIGHBOUR_MEMORY_MAX`). 6 (60 ms at the default period)
    /// forgets a neighbour that left within 60 ms and keeps one that idles between bursts
    /// (measured in the lab: 4 still let a 70 %-loaded neighbour with 5 ms items look absent
    /// about once a second).
    pub neighbour_memory: u32,
    /// A busy-worker average at or above this fraction of the target counts as saturated.
    pub saturated_fraction: f64,
    /// The first wait between probes, in periods; doubles after each failed probe.
    pub probe_wait_min: u32,
    /// The longest wait between probes, in periods.
    pub probe_wait_max: u32,
    /// Between decisions, wake one worker beyond the target while a task waits and a CPU is
    /// idle at that instant, and give it back as soon as anyone else waits for a CPU
    /// (`policy/borrow_limit.rs`). Off by default: in the lab it cut the end-to-end p99 at 70 % load
    /// in one run and not in the next, and raised the neighbours' service p99 in both
    /// (`docs/policy.md`, "Between decisions").
    pub borrow: bool,
    /// The neighbours that matter share this pool's host CPU tokens (`Builder::host_tokens`
    /// turns it on unless `host_tokens_size_to_neighbours(true)`; `docs/host-tokens.md`). The
    /// tokens already keep the tasks of all of them to one per CPU, updated the instant a task
    /// ends, so the neighbours' CPU use neither limits how far the pool grows into idle CPUs
    /// (step 4) nor starts fairness probes (step 5): the pool stays at its quota's worth of
    /// workers unless they wait for a CPU, and a neighbour's idle CPU serves our next task at
    /// once. The samples cannot tell neighbours with tokens from others: *every* neighbour
    /// counts as absent, and one without tokens is met by contention (step 3) only, after its
    /// threads made ours wait (a bursty one can make the pool grow and shrink in turn).
    pub neighbours_share_tokens: bool,
}

impl Default for AdaptiveConfig {
    fn default() -> Self {
        AdaptiveConfig {
            wait_threads: 0.5,
            wait_fraction: 0.0,
            throttled_fraction: 0.05,
            max_decrease: 0.5,
            idle_cpus: 0.5,
            neighbour_cpus: 0.5,
            neighbour_memory: 6,
            saturated_fraction: 0.9,
            probe_wait_min: 4,
            probe_wait_max: 300,
            borrow: false,
            neighbours_share_tokens: false,
        }
    }
}

impl AdaptiveConfig {
    pub(super) fn validate(&self) -> Result<(), String> {
        let positive = [
            ("wait_threads", self.wait_threads),
            ("idle_cpus", self.idle_cpus),
            ("saturated_fraction", self.saturated_fraction),
        ];
        for (name, value) in positive {
            if !(value.is_finite() && value > 0.0) {
                return Err(format!("AdaptiveConfig::{name} must be finite and > 0, got {value}"));
            }
        }
        for (name, value) in [
            ("wait_fraction", self.wait_fraction),
            ("throttled_fraction", self.throttled_fraction),
            ("neighbour_cpus", self.neighbour_cpus),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(format!("AdaptiveConfig::{name} must be finite and >= 0, got {value}"));
            }
        }
        if self.neighbour_memory == 0 || self.neighbour_memory as usize > NEIGHBOUR_MEMORY_MAX {
            return Err(format!(
                "AdaptiveConfig::neighbour_memory must be in 1..={NEIGHBOUR_MEMORY_MAX}, got {}",
                self.neighbour_memory
            ));
        }
        if !(self.max_decrease > 0.0 && self.max_decrease < 1.0) {
            return Err(format!("AdaptiveConfig::max_decrease must be in (0, 1), got {}", self.max_decrease));
        }
        if self.probe_wait_min == 0 || self.probe_wait_max < self.probe_wait_min {
            return Err(format!(
                "AdaptiveConfig probe waits need 1 <= probe_wait_min <= probe_wait_max, got {} and {}",
                self.probe_wait_min, self.probe_wait_max
            ));
        }
        Ok(())
    }
}

/// A probe adds `max(1, gap / PROBE_GAP_DIVISOR)` workers, the gap being how many more CPUs
/// the neighbours use than we do.
const PROBE_GAP_DIVISOR: f64 = 8.0;

pub(super) fn decide(config: &AdaptiveConfig, sample: &Sample, state: &mut PolicyState) -> Decision {
    if state.probe_wait == 0 {
        state.probe_wait = config.probe_wait_min;
    }
    let remembered = remember_neighbours(config, sample, state);
    // Neighbours that share our tokens cannot overcommit the host with us: count them absent.
    let (neighbours, neighbours_least) = if config.neighbours_share_tokens { (0.0, 0.0) } else { remembered };
    let cap = sample.cap();
    let current = state.target.clamp(1, cap);
    // 1. Quota (and a thread count or CPU set that shrank under us).
    if current < state.target {
        state.hold = 1;
        state.probing = false;
        return Decision { target: current, reason: Reason::Quota };
    }
    // 2. Hold.
    if state.hold > 0 {
        state.hold -= 1;
        return Decision { target: current, reason: Reason::Hold };
    }
    let waiting = sample.waiting_workers();
    let contended = (waiting >= config.wait_threads && waiting >= config.wait_fraction * f64::from(current))
        || sample.throttled_fraction() >= config.throttled_fraction;
    let saturated =
        sample.queued > 0 || sample.busy_workers() >= config.saturated_fraction * f64::from(current);
    let idle = sample.idle_cpus();

    // 3. Contention.
    if contended {
        if state.probing {
            // The probe cost us more than it gained: back off.
            state.probe_wait = state.probe_wait.saturating_mul(2).min(config.probe_wait_max);
            state.probing = false;
        }
        if current == 1 {
            return Decision { target: 1, reason: Reason::Contention };
        }
        // Give back the workers that waited: exactly the excess when everyone does it, and
        // proportional to our size (each runnable thread waits alike under a fair scheduler),
        // so a bigger pool gives back more: repeated, this equalises the pools.
        let most = ((f64::from(current) * config.max_decrease).ceil() as u32).max(1);
        let give_back = (waiting.round() as u32).clamp(1, most);
        let decreased = current.saturating_sub(give_back).max(1);
        state.hold = 1;
        return Decision { target: decreased, reason: Reason::Contention };
    }
    if state.probing && state.since_change >= 2 {
        // The third period after the probe (the first was held): the neighbours have had two
        // periods to react, even one that was holding after a change of its own. If our workers still wait, the probe only overcommitted the host:
        // undo it and wait twice as long before the next one. If not, probe again soon.
        state.probing = false;
        if waiting >= config.wait_threads / 2.0 {
            state.probe_wait = state.probe_wait.saturating_mul(2).min(config.probe_wait_max);
            state.hold = 1;
            return Decision { target: current.saturating_sub(1).max(1), reason: Reason::Contention };
        }
        state.probe_wait = config.probe_wait_min;
    }
    if !saturated || current >= cap {
        return Decision { target: current, reason: Reason::Steady };
    }
    // 4. Idle CPUs.
    if idle >= config.idle_cpus {
        let alone = neighbours < config.neighbour_cpus;
        // The CPUs the neighbours leave us (rounded: a neighbour using 0.7 CPU leaves 1 of 2).
        // Halves round down: a neighbour at 0.5 CPU of 2 leaves us 1.
        let room = if alone || sample.cpus == 0 {
            cap
        } else {
            ((f64::from(sample.cpus) - neighbours - 0.5).ceil().max(1.0) as u32).min(cap)
        };
        if current < room {
            let share = if alone { idle } else { idle / 2.0 };
            let grow = (share.ceil() as u32).max(1);
            state.hold = 1;
            return Decision { target: current.saturating_add(grow).min(room), reason: Reason::Idle };
        }
    }
    // 5. Fairness probe.
    // Only against a lasting gap (the neighbours' *least* use over the memory) and when our
    // workers were busy all period (not just a task queued at the instant of the sample): a
    // bursty neighbour's burst is not the lock-in this rule breaks.
    let gap = neighbours_least - sample.own_cpus();
    let busy_all_period = sample.busy_workers() >= config.saturated_fraction * f64::from(current);
    if gap >= 1.0 && busy_all_period && state.since_change.saturating_add(1) >= state.probe_wait {
        // One worker, or an eighth of the gap on big hosts so that 64 CPUs converge as fast as
        // 16 (the bigger neighbour gives back what its workers then wait).
        let step = ((gap / PROBE_GAP_DIVISOR).floor() as u32).max(1);
        state.probing = true;
        state.hold = 1;
        return Decision { target: current.saturating_add(step).min(cap), reason: Reason::Probe };
    }
    Decision { target: current, reason: Reason::Steady }
}

/// Records this period's neighbour use and returns the largest and the least of the last
/// `neighbour_memory` periods (a sample without a finite figure counts as 0).
fn remember_neighbours(config: &AdaptiveConfig, sample: &Sample, state: &mut PolicyState) -> (f64, f64) {
    let now = sample.neighbour_cpus();
    let len = NEIGHBOUR_MEMORY_MAX as u64;
    state.recent_neighbours[(state.periods % len) as usize] =
        if now.is_finite() { now.max(0.0) } else { 0.0 };
    state.periods = state.periods.wrapping_add(1);
    let memory = u64::from(config.neighbour_memory.clamp(1, NEIGHBOUR_MEMORY_MAX as u32)).min(state.periods);
    let recent = (1..=memory).map(|back| state.recent_neighbours[((state.periods - back) % len) as usize]);
    recent.fold((0.0, f64::INFINITY), |(most, least), v| (f64::max(most, v), f64::min(least, v)))
}
