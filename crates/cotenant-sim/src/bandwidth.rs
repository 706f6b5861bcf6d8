//! CFS bandwidth control, event by event (seed 001 §II-B and §III-A; the slush fund of §IV-A).
//!
//! One cgroup with a quota per period; `threads` CPU-bound threads, one per CPU, never
//! blocking once started. The model (seed 001's "Listing" numbers in brackets):
//!
//! - **Global pool**: refilled to `quota` at every period boundary [Listing 1]. Under `slush`
//!   what the period left is kept as the slush fund instead of being discarded [Listing 2].
//! - **Local pools**, one per CPU: a CPU's running thread is charged at its scheduler ticks
//!   (every `tick`, from a per-CPU phase) for the time it ran since the last charge. When the
//!   local pool is at or below zero it asks the global pool for `slice - remaining` (enough for
//!   a whole slice) and gets what is there [Listing 4]; still at or below zero, the thread is
//!   throttled. Under `slush`, the first refill of a local pool in a period first pays its debt
//!   from the slush fund, `min(slush, -remaining)` clamped at zero [Listing 3].
//! - **Unthrottling** at the period boundary, after the refill: each throttled CPU (in the
//!   order they were throttled) gets `1 ns - remaining` from the global pool if it is there,
//!   the kernel's rule (`distribute_cfs_runtime`); the seed does not say how much.
//! - **Ties**: the period timer runs before a tick at the same instant (the seed's Figure 4
//!   needs it: at t = 20 ms the refill comes first).
//!
//! - **Blocking** (optional duty cycle: each thread runs `run` of CPU time, then sleeps
//!   `sleep`): a thread that blocks is charged at the context switch (and asks for a slice if
//!   that leaves its pool at or below zero, as `update_curr` does); a thread that wakes with an
//!   empty local pool asks for runtime and is throttled if it gets none (the kernel's check at
//!   enqueue).
//! - **Configuration writes** (optional, every `update_every`): a container runtime rewriting
//!   the same quota and period. The kernel (seed 001 §III-A2) refills the global pool, resets
//!   every local pool to zero and unthrottles; under `all` the write is a no-op (§IV-A2).
//!
//! Variants: `baseline` (the seed's model above, its Listings 1-4), `slush` (baseline with the
//! slush fund), `all` (slush, and same-value writes are no-ops), `mainline` (baseline, and a
//! CPU whose thread blocks returns all but `min_cfs_rq_runtime` = 1 ms of its local pool to the
//! global pool, `return_cfs_rq_runtime`, which the slack timer hands to throttled CPUs; like
//! the seed's model, local runtime never expires, the 5.4 change). The kernel has returned idle
//! runtime since 3.2, so the seed's 5.12 did it too; its listings leave it out, and so does
//! `baseline`, so that the variants separate the mechanisms. For threads that never block and
//! no configuration writes, `all` runs exactly as `slush` and `mainline` as `baseline`: the
//! differences need the options above. Not modelled: the slack timer's 5 ms batching delay
//! (returned runtime is handed out at once), `cfs_burst`.

use std::fmt;

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

    fn has_slush(self) -> bool {
        matches!(self, Variant::Slush | Variant::All)
    }
}

/// The kernel's `min_cfs_rq_runtime`: what an idle CPU keeps of its local pool (`mainline`).
const MIN_CFS_RQ_RUNTIME: i64 = 1_000_000;

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

/// What happened, for the timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The global pool was refilled.
    Refill {
        /// What the period left (discarded, or kept as slush).
        leftover: i64,
    },
    /// A tick charged the CPU's thread.
    Tick {
        /// The run time charged.
        charged: u64,
        /// What the local pool asked the global pool for (0 if it did not).
        asked: u64,
        /// What it got.
        got: u64,
        /// What the slush fund paid first.
        slush_paid: u64,
    },
    /// The CPU's thread was throttled.
    Throttle,
    /// The CPU's thread was unthrottled.
    Unthrottle {
        /// The run time it was given.
        granted: u64,
    },
    /// The thread started.
    Start,
    /// The thread blocked (charged at the context switch).
    Block {
        /// The run time charged.
        charged: u64,
        /// What the local pool asked the global pool for (0 if it did not).
        asked: u64,
        /// What it got.
        got: u64,
        /// What it gave back to the global pool (`mainline`).
        returned: u64,
    },
    /// The thread woke.
    Wake {
        /// What the local pool asked for (0 if it had runtime).
        asked: u64,
        /// What it got.
        got: u64,
    },
    /// A same-value configuration write (`noop` under `all`).
    Update {
        /// Whether it changed nothing.
        noop: bool,
    },
}

