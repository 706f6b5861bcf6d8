//! [`Metrics`]: a snapshot of a pool's counters, gauges and task-time histograms, printable for
//! people ([`Display`](std::fmt::Display)) and for Prometheus; and how the library reports a
//! feature it turned off because the kernel refused a read (`Degradation`): counted in
//! [`Metrics::degradations`] and logged once per process.
//!
//! | file | what it owns |
//! |---|---|
//! | `mod.rs` | [`Metrics`] and its parts, `Display`, [`Metrics::to_prometheus`] (one pool), `Degradation` |
//! | `histogram.rs` | [`Histogram`]: fixed log-scale buckets of task times |
//! | `exposition.rs` | one exposition as data: every family once, in a fixed order; [`render`] (pure) |
//! | `text.rs` | the Prometheus text format of those families |
//! | `registry.rs` | [`Registry`]: live pools (held weakly), the CPU limit, the token sets |
//! | `exposition_tests.rs` | the renderer fed recorded values, the registry over real pools |
//! | `prometheus_client.rs` | with the `prometheus-client` feature: the registry as a `Collector` |
//! | `facade.rs` | with the `metrics` feature: the registry recorded through the `metrics` facade |
//!
//! Several pools on one endpoint: register them in one [`Registry`] and serve
//! [`Registry::render`], which writes each family's `# HELP` and `# TYPE` once (strict parsers
//! reject them repeated). The families are listed in `docs/metrics.md`.
//!
//! With the `serde` cargo feature (off by default, so that the library's dependencies stay
//! few), [`BudgetMetrics`], [`ElasticMetrics`], [`TokenState`] and [`Histogram`] implement
//! `Serialize` and `Deserialize`, field names as in Rust and `TokenState` in the words of
//! [`TokenState::as_str`]: a program that writes them out and reads them back (the lab's
//! workers, the C ABI's JSON) needs no copy of its own. [`Metrics`] does not: its `alerts`
//! have no serde form.

pub(crate) mod clock;
mod exposition;
#[cfg(all(test, not(loom)))]
mod exposition_tests;
#[cfg(all(feature = "metrics", not(loom)))]
mod facade;
pub mod histogram;
#[cfg(all(feature = "prometheus-client", not(loom)))]
mod prometheus_client;
#[cfg(not(loom))]
mod registry;
mod text;

pub use exposition::{render, CpuLimitReading, ProcessReading, TokenSetReading};
pub use histogram::Histogram;
#[cfg(not(loom))]
pub use registry::{Registry, RegistryError, DEFAULT_CPU_LIMIT_EVERY};

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::health::Alerts;

