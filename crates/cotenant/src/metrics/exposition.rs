//! One exposition, as data: the metric families of any number of pools, of the process's CPU
//! limit and of the host-token sets the pools share, each family once (one help, one type, then
//! its samples for every pool), in a fixed order. [`render`] writes it as Prometheus text; the
//! [`Registry`](super::Registry) reads live pools into it, and the `prometheus-client` and
//! `metrics` features hand the same families to those libraries. Pure: readings in, families
//! out, so that tests feed it recorded values.
//!
//! The order: the CPU limit; the pools' scalar families (times first, then counts, the order
//! the one-pool text has always had); their host-token state and health alerts; their two
//! histograms; the token sets. A family no pool has a sample for (the CPU budget's, when no
//! pool has a budget) is left out.

use super::histogram::Histogram;
use super::{BudgetMetrics, ElasticMetrics, Metrics, TokenState};
use crate::cpus::{Constraint, Limit, Rounding};
use crate::health::Alert;

/// The process's CPU limit as the exposition shows it (`cotenant_cpu_limit`, `_threads`,
/// `_binding`): a reading of a [`Limit`].
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct CpuLimitReading {
    /// The limit in CPUs, fractional ([`Limit::limit`]).
    pub cpus: f64,
    /// The thread count it rounds to ([`Limit::threads`], rounded down, at least 1).
    pub threads: u32,
    /// The constraint that sets it ([`Limit::binding`]).
    pub binding: Constraint,
}

impl CpuLimitReading {
    /// A reading of `cpus` CPUs, `threads` threads, bound by `binding`.
    pub fn new(cpus: f64, threads: u32, binding: Constraint) -> Self {
        CpuLimitReading { cpus, threads, binding }
    }
}

impl From<&Limit> for CpuLimitReading {
    fn from(limit: &Limit) -> Self {
        CpuLimitReading::new(limit.limit(), limit.threads(Rounding::Floor), limit.binding())
    }
}

/// The process's part of an exposition: its CPU limit, if it could be read, and how many
/// readings of it failed (`cotenant_cpu_limit_errors_total`).
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct ProcessReading {
    /// The CPU limit; `None` when the last reading failed (its families are then left out).
    pub cpu_limit: Option<CpuLimitReading>,
    /// Readings of the CPU limit that failed since the registry was made.
    pub cpu_limit_errors: u64,
}

impl ProcessReading {
    /// The process's part: `cpu_limit` (`None`: unreadable) and the failed readings so far.
    pub fn new(cpu_limit: Option<CpuLimitReading>, cpu_limit_errors: u64) -> Self {
        ProcessReading { cpu_limit, cpu_limit_errors }
    }
}

/// A host-token set's state (`cotenant_token_set_*{set="<name>"}`, once per set however many
/// pools share it). A value that could not be read is `None`, and its sample is left out.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TokenSetReading {
    /// The `set` label: the set's name.
    pub name: String,
    /// The tokens the set was created with ([`HostTokens::count`](crate::tokens::HostTokens::count)).
    pub tokens: u32,
    /// Tokens nobody holds now.
    pub available: Option<u32>,
    /// Threads waiting for a token now.
    pub waiting: Option<u32>,
    /// Processes counted as members of the set.
    pub members: Option<u32>,
}

impl TokenSetReading {
    /// The set `name` of `tokens` tokens, nothing else read yet.
    pub fn new(name: impl Into<String>, tokens: u32) -> Self {
        TokenSetReading { name: name.into(), tokens, available: None, waiting: None, members: None }
    }
}

/// One exposition in the Prometheus text format (version 0.0.4): `pools` as `(name, metrics)`
/// (the `pool` label; a name given twice keeps its first metrics, so that the text stays
/// valid), the process's CPU limit if `process` is given, and `sets`, each once by name.
///
/// ```
/// use cotenant::metrics::{render, ProcessReading, TokenSetReading};
/// let (a, b) = (cotenant::Metrics::default(), cotenant::Metrics::default());
/// let text = render(&[("api", &a), ("batch", &b)], Some(&ProcessReading::new(None, 1)), &[]);
/// assert_eq!(text.matches("# TYPE cotenant_pool_completed_total counter").count(), 1);
/// assert!(text.contains("cotenant_pool_completed_total{pool=\"batch\"} 0\n"));
/// assert!(text.contains("cotenant_cpu_limit_errors_total 1\n"));
/// # let _ = TokenSetReading::new("default", 2);
/// ```
pub fn render(
    pools: &[(&str, &Metrics)],
    process: Option<&ProcessReading>,
    sets: &[TokenSetReading],
) -> String {
    super::text::write(&families(pools, process, sets))
}

