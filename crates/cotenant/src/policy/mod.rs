//! Pure decision logic: a [`Sample`] of one period plus the policy's [`PolicyState`] give the
//! next target. No clock, no I/O, no threads: the pool's controller, the simulator
//! (`internal::policy_sim` and the `cotenant-sim` crate) and the recorded vectors of `testdata/policy/` all call the same functions.
//!
//! | policy | module | what it does |
//! |---|---|---|
//! | [`Policy::fixed`] | here | a constant target |
//! | [`Policy::share`] | `share.rs` | seed 000 §5.2's formula, faithfully (locks in, see `docs/policy.md`) |
//! | [`Policy::adaptive`] | `adaptive.rs` | cotenant's controller: contention, idle CPUs, fairness probes |
//! | (adaptive) | `borrow_limit.rs` | between decisions: one more worker while a CPU is idle *now* |
//! | (the controller) | `coast.rs` | how many periods until a pool's next sample: more while nothing changes |
//! | (elastic pools) | `elastic_size.rs` | threads for blocking work: Ncpu × U × (1 + W/C), Little's law, hysteresis |
//!
//! Invariant: every decision is in `1..=sample.threads`, and a dynamic policy never exceeds
//! [`Sample::cap`] (what the quota pays for).

mod adaptive;
pub(crate) mod borrow_limit;
pub(crate) mod coast;
pub(crate) mod elastic_size;
mod share;

use std::fmt;

pub use adaptive::AdaptiveConfig;

/// How a pool decides how many of its workers may run.
///
/// ```
/// use cotenant::{Policy, Pool};
/// let ignorant = Pool::builder().policy(Policy::fixed(2)).build().unwrap();
/// assert_eq!((ignorant.threads(), ignorant.target()), (2, 2));
/// assert_eq!(Policy::share(1.5).to_string(), "share(1.5)");
/// assert!(Policy::share(-1.0).validate().unwrap_err().contains("finite overcommit > 0"));
/// assert_eq!(Policy::default(), Policy::adaptive());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    kind: Kind,
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Fixed(usize),
    Share(f64),
    Adaptive(AdaptiveConfig),
}

impl Policy {
    /// cotenant's controller (the default): shrinks when neighbours make our workers wait for a
    /// CPU, grows into idle CPUs while work is queued, never plans more workers than the quota
    /// pays for, and probes for its fair share so that it cannot lock in (`docs/policy.md`).
    pub fn adaptive() -> Self {
        Policy { kind: Kind::Adaptive(AdaptiveConfig::default()) }
    }

    /// [`Policy::adaptive`] with tuned constants (for experiments; the defaults are measured).
    pub fn adaptive_with(config: AdaptiveConfig) -> Self {
        Policy { kind: Kind::Adaptive(config) }
    }

    /// The friendlypool paper's rule ("Reducing Tail Latencies Through Environment- and
    /// Neighbour-aware Thread Management", its section 5.2): `target = ceil(overcommit ·
    /// Δcpu_self / Δcpu_busy · CPUs)`, computed on the CPUs this process may use and capped by
    /// the quota. `overcommit` > 0; 1 is the paper's default, larger trades latency for
    /// throughput (its Figure 8).
    pub fn share(overcommit: f64) -> Self {
        Policy { kind: Kind::Share(overcommit) }
    }

    /// A constant target of `n` workers: the "ignorant" pool when `n` is the CPU count, the
    /// "optimal" one when it is CPUs / processes. No controller runs for a fixed pool.
    pub fn fixed(n: usize) -> Self {
        Policy { kind: Kind::Fixed(n) }
    }

