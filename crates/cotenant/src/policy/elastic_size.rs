//! Pure: how many threads an elastic pool should have next period (issue 9 item 3, seed 002
//! "Little's Law Applied to Thread Pools").
//!
//! A CPU pool keeps a fixed set of threads and parks the ones its CPUs cannot run: a parked
//! thread costs nothing and can run again within a period. A pool of *blocking* tasks needs
//! threads in proportion to how long its tasks wait (seed 002: threads = Ncpu × U × (1 + W/C)),
//! which can be tens or hundreds; keeping the most it might ever need would cost stacks and
//! scheduler entries all the time, so the elastic pool creates and retires them instead.
//!
//! Each period the controller gives [`decide`] what the finished tasks measured (wall time, CPU
//! time from the thread CPU clock, run-queue wait from schedstat), how many tasks arrived, what
//! is queued, and `cpus`: the CPUs the pool may use now, decided by the pool's CPU policy
//! (`adaptive` by default) exactly as for a CPU pool, so an elastic pool too gives way when the
//! neighbours are busy. Then:
//!
//! 1. **Estimate** per task: C = CPU time, W = wall − CPU − run-queue wait (time blocked, not
//!    time waiting for a CPU: on a busy host tasks wait longer for a CPU, and counting that as
//!    I/O would grow the pool exactly when it should not). Both are moving averages weighted by
//!    tasks (`TASK_WEIGHT` per task), so one slow task does not resize the pool.
//! 2. **Size**: the utilisation formula `ceil(cpus × U × (1 + W/C))`. Without a backlog (empty
//!    queue) the pool needs no more than what is in flight: Little's law, L = λ × (wall time),
//!    with `headroom` for bursts; the smaller of the two wins. Before any task has finished
//!    there is no estimate: a backlog doubles the size each period (bounded by `max`).
//!
//!    The formula assumes a thread never waits for a CPU; with a backlog and the CPUs nearly
//!    full, the pool's own threads queue for them, and the formula's size leaves CPUs idle
//!    (measured: 72 % of the best fixed size's throughput at 20 ms of I/O, `lab sizing`). So,
//!    with a backlog, **utilisation feedback** corrects it: the CPU the tasks used and the idle
//!    time of the allowed CPUs are measured over a window at the current size (at least
//!    `WINDOW_PERIODS` periods and `WINDOW_TASKS` task times: new threads show only once their
//!    first tasks finish); while CPUs sit idle and the tasks use less than `FULL` × cpus × U,
//!    the size grows in proportion to the CPU it could use (at most doubling), and the size so
//!    found is a floor while the backlog lasts; once a window finds the CPUs full, the size
//!    holds (more threads would only queue for the CPUs). A growth that did not reduce the idle
//!    time by `GAIN` × cpus ends the feedback until the backlog or the CPU count changes, so a
//!    pool whose CPUs cannot be filled (a lock, a neighbour's reserve) does not creep to `max`.
//! 3. **Hysteresis**: a larger size applies at once (a backlog costs latency now); a smaller
//!    one only after it has been wanted for `shrink_after` consecutive periods, and then the
//!    largest size wanted during those periods (threads are cheap to keep for a while and
//!    costly to re-create on every burst).

/// The largest `max` accepted: the pool allocates a slot (counters and a parker, a few hundred
/// bytes) per possible thread when it is built.
pub const MAX_THREADS: u32 = 65_536;

/// The elastic pool's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ElasticConfig {
    /// Threads the pool always keeps (at least 1).
    pub min: u32,
    /// Threads the pool never exceeds.
    pub max: u32,
    /// U in the formula: the share of the pool's CPUs to keep busy, in (0, 1]. Default 1: the
    /// CPU policy already decided how many CPUs the pool may use, so leaving some of those idle
    /// would only lose throughput (the contention-cliff chapter's 0.8, "Thread Pool Sizing and
    /// the Contention Cliff", leaves room for neighbours, which `cpus` does here).
    pub utilization: f64,
    /// Multiplier on Little's law's L when there is no backlog (default 1.5).
    pub headroom: f64,
    /// Consecutive periods a smaller size must be wanted before the pool shrinks (default 50
    /// periods: half a second at the default 10 ms period).
    pub shrink_after: u32,
}