/// One event: at `at`, on `cpu` (`None` for the global pool), with the pools after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// When (ns from the start).
    pub at: u64,
    /// The CPU, or `None` for the global pool.
    pub cpu: Option<usize>,
    /// What happened.
    pub kind: Kind,
    /// The CPU's local pool after the event (0 for global events).
    pub local: i64,
    /// The global pool after the event.
    pub global: i64,
    /// The slush fund after the event.
    pub slush: i64,
}

/// Per period (index from 1): time run and time throttled, summed over CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Period {
    /// 1 for the first period.
    pub index: u32,
    /// Time the threads ran in it.
    pub ran: u64,
    /// Time threads spent throttled in it.
    pub throttled: u64,
}

/// A simulation's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// Every period, in order.
    pub periods: Vec<Period>,
    /// Every event, in order.
    pub events: Vec<Event>,
}

impl Run {
    /// Periods in which any thread was throttled, over all periods (Table II's measure).
    pub fn throttled_ratio(&self) -> f64 {
        let throttled = self.periods.iter().filter(|p| p.throttled > 0).count();
        throttled as f64 / self.periods.len().max(1) as f64
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    NotStarted,
    Running,
    Throttled,
    /// Blocked (the duty cycle's sleep): the CPU is idle until `wake_at`.
    Sleeping,
}

struct Cpu {
    remaining: i64,
    state: State,
    last_charge: u64,
    next_tick: u64,
    /// The period number of this local pool's last refill (the slush rule applies to the first).
    refilled_in: Option<u64>,
    /// With a duty cycle: CPU time left before the thread blocks.
    burst_left: u64,
    /// When a sleeping thread wakes.
    wake_at: u64,
}

/// The global pool and the slush fund, and the refill of a local pool from them.
struct Pools {
    global: i64,
    slush: i64,
    slice: i64,
    variant: Variant,
}

impl Pools {
    /// A local pool at or below zero asks for a whole slice [Listing 4]; under `slush` and
    /// `all`, its first refill in a period first pays its debt from the slush fund [Listing 3].
    /// Returns (asked, got, slush paid).
    fn refill(&mut self, cpu: &mut Cpu, period_nr: u64) -> (u64, u64, u64) {
        if cpu.remaining > 0 {
            return (0, 0, 0);
        }
        let mut slush_paid = 0;
        if self.variant.has_slush() && cpu.refilled_in != Some(period_nr) {
            let pay = self.slush.min(-cpu.remaining).max(0);
            self.slush -= pay;
            cpu.remaining += pay;
            slush_paid = pay as u64;
        }
        cpu.refilled_in = Some(period_nr);
        let want = self.slice - cpu.remaining;
        let grant = want.min(self.global).max(0);
        self.global -= grant;
        cpu.remaining += grant;
        (want as u64, grant as u64, slush_paid)
    }
}

/// Unthrottles the throttled CPUs, in the order they were throttled, while the global pool
/// pays each `1 ns - remaining` (the kernel's `distribute_cfs_runtime`).
fn distribute(
    pools: &mut Pools,
    cpus: &mut [Cpu],
    order: &mut Vec<usize>,
    now: u64,
    events: &mut Vec<Event>,
) {
    let mut still = Vec::new();
    for &i in order.iter() {
        let cpu = &mut cpus[i];
        let need = 1 - cpu.remaining; // the kernel's -remaining + 1 ns
        if pools.global >= need {
            pools.global -= need;
            cpu.remaining += need;
            cpu.state = State::Running;
            cpu.last_charge = now;
            events.push(Event {
                at: now,
                cpu: Some(i),
                kind: Kind::Unthrottle { granted: need as u64 },
                local: cpu.remaining,
                global: pools.global,
                slush: pools.slush,
            });
        } else {
            still.push(i);
        }
    }
    *order = still;
}

/// Runs the simulation.
pub fn simulate(config: &Config) -> Result<Run, String> {
    config.validate()?;
    let n = config.phases.len();
    let end = config.period * u64::from(config.periods);
    let quota = i64::try_from(config.quota).map_err(|_| "quota too large")?;
    let slice = i64::try_from(config.slice).map_err(|_| "slice too large")?;
    let mut pools = Pools { global: 0, slush: 0, slice, variant: config.variant };
    let burst = config.duty.map_or(u64::MAX, |d| d.run);
    let mut cpus: Vec<Cpu> = (0..n)
        .map(|i| Cpu {
            remaining: 0,
            state: State::NotStarted,
            last_charge: 0,
            next_tick: config.phases[i],
            refilled_in: None,
            burst_left: burst,
            wake_at: u64::MAX,
        })
        .collect();
    let mut throttled_order: Vec<usize> = Vec::new();
    let mut events = Vec::new();
    let mut periods: Vec<Period> =
        (1..=config.periods).map(|index| Period { index, ran: 0, throttled: 0 }).collect();
    let mut now = 0u64;
    let mut next_period = 0u64; // the first refill is at t = 0
    let mut next_update = config.update_every.unwrap_or(u64::MAX);
    macro_rules! event {
        ($cpu:expr, $kind:expr, $local:expr) => {
            events.push(Event {
                at: now,
                cpu: $cpu,
                kind: $kind,
                local: $local,
                global: pools.global,
                slush: pools.slush,
            })
        };
    }
    loop {
        // The next instant anything happens.
        let mut at = next_period.min(next_update).min(end);
        for (i, cpu) in cpus.iter().enumerate() {
            at = at.min(cpu.next_tick);
            match cpu.state {
                State::NotStarted => at = at.min(config.starts[i]),
                State::Sleeping => at = at.min(cpu.wake_at),
                State::Running => at = at.min(now.saturating_add(cpu.burst_left)),
                State::Throttled => {}
            }
        }
        // Account [now, at) to the period that holds it (events include every boundary).
        if at > now {
            let index = (now / config.period) as usize;
            for cpu in &mut cpus {
                match cpu.state {
                    State::Running => {
                        periods[index].ran += at - now;
                        if config.duty.is_some() {
                            cpu.burst_left -= at - now;
                        }
                    }
                    State::Throttled => periods[index].throttled += at - now,
                    State::NotStarted | State::Sleeping => {}
                }
            }
            now = at;
        }
        if now >= end {
            break;
        }
        let period_nr = now / config.period;
        // 1. The period timer: refill, then unthrottle.
        if now == next_period {
            let leftover = pools.global;
            if config.variant.has_slush() {
                pools.slush = leftover.max(0);
            }
            pools.global = quota;
            event!(None, Kind::Refill { leftover }, 0);
            distribute(&mut pools, &mut cpus, &mut throttled_order, now, &mut events);
            next_period += config.period;
        }
        // 2. A configuration write with the same quota and period (seed 001 §III-A2): the
        //    kernel refills the global pool, empties every local pool and unthrottles; under
        //    `all` it is a no-op (§IV-A2).
        if now == next_update {
            let noop = config.variant == Variant::All;
            if !noop {
                pools.global = quota;
                for cpu in &mut cpus {
                    cpu.remaining = 0;
                    if cpu.state == State::Throttled {
                        cpu.state = State::Running;
                        cpu.last_charge = now;
                    }
                }
                throttled_order.clear();
            }
            event!(None, Kind::Update { noop }, 0);
            next_update = next_update.saturating_add(config.update_every.unwrap_or(u64::MAX));
        }
        // 3. Threads that start or wake now (an empty local pool asks for runtime first, and
        //    is throttled if it gets none: the kernel's check at enqueue).
        for (i, cpu) in cpus.iter_mut().enumerate() {
            let starts = cpu.state == State::NotStarted && config.starts[i] == now;
            let wakes = cpu.state == State::Sleeping && cpu.wake_at == now;
            if !(starts || wakes) {
                continue;
            }
            cpu.state = State::Running;
            cpu.last_charge = now;
            cpu.burst_left = burst;
            let (asked, got, _) = if wakes { pools.refill(cpu, period_nr) } else { (0, 0, 0) };
            let kind = if starts { Kind::Start } else { Kind::Wake { asked, got } };
            event!(Some(i), kind, cpu.remaining);
            if wakes && cpu.remaining <= 0 {
                cpu.state = State::Throttled;
                throttled_order.push(i);
                event!(Some(i), Kind::Throttle, cpu.remaining);
            }
        }
        // 4. Ticks now, in CPU order.
        for (i, cpu) in cpus.iter_mut().enumerate() {
            if cpu.next_tick != now {
                continue;
            }
            cpu.next_tick += config.tick;
            if cpu.state != State::Running {
                continue;
            }
            let charged = now - cpu.last_charge;
            cpu.last_charge = now;
            cpu.remaining -= charged as i64;
            let (asked, got, slush_paid) = pools.refill(cpu, period_nr);
            event!(Some(i), Kind::Tick { charged, asked, got, slush_paid }, cpu.remaining);
            if cpu.remaining <= 0 {
                cpu.state = State::Throttled;
                throttled_order.push(i);
                event!(Some(i), Kind::Throttle, cpu.remaining);
            }
        }
        // 5. Threads whose burst ends now block: charged at the context switch; under
        //    `mainline` the CPU, now idle, returns all but 1 ms of its local pool.
        if let Some(duty) = config.duty {
            let mut any_returned = false;
            for (i, cpu) in cpus.iter_mut().enumerate() {
                if cpu.state != State::Running || cpu.burst_left != 0 {
                    continue;
                }
                let charged = now - cpu.last_charge;
                cpu.last_charge = now;
                cpu.remaining -= charged as i64;
                let (asked, got, _) = pools.refill(cpu, period_nr);
                let mut returned = 0;
                if config.variant == Variant::Mainline && cpu.remaining > MIN_CFS_RQ_RUNTIME {
                    returned = cpu.remaining - MIN_CFS_RQ_RUNTIME;
                    cpu.remaining -= returned;
                    pools.global += returned;
                }
                cpu.state = State::Sleeping;
                cpu.wake_at = now + duty.sleep;
                event!(
                    Some(i),
                    Kind::Block { charged, asked, got, returned: returned as u64 },
                    cpu.remaining
                );
                any_returned |= returned > 0;
            }
            if any_returned {
                // The slack timer hands returned runtime to throttled CPUs (at once here; the
                // kernel waits up to 5 ms to batch returns).
                distribute(&mut pools, &mut cpus, &mut throttled_order, now, &mut events);
            }
        }
    }
    Ok(Run { periods, events })
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |ns: i64| ns as f64 / 1e6;
        let cpu = self.cpu.map_or_else(|| "  -".to_owned(), |c| format!("{c:>3}"));
        let what = match self.kind {
            Kind::Refill { leftover } => format!("refill (leftover {:.2} ms)", ms(leftover)),
            Kind::Tick { charged, asked: 0, .. } => format!("tick, charged {:.2} ms", ms(charged as i64)),
            Kind::Tick { charged, asked, got, slush_paid } => {
                let slush = if slush_paid > 0 {
                    format!("; slush paid {:.2}", ms(slush_paid as i64))
                } else {
                    String::new()
                };
                format!(
                    "tick, charged {:.2} ms{slush}; asked {:.2}, got {:.2}",
                    ms(charged as i64),
                    ms(asked as i64),
                    ms(got as i64)
                )
            }
            Kind::Throttle => "THROTTLED".to_owned(),
            Kind::Unthrottle { granted } => format!("unthrottled with {:.3} ms", ms(granted as i64)),
            Kind::Start => "thread starts".to_owned(),
            Kind::Block { charged, asked, got, returned } => format!(
                "blocks, charged {:.2} ms; asked {:.2}, got {:.2}; returned {:.2}",
                ms(charged as i64),
                ms(asked as i64),
                ms(got as i64),
                ms(returned as i64)
            ),
            Kind::Wake { asked: 0, .. } => "wakes".to_owned(),
            Kind::Wake { asked, got } => {
                format!("wakes; asked {:.2}, got {:.2}", ms(asked as i64), ms(got as i64))
            }
            Kind::Update { noop: true } => "config write (same values): no-op".to_owned(),
            Kind::Update { noop: false } => "config write (same values): refill, local pools to 0".to_owned(),
        };
        write!(
            f,
            "{:>9.3} ms  cpu {cpu}  {what:<62} local {:>7.3}  global {:>7.3}  slush {:>6.3}",
            self.at as f64 / 1e6,
            ms(self.local),
            ms(self.global),
            ms(self.slush)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn figure_4(variant: Variant) -> Run {
        simulate(&Config::single(10 * MS, 10 * MS, 5 * MS, 4 * MS, 3, variant)).unwrap()
    }

    fn tick_at(run: &Run, at_ms: u64) -> Event {
        *run.events
            .iter()
            .find(|e| e.at == at_ms * MS && matches!(e.kind, Kind::Tick { .. }))
            .unwrap_or_else(|| panic!("no tick at {at_ms} ms"))
    }

    /// Seed 001 §III-A1, Figure 4: period 10 ms, quota 10 ms, slice 5 ms, tick 4 ms, one
    /// CPU-bound thread. "At t=8ms the local pool is at -3ms and is refilled with only 2ms";
    /// at t=12ms it is at -2ms; the third period runs "only for 8ms" and is "throttled for 2ms".
    #[test]
    fn baseline_reproduces_seed_001_figure_4() {
        let run = figure_4(Variant::Baseline);
        let t8 = tick_at(&run, 8);
        assert_eq!(t8.kind, Kind::Tick { charged: 4 * MS, asked: 8 * MS, got: 5 * MS, slush_paid: 0 });
        assert_eq!((t8.local, t8.global), (2 * MS as i64, 0), "-3 ms refilled with only 5: local 2");
        let t12 = tick_at(&run, 12);
        assert_eq!(t12.kind, Kind::Tick { charged: 4 * MS, asked: 7 * MS, got: 7 * MS, slush_paid: 0 });
        assert_eq!(t12.global, 3 * MS as i64, "-2 ms at t = 12: the global pool keeps 3 ms");
        // t = 20: the refill first discards the 3 ms left; the tick then pays the -3 ms debt.
        let refill = run.events.iter().find(|e| e.at == 20 * MS).unwrap();
        assert_eq!(refill.kind, Kind::Refill { leftover: 3 * MS as i64 });
        let t28 = tick_at(&run, 28);
        assert_eq!(t28.kind, Kind::Tick { charged: 4 * MS, asked: 8 * MS, got: 2 * MS, slush_paid: 0 });
        assert!(run.events.iter().any(|e| e.at == 28 * MS && e.kind == Kind::Throttle));
        let periods: Vec<(u32, u64, u64)> =
            run.periods.iter().map(|p| (p.index, p.ran, p.throttled)).collect();
        assert_eq!(periods, [(1, 10 * MS, 0), (2, 10 * MS, 0), (3, 8 * MS, 2 * MS)]);
    }

    /// Seed 001 §IV-A: with the slush fund the 3 ms left at t = 20 pay the -3 ms debt, and no
    /// period is throttled.
    #[test]
    fn slush_removes_figure_4s_throttling() {
        let run = figure_4(Variant::Slush);
        let t20 = tick_at(&run, 20);
        assert_eq!(t20.kind, Kind::Tick { charged: 4 * MS, asked: 5 * MS, got: 5 * MS, slush_paid: 3 * MS });
        assert!(run.periods.iter().all(|p| p.ran == 10 * MS && p.throttled == 0), "{:?}", run.periods);
        assert!(!run.events.iter().any(|e| e.kind == Kind::Throttle));
    }

    /// Run on, baseline alternates: the throttled period ends with a debt that the next
    /// period's refill pays at once (derived, not in the seed; its Table II reports 49 % of
    /// 10 ms periods throttled for 3 threads).
    #[test]
    fn baseline_throttles_every_other_period_in_the_long_run() {
        let run = simulate(&Config::single(10 * MS, 10 * MS, 5 * MS, 4 * MS, 20, Variant::Baseline)).unwrap();
        let throttled: Vec<bool> = run.periods.iter().map(|p| p.throttled > 0).collect();
        assert!(throttled[2..].iter().filter(|&&t| t).count() >= 8, "{throttled:?}");
        assert!(run.throttled_ratio() > 0.4 && run.throttled_ratio() < 0.6);
        assert_eq!(
            simulate(&Config::single(10 * MS, 10 * MS, 5 * MS, 4 * MS, 20, Variant::Slush))
                .unwrap()
                .throttled_ratio(),
            0.0
        );
    }

    #[test]
    fn no_more_runs_than_the_quota_allows_plus_one_slice_and_tick_per_cpu() {
        for variant in Variant::ALL {
            let config = Config {
                period: 10 * MS,
                quota: 25 * MS,
                slice: 5 * MS,
                tick: 4 * MS,
                phases: vec![0, MS, 3 * MS],
                starts: vec![0, 2 * MS, 7 * MS],
                periods: 50,
                variant,
                duty: None,
                update_every: None,
            };
            let run = simulate(&config).unwrap();
            let ran: u64 = run.periods.iter().map(|p| p.ran).sum();
            assert!(ran <= 50 * 25 * MS + 3 * (5 + 4) * MS, "{variant:?} ran {ran}");
            assert!(ran >= 45 * 25 * MS, "{variant:?} ran only {ran}");
        }
    }

    #[test]
    fn the_same_inputs_give_the_same_timeline() {
        let config = Config {
            period: 10 * MS,
            quota: 20 * MS,
            slice: 5 * MS,
            tick: 4 * MS,
            phases: vec![0, 1_234_567, 3_999_999],
            starts: vec![0, 5 * MS, 123],
            periods: 30,
            variant: Variant::Baseline,
            duty: Some(Duty { run: 7 * MS, sleep: 3 * MS }),
            update_every: Some(45 * MS),
        };
        assert_eq!(simulate(&config).unwrap(), simulate(&config).unwrap());
    }

    /// Table II's shape under `baseline`: far more throttling at 50 and 10 ms than at 100 ms;
    /// at most 1 % under `slush` at any period (seed 001 Figures 5 and 6); the same seed, the
    /// same configuration.
    #[test]
    fn table_ii_shape_baseline_grows_as_the_period_shrinks_slush_does_not_throttle() {
        let ratio = |period_ms: u64, periods: u32, variant: Variant, seed: u64| {
            simulate(&table_ii(3, period_ms * MS, 5 * MS, 4 * MS, periods, variant, seed))
                .unwrap()
                .throttled_ratio()
        };
        for seed in 0..5 {
            let (long, mid, short) = (
                ratio(100, 200, Variant::Baseline, seed),
                ratio(50, 400, Variant::Baseline, seed),
                ratio(10, 2000, Variant::Baseline, seed),
            );
            assert!(
                long < mid && long < short && mid > 0.3 && short > 0.3,
                "seed {seed}: {long} {mid} {short}"
            );
            for (period, periods) in [(100, 200), (50, 400), (10, 2000)] {
                // "less than 1 %" (seed 001 §V): a thread that starts late can still overrun once.
                assert!(ratio(period, periods, Variant::Slush, seed) <= 0.01, "seed {seed}, {period} ms");
            }
        }
        let config = table_ii(3, 10 * MS, 5 * MS, 4 * MS, 100, Variant::Baseline, 7);
        assert_eq!(config, table_ii(3, 10 * MS, 5 * MS, 4 * MS, 100, Variant::Baseline, 7));
        assert!(config.phases.iter().chain(&config.starts).all(|&t| t < 4 * MS));
    }

    /// Without blocking and configuration writes, `all` is `slush` and `mainline` is
    /// `baseline`, event for event (what the module doc says).
    #[test]
    fn all_and_mainline_need_writes_and_blocking_to_differ() {
        for period in [100 * MS, 10 * MS] {
            let run = |variant| simulate(&table_ii(3, period, 5 * MS, 4 * MS, 50, variant, 3)).unwrap();
            assert_eq!(run(Variant::All), run(Variant::Slush));
            assert_eq!(run(Variant::Mainline), run(Variant::Baseline));
        }
    }

    /// Seed 001 §III-A2: a write of the same quota and period empties the local pools, so the
    /// runtime they held is charged again and a period that did not throttle now does; under
    /// `all` the write is a no-op (§IV-A2) and nothing throttles.
    #[test]
    fn a_same_value_write_throttles_except_under_all() {
        let config = |variant| Config {
            update_every: Some(1_000 * MS),
            ..table_ii(3, 100 * MS, 5 * MS, 4 * MS, 30, variant, 1)
        };
        let quiet = simulate(&table_ii(3, 100 * MS, 5 * MS, 4 * MS, 30, Variant::Baseline, 1)).unwrap();
        assert_eq!(quiet.throttled_ratio(), 0.0);
        let baseline = simulate(&config(Variant::Baseline)).unwrap();
        assert!(baseline.events.iter().any(|e| e.kind == Kind::Update { noop: false }));
        assert!(baseline.throttled_ratio() >= 0.1, "{}", baseline.throttled_ratio());
        assert!(baseline.periods[..10].iter().all(|p| p.throttled == 0), "nothing before the first write");
        let all = simulate(&config(Variant::All)).unwrap();
        assert!(all.events.iter().any(|e| e.kind == Kind::Update { noop: true }));
        assert_eq!(all.throttled_ratio(), 0.0);
    }

    /// One thread that runs 2 ms and blocks 8 ms: at its first block (t = 2 ms) its local pool
    /// holds 3 ms of the 5 ms slice; `mainline` returns all but 1 ms to the global pool,
    /// `baseline` keeps it.
    #[test]
    fn mainline_returns_all_but_1_ms_when_a_cpu_goes_idle() {
        let block = |variant| {
            let config = Config {
                duty: Some(Duty { run: 2 * MS, sleep: 8 * MS }),
                ..Config::single(10 * MS, 10 * MS, 5 * MS, 4 * MS, 2, variant)
            };
            let run = simulate(&config).unwrap();
            *run.events.iter().find(|e| matches!(e.kind, Kind::Block { .. })).unwrap()
        };
        let mainline = block(Variant::Mainline);
        assert_eq!(mainline.at, 2 * MS);
        assert_eq!(mainline.kind, Kind::Block { charged: 2 * MS, asked: 0, got: 0, returned: 2 * MS });
        assert_eq!((mainline.local, mainline.global), (MS as i64, 7 * MS as i64));
        let baseline = block(Variant::Baseline);
        assert_eq!(baseline.kind, Kind::Block { charged: 2 * MS, asked: 0, got: 0, returned: 0 });
        assert_eq!((baseline.local, baseline.global), (3 * MS as i64, 5 * MS as i64));
    }

    /// A thread that wakes with an empty local pool and finds the global pool empty is
    /// throttled at once (the kernel's check at enqueue), and runs again at the refill.
    #[test]
    fn a_thread_that_wakes_to_an_empty_pool_is_throttled() {
        // Quota 4 ms per 10 ms; the thread runs 6 ms bursts, blocking 1 ms in between.
        let config = Config {
            duty: Some(Duty { run: 6 * MS, sleep: MS }),
            ..Config::single(10 * MS, 4 * MS, 5 * MS, 4 * MS, 4, Variant::Baseline)
        };
        let run = simulate(&config).unwrap();
        assert!(run.events.iter().any(|e| matches!(e.kind, Kind::Wake { asked, got: 0 } if asked > 0)
            && run.events.iter().any(|t| t.at == e.at && t.cpu == e.cpu && t.kind == Kind::Throttle)));
        let ran: u64 = run.periods.iter().map(|p| p.ran).sum();
        assert!(ran <= 4 * 4 * MS + 5 * MS + 4 * MS, "ran {ran}");
    }

    #[test]
    fn bad_inputs_are_named() {
        let mut config = Config::single(10 * MS, 10 * MS, 5 * MS, 4 * MS, 3, Variant::Baseline);
        config.tick = 0;
        assert!(simulate(&config).unwrap_err().contains("tick"));
        let mut config = Config::single(10 * MS, 10 * MS, 5 * MS, 4 * MS, 3, Variant::Baseline);
        config.phases = vec![5 * MS];
        assert!(simulate(&config).unwrap_err().contains("phase"));
        let mut config = Config::single(10 * MS, 10 * MS, 5 * MS, 4 * MS, 3, Variant::Baseline);
        config.starts = vec![];
        assert!(simulate(&config).unwrap_err().contains("one tick phase and one start per thread"));
        let mut config = Config::single(10 * MS, 10 * MS, 5 * MS, 4 * MS, 3, Variant::Baseline);
        config.duty = Some(Duty { run: 0, sleep: MS });
        assert!(simulate(&config).unwrap_err().contains("duty cycle"));
        config.duty = None;
        config.update_every = Some(0);
        assert!(simulate(&config).unwrap_err().contains("--update-every"));
        config.update_every = None;
        config.duty = Some(Duty { run: 1, sleep: 1 });
        config.periods = 1_000;
        assert!(simulate(&config).unwrap_err().contains("at most 10^8"));
    }
}