    /// This policy for a pool whose workers share host CPU tokens with their neighbours
    /// (`Builder::host_tokens` applies it): [`Policy::adaptive`] stops sizing itself against
    /// its neighbours' CPU use, which the samples cannot split into token sharers and others
    /// ([`AdaptiveConfig::neighbours_share_tokens`]); `fixed` and `share` are unchanged.
    ///
    /// ```
    /// use cotenant::{policy::AdaptiveConfig, Policy};
    /// let shared = Policy::adaptive().sharing_host_tokens();
    /// let expected = AdaptiveConfig { neighbours_share_tokens: true, ..Default::default() };
    /// assert_eq!(shared, Policy::adaptive_with(expected));
    /// assert_eq!(shared.to_string(), "adaptive(tokens)");
    /// assert_eq!(Policy::fixed(2).sharing_host_tokens(), Policy::fixed(2));
    /// ```
    pub fn sharing_host_tokens(self) -> Policy {
        match self.kind {
            Kind::Adaptive(config) => {
                Policy { kind: Kind::Adaptive(AdaptiveConfig { neighbours_share_tokens: true, ..config }) }
            }
            kind => Policy { kind },
        }
    }

    /// The policy's name: `fixed`, `share` or `adaptive`.
    pub fn name(&self) -> &'static str {
        match self.kind {
            Kind::Fixed(_) => "fixed",
            Kind::Share(_) => "share",
            Kind::Adaptive(_) => "adaptive",
        }
    }

    /// `Some(n)` for `fixed(n)`.
    pub fn fixed_target(&self) -> Option<usize> {
        match self.kind {
            Kind::Fixed(n) => Some(n),
            _ => None,
        }
    }

    /// Checks the parameters; the text says what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        match &self.kind {
            Kind::Fixed(0) => Err("Policy::fixed(n) needs n >= 1, got 0".into()),
            Kind::Share(o) if !(o.is_finite() && *o > 0.0) => {
                Err(format!("Policy::share(overcommit) needs a finite overcommit > 0, got {o}"))
            }
            Kind::Adaptive(config) => config.validate(),
            _ => Ok(()),
        }
    }

    /// The next target after a period described by `sample`.
    pub fn decide(&self, sample: &Sample, state: &mut PolicyState) -> Decision {
        let decision = match &self.kind {
            Kind::Fixed(n) => Decision { target: clamp(*n as u32, sample.threads), reason: Reason::Fixed },
            Kind::Share(o) => share::decide(*o, sample),
            Kind::Adaptive(config) => adaptive::decide(config, sample, state),
        };
        debug_assert!(decision.target >= 1 && decision.target <= sample.threads.max(1));
        state.idle_average += (sample.idle_cpus() - state.idle_average) * borrow_limit::IDLE_SMOOTHING;
        state.record(decision.target);
        decision
    }

    /// How many workers may run while borrowing idle CPUs between decisions (0: no
    /// borrowing), after [`decide`](Policy::decide) updated `state`. Only
    /// [`Policy::adaptive`] borrows (unless its config turns it off); see `policy/borrow_limit.rs`
    /// for when it is safe.
    pub fn borrow_limit(&self, sample: &Sample, state: &PolicyState, online_cpus: u32) -> u32 {
        match &self.kind {
            Kind::Adaptive(config) if config.borrow => {
                borrow_limit::limit(sample, state.idle_average, online_cpus)
            }
            _ => 0,
        }
    }
}

impl Default for Policy {
    /// [`Policy::adaptive`].
    fn default() -> Self {
        Policy::adaptive()
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Fixed(n) => write!(f, "fixed({n})"),
            Kind::Share(o) => write!(f, "share({o})"),
            Kind::Adaptive(c) if c.neighbours_share_tokens => f.write_str("adaptive(tokens)"),
            Kind::Adaptive(_) => f.write_str("adaptive"),
        }
    }
}

/// The target when there is no sample (sampling failed): every worker the quota pays for,
/// or every thread when even that is unknown — the pool then behaves like a plain pool.
pub fn fallback_target(threads: u32, cap: Option<u32>) -> u32 {
    clamp(cap.unwrap_or(threads), threads)
}