impl ElasticConfig {
    /// The defaults for `min..=max` threads.
    pub fn new(min: u32, max: u32) -> Self {
        ElasticConfig { min, max, utilization: 1.0, headroom: 1.5, shrink_after: 50 }
    }

    /// `Err` names the setting that is out of range.
    pub fn validate(&self) -> Result<(), String> {
        if self.min == 0 {
            return Err("elastic: min must be at least 1, got 0".into());
        }
        if self.max < self.min {
            return Err(format!("elastic: max ({}) must be at least min ({})", self.max, self.min));
        }
        if self.max > MAX_THREADS {
            return Err(format!(
                "elastic: max must be at most {MAX_THREADS} (a slot per thread is allocated up front), got {}",
                self.max
            ));
        }
        if !(self.utilization.is_finite() && self.utilization > 0.0 && self.utilization <= 1.0) {
            return Err(format!("elastic: utilization must be in (0, 1], got {}", self.utilization));
        }
        if !(self.headroom.is_finite() && self.headroom >= 1.0) {
            return Err(format!("elastic: headroom must be at least 1, got {}", self.headroom));
        }
        Ok(())
    }
}

/// What one period measured (times in nanoseconds of that period).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ElasticSample {
    /// Wall-clock length of the period.
    pub elapsed_ns: u64,
    /// CPUs the pool may use now (the CPU policy's target).
    pub cpus: u32,
    /// Tasks that finished in the period.
    pub tasks: u64,
    /// Those of them that were measured (sampled); the times below are theirs.
    pub sampled: u64,
    /// Their wall time, summed.
    pub wall_ns: u64,
    /// Their CPU time (thread CPU clock), summed.
    pub cpu_ns: u64,
    /// Their run-queue wait (schedstat), summed.
    pub runq_ns: u64,
    /// Tasks submitted in the period.
    pub arrivals: u64,
    /// Tasks waiting in the queue at the end of the period.
    pub queued: u32,
    /// Idle time of the CPUs the process may run on (from the host's counters; 0 if unknown,
    /// which reads as "no idle CPU to fill").
    pub idle_ns: u64,
}

/// What the sizer remembers between periods.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ElasticState {
    /// The size in force.
    pub size: u32,
    /// Moving average of the CPU time per task (ns); `None` before the first task finished.
    pub compute_ns: Option<f64>,
    /// Moving average of the blocked time per task (ns).
    pub wait_ns: f64,
    /// Moving average of the run-queue wait per task (ns).
    pub runq_ns: f64,
    /// Utilisation feedback's memory.
    pub fill: Fill,
    /// Consecutive periods a smaller size was wanted.
    pub below_for: u32,
    /// The largest size wanted during those periods.
    pub below_max: u32,
}

impl ElasticState {
    /// A pool that starts with `size` threads.
    pub fn new(size: u32) -> Self {
        ElasticState {
            size,
            compute_ns: None,
            wait_ns: 0.0,
            runq_ns: 0.0,
            fill: Fill::default(),
            below_for: 0,
            below_max: 0,
        }
    }

    /// W/C of the tasks so far (`None` before the first finished, or if they used no CPU).
    pub fn wait_compute_ratio(&self) -> Option<f64> {
        self.compute_ns.filter(|&c| c > 0.0).map(|c| self.wait_ns / c)
    }
}

/// Why the size is what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElasticReason {
    /// The formula (or Little's law) asked for more threads: applied at once.
    Grow,
    /// No task has finished yet and tasks are queued: doubled.
    Probe,
    /// A smaller size was wanted long enough.
    Shrink,
    /// A smaller size is wanted, not yet for long enough.
    Hold,
    /// Utilisation feedback: a backlog and CPUs left idle.
    Fill,
    /// The size is right.
    Steady,
}

impl ElasticReason {
    /// The reason's name in logs.
    #[cfg_attr(loom, allow(dead_code))] // the elastic controller is not modelled under loom
    pub fn as_str(self) -> &'static str {
        match self {
            ElasticReason::Grow => "grow",
            ElasticReason::Probe => "probe",
            ElasticReason::Shrink => "shrink",
            ElasticReason::Hold => "hold",
            ElasticReason::Fill => "fill",
            ElasticReason::Steady => "steady",
        }
    }
}