/// The kind of a family: its `# TYPE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Gauge,
    Counter,
    Histogram,
}

impl Kind {
    /// The word of the `# TYPE` line.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Gauge => "gauge",
            Kind::Counter => "counter",
            Kind::Histogram => "histogram",
        }
    }
}

/// A sample's value.
// A histogram is kept inline: a render builds a few dozen values once, so the size of the
// largest variant costs nothing that a box per histogram would save.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Value {
    /// A count or a size, as an integer.
    Count(u64),
    /// A time kept in nanoseconds, written in seconds (Prometheus's base unit).
    Seconds(u64),
    /// A fraction (the CPU limit).
    Float(f64),
    /// A histogram of times in nanoseconds (buckets, sum and count, in seconds).
    Histogram(Histogram),
}

impl Value {
    /// The value as a float, in seconds for a time; a histogram's count.
    #[cfg_attr(any(loom, not(any(feature = "prometheus-client", feature = "metrics"))), allow(dead_code))]
    pub(crate) fn as_f64(&self) -> f64 {
        match *self {
            Value::Count(n) => n as f64,
            Value::Seconds(ns) => ns as f64 / 1e9,
            Value::Float(x) => x,
            Value::Histogram(h) => h.count() as f64,
        }
    }
}

/// A plain number is a count.
impl From<u64> for Value {
    fn from(n: u64) -> Self {
        Value::Count(n)
    }
}

/// A plain number is a count.
impl From<usize> for Value {
    fn from(n: usize) -> Self {
        Value::Count(n as u64)
    }
}

/// One sample of a family: its labels (in order, values unescaped) and its value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sample {
    pub(crate) labels: Vec<(&'static str, String)>,
    pub(crate) value: Value,
}

/// A metric family: its full name, type and help, and every sample of it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Family {
    pub(crate) name: &'static str,
    pub(crate) kind: Kind,
    pub(crate) help: &'static str,
    pub(crate) samples: Vec<Sample>,
}

/// A pool family of one unlabelled (but for `pool`) sample: name, type, help, value.
#[derive(Debug, Clone, Copy)]
struct Scalar {
    name: &'static str,
    kind: Kind,
    help: &'static str,
    value: Value,
}

fn scalar(name: &'static str, kind: Kind, help: &'static str, value: Value) -> Scalar {
    Scalar { name, kind, help, value }
}

/// Every constraint that can set the CPU limit, in `cpus`' order (`cotenant_cpu_limit_binding`).
const CONSTRAINTS: [Constraint; 4] =
    [Constraint::Online, Constraint::Affinity, Constraint::Cpuset, Constraint::Quota];

/// Every host-token state, in `TokenState`'s order (`cotenant_pool_host_tokens`).
const TOKEN_STATES: [TokenState; 4] =
    [TokenState::Off, TokenState::Unavailable, TokenState::Alone, TokenState::Engaged];

/// The families of one exposition (see the module documentation for the order).
pub(crate) fn families(
    pools: &[(&str, &Metrics)],
    process: Option<&ProcessReading>,
    sets: &[TokenSetReading],
) -> Vec<Family> {
    // A name given twice would write the same series twice: keep the first.
    let mut distinct: Vec<(&str, &Metrics)> = Vec::with_capacity(pools.len());
    for &(name, metrics) in pools {
        if !distinct.iter().any(|(seen, _)| *seen == name) {
            distinct.push((name, metrics));
        }
    }
    let mut out = Vec::new();
    if let Some(process) = process {
        process_families(process, &mut out);
    }
    pool_families(&distinct, &mut out);
    set_families(sets, &mut out);
    out.retain(|family| !family.samples.is_empty());
    out
}

fn family(name: &'static str, kind: Kind, help: &'static str, samples: Vec<Sample>) -> Family {
    Family { name, kind, help, samples }
}