/// One period, as the controller measured it. Times are nanoseconds of that period; CPU
/// amounts derived from them are in CPUs (1.0 = one CPU busy for the whole period).
///
/// It may gain fields: outside this crate start from [`Sample::default`] and set the fields.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct Sample {
    /// Wall-clock length of the period.
    pub elapsed_ns: u64,
    /// The pool's OS threads.
    pub threads: u32,
    /// CPUs this process may run on (online ∩ affinity ∩ cpuset).
    pub cpus: u32,
    /// The CPU limit set by quotas (`None`: no quota).
    pub quota_cpus: Option<f64>,
    /// CPU time of this whole process.
    pub self_ns: u64,
    /// CPU time of every task on the CPUs we may use (busy time of those CPUs).
    pub busy_ns: u64,
    /// Idle time of the CPUs we may use.
    pub idle_ns: u64,
    /// Runnable tasks on the host at the end of the period (`/proc/stat` `procs_running`).
    pub procs_running: Option<u32>,
    /// Time our cgroup was throttled by its quota (`cpu.stat`).
    pub throttled_ns: u64,
    /// Wall-clock time our workers spent in busy stretches (running tasks back to back).
    pub workers_busy_ns: u64,
    /// CPU time our workers got (`None` when per-thread clocks are unavailable).
    pub workers_cpu_ns: Option<u64>,
    /// Time our workers waited on a run queue (schedstat), when the kernel reports it. A pool
    /// whose adaptive policy shares host tokens counts only the wait of workers holding a token
    /// (`docs/host-tokens.md`): the others wait behind the holders by design. In a period in
    /// which one of its tasks ran without a token it counts every worker's wait again.
    pub workers_runq_wait_ns: Option<u64>,
    /// Tasks waiting in our queue at the end of the period.
    pub queued: u32,
}

impl Sample {
    /// The sample as one line of JSON, field names as in this struct (the format of
    /// `testdata/policy/` and of `COTENANT_RECORD_SAMPLES` recordings).
    pub fn to_json(&self) -> String {
        fn opt<T: fmt::Display>(value: Option<T>) -> String {
            value.map_or_else(|| "null".to_owned(), |v| v.to_string())
        }
        format!(
            "{{\"elapsed_ns\": {}, \"threads\": {}, \"cpus\": {}, \"quota_cpus\": {}, \"self_ns\": {}, \
             \"busy_ns\": {}, \"idle_ns\": {}, \"procs_running\": {}, \"throttled_ns\": {}, \
             \"workers_busy_ns\": {}, \"workers_cpu_ns\": {}, \"workers_runq_wait_ns\": {}, \"queued\": {}}}",
            self.elapsed_ns,
            self.threads,
            self.cpus,
            opt(self.quota_cpus),
            self.self_ns,
            self.busy_ns,
            self.idle_ns,
            opt(self.procs_running),
            self.throttled_ns,
            self.workers_busy_ns,
            opt(self.workers_cpu_ns),
            opt(self.workers_runq_wait_ns),
            self.queued
        )
    }

    fn per_period(&self, ns: u64) -> f64 {
        if self.elapsed_ns == 0 {
            0.0
        } else {
            ns as f64 / self.elapsed_ns as f64
        }
    }

    /// The most workers the quota and the allowed CPUs pay for: `min(threads, cpus,
    /// floor(quota))`, at least 1. Floor, because a worker the quota cannot pay for in full is
    /// throttled at the end of every period (the friendlypool paper, section 3, and "Mitigating
    /// Unnecessary Throttling in Linux CFS Bandwidth Control").
    pub fn cap(&self) -> u32 {
        let mut cap = self.threads.max(1);
        if self.cpus > 0 {
            cap = cap.min(self.cpus);
        }
        if let Some(quota) = self.quota_cpus {
            // A tiny epsilon so that 2.0 stored as 1.9999999 still pays for 2 workers.
            cap = cap.min(((quota + 1e-9).floor() as u32).max(1));
        }
        cap.max(1)
    }

    /// CPUs this process used.
    pub fn own_cpus(&self) -> f64 {
        self.per_period(self.self_ns)
    }

    /// CPUs everyone else used on the CPUs we may use.
    pub fn neighbour_cpus(&self) -> f64 {
        self.per_period(self.busy_ns.saturating_sub(self.self_ns))
    }

    /// CPUs left idle among those we may use.
    pub fn idle_cpus(&self) -> f64 {
        self.per_period(self.idle_ns)
    }