/// The sizer's answer for one period.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ElasticDecision {
    /// Threads for the next period, within `[min, max]`.
    pub size: u32,
    /// The size wanted this period, before hysteresis.
    pub wanted: u32,
    /// Why.
    pub reason: ElasticReason,
}

/// Weight of one finished task in the moving averages: 16 tasks move them about halfway.
pub const TASK_WEIGHT: f64 = 0.04;
/// Utilisation feedback stops when the tasks use this share of cpus × U ...
pub const FULL: f64 = 0.95;
/// ... or when a growth raised their CPU use by less than this share of cpus.
pub const GAIN: f64 = 0.02;

/// Step 1: folds the period's finished tasks into the per-task averages.
fn estimate(sample: &ElasticSample, state: &mut ElasticState) {
    if sample.sampled == 0 {
        return;
    }
    let n = sample.sampled as f64;
    let cpu = sample.cpu_ns as f64 / n;
    let runq = sample.runq_ns as f64 / n;
    let wait = (sample.wall_ns as f64 / n - cpu - runq).max(0.0);
    let weight = 1.0 - (1.0 - TASK_WEIGHT).powf(n);
    match state.compute_ns {
        None => {
            state.compute_ns = Some(cpu);
            (state.wait_ns, state.runq_ns) = (wait, runq);
        }
        Some(old) => {
            state.compute_ns = Some(old + weight * (cpu - old));
            state.wait_ns += weight * (wait - state.wait_ns);
            state.runq_ns += weight * (runq - state.runq_ns);
        }
    }
}

/// Steps 1–3: the size for the next period.
///
/// `config` should have passed [`ElasticConfig::validate`]; a `max` below `min` is read as `min`.
pub fn decide(config: &ElasticConfig, sample: &ElasticSample, state: &mut ElasticState) -> ElasticDecision {
    let config = &ElasticConfig { max: config.max.max(config.min), ..*config };
    estimate(sample, state);
    if sample.queued == 0 || sample.cpus != state.fill.cpus {
        // The backlog is gone or the CPUs changed: what feedback learned no longer holds.
        state.fill = Fill { cpus: sample.cpus, ..Fill::default() };
    }
    let clamp = |size: f64| -> u32 {
        if size.is_nan() {
            config.min
        } else {
            (size.ceil().min(f64::from(config.max)) as u32).clamp(config.min, config.max)
        }
    };
    let current = state.size.clamp(config.min, config.max);
    let wanted = match state.compute_ns {
        None if sample.queued > 0 => {
            state.size = clamp(f64::from(current) * 2.0);
            state.below_for = 0;
            return ElasticDecision { size: state.size, wanted: state.size, reason: ElasticReason::Probe };
        }
        None => current,
        Some(compute) => {
            let cpus = f64::from(sample.cpus.max(1));
            let formula = if compute > 0.0 {
                cpus * config.utilization * (1.0 + state.wait_ns / compute)
            } else {
                f64::from(config.max) // tasks that use no CPU at all: only `max` bounds them
            };
            if sample.queued > 0 || sample.elapsed_ns == 0 {
                let by_formula = clamp(formula);
                let filled = fill(config, sample, state, current);
                if filled > by_formula.max(current) {
                    state.size = filled;
                    state.below_for = 0;
                    return ElasticDecision { size: filled, wanted: filled, reason: ElasticReason::Fill };
                }
                if state.fill.full {
                    // The CPUs are full: more threads would only queue for them (and inflate
                    // the run-queue wait that W may not fully exclude); fewer only if the
                    // formula asks for fewer (the CPU count fell).
                    current.min(by_formula.max(state.fill.size))
                } else {
                    by_formula.max(state.fill.size)
                }
            } else {
                let rate = sample.arrivals as f64 / (sample.elapsed_ns as f64 / 1e9);
                let task_s = (compute + state.wait_ns + state.runq_ns) / 1e9;
                clamp(formula.min(rate * task_s * config.headroom))
            }
        }
    };
    let reason = if wanted > current {
        state.size = wanted;
        state.below_for = 0;
        state.fill.restart();
        ElasticReason::Grow
    } else if wanted < current {
        state.below_max = if state.below_for == 0 { wanted } else { state.below_max.max(wanted) };
        state.below_for += 1;
        if state.below_for >= config.shrink_after.max(1) {
            state.size = state.below_max;
            state.below_for = 0;
            state.fill.restart();
            ElasticReason::Shrink
        } else {
            state.size = current;
            ElasticReason::Hold
        }
    } else {
        state.size = current;
        state.below_for = 0;
        ElasticReason::Steady
    };
    ElasticDecision { size: state.size, wanted, reason }
}