fn unlabelled(value: Value) -> Vec<Sample> {
    vec![Sample { labels: Vec::new(), value }]
}

fn process_families(process: &ProcessReading, out: &mut Vec<Family>) {
    if let Some(limit) = process.cpu_limit {
        out.push(family(
            "cotenant_cpu_limit",
            Kind::Gauge,
            "CPUs this process may use: the smallest of the online CPUs, its cpuset, its affinity and every CPU quota up to the cgroup root",
            unlabelled(Value::Float(limit.cpus)),
        ));
        out.push(family(
            "cotenant_cpu_limit_threads",
            Kind::Gauge,
            "threads the CPU limit rounds down to (at least 1)",
            unlabelled(Value::Count(u64::from(limit.threads))),
        ));
        let binding = CONSTRAINTS
            .iter()
            .map(|&constraint| Sample {
                labels: vec![("source", constraint.as_str().to_owned())],
                value: Value::Count(u64::from(constraint == limit.binding)),
            })
            .collect();
        out.push(family(
            "cotenant_cpu_limit_binding",
            Kind::Gauge,
            "1 for the constraint that sets the CPU limit (online, affinity, cpuset, quota), 0 for the others",
            binding,
        ));
    }
    out.push(family(
        "cotenant_cpu_limit_errors_total",
        Kind::Counter,
        "readings of the CPU limit that failed (its other families are left out until one succeeds)",
        unlabelled(Value::Count(process.cpu_limit_errors)),
    ));
}

fn pool_label(pool: &str) -> Vec<(&'static str, String)> {
    vec![("pool", pool.to_owned())]
}

fn pool_families(pools: &[(&str, &Metrics)], out: &mut Vec<Family>) {
    // Every scalar family in its place, whichever pools have it: the order is that of a pool
    // with a CPU budget and an elastic size, which has them all.
    let full = Metrics {
        budget: Some(BudgetMetrics::default()),
        elastic: Some(ElasticMetrics::default()),
        ..Metrics::default()
    };
    let per_pool: Vec<(&str, Vec<Scalar>)> =
        pools.iter().map(|&(name, metrics)| (name, scalars(metrics))).collect();
    for template in scalars(&full) {
        let samples = per_pool
            .iter()
            .filter_map(|(pool, rows)| {
                let found = rows.iter().find(|row| row.name == template.name)?;
                Some(Sample { labels: pool_label(pool), value: found.value })
            })
            .collect();
        out.push(family(template.name, template.kind, template.help, samples));
    }

    let mut tokens = Vec::with_capacity(pools.len() * TOKEN_STATES.len());
    let mut alerts = Vec::with_capacity(pools.len() * Alert::ALL.len());
    let (mut queue_wait, mut run_time) = (Vec::new(), Vec::new());
    for &(pool, metrics) in pools {
        for state in TOKEN_STATES {
            tokens.push(Sample {
                labels: vec![("pool", pool.to_owned()), ("state", state.as_str().to_owned())],
                value: Value::Count(u64::from(metrics.host_tokens == state)),
            });
        }
        for alert in Alert::ALL {
            alerts.push(Sample {
                labels: vec![("pool", pool.to_owned()), ("alert", alert.as_str().to_owned())],
                value: Value::Count(u64::from(metrics.alerts.contains(alert))),
            });
        }
        if let Some(histogram) = metrics.queue_wait {
            queue_wait.push(Sample { labels: pool_label(pool), value: Value::Histogram(histogram) });
        }
        if let Some(histogram) = metrics.run_time {
            run_time.push(Sample { labels: pool_label(pool), value: Value::Histogram(histogram) });
        }
    }
    out.push(family(
        "cotenant_pool_host_tokens",
        Kind::Gauge,
        "1 for the pool's host-token state (off, unavailable, alone, engaged)",
        tokens,
    ));
    out.push(family(
        "cotenant_pool_alert",
        Kind::Gauge,
        "1 while the health alert is raised (queue overload, at capacity, rejecting, completions falling)",
        alerts,
    ));
    out.push(family(
        "cotenant_pool_queue_wait_seconds",
        Kind::Histogram,
        "time from submitting a task to a worker taking it",
        queue_wait,
    ));
    out.push(family(
        "cotenant_pool_run_time_seconds",
        Kind::Histogram,
        "time a worker spent running a task (panicked ones included)",
        run_time,
    ));
}