    /// Our workers that were, on average, runnable but not running: run-queue wait from
    /// schedstat when the kernel has it, otherwise busy wall time minus CPU time (which also
    /// counts time a task spent blocked; cotenant's pool is for CPU-bound work).
    pub fn waiting_workers(&self) -> f64 {
        match (self.workers_runq_wait_ns, self.workers_cpu_ns) {
            (Some(wait), _) => self.per_period(wait),
            (None, Some(cpu)) => self.per_period(self.workers_busy_ns.saturating_sub(cpu)),
            (None, None) => 0.0,
        }
    }

    /// Workers in busy stretches, on average over the period.
    pub fn busy_workers(&self) -> f64 {
        self.per_period(self.workers_busy_ns)
    }

    /// The share of the period our cgroup was throttled.
    pub fn throttled_fraction(&self) -> f64 {
        self.per_period(self.throttled_ns)
    }
}

/// What a policy remembers between periods. Its memory is private to the policies (it may
/// change with them); [`PolicyState::target`] reads the target in force.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyState {
    /// The target in force during the period being decided.
    pub(crate) target: u32,
    /// Periods to keep the target unchanged (the period after a change mixes old and new).
    pub(crate) hold: u32,
    /// Periods since the target last changed.
    pub(crate) since_change: u32,
    /// Periods to wait between fairness probes (doubles after a probe that failed).
    pub(crate) probe_wait: u32,
    /// Whether the last change was a probe that has not yet been confirmed.
    pub(crate) probing: bool,
    /// The neighbours' CPU use in the last periods, newest at `(periods - 1) % len`; the
    /// adaptive policy looks at the largest of the last `AdaptiveConfig::neighbour_memory`.
    pub(crate) recent_neighbours: [f64; NEIGHBOUR_MEMORY_MAX],
    /// Periods decided so far (indexes `recent_neighbours`).
    pub(crate) periods: u64,
    /// Idle CPUs among those we may use, smoothed over about 8 periods (an exponential moving
    /// average with weight `IDLE_SMOOTHING`, `policy/borrow_limit.rs`): what gates borrowing.
    pub(crate) idle_average: f64,
}

/// The most periods of neighbour use a [`PolicyState`] remembers.
pub const NEIGHBOUR_MEMORY_MAX: usize = 16;

impl PolicyState {
    /// The state of a pool that starts with `target` workers allowed.
    pub fn new(target: u32) -> Self {
        PolicyState {
            target: target.max(1),
            hold: 0,
            since_change: 0,
            probe_wait: 0,
            probing: false,
            recent_neighbours: [0.0; NEIGHBOUR_MEMORY_MAX],
            periods: 0,
            idle_average: 0.0,
        }
    }

    /// The target in force: the last decision's, or the starting one before any decision.
    #[must_use]
    pub fn target(&self) -> u32 {
        self.target
    }

    fn record(&mut self, target: u32) {
        if target == self.target {
            self.since_change = self.since_change.saturating_add(1);
        } else {
            self.since_change = 0;
        }
        self.target = target;
    }
}

/// A policy's answer for one period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Decision {
    /// Workers allowed to run in the next period.
    pub target: u32,
    /// Why.
    pub reason: Reason,
}

/// Why a decision was made (for tracing, the simulator's tables and the tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reason {
    /// `Policy::fixed`.
    Fixed,
    /// `Policy::share`'s formula.
    Share,
    /// Lowered to what the quota pays for.
    Quota,
    /// Our workers waited for a CPU (or the cgroup was throttled): shrink.
    Contention,
    /// Idle CPUs and queued work: grow.
    Idle,
    /// One more worker to test whether our fair share is larger (no idle, neighbours bigger).
    Probe,
    /// Nothing calls for a change.
    Steady,
    /// Holding after a change (the period straddled it).
    Hold,
}

impl Reason {
    /// A short lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Fixed => "fixed",
            Reason::Share => "share",
            Reason::Quota => "quota",
            Reason::Contention => "contention",
            Reason::Idle => "idle",
            Reason::Probe => "probe",
            Reason::Steady => "steady",
            Reason::Hold => "hold",
        }
    }
}

/// `value` clamped to `1..=threads`.
fn clamp(value: u32, threads: u32) -> u32 {
    value.clamp(1, threads.max(1))
}