/// A snapshot of a [`Pool`](crate::Pool)'s state. Counters only grow; gauges are "now".
///
/// ```
/// let pool = cotenant::Pool::builder().policy(cotenant::Policy::fixed(1)).build().unwrap();
/// pool.spawn(|| ()).join().unwrap();
/// let metrics = pool.metrics();
/// assert_eq!((metrics.threads, metrics.target, metrics.completed), (1, 1, 1));
/// assert!(metrics.to_prometheus("api").contains("cotenant_pool_completed_total{pool=\"api\"} 1"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Metrics {
    /// Gauge: OS threads the pool started.
    pub threads: usize,
    /// Gauge: workers allowed to run now.
    pub target: usize,
    /// Gauge: workers running tasks now (in a busy stretch).
    pub running: usize,
    /// Gauge: tasks waiting in the queue.
    pub queued: usize,
    /// The queue's capacity. `queued` may exceed it by the polls of woken futures, which the
    /// queue never refuses (`Pool::spawn_future`).
    pub queue_capacity: usize,
    /// Counter: tasks that ran to completion or panicked, including those run by a submitter
    /// under `Full::CallerRuns`.
    pub completed: u64,
    /// Counter: tasks run on the submitting thread because the queue was full.
    pub caller_ran: u64,
    /// Counter: tasks refused (queue full under `Full::Reject` or `try_spawn`, or shut down).
    pub rejected: u64,
    /// Counter: tasks that panicked (also counted in `completed`).
    pub panicked: u64,
    /// Counter: polls of futures spawned with [`Pool::spawn_future`](crate::Pool::spawn_future)
    /// that ran, on workers or on the threads that woke or spawned them (a full queue). Each
    /// poll is one task of the pool: it is also counted in [`completed`](Self::completed) (and
    /// in [`caller_ran`](Self::caller_ran) when a caller ran it) and, in a pool that times its
    /// tasks, in the [`queue_wait`](Self::queue_wait) and [`run_time`](Self::run_time)
    /// histograms. 0 for a pool that runs closures only.
    pub future_polls: u64,
    /// Counter: wake-ups of spawned futures that queued another poll: a wake-up of a future
    /// waiting for one, or a wake-up during a poll, which queues the future again once that
    /// poll returns `Pending` (several during one poll count once). A wake-up that finds a poll
    /// already queued (or already due after the poll in progress), or a finished future, is
    /// not counted. A wake-up after the pool shut down is counted too (it cancels the future
    /// and counts in [`rejected`](Self::rejected)); one after the pool was dropped and its state
    /// freed is not.
    pub future_wakeups: u64,
    /// Counter: decisions the controller made (one per period for dynamic policies; one per two
    /// or four periods while a pool coasts: it runs every worker, alone, nothing to change).
    pub decisions: u64,
    /// Counter: periods in which sampling failed and the pool fell back to all its workers
    /// (every period of a dynamic pool on a system other than Linux, where there is nothing to
    /// sample: the crate documentation's "Platforms").
    pub sample_errors: u64,
    /// Counter: workers woken beyond the target because a task waited while a CPU was idle
    /// (borrowing, `Policy::adaptive`).
    pub borrows: u64,
    /// Counter: tasks run without a host CPU token because none came within the wait limit
    /// (a pool built with [`host_tokens`](crate::Builder::host_tokens); `crate::tokens`).
    pub token_timeouts: u64,
    /// Counter: host CPU tokens the workers took. A worker keeps its token for the next task
    /// when it has one to run at once and no worker of any pool sharing the tokens waits for
    /// one, so this is at most the tasks run with a token; far fewer on a busy pool nobody
    /// competes with.
    pub token_takes: u64,
    /// Counter: host-token operations that failed (the set was removed, say; the tasks then
    /// run without a token), CPU leases and moves to a leased CPU included (the task then
    /// runs where the kernel put it).
    pub token_errors: u64,
    /// Counter: for a pool whose adaptive policy `host_tokens` changed with
    /// `Policy::sharing_host_tokens` (0 for any other pool), the controller periods in which a
    /// task ran without a host token (timeouts or errors above), so that the policy sized the
    /// pool against its neighbours again for that period.
    pub token_fallback_periods: u64,
    /// Counter: host CPU tokens the controller took back from workers whose task was blocked
    /// (sleeping, waiting for I/O or a lock) for a whole period while holding one; the rest of
    /// such a task runs without a token (`crate::tokens`, docs/host-tokens.md).
    pub token_takebacks: u64,
    /// Counter: times the pool turned a feature off, or went without a reading, because the
    /// kernel refused a read: its CPU mask at build (worker pinning and host-token CPU leases
    /// are then off), a worker's schedstat (the policy's run-queue wait, the host-token
    /// holders' wait or an elastic pool's per-task wait is then missing until a retry, a
    /// second later, succeeds). A stretch of failures counts once; the first of each kind in
    /// the process is logged as a warning naming what failed and what was turned off.
    pub degradations: u64,
    /// Gauge: whether the pool shares host CPU tokens now, and if not, why.
    pub host_tokens: TokenState,
    /// The CPU budget's counters, for a pool built with
    /// [`cpu_budget`](crate::Builder::cpu_budget).
    pub budget: Option<BudgetMetrics>,
    /// An elastic pool's sizes and estimates, for a pool built with
    /// [`elastic`](crate::Builder::elastic) (its size is `target`).
    pub elastic: Option<ElasticMetrics>,
    /// Histogram: for each task run, the time from its submission to a worker taking it
    /// (`cotenant_pool_queue_wait_seconds`). Its count is the tasks run ([`completed`](Self::completed)).
    /// `None` when the pool does not time its tasks, the default (`Builder::task_histograms`,
    /// `COTENANT_TASK_HISTOGRAMS`).
    pub queue_wait: Option<Histogram>,
    /// Histogram: for each task run, the time a worker spent running it, panicked ones
    /// included (`cotenant_pool_run_time_seconds`). Its count is the tasks run
    /// ([`completed`](Self::completed)). `None` when the pool does not time its tasks (the
    /// default).
    pub run_time: Option<Histogram>,
    /// The health alerts in force when the snapshot was taken: queue above twice the pool
    /// size, over 95 % of the workers busy for a minute, tasks rejected in the last minute,
    /// completions falling while tasks wait (the contention-cliff chapter's alerts; thresholds
    /// and tests in [`crate::health`]). The pool logs each alert once when it is raised and once when it
    /// clears. The window gets a point every second (or every period, if that is longer) from
    /// the controller of dynamic and elastic pools, and one at every
    /// [`Pool::metrics`](crate::Pool::metrics) call (points less than a second apart replace
    /// each other).
    pub alerts: Alerts,
}