/// How a set gauge's value is read from a [`TokenSetReading`] (`None`: left out).
type SetField = fn(&TokenSetReading) -> Option<u32>;

fn set_families(sets: &[TokenSetReading], out: &mut Vec<Family>) {
    // One series per set name: a name given twice keeps its first reading.
    let mut distinct: Vec<&TokenSetReading> = Vec::with_capacity(sets.len());
    for set in sets {
        if !distinct.iter().any(|seen| seen.name == set.name) {
            distinct.push(set);
        }
    }
    let gauges: [(&'static str, &'static str, SetField); 4] = [
        ("cotenant_token_set_tokens", "host CPU tokens the set was created with", |s| Some(s.tokens)),
        ("cotenant_token_set_available", "host CPU tokens nobody holds now", |s| s.available),
        ("cotenant_token_set_waiting", "threads waiting for a host CPU token now", |s| s.waiting),
        ("cotenant_token_set_members", "processes counted as members of the set", |s| s.members),
    ];
    for (name, help, read) in gauges {
        let samples = distinct
            .iter()
            .filter_map(|set| {
                let value = read(set)?;
                Some(Sample {
                    labels: vec![("set", set.name.clone())],
                    value: Value::Count(u64::from(value)),
                })
            })
            .collect();
        out.push(family(name, Kind::Gauge, help, samples));
    }
}

/// A pool's scalar families: the times first, then the counts (the order the text has always
/// had), each group in field order.
fn scalars(metrics: &Metrics) -> Vec<Scalar> {
    use Kind::{Counter, Gauge};
    // Every field by name: a new one does not compile until it is exposed here (or named `_`
    // with the place that exposes it).
    let Metrics {
        threads,
        target,
        running,
        queued,
        queue_capacity,
        completed,
        caller_ran,
        rejected,
        panicked,
        future_polls,
        future_wakeups,
        decisions,
        sample_errors,
        borrows,
        token_timeouts,
        token_takes,
        token_errors,
        token_fallback_periods,
        token_takebacks,
        degradations,
        host_tokens: _, // `cotenant_pool_host_tokens`, labelled by state
        budget,
        elastic,
        alerts: _,     // `cotenant_pool_alert`, labelled by alert
        queue_wait: _, // a histogram family of its own
        run_time: _,   // a histogram family of its own
    } = *metrics;
    let rows = [
        scalar("cotenant_pool_threads", Gauge, "OS threads the pool started", threads.into()),
        scalar("cotenant_pool_target", Gauge, "workers allowed to run", target.into()),
        scalar("cotenant_pool_running", Gauge, "workers running tasks", running.into()),
        scalar("cotenant_pool_queued", Gauge, "tasks waiting in the queue", queued.into()),
        scalar(
            "cotenant_pool_queue_capacity",
            Gauge,
            "capacity of the queue (woken futures' polls may be queued beyond it)",
            queue_capacity.into(),
        ),
        scalar(
            "cotenant_pool_completed_total",
            Counter,
            "tasks completed (including panicked)",
            completed.into(),
        ),
        scalar(
            "cotenant_pool_caller_ran_total",
            Counter,
            "tasks run by the submitter on a full queue",
            caller_ran.into(),
        ),
        scalar("cotenant_pool_rejected_total", Counter, "tasks refused", rejected.into()),
        scalar("cotenant_pool_panicked_total", Counter, "tasks that panicked", panicked.into()),
        scalar(
            "cotenant_pool_future_polls_total",
            Counter,
            "polls of spawned futures run, each one also a task in completed_total and the task histograms",
            future_polls.into(),
        ),
        scalar(
            "cotenant_pool_future_wakeups_total",
            Counter,
            "wake-ups of spawned futures that queued another poll (one already queued is not counted)",
            future_wakeups.into(),
        ),
        scalar("cotenant_pool_decisions_total", Counter, "controller decisions", decisions.into()),
        scalar(
            "cotenant_pool_sample_errors_total",
            Counter,
            "periods whose sampling failed",
            sample_errors.into(),
        ),
        scalar(
            "cotenant_pool_borrows_total",
            Counter,
            "workers woken beyond the target onto an idle CPU",
            borrows.into(),
        ),
        scalar(
            "cotenant_pool_token_timeouts_total",
            Counter,
            "tasks run without a host CPU token (none came in time)",
            token_timeouts.into(),
        ),
        scalar(
            "cotenant_pool_token_takes_total",
            Counter,
            "host CPU tokens taken (one may serve several tasks)",
            token_takes.into(),
        ),
        scalar(
            "cotenant_pool_token_errors_total",
            Counter,
            "host CPU token operations that failed",
            token_errors.into(),
        ),
        scalar(
            "cotenant_pool_token_fallback_periods_total",
            Counter,
            "periods sized against the neighbours again because a task ran without a host CPU token",
            token_fallback_periods.into(),
        ),
        scalar(
            "cotenant_pool_token_takebacks_total",
            Counter,
            "host CPU tokens taken back from workers blocked while holding one",
            token_takebacks.into(),
        ),
        scalar(
            "cotenant_pool_degradations_total",
            Counter,
            "features turned off or readings missed because the kernel refused a read (see the log)",
            degradations.into(),
        ),
    ];
    let all = rows
        .into_iter()
        .chain(budget.iter().flat_map(budget_scalars))
        .chain(elastic.iter().flat_map(elastic_scalars));
    // The times first, then the counts: the order the text has always had.
    let (mut times, counts): (Vec<Scalar>, Vec<Scalar>) =
        all.partition(|row| matches!(row.value, Value::Seconds(_)));
    times.extend(counts);
    times
}

