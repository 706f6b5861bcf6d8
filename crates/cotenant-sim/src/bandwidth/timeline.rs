//! A simulation's outcome: the timeline of [`Event`]s (what each [`Kind`] means and how it
//! prints) and each [`Period`]'s totals, gathered in a [`Run`].

use std::fmt;

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