/// An elastic pool's threads and what its size was computed from (see
/// [`crate::Builder::elastic`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct ElasticMetrics {
    /// The smallest size.
    pub min: usize,
    /// The largest size.
    pub max: usize,
    /// Gauge: threads alive now (the size, plus any still finishing a task before retiring).
    pub live: usize,
    /// Counter: threads started (the first `min` included).
    pub started: u64,
    /// Counter: threads retired (exited because the pool shrank).
    pub retired: u64,
    /// Gauge: the CPUs the pool's policy allowed at the last decision.
    pub cpus: u64,
    /// Gauge: the per-task CPU time estimate (C), in nanoseconds.
    pub task_cpu_ns: u64,
    /// Gauge: the per-task blocked time estimate (W), in nanoseconds.
    pub task_wait_ns: u64,
}

/// The counters of a pool's user-space CPU budget (see [`crate::Builder::cpu_budget`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct BudgetMetrics {
    /// CPU time per period (ns).
    pub quota_ns: u64,
    /// The period (ns).
    pub period_ns: u64,
    /// Periods since the pool started, the current one included.
    pub periods: u64,
    /// Counter: periods in which a worker found the budget spent and parked until the refill.
    pub throttled_periods: u64,
    /// Counter: periods that began with less than a full quota, paying an overrun of the
    /// period before that the slush fund could not pay.
    pub short_periods: u64,
    /// Counter: CPU time the workers charged (ns).
    pub charged_ns: u64,
}

/// Whether a pool shares host CPU tokens ([`Metrics::host_tokens`]; `crate::tokens`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))] // the words of `as_str`
#[non_exhaustive] // a later kind of sharing may add a state
pub enum TokenState {
    /// No tokens: turned off (`Builder::host_tokens_off`, `COTENANT_TOKENS=off`), or a kind of
    /// pool that takes none (elastic, background, with a CPU budget).
    #[default]
    Off,
    /// The default set was wanted but could not be had (the reason is in the log), or the
    /// system has no host CPU tokens (systems other than Linux; not logged).
    Unavailable,
    /// The default set is open, but nobody else shares it: no token is taken.
    Alone,
    /// Tokens are taken for every task.
    Engaged,
}

impl TokenState {
    /// The word used in the Prometheus label and the `Display` text.
    pub fn as_str(self) -> &'static str {
        match self {
            TokenState::Off => "off",
            TokenState::Unavailable => "unavailable",
            TokenState::Alone => "alone",
            TokenState::Engaged => "engaged",
        }
    }
}

impl Metrics {
    /// The metrics of one pool in the Prometheus text format, labelled `pool="<pool>"`: a
    /// whole exposition of its own. Several pools served on one endpoint need a
    /// [`Registry`] (or [`render`]), which writes each family's `# HELP` and `# TYPE` once;
    /// two of these texts put together repeat them, which strict parsers reject.
    pub fn to_prometheus(&self, pool: &str) -> String {
        render(&[(pool, self)], None, &[])
    }
}