/// Utilisation feedback's memory (step 2).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Fill {
    /// The size feedback settled on (0: none): a floor while the backlog lasts.
    pub size: u32,
    /// The CPU count it was learned for.
    pub cpus: u32,
    /// The current measuring window (since the size last changed): the tasks' CPU time, the
    /// allowed CPUs' idle time ...
    pub window_cpu_ns: u64,
    /// (idle)
    pub window_idle_ns: u64,
    /// ... and its length.
    pub window_ns: u64,
    /// The idle CPUs in the window before the last growth by feedback (to check that it helped).
    pub before: Option<f64>,
    /// Feedback found no gain: off until the backlog or the CPU count changes.
    pub plateau: bool,
    /// The last window found the CPUs full: the size holds while the backlog lasts.
    pub full: bool,
}

impl Fill {
    fn restart(&mut self) {
        (self.window_cpu_ns, self.window_idle_ns, self.window_ns) = (0, 0, 0);
    }
}

/// Periods a measuring window lasts at least (a fifth of a second at the default period: shorter
/// windows of a few tens of tasks measured the CPU used to ±15 %, enough to mistake a growth
/// that helped for one that did not) ...
pub const WINDOW_PERIODS: u64 = 20;
/// ... and task times it spans at least: new threads show in the CPU used only once their
/// first tasks finish.
pub const WINDOW_TASKS: f64 = 4.0;

/// Utilisation feedback (step 2): once a window of at least `WINDOW_TASKS` task times has been
/// measured at the current size, the size that would use the idle CPUs too if the tasks' CPU
/// use grows in proportion to the threads (at most doubling); `current` when the CPUs are full
/// (the tasks use `FULL` of the CPUs they may, or less than `1 - FULL` of a CPU per allowed CPU
/// is idle), when the last growth did not reduce the idle time, or before the window is over.
fn fill(config: &ElasticConfig, sample: &ElasticSample, state: &mut ElasticState, current: u32) -> u32 {
    let compute_ns = state.compute_ns.unwrap_or(0.0);
    let task_ns = compute_ns + state.wait_ns + state.runq_ns;
    let f = &mut state.fill;
    // Every finished task's CPU time, from the sampled ones' average.
    f.window_cpu_ns = f.window_cpu_ns.saturating_add((sample.tasks as f64 * compute_ns) as u64);
    f.window_idle_ns = f.window_idle_ns.saturating_add(sample.idle_ns);
    f.window_ns = f.window_ns.saturating_add(sample.elapsed_ns);
    let long_enough =
        f.window_ns >= WINDOW_PERIODS * sample.elapsed_ns && f.window_ns as f64 >= WINDOW_TASKS * task_ns;
    if !long_enough || f.window_ns == 0 {
        return current;
    }
    let used = f.window_cpu_ns as f64 / f.window_ns as f64;
    let idle = f.window_idle_ns as f64 / f.window_ns as f64;
    f.restart();
    let cpus = f64::from(sample.cpus.max(1));
    let goal = cpus * config.utilization;
    f.full = used >= FULL * goal || idle <= (1.0 - FULL) * cpus;
    if f.full || f.plateau {
        return current;
    }
    if let Some(before) = f.before.take() {
        if idle > before - GAIN * cpus {
            f.plateau = true; // the last growth left the CPUs as idle: they are not ours to fill
            return current;
        }
    }
    let reachable = (used + idle).min(goal);
    let size = ((f64::from(current) * (reachable / used.max(0.01)).min(2.0)).ceil() as u32)
        .clamp(config.min, config.max);
    if size > current {
        f.before = Some(idle);
        f.size = size;
    }
    size
}

#[cfg(test)]
mod tests;