/// A CPU budget's families, in field order.
fn budget_scalars(budget: &BudgetMetrics) -> [Scalar; 6] {
    use Kind::{Counter, Gauge};
    use Value::Seconds;
    // Every field by name: a new one does not compile until it is exposed here too.
    let BudgetMetrics { quota_ns, period_ns, periods, throttled_periods, short_periods, charged_ns } =
        *budget;
    [
        scalar("cotenant_pool_budget_quota_seconds", Gauge, "CPU budget per period", Seconds(quota_ns)),
        scalar("cotenant_pool_budget_period_seconds", Gauge, "CPU budget period", Seconds(period_ns)),
        scalar("cotenant_pool_budget_periods_total", Counter, "CPU budget periods", periods.into()),
        scalar(
            "cotenant_pool_budget_throttled_periods_total",
            Counter,
            "periods the budget ran out",
            throttled_periods.into(),
        ),
        scalar(
            "cotenant_pool_budget_short_periods_total",
            Counter,
            "periods that began paying a debt",
            short_periods.into(),
        ),
        scalar(
            "cotenant_pool_budget_charged_seconds_total",
            Counter,
            "CPU time charged to the budget",
            Seconds(charged_ns),
        ),
    ]
}

/// An elastic pool's families, in field order.
fn elastic_scalars(elastic: &ElasticMetrics) -> [Scalar; 8] {
    use Kind::{Counter, Gauge};
    use Value::Seconds;
    // Every field by name: a new one does not compile until it is exposed here too.
    let ElasticMetrics { min, max, live, started, retired, cpus, task_cpu_ns, task_wait_ns } = *elastic;
    [
        scalar("cotenant_pool_elastic_min_threads", Gauge, "smallest size of the elastic pool", min.into()),
        scalar("cotenant_pool_elastic_max_threads", Gauge, "largest size of the elastic pool", max.into()),
        scalar("cotenant_pool_elastic_live_threads", Gauge, "threads alive in the elastic pool", live.into()),
        scalar(
            "cotenant_pool_elastic_started_total",
            Counter,
            "threads the elastic pool started",
            started.into(),
        ),
        scalar(
            "cotenant_pool_elastic_retired_total",
            Counter,
            "threads the elastic pool retired",
            retired.into(),
        ),
        scalar("cotenant_pool_elastic_cpus", Gauge, "CPUs the policy allows the elastic pool", cpus.into()),
        scalar(
            "cotenant_pool_elastic_task_cpu_seconds",
            Gauge,
            "estimated CPU time per task",
            Seconds(task_cpu_ns),
        ),
        scalar(
            "cotenant_pool_elastic_task_wait_seconds",
            Gauge,
            "estimated blocked time per task",
            Seconds(task_wait_ns),
        ),
    ]
}