impl fmt::Display for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "target {}/{} threads, {} running, {}/{} queued; {} completed ({} by callers), {} panicked, \
             {} rejected; {} decisions, {} sample errors, {} borrows",
            self.target,
            self.threads,
            self.running,
            self.queued,
            self.queue_capacity,
            self.completed,
            self.caller_ran,
            self.panicked,
            self.rejected,
            self.decisions,
            self.sample_errors,
            self.borrows
        )?;
        write!(f, "; host tokens {}", self.host_tokens.as_str())?;
        if self.token_timeouts > 0 || self.token_errors > 0 || self.token_takebacks > 0 {
            write!(
                f,
                ", {} host-token timeouts, {} host-token errors, {} host tokens taken back from blocked tasks, {} periods sized without trusting the tokens",
                self.token_timeouts, self.token_errors, self.token_takebacks, self.token_fallback_periods
            )?;
        }
        if self.future_polls > 0 || self.future_wakeups > 0 {
            write!(
                f,
                "; futures: {} polls (counted as tasks), {} wake-ups that queued a poll",
                self.future_polls, self.future_wakeups
            )?;
        }
        if self.degradations > 0 {
            write!(f, "; {} degradations (a kernel read failed; see the log)", self.degradations)?;
        }
        if let Some(b) = self.budget {
            write!(
                f,
                "; budget {:.2} CPUs per {:?}: {} of {} periods throttled, {} short, {:.3} s charged",
                b.quota_ns as f64 / b.period_ns.max(1) as f64,
                std::time::Duration::from_nanos(b.period_ns),
                b.throttled_periods,
                b.periods,
                b.short_periods,
                b.charged_ns as f64 / 1e9
            )?;
        }
        if !self.alerts.is_empty() {
            write!(f, "; alerts: {}", self.alerts)?;
        }
        if let Some(e) = self.elastic {
            write!(
                f,
                "; elastic {}..={}: {} live, {} started, {} retired; {} CPUs, per task {:.3} ms CPU, {:.3} ms blocked",
                e.min,
                e.max,
                e.live,
                e.started,
                e.retired,
                e.cpus,
                e.task_cpu_ns as f64 / 1e6,
                e.task_wait_ns as f64 / 1e6
            )?;
        }
        let p99 = |histogram: Option<Histogram>| histogram.and_then(|h| h.quantile_ns(0.99));
        if let Some(wait) = p99(self.queue_wait) {
            write!(f, "; p99 queue wait {}", bucket_words(wait))?;
        }
        if let Some(run) = p99(self.run_time) {
            write!(f, "; p99 run time {}", bucket_words(run))?;
        }
        Ok(())
    }
}

/// A quantile read from a histogram (the upper bound of its bucket), for people.
fn bucket_words(upper_bound_ns: u64) -> String {
    if upper_bound_ns == u64::MAX {
        "above the last bucket".to_owned()
    } else {
        format!("at most {:?}", std::time::Duration::from_nanos(upper_bound_ns))
    }
}

/// A feature the library turned off, or a reading it went without, because the kernel refused a
/// read. None of them stops a pool, so none may pass in silence: [`record`](Degradation::record)
/// counts it for the pool it happened to ([`Metrics::degradations`]) and logs the first of each
/// kind in the process as a warning naming what failed and what was turned off.
#[cfg_attr(loom, allow(dead_code))] // the pool's readers of the kernel are not built under loom
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Degradation {
    /// `sched_getaffinity(2)` failed while a pool was built (`pool/mod.rs`), or the system has
    /// no affinity masks (outside Linux, where a pool that wants them reports this).
    AffinityUnreadable,
    /// The controller could not open or read a worker's schedstat (`pool/control.rs`).
    WorkerSchedstat,
    /// A worker could not read its own schedstat (`pool/host_tokens.rs`, `pool/elastic.rs`).
    OwnSchedstat,
}

/// Per [`Degradation`], in declaration order: whether this process has logged one.
static LOGGED: [AtomicBool; 3] = [AtomicBool::new(false), AtomicBool::new(false), AtomicBool::new(false)];

