//! The model's types: the waiting strategies, what one run is told ([`RunSpec`], [`Boost`])
//! and what it measures ([`Latencies`], [`RunResult`]).

use std::time::Duration;

use anyhow::Context as _;
use cotenant::wait::Backoff;
use hdrhistogram::Histogram;
use serde::Serialize;

/// How a snapshot waits for an allocating session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// Pure spinning (WiredTiger's snapshot code before seed 004's fix).
    Spin,
    /// `sched_yield` between checks.
    Yield,
    /// WiredTiger's `__wt_spin_backoff` (`Backoff::wiredtiger`).
    Backoff,
    /// A short spin, then parked on a `Signal` that publishing sessions notify.
    Park,
}

impl Strategy {
    /// Every strategy, in the order the tables and runs use.
    pub const ALL: [Strategy; 4] = [Strategy::Spin, Strategy::Yield, Strategy::Backoff, Strategy::Park];

    /// The strategy's name in tables, rows and charts.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Spin => "spin",
            Strategy::Yield => "yield",
            Strategy::Backoff => "backoff",
            Strategy::Park => "park",
        }
    }

    /// The `cotenant::wait` back-off that implements this strategy.
    pub(super) fn backoff(self) -> Backoff {
        match self {
            Strategy::Spin => Backoff::spin(),
            Strategy::Yield => Backoff::yielding(),
            Strategy::Backoff => Backoff::wiredtiger(),
            Strategy::Park => Backoff::parking(),
        }
    }
}

/// When the boosted sessions run at nice -20.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Boost {
    /// No session is boosted.
    Never,
    /// From `start` to `end` after the run's start.
    Window {
        /// When the boost begins.
        start: Duration,
        /// When it ends.
        end: Duration,
    },
    /// For the whole run.
    Always,
}

/// One run of the model.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// How snapshots wait for allocating sessions.
    pub strategy: Strategy,
    /// Session threads.
    pub sessions: usize,
    /// The CPUs the sessions may run on.
    pub cpus: Vec<usize>,
    /// How many sessions get nice -20, and when.
    pub boosted: usize,
    /// When the boosted sessions run at nice -20.
    pub boost: Boost,
    /// How long the sessions run.
    pub duration: Duration,
    /// The client's round trip before each transaction (zero: back to back).
    pub round_trip: Duration,
}

/// Transaction latencies (ns): of one session, or of every session of a run merged.
pub struct Latencies {
    /// End-to-end latencies (round trip and transaction) per second of the run.
    pub per_second: Vec<Histogram<u64>>,
    /// End-to-end latencies of the whole run.
    pub total: Histogram<u64>,
    /// The transactions alone (begin to commit), as the server sees them.
    pub server: Histogram<u64>,
    /// Latencies of the transactions that began inside the boost window.
    pub in_window: Histogram<u64>,
    /// Transactions committed before the run stopped.
    pub transactions: u64,
}

impl Latencies {
    /// No transaction yet.
    pub(super) fn new() -> Self {
        Latencies {
            per_second: Vec::new(),
            total: histogram(),
            server: histogram(),
            in_window: histogram(),
            transactions: 0,
        }
    }

    /// The histogram of second `second` of the run, created on first use.
    pub(super) fn second(&mut self, second: usize) -> &mut Histogram<u64> {
        while self.per_second.len() <= second {
            self.per_second.push(histogram());
        }
        &mut self.per_second[second]
    }

    /// Adds `other`'s transactions and histograms to these.
    pub(super) fn add(&mut self, other: &Latencies) -> anyhow::Result<()> {
        self.transactions += other.transactions;
        self.total.add(&other.total).context("merging histograms")?;
        self.server.add(&other.server).context("merging histograms")?;
        self.in_window.add(&other.in_window).context("merging histograms")?;
        for (second, h) in other.per_second.iter().enumerate() {
            self.second(second).add(h).context("merging histograms")?;
        }
        Ok(())
    }
}

/// What one run measured.
pub struct RunResult {
    /// Every session's latencies, merged.
    pub latencies: Latencies,
    /// The run's wall time, from its start to the stop (at least the run's duration, at most
    /// 0.5 s more): what the throughput is counted over.
    pub elapsed: Duration,
    /// CPUs the process used on average over the run (its CPU time over the wall time): how
    /// far the sessions load the CPUs they may use.
    pub cpus_used: f64,
    /// Why the boost could not be applied, if it could not.
    pub boost_refused: Option<String>,
}

impl RunResult {
    /// Transactions per second.
    pub fn throughput(&self) -> f64 {
        self.latencies.transactions as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

fn histogram() -> Histogram<u64> {
    // 1 ns to 100 s, 3 significant digits.
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid histogram bounds")
}
