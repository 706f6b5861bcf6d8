//! A simulation's inputs: the kernel behaviour ([`Variant`]), a thread's [`Duty`] cycle, the
//! [`Config`] and its checks, and seed 001 Table II's setting ([`table_ii`]).

/// Which kernel behaviour to simulate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// The seed's kernel 5.12: the period's leftover is discarded at the refill.
    Baseline,
    /// Seed 001 §IV-A: the leftover becomes a slush fund that pays the next period's overruns.
    Slush,
    /// Seed 001 §IV-A1 and §IV-A2: the slush fund, and a configuration write that changes
    /// nothing is a no-op.
    All,
    /// Linux since 5.4 as far as this model goes: `baseline`, and an idle CPU returns all but
    /// 1 ms of its local pool.
    Mainline,
}

impl Variant {
    /// Every variant, in the order tables show them.
    pub const ALL: [Variant; 4] = [Variant::Baseline, Variant::Slush, Variant::All, Variant::Mainline];

    /// The variant's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Baseline => "baseline",
            Variant::Slush => "slush",
            Variant::All => "all",
            Variant::Mainline => "mainline",
        }
    }

    pub(super) fn has_slush(self) -> bool {
        matches!(self, Variant::Slush | Variant::All)
    }
}

/// A thread's duty cycle: `run` of CPU time, then `sleep` blocked, repeatedly (ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Duty {
    /// CPU time per burst.
    pub run: u64,
    /// Time blocked between bursts.
    pub sleep: u64,
}

/// A simulation's inputs (nanoseconds).
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The bandwidth period.
    pub period: u64,
    /// The CPU time the group may use per period (all CPUs together).
    pub quota: u64,
    /// The amount a local pool asks for (5 ms by default in the kernel).
    pub slice: u64,
    /// The scheduler tick.
    pub tick: u64,
    /// Each CPU's first tick (its phase, below `tick`); one entry per thread.
    pub phases: Vec<u64>,
    /// When each thread starts running (one thread per CPU).
    pub starts: Vec<u64>,
    /// Periods to simulate.
    pub periods: u32,
    /// Which kernel behaviour.
    pub variant: Variant,
    /// `None`: the threads never block (sysbench, Table II).
    pub duty: Option<Duty>,
    /// A same-value configuration write every this often (from `update_every`; `None`: never).
    pub update_every: Option<u64>,
}

impl Config {
    /// One thread on one CPU, tick phase 0, started at 0 (seed 001 Figure 4's setting).
    pub fn single(period: u64, quota: u64, slice: u64, tick: u64, periods: u32, variant: Variant) -> Self {
        Config {
            period,
            quota,
            slice,
            tick,
            phases: vec![0],
            starts: vec![0],
            periods,
            variant,
            duty: None,
            update_every: None,
        }
    }

    /// `Err` names the input that is out of range.
    pub fn validate(&self) -> Result<(), String> {
        for (name, value) in
            [("period", self.period), ("quota", self.quota), ("slice", self.slice), ("tick", self.tick)]
        {
            if value == 0 {
                return Err(format!("{name} must be positive"));
            }
        }
        if self.phases.is_empty() || self.phases.len() != self.starts.len() {
            return Err(format!(
                "one tick phase and one start per thread: got {} phases and {} starts",
                self.phases.len(),
                self.starts.len()
            ));
        }
        if let Some(phase) = self.phases.iter().find(|&&p| p >= self.tick) {
            return Err(format!("a tick phase must be below the tick ({} ns), got {phase}", self.tick));
        }
        if self.periods == 0 {
            return Err("periods must be at least 1".into());
        }
        if let Some(duty) = self.duty {
            if duty.run == 0 || duty.sleep == 0 {
                return Err(format!(
                    "a duty cycle needs run and sleep (--run, --sleep) above 0, got {} ns and {} ns",
                    duty.run, duty.sleep
                ));
            }
        }
        if self.update_every == Some(0) {
            return Err("the interval between configuration writes (--update-every) must be positive".into());
        }
        let end = self.period.checked_mul(u64::from(self.periods)).ok_or("period × periods overflows")?;
        // Every tick, burst, sleep and write is an event: bound their number (a 1 ns duty
        // cycle over seconds would not fit in memory).
        let step = [Some(self.tick), self.duty.map(|d| d.run.saturating_add(d.sleep)), self.update_every]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(self.tick);
        let events = u128::from(end) * self.phases.len() as u128 / u128::from(step.max(1));
        if events > 100_000_000 {
            return Err(format!(
                "about {events} events (threads × time / shortest of tick, run + sleep, --update-every): \
                 at most 10^8; simulate fewer periods or longer intervals"
            ));
        }
        Ok(())
    }
}

/// Seed 001 Table II's setting: `threads` CPU-bound threads, one per CPU, a quota of `threads`
/// whole CPUs per `period`, each CPU's tick phase and each thread's start (within one tick:
/// "processes start between scheduler ticks", §III-A1) drawn from `seed`.
pub fn table_ii(
    threads: usize,
    period: u64,
    slice: u64,
    tick: u64,
    periods: u32,
    variant: Variant,
    seed: u64,
) -> Config {
    let mut rng = crate::rng::SplitMix64::stream(seed, 0);
    let phases = (0..threads).map(|_| rng.below(tick)).collect();
    let starts = (0..threads).map(|_| rng.below(tick)).collect();
    Config {
        period,
        quota: period.saturating_mul(threads as u64),
        slice,
        tick,
        phases,
        starts,
        periods,
        variant,
        duty: None,
        update_every: None,
    }
}