#[cfg_attr(loom, allow(dead_code))]
impl Degradation {
    /// What failed.
    fn what(self) -> &'static str {
        match self {
            Degradation::AffinityUnreadable => "the CPU affinity mask could not be read",
            Degradation::WorkerSchedstat => "the controller could not read a worker's schedstat",
            Degradation::OwnSchedstat => "a worker could not read its own schedstat",
        }
    }

    /// What the library does without it.
    fn consequence(self) -> &'static str {
        match self {
            Degradation::AffinityUnreadable => {
                "worker pinning and host-token CPU leases are off for the pool being built"
            }
            Degradation::WorkerSchedstat => {
                "the pool's policy runs without the workers' run-queue wait until a retry (every \
                 second) reads it"
            }
            Degradation::OwnSchedstat => {
                "the worker's run-queue wait is unknown (host tokens: the holders' wait; elastic \
                 pools: counted as blocked time) until a retry (every second) reads it"
            }
        }
    }

    /// Counts one in `counter`, and logs it if it is the first of its kind in this process.
    /// `detail`: the failure (path and error). Returns whether it was logged now.
    pub(crate) fn record(self, counter: &AtomicU64, detail: &dyn fmt::Display) -> bool {
        counter.fetch_add(1, Ordering::Relaxed);
        self.log_once(detail)
    }

    /// Logs it if it is the first of its kind in this process, for a caller that counts it
    /// itself; returns whether it was logged now.
    pub(crate) fn log_once(self, detail: &dyn fmt::Display) -> bool {
        let first = !LOGGED[self as usize].swap(true, Ordering::Relaxed);
        if first {
            tracing::warn!(
                "cotenant: {} ({detail}); {} (counted in Metrics::degradations; logged once)",
                self.what(),
                self.consequence()
            );
        }
        first
    }

    /// Whether this process has logged one of this kind.
    #[cfg(test)]
    pub(crate) fn logged(self) -> bool {
        LOGGED[self as usize].load(Ordering::Relaxed)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_degradation_is_counted_every_time_and_logged_once() {
        let counter = AtomicU64::new(0);
        let kind = Degradation::AffinityUnreadable;
        let first = kind.record(&counter, &"sched_getaffinity(2): test");
        let second = kind.record(&counter, &"sched_getaffinity(2): test");
        assert_eq!(counter.load(Ordering::Relaxed), 2, "each one counted");
        assert!(!second, "logged at most once per process");
        assert!(kind.logged(), "logged (first: {first})");
    }

    #[test]
    fn degradations_show_for_people_and_for_prometheus() {
        let metrics = Metrics { degradations: 3, ..Metrics::default() };
        assert!(metrics.to_string().contains("3 degradations"), "{metrics}");
        let text = metrics.to_prometheus("p");
        assert!(text.contains("# TYPE cotenant_pool_degradations_total counter"), "{text}");
        assert!(text.contains("cotenant_pool_degradations_total{pool=\"p\"} 3"), "{text}");
        assert!(!Metrics::default().to_string().contains("degradations"));
    }

    #[test]
    fn future_counters_show_for_people_and_for_prometheus() {
        let metrics = Metrics { completed: 5, future_polls: 3, future_wakeups: 2, ..Metrics::default() };
        let words = metrics.to_string();
        let expected = "futures: 3 polls (counted as tasks), 2 wake-ups that queued a poll";
        assert!(words.contains(expected), "{words}");
        let text = metrics.to_prometheus("p");
        for (family, value) in [("future_polls_total", 3), ("future_wakeups_total", 2)] {
            assert!(text.contains(&format!("# TYPE cotenant_pool_{family} counter\n")), "{text}");
            assert!(text.contains(&format!("cotenant_pool_{family}{{pool=\"p\"}} {value}\n")), "{text}");
        }
        // A pool that runs closures only says nothing about futures to people, 0 to Prometheus.
        assert!(!Metrics::default().to_string().contains("futures"));
        let text = Metrics::default().to_prometheus("p");
        assert!(text.contains("cotenant_pool_future_polls_total{pool=\"p\"} 0\n"), "{text}");
    }

    #[test]
    fn the_prometheus_text_keeps_its_order_times_first() {
        let budget = BudgetMetrics { quota_ns: 150_000_000, periods: 7, ..BudgetMetrics::default() };
        let elastic = ElasticMetrics { max: 4, task_wait_ns: 2_500_000, ..ElasticMetrics::default() };
        let metrics = Metrics { budget: Some(budget), elastic: Some(elastic), ..Metrics::default() };
        let text = metrics.to_prometheus("p");
        let names: Vec<&str> = text
            .lines()
            .filter_map(|line| line.strip_prefix("# TYPE cotenant_pool_")?.split(' ').next())
            .collect();
        let times = ["budget_quota_seconds", "budget_period_seconds", "budget_charged_seconds_total"];
        let elastic_times = ["elastic_task_cpu_seconds", "elastic_task_wait_seconds"];
        assert_eq!(names[..5], [&times[..], &elastic_times[..]].concat()[..], "{text}");
        assert_eq!(names[5..8], ["threads", "target", "running"], "{text}");
        let tasks = ["completed_total", "caller_ran_total", "rejected_total", "panicked_total"];
        assert_eq!(names[10..14], tasks, "{text}");
        assert_eq!(names[14..16], ["future_polls_total", "future_wakeups_total"], "{text}");
        assert_eq!(names[16], "decisions_total", "{text}");
        let budget_counts =
            ["budget_periods_total", "budget_throttled_periods_total", "budget_short_periods_total"];
        assert_eq!(names[25..28], budget_counts, "{text}");
        assert_eq!(names[28], "elastic_min_threads", "{text}");
        assert_eq!(names[33..], ["elastic_cpus", "host_tokens", "alert"], "{text}");
        assert!(text.contains("cotenant_pool_budget_quota_seconds{pool=\"p\"} 0.15\n"), "{text}");
        assert!(text.contains("cotenant_pool_elastic_task_wait_seconds{pool=\"p\"} 0.0025\n"), "{text}");
        assert!(text.contains("cotenant_pool_budget_periods_total{pool=\"p\"} 7\n"), "{text}");
        assert!(text.contains("cotenant_pool_elastic_max_threads{pool=\"p\"} 4\n"), "{text}");
    }
}
