//! Seed 000 Figure 7: P identical processes at once, each serving its own open-loop load, for
//! each pool kind (`ignorant`, `optimal`, `share`, `adaptive`), in two settings: all processes
//! in one cgroup (their threads compete one by one) and one cgroup per process with equal
//! weights (tenants compete, as containers do).
//!
//! The children are real processes (`cotenant lab-worker`) that start their schedules at one
//! common instant. Each run's rows are aggregated by the pure functions at the bottom, which
//! are unit-tested on recorded rows. `headline` (what `make demo` runs) and `factor` (Figure 8)
//! are configurations of this experiment, and so is `go-neighbours`, whose processes are the Go
//! worker (`gobuild.rs`) under Go's default GOMAXPROCS, a static split, or the cotenant Go
//! controller.

use std::fmt::Write as _;

use anyhow::Context as _;
use serde::Serialize;

use std::time::Duration;

use cotenant_ops::cgroup::{Cgroup, Layout};
use cotenant_ops::stats::median;
use super::gobuild::{go_worker, GoWorker};
use super::runner::{run_workers, WorkerSpec};
use super::worker::{SummaryRow, WorkerReport};
use super::{Chart, Lab, Outcome, Series};
use crate::args::{GoItems, LabArgs, PoolKind};

/// Every pool kind, in table order.
pub const KINDS: [PoolKind; 5] =
    [PoolKind::Ignorant, PoolKind::Optimal, PoolKind::Share, PoolKind::Plain, PoolKind::Adaptive];

/// The pool kinds `args` asks for (`--pools`), or every kind.
fn kinds(args: &LabArgs) -> Vec<PoolKind> {
    if args.pools.is_empty() {
        KINDS.to_vec()
    } else {
        args.pools.clone()
    }
}

/// Where the processes of a run live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Setting {
    /// All in one cgroup: every thread competes with every other.
    OneCgroup,
    /// One cgroup per process, equal weights: the kernel shares CPUs between processes first.
    PerProcess,
}

impl Setting {
    /// The name used in tables and files.
    pub fn name(self) -> &'static str {
        match self {
            Setting::OneCgroup => "one cgroup",
            Setting::PerProcess => "cgroup per process",
        }
    }
}

/// One run's parameters.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct RunConfig {
    /// Processes at once.
    pub processes: u32,
    /// Pool kind of every process.
    pub kind: PoolKind,
    /// The share factor when `kind` is `share`.
    pub share_factor: f64,
    /// Where the processes live.
    pub setting: Setting,
    /// Offered load per process (fraction of its fair share).
    pub load: f64,
    /// Service time per item (ms).
    pub service_ms: f64,
    /// Run length.
    pub duration_ms: u64,
    /// Which repeat this is (also the seed).
    pub repeat: u32,
    /// How the Go kinds run their items.
    pub go_items: GoItems,
    /// Chunks per item for the Go kinds (0: each process calibrates itself).
    pub go_chunks: u32,
    /// Chunks per item for the Rust kinds (0: each process calibrates itself).
    pub chunks: u32,
}

/// The Go worker's arguments for `config` on a host of `cpus` CPUs.
fn go_worker_args(config: &RunConfig, cpus: u32) -> Vec<String> {
    let processes = config.processes.max(1);
    let mut args: Vec<String> = vec![
        "--processes".into(),
        processes.to_string(),
        "--fair-cpus".into(),
        (f64::from(cpus) / f64::from(processes)).to_string(),
        "--load".into(),
        config.load.to_string(),
        "--service-ms".into(),
        config.service_ms.to_string(),
        "--duration-ms".into(),
        config.duration_ms.to_string(),
        "--seed".into(),
        config.repeat.to_string(),
    ];
    if config.go_items == GoItems::Limited {
        args.push("--limit".into());
    }
    if config.go_chunks > 0 {
        args.extend(["--chunks".into(), config.go_chunks.to_string()]);
    }
    match config.kind {
        PoolKind::GoOptimal => args.extend(["--gomaxprocs".into(), (cpus / processes).max(1).to_string()]),
        PoolKind::GoCotenant => args.push("--cotenant".into()),
        _ => {}
    }
    args
}

/// The token set of an `adaptive` run: one token per CPU, removed when the run ends however it
/// ends: dropped, or by the lab's signal thread (it is created under the registry's lock of
/// `cgroup.rs`, and none after a signal). Only a lab killed by SIGKILL leaves it behind; the
/// next run replaces it, and `lab clean` removes it while no lab runs.
struct LabTokens(Option<cotenant::tokens::HostTokens>);

/// The name of the lab's token set (`lab clean` removes it too).
pub const LAB_TOKENS: &str = "cotenant-lab";

impl LabTokens {
    fn create(cpus: u32) -> anyhow::Result<LabTokens> {
        cotenant_ops::cgroup::create_token_set(LAB_TOKENS, || LabTokens::create_now(cpus))
    }

    fn create_now(cpus: u32) -> anyhow::Result<LabTokens> {
        use cotenant::tokens::HostTokens;
        let open = || {
            // As an observer: the lab itself is no member, so a lone worker stays alone.
            HostTokens::open_observer(LAB_TOKENS, cpus)
                .or_else(|_| {
                    // Left uninitialised by a run killed while creating it: remove it and retry.
                    HostTokens::remove_named(LAB_TOKENS)?;
                    HostTokens::open_observer(LAB_TOKENS, cpus)
                })
                .context("creating the lab's host token set")
        };
        let mut tokens = open()?;
        // Dead processes leave the member count and give their tokens back (SEM_UNDO): members
        // or held tokens belong to a live run (its workers count even while alone).
        if tokens.members()? > 0 || tokens.available()? != tokens.count() {
            anyhow::bail!(
                "the lab's host token set {LAB_TOKENS} is in use by another running lab (run one lab at a time: \
                 timing runs disturb each other)"
            );
        }
        if tokens.count() != cpus {
            // Left by a run on another CPU count (a changed VM): start afresh.
            tokens.remove()?;
            tokens = open()?;
        }
        Ok(LabTokens(Some(tokens)))
    }
}

impl Drop for LabTokens {
    fn drop(&mut self) {
        if let Some(Err(e)) = self.0.take().map(|tokens| tokens.remove()) {
            eprintln!("lab: {e}");
        }
    }
}

fn is_go(kind: PoolKind) -> bool {
    matches!(kind, PoolKind::GoDefault | PoolKind::GoOptimal | PoolKind::GoCotenant)
}

/// Runs `config.processes` workers at once on a host of `cpus` CPUs and returns their reports.
pub fn run_once(config: &RunConfig, cpus: u32, layout: Option<&Layout>) -> anyhow::Result<Vec<WorkerReport>> {
    let args = vec![
        "--pool".to_owned(),
        kind_name(config.kind).to_owned(),
        "--share-factor".to_owned(),
        config.share_factor.to_string(),
        "--processes".to_owned(),
        config.processes.to_string(),
        "--load".to_owned(),
        config.load.to_string(),
        "--service-ms".to_owned(),
        config.service_ms.to_string(),
        "--duration-ms".to_owned(),
        config.duration_ms.to_string(),
        "--seed".to_owned(),
        config.repeat.to_string(),
    ];
    let mut args = args;
    if config.chunks > 0 {
        args.extend(["--chunks".to_owned(), config.chunks.to_string()]);
    }
    // An `adaptive` run's processes share the lab's token set for its duration (removed when
    // it ends; the runner names it to every worker in `COTENANT_TOKENS_SET`).
    let _tokens = if config.kind == PoolKind::Adaptive { Some(LabTokens::create(cpus)?) } else { None };
    // The cgroups live until the run ends (dropped after the workers are reaped).
    let mut cgroups = Vec::new();
    if let Some(layout) = layout {
        let count = match config.setting {
            Setting::OneCgroup => 1,
            Setting::PerProcess => config.processes,
        };
        for i in 0..count {
            let cg =
                Cgroup::create(layout, cotenant_ops::cgroup::LAB_PREFIX, &format!("neighbours-{i}"), false, None)
                    .context("creating a lab cgroup")?;
            Cgroup::set_weight(layout, cg.cpu_dir(false), 100).context("setting a lab cgroup's weight")?;
            cgroups.push(cg);
        }
    } else if config.setting == Setting::PerProcess {
        anyhow::bail!("one cgroup per process needs real cgroups");
    }
    let go = if is_go(config.kind) {
        match go_worker() {
            GoWorker::Ready(path) => Some(path),
            GoWorker::NotInstalled => anyhow::bail!("the Go kinds need a Go toolchain; none is installed"),
            GoWorker::BuildFailed(why) => anyhow::bail!("building the Go worker failed: {why}"),
        }
    } else {
        None
    };
    let specs = (0..config.processes as usize)
        .map(|i| {
            let cgroup = cgroups.get(i).or(cgroups.first());
            match &go {
                Some(program) => Ok(WorkerSpec {
                    program: program.clone(),
                    args: go_worker_args(config, cpus),
                    cgroup,
                    start_offset: Duration::ZERO,
                }),
                None => WorkerSpec::lab_worker(args.clone(), cgroup),
            }
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    run_workers(&specs)
}

pub fn kind_name(kind: PoolKind) -> &'static str {
    match kind {
        PoolKind::Ignorant => "ignorant",
        PoolKind::Optimal => "optimal",
        PoolKind::Share => "share",
        PoolKind::Adaptive => "adaptive",
        PoolKind::Plain => "plain",
        PoolKind::Fixed => "fixed",
        PoolKind::GoDefault => "go default",
        PoolKind::GoOptimal => "go CPUs/P",
        PoolKind::GoCotenant => "go + cotenant",
    }
}

/// One run, reduced to the figures the tables use.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct RunFigures {
    /// Median over processes of each one's service p99 (µs).
    pub service_p99_us: f64,
    /// Worst service time of any process (µs).
    pub service_max_us: f64,
    /// Median over processes of each one's end-to-end p99 (µs).
    pub e2e_p99_us: f64,
    /// Completed items per second, all processes together.
    pub throughput_per_s: f64,
    /// Fraction of offered items completed.
    pub completed_fraction: f64,
}

/// Reduces one run's reports.
pub fn figures(reports: &[WorkerReport]) -> RunFigures {
    let summaries: Vec<&SummaryRow> = reports.iter().map(|r| &r.summary).collect();
    figures_of(&summaries)
}

/// Reduces one run's per-process summaries (real processes, or simulated ones in `cotenant sim
/// neighbours`, which must reduce alike to be compared).
pub fn figures_of(summaries: &[&SummaryRow]) -> RunFigures {
    let mut p99: Vec<f64> = summaries.iter().map(|s| s.service_p99_us).collect();
    let mut e2e: Vec<f64> = summaries.iter().map(|s| s.e2e_p99_us).collect();
    let offered: usize = summaries.iter().map(|s| s.offered).sum();
    let completed: usize = summaries.iter().map(|s| s.completed).sum();
    RunFigures {
        service_p99_us: median(&mut p99),
        service_max_us: summaries.iter().map(|s| s.service_max_us).fold(0.0, f64::max),
        e2e_p99_us: median(&mut e2e),
        throughput_per_s: summaries.iter().map(|s| s.throughput_per_s).sum(),
        completed_fraction: if offered == 0 { 1.0 } else { completed as f64 / offered as f64 },
    }
}

/// What identifies a configuration in the tables.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Key {
    /// Where the processes live.
    pub setting: Setting,
    /// Offered load per process.
    pub load: f64,
    /// Processes.
    pub processes: u32,
    /// Pool kind.
    pub kind: PoolKind,
    /// Share factor (meaningful for `share`).
    pub share_factor: f64,
}

impl Key {
    /// The pool's name in tables: `share` carries its factor when it is not 1.
    pub fn pool_name(&self) -> String {
        if self.kind == PoolKind::Share && self.share_factor != 1.0 {
            format!("share({})", self.share_factor)
        } else {
            kind_name(self.kind).to_owned()
        }
    }
}

/// A configuration's figures over its repeats: median, min and max of each.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Aggregate {
    /// The configuration.
    pub key: Key,
    /// Repeats aggregated.
    pub repeats: usize,
    /// Medians over repeats.
    pub median: RunFigures,
    /// Smallest of each figure over repeats.
    pub min: RunFigures,
    /// Largest of each figure over repeats.
    pub max: RunFigures,
}

/// Aggregates the runs of one configuration (at least one).
pub fn aggregate(key: Key, runs: &[RunFigures]) -> Aggregate {
    let pick = |f: fn(&RunFigures) -> f64| -> (f64, f64, f64) {
        let mut v: Vec<f64> = runs.iter().map(f).collect();
        let m = median(&mut v);
        (m, v.first().copied().unwrap_or(f64::NAN), v.last().copied().unwrap_or(f64::NAN))
    };
    let fields: [fn(&RunFigures) -> f64; 5] = [
        |r| r.service_p99_us,
        |r| r.service_max_us,
        |r| r.e2e_p99_us,
        |r| r.throughput_per_s,
        |r| r.completed_fraction,
    ];
    let picked: Vec<(f64, f64, f64)> = fields.iter().map(|f| pick(*f)).collect();
    let build = |i: usize| {
        let at = |j: usize| [picked[j].0, picked[j].1, picked[j].2][i];
        RunFigures {
            service_p99_us: at(0),
            service_max_us: at(1),
            e2e_p99_us: at(2),
            throughput_per_s: at(3),
            completed_fraction: at(4),
        }
    };
    Aggregate { key, repeats: runs.len(), median: build(0), min: build(1), max: build(2) }
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        f64::NAN
    }
}

/// The aggregate of `kind` at this setting, load and P (`share` at factor 1, the seed's).
fn find_kind(
    aggregates: &[Aggregate],
    setting: Setting,
    load: f64,
    processes: u32,
    kind: PoolKind,
) -> Option<&Aggregate> {
    aggregates.iter().find(|a| {
        a.key.setting == setting
            && a.key.load == load
            && a.key.processes == processes
            && a.key.kind == kind
            && (kind != PoolKind::Share || a.key.share_factor == 1.0)
    })
}

/// The verdict line for one setting, load and P: adaptive against ignorant and optimal (and
/// share's throughput under overload), from the medians.
pub fn verdict(aggregates: &[Aggregate], setting: Setting, load: f64, processes: u32) -> Option<String> {
    verdict_of(PoolKind::Adaptive, aggregates, setting, load, processes)
}

/// [`verdict`]'s line for `subject` (adaptive, or tokens: adaptive pools sharing host CPU tokens) in
/// the place of adaptive.
pub fn verdict_of(
    subject: PoolKind,
    aggregates: &[Aggregate],
    setting: Setting,
    load: f64,
    processes: u32,
) -> Option<String> {
    let find = |kind| find_kind(aggregates, setting, load, processes, kind);
    let (ours, ignorant) = (find(subject)?, find(PoolKind::Ignorant)?);
    let mut line = format!(
        "{}, load {:.0}%, P={processes}: {} service p99 {:.2}x ignorant's",
        setting.name(),
        load * 100.0,
        kind_name(subject),
        ratio(ours.median.service_p99_us, ignorant.median.service_p99_us)
    );
    if let Some(optimal) = find(PoolKind::Optimal) {
        let _ = write!(
            line,
            " and {:.2}x optimal's; max {:.2}x ignorant's and {:.2}x optimal's",
            ratio(ours.median.service_p99_us, optimal.median.service_p99_us),
            ratio(ours.median.service_max_us, ignorant.median.service_max_us),
            ratio(ours.median.service_max_us, optimal.median.service_max_us),
        );
    }
    let _ = write!(
        line,
        "; end-to-end p99 {:.2}x ignorant's; throughput {:.2}x ignorant's",
        ratio(ours.median.e2e_p99_us, ignorant.median.e2e_p99_us),
        ratio(ours.median.throughput_per_s, ignorant.median.throughput_per_s),
    );
    if let Some(share) = find(PoolKind::Share) {
        let _ = write!(
            line,
            " (share: {:.2}x)",
            ratio(share.median.throughput_per_s, ignorant.median.throughput_per_s)
        );
    }
    Some(line)
}

/// The verdict line of `go-neighbours` for one setting, load and P: the cotenant controller
/// against Go's default GOMAXPROCS (and the static split, when it ran), from the medians.
pub fn go_verdict(aggregates: &[Aggregate], setting: Setting, load: f64, processes: u32) -> Option<String> {
    let find = |kind| find_kind(aggregates, setting, load, processes, kind);
    let (controlled, default) = (find(PoolKind::GoCotenant)?, find(PoolKind::GoDefault)?);
    let mut line = format!(
        "{}, load {:.0}%, P={processes}: go + cotenant service p99 {:.2}x go default's",
        setting.name(),
        load * 100.0,
        ratio(controlled.median.service_p99_us, default.median.service_p99_us)
    );
    if let Some(split) = find(PoolKind::GoOptimal) {
        let _ = write!(
            line,
            " and {:.2}x go CPUs/P's",
            ratio(controlled.median.service_p99_us, split.median.service_p99_us)
        );
    }
    let _ = write!(
        line,
        "; end-to-end p99 {:.2}x default's; throughput {:.2}x default's",
        ratio(controlled.median.e2e_p99_us, default.median.e2e_p99_us),
        ratio(controlled.median.throughput_per_s, default.median.throughput_per_s),
    );
    Some(line)
}

/// What to run: the cross product of these.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Settings.
    pub settings: Vec<Setting>,
    /// Loads.
    pub loads: Vec<f64>,
    /// Process counts.
    pub processes: Vec<u32>,
    /// Pool kinds with their share factor.
    pub pools: Vec<(PoolKind, f64)>,
    /// Repeats per configuration.
    pub repeats: u32,
    /// Seconds per run.
    pub seconds: u64,
    /// Chunks per item for the Go kinds, calibrated once for the whole plan (0: each Go
    /// process calibrates itself).
    pub go_chunks: u32,
}

impl Plan {
    /// Every configuration, in table order (settings, loads, process counts, pools).
    pub fn keys(&self) -> impl Iterator<Item = Key> + '_ {
        self.settings.iter().flat_map(move |&setting| {
            self.loads.iter().flat_map(move |&load| {
                self.processes.iter().flat_map(move |&processes| {
                    self.pools.iter().map(move |&(kind, share_factor)| Key {
                        setting,
                        load,
                        processes,
                        kind,
                        share_factor,
                    })
                })
            })
        })
    }

    /// Runs every configuration `repeats` times through `run(key, repeat)` (a real run or a
    /// simulated one) and reduces them: the aggregates in table order, and a verdict per
    /// (setting, load, P) once all its pools have run.
    pub fn execute(
        &self,
        mut run: impl FnMut(&Key, u32) -> anyhow::Result<RunFigures>,
    ) -> anyhow::Result<(Vec<Aggregate>, Vec<String>)> {
        let mut aggregates = Vec::new();
        let mut verdicts = Vec::new();
        let keys: Vec<Key> = self.keys().collect();
        // The pools compared in one verdict (same setting, load and P) run their repeats in
        // turn (repeat 1 of every pool, then repeat 2, ...), so that a slow phase of the host
        // falls on every pool alike rather than on the pool whose block it hits.
        for group in
            keys.chunk_by(|a, b| (a.setting, a.load, a.processes) == (b.setting, b.load, b.processes))
        {
            let mut runs: Vec<Vec<RunFigures>> = group.iter().map(|_| Vec::new()).collect();
            for repeat in 0..self.repeats {
                for (key, key_runs) in group.iter().zip(&mut runs) {
                    match run(key, repeat) {
                        Ok(figures) => key_runs.push(figures),
                        // A failed run (a worker hung or crashed) is recorded by `run`; the
                        // configuration's other runs, and the plan, go on.
                        Err(e) if super::runner::failed_run(&e).is_some() => {}
                        Err(e) => return Err(e),
                    }
                }
            }
            for (key, key_runs) in group.iter().zip(&runs) {
                if !key_runs.is_empty() {
                    aggregates.push(aggregate(*key, key_runs));
                }
            }
            let (setting, load, processes) = (group[0].setting, group[0].load, group[0].processes);
            if let Some(v) = verdict(&aggregates, setting, load, processes)
                .or_else(|| go_verdict(&aggregates, setting, load, processes))
            {
                verdicts.push(v);
            }
            verdicts.extend(verdict_of(PoolKind::Plain, &aggregates, setting, load, processes));
        }
        Ok((aggregates, verdicts))
    }

    /// The `neighbours` plan for `args` on `lab`'s host: P = 1..2×CPUs (quick: 1, 2), loads
    /// from `--load` (default 70 % and the 150 % overload), both settings when real cgroups
    /// exist.
    pub fn neighbours(lab: &Lab, args: &LabArgs) -> Plan {
        let processes = if !args.processes.is_empty() {
            args.processes.clone()
        } else if args.quick {
            vec![1, 2]
        } else {
            (1..=2 * lab.host.cpus).collect()
        };
        let loads = if !args.load.is_empty() {
            args.load.clone()
        } else if args.quick {
            vec![0.7]
        } else {
            vec![0.7, 1.5]
        };
        Plan {
            settings: lab.settings(args),
            loads,
            processes,
            pools: kinds(args).into_iter().map(|k| (k, 1.0)).collect(),
            repeats: args.repeats.unwrap_or(if args.quick { 1 } else { 3 }),
            seconds: args.seconds.unwrap_or(if args.quick { 1 } else { 5 }),
            go_chunks: 0,
        }
    }
}

impl Plan {
    /// `factor` (seed 000 Figure 8): share's overcommit factor 0.5, 1, 1.5, 2, 3 at P = 2,
    /// each process offered its whole fair share, one cgroup; `adaptive` has no such factor
    /// and is the reference line. `ignorant` and `optimal` frame the range.
    pub fn factor(lab: &Lab, args: &LabArgs) -> Plan {
        let factors: &[f64] = if args.quick { &[0.5, 3.0] } else { &[0.5, 1.0, 1.5, 2.0, 3.0] };
        let mut pools: Vec<(PoolKind, f64)> = factors.iter().map(|&f| (PoolKind::Share, f)).collect();
        pools.extend([(PoolKind::Adaptive, 1.0), (PoolKind::Ignorant, 1.0), (PoolKind::Optimal, 1.0)]);
        Plan {
            settings: vec![Setting::OneCgroup],
            loads: if args.load.is_empty() { vec![1.0] } else { args.load.clone() },
            processes: if args.processes.is_empty() {
                vec![2.max(lab.host.cpus)]
            } else {
                args.processes.clone()
            },
            pools,
            repeats: args.repeats.unwrap_or(if args.quick { 1 } else { 3 }),
            seconds: args.seconds.unwrap_or(if args.quick { 1 } else { 5 }),
            go_chunks: 0,
        }
    }

    /// `go-neighbours`: `neighbours` with Go services (one goroutine per item), P = 2, each
    /// process offered its whole fair share and 150 % of it, under Go's default GOMAXPROCS,
    /// the static split max(1, CPUs / P), and the cotenant Go controller.
    pub fn go_neighbours(lab: &Lab, args: &LabArgs) -> Plan {
        Plan {
            settings: lab.settings(args),
            loads: if !args.load.is_empty() {
                args.load.clone()
            } else if args.quick {
                vec![1.0]
            } else {
                vec![1.0, 1.5]
            },
            processes: if args.processes.is_empty() { vec![2] } else { args.processes.clone() },
            pools: [PoolKind::GoDefault, PoolKind::GoOptimal, PoolKind::GoCotenant]
                .iter()
                .map(|&k| (k, 1.0))
                .collect(),
            repeats: args.repeats.unwrap_or(if args.quick { 1 } else { 3 }),
            seconds: args.seconds.unwrap_or(if args.quick { 1 } else { 5 }),
            go_chunks: 0,
        }
    }

    /// `headline` (what `make demo` runs): P = 2, every process offered its whole fair share,
    /// one cgroup, the five pool kinds, 3 repeats of 4 s: about 90 s.
    pub fn headline(_lab: &Lab, args: &LabArgs) -> Plan {
        Plan {
            settings: vec![Setting::OneCgroup],
            loads: if args.load.is_empty() { vec![1.0] } else { args.load.clone() },
            processes: if args.processes.is_empty() { vec![2] } else { args.processes.clone() },
            pools: kinds(args).into_iter().map(|k| (k, 1.0)).collect(),
            repeats: args.repeats.unwrap_or(if args.quick { 1 } else { 3 }),
            seconds: args.seconds.unwrap_or(if args.quick { 1 } else { 4 }),
            go_chunks: 0,
        }
    }
}

/// `go-neighbours`: skipped with a note, not failed, when Go is missing or its build fails.
pub fn run_go(lab: &Lab, args: &LabArgs) -> anyhow::Result<Outcome> {
    let skipped = |why: String| Outcome { report: format!("Skipped: {why}.\n"), ..Outcome::default() };
    match go_worker() {
        GoWorker::Ready(program) => {
            let mut plan = Plan::go_neighbours(lab, args);
            plan.go_chunks = calibrate_go(&program, args.service_ms)?;
            let mut outcome = run_plan(lab, args, &plan, "go-neighbours")?;
            let how = match args.go_items {
                GoItems::Limited => {
                    "runs at most GOMAXPROCS items at once, in arrival order (a worker pool sized by \
                     GOMAXPROCS; `--go-items per-item` starts a goroutine per item instead)"
                }
                GoItems::PerItem => {
                    "starts one goroutine per item as it arrives, and Go's scheduler time-slices them \
                     (`--go-items limited` runs at most GOMAXPROCS at once instead)"
                }
            };
            outcome.report = format!(
                "Every process is a Go service (the Go worker, built with the host's toolchain) that {how}. \
                 Kinds: Go's default GOMAXPROCS; GOMAXPROCS = max(1, CPUs / P) set once; GOMAXPROCS \
                 steered by the cotenant Go controller (`go/`). Service time runs from the moment an \
                 item may run to its end. Every item is {} chunks of work in every run (calibrated once, \
                 the median of {GO_CALIBRATIONS} calibrations, so that throughputs compare the same work).\n\n{}",
                plan.go_chunks, outcome.report
            );
            Ok(outcome)
        }
        GoWorker::NotInstalled => Ok(skipped("Go is not installed".into())),
        GoWorker::BuildFailed(why) => Ok(skipped(format!("building the Go worker failed ({why})"))),
    }
}

/// Calibrations of the Go worker whose median sizes every item of `go-neighbours`.
const GO_CALIBRATIONS: usize = 3;

/// The chunks of a `service_ms` item for the Go worker at `program`: the median of
/// [`GO_CALIBRATIONS`] calibrations, each in a fresh process (Go's cost per chunk varies
/// between processes). Each is a child of the lab (killed on a signal) with a deadline of
/// [`super::runner::PROBE_DEADLINE`]: a calibration that hangs ends the experiment with an error.
fn calibrate_go(program: &std::path::Path, service_ms: f64) -> anyhow::Result<u32> {
    use super::runner::{run_bounded_output, PROBE_DEADLINE};
    let mut found = Vec::new();
    for _ in 0..GO_CALIBRATIONS {
        let mut command = std::process::Command::new(program);
        command.args(["--calibrate", "--service-ms", &service_ms.to_string()]);
        let output = run_bounded_output(&mut command, PROBE_DEADLINE).context("calibrating the Go worker")?;
        let text = String::from_utf8_lossy(&output.stdout);
        let chunks = serde_json::from_str::<serde_json::Value>(text.trim())
            .ok()
            .and_then(|v| v["chunks"].as_u64())
            .filter(|&c| output.status.success() && c > 0)
            .with_context(|| {
                format!("the Go worker's calibration printed {:?} ({})", text.trim(), output.status)
            })?;
        found.push(chunks as f64);
    }
    Ok(median(&mut found) as u32)
}

/// Runs `plan` and reduces it to an [`Outcome`] with tables, charts and verdicts.
pub fn run_plan(lab: &Lab, args: &LabArgs, plan: &Plan, title: &str) -> anyhow::Result<Outcome> {
    let mut outcome = Outcome::default();
    // Every Rust process of every run does the same work: items sized once, here, rather than
    // by each process's own calibration, which moves by over 10 % from run to run and would
    // move the throughputs with it (issue 33's 150 % line was read through that noise).
    let chunks = if plan.pools.iter().any(|&(kind, _)| !is_go(kind)) {
        super::workload::calibrate_fastest(Duration::from_secs_f64(args.service_ms / 1000.0))
    } else {
        0
    };
    let (aggregates, verdicts) = plan.execute(|key, repeat| {
        let &Key { setting, load, processes, kind, share_factor } = key;
        let config = RunConfig {
            processes,
            kind,
            share_factor,
            setting,
            load,
            service_ms: args.service_ms,
            duration_ms: plan.seconds * 1000,
            repeat,
            go_items: args.go_items,
            go_chunks: plan.go_chunks,
            chunks,
        };
        let busy_before = lab.quiet_check();
        eprintln!(
            "lab {title}: {}, load {:.0}%, P={processes}, {}, repeat {}/{}",
            setting.name(),
            load * 100.0,
            key.pool_name(),
            repeat + 1,
            plan.repeats
        );
        let mut row = serde_json::Map::new();
        row.insert("setting".into(), setting.name().into());
        row.insert("load".into(), load.into());
        row.insert("processes".into(), processes.into());
        row.insert("pool".into(), key.pool_name().into());
        row.insert("repeat".into(), repeat.into());
        row.insert("seconds".into(), plan.seconds.into());
        row.insert("service_ms".into(), args.service_ms.into());
        let reports = match run_once(&config, lab.host.cpus, lab.layout.as_ref().ok()) {
            Ok(reports) => reports,
            Err(e) => {
                // A failed run gets its row, and `execute` goes on without it; any other error
                // ends the experiment.
                if let Some(why) = super::runner::failed_run(&e) {
                    eprintln!("lab {title}: the run failed and is recorded as such: {why}");
                    outcome.rows.push(super::failed_row(row, &why));
                }
                return Err(e);
            }
        };
        let figures = figures(&reports);
        if is_go(kind) {
            row.insert("go_items".into(), serde_json::to_value(args.go_items)?);
            row.insert("go_chunks".into(), plan.go_chunks.into());
        } else {
            row.insert("chunks".into(), chunks.into());
            // The CPUs the processes used over the run (all their threads): whether a slow run
            // left CPUs idle or spent them on something else.
            let used_ns: u64 = reports.iter().map(|r| r.process_cpu_ns).sum();
            let wall_ns = reports.iter().map(|r| r.wall_ns).max().unwrap_or(0);
            if wall_ns > 0 {
                row.insert("cpus_used".into(), (used_ns as f64 / wall_ns as f64).into());
            }
            // CPU time per completed item, pool workers only: what the same work cost.
            let completed: usize = reports.iter().map(|r| r.summary.completed).sum();
            let workers_ns: u64 = reports.iter().map(|r| r.workers_cpu_ns).sum();
            if completed > 0 && workers_ns > 0 {
                row.insert("cpu_us_per_item".into(), (workers_ns as f64 / completed as f64 / 1000.0).into());
            }
        }
        row.insert("host_busy_cpus_before".into(), busy_before.into());
        row.insert("service_p99_us".into(), figures.service_p99_us.into());
        row.insert("service_max_us".into(), figures.service_max_us.into());
        row.insert("e2e_p99_us".into(), figures.e2e_p99_us.into());
        row.insert("throughput_per_s".into(), figures.throughput_per_s.into());
        row.insert("completed_fraction".into(), figures.completed_fraction.into());
        // Fairness between the processes: Jain's index of their throughputs (1 = equal).
        let throughputs: Vec<f64> = reports.iter().map(|r| r.summary.throughput_per_s).collect();
        row.insert("throughput_jain".into(), cotenant::internal::policy_sim::jain(&throughputs).into());
        let targets: Vec<String> = reports.iter().map(|r| r.final_target.to_string()).collect();
        row.insert("final_targets".into(), targets.join(" ").into());
        if kind == PoolKind::Adaptive {
            row.insert("token_timeouts".into(), reports.iter().map(|r| r.token_timeouts).sum::<u64>().into());
            row.insert(
                "token_takebacks".into(),
                reports.iter().map(|r| r.token_takebacks).sum::<u64>().into(),
            );
            // Evidence that the default pools engaged their tokens (0 alone: P = 1).
            row.insert("token_takes".into(), reports.iter().map(|r| r.token_takes).sum::<u64>().into());
        }
        outcome.rows.push(row);
        Ok(figures)
    })?;
    outcome.verdicts = verdicts;
    outcome.report = table(&aggregates);
    outcome.charts = charts(&aggregates, plan);
    outcome.summary = serde_json::to_value(&aggregates)?;
    Ok(outcome)
}

/// The Markdown table of `aggregates`.
pub fn table(aggregates: &[Aggregate]) -> String {
    let mut out = String::from(
        "| setting | load | P | pool | service p99 ms | service max ms | end-to-end p99 ms | throughput /s | completed | repeats |\n\
         |---|---:|---:|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for a in aggregates {
        let spread =
            |m: f64, lo: f64, hi: f64| format!("{:.1} ({:.1}–{:.1})", m / 1000.0, lo / 1000.0, hi / 1000.0);
        let _ = writeln!(
            out,
            "| {} | {:.0}% | {} | {} | {} | {} | {} | {:.1} | {:.0}% | {} |",
            a.key.setting.name(),
            a.key.load * 100.0,
            a.key.processes,
            a.key.pool_name(),
            spread(a.median.service_p99_us, a.min.service_p99_us, a.max.service_p99_us),
            spread(a.median.service_max_us, a.min.service_max_us, a.max.service_max_us),
            spread(a.median.e2e_p99_us, a.min.e2e_p99_us, a.max.e2e_p99_us),
            a.median.throughput_per_s,
            a.median.completed_fraction * 100.0,
            a.repeats
        );
    }
    out.push_str("\nMedians over repeats, (min–max) in brackets.\n");
    out
}

/// Per setting and load: service p99 and max (log) and throughput against P, one line per pool.
pub fn charts(aggregates: &[Aggregate], plan: &Plan) -> Vec<Chart> {
    let mut charts = Vec::new();
    if plan.processes.len() < 2 {
        return charts;
    }
    for &setting in &plan.settings {
        for &load in &plan.loads {
            let slug = format!(
                "{}-load{:.0}",
                if setting == Setting::OneCgroup { "one-cgroup" } else { "per-process" },
                load * 100.0
            );
            let series = |f: fn(&RunFigures) -> f64| -> Vec<Series> {
                plan.pools
                    .iter()
                    .map(|&(kind, factor)| {
                        let mine = aggregates.iter().filter(|a| {
                            a.key.setting == setting
                                && a.key.load == load
                                && a.key.kind == kind
                                && a.key.share_factor == factor
                        });
                        let name = mine.clone().next().map(|a| a.key.pool_name()).unwrap_or_default();
                        Series {
                            name,
                            points: mine.map(|a| (f64::from(a.key.processes), f(&a.median))).collect(),
                        }
                    })
                    .collect()
            };
            charts.push(Chart {
                file_stem: format!("service-p99-{slug}"),
                title: format!("service p99, {}, load {:.0}%", setting.name(), load * 100.0),
                x_label: "processes (P)".into(),
                y_label: "service p99 (ms)".into(),
                log_y: true,
                series: series(|r| r.service_p99_us / 1000.0),
            });
            charts.push(Chart {
                file_stem: format!("service-max-{slug}"),
                title: format!("service max, {}, load {:.0}%", setting.name(), load * 100.0),
                x_label: "processes (P)".into(),
                y_label: "worst service time (ms)".into(),
                log_y: true,
                series: series(|r| r.service_max_us / 1000.0),
            });
            charts.push(Chart {
                file_stem: format!("throughput-{slug}"),
                title: format!("throughput, {}, load {:.0}%", setting.name(), load * 100.0),
                x_label: "processes (P)".into(),
                y_label: "items per second, all processes".into(),
                log_y: false,
                series: series(|r| r.throughput_per_s),
            });
        }
    }
    charts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worker::SummaryRow;

    fn key(processes: u32, kind: PoolKind) -> Key {
        Key { setting: Setting::OneCgroup, load: 0.7, processes, kind, share_factor: 1.0 }
    }

    fn report(p99: f64, max: f64, tput: f64) -> WorkerReport {
        WorkerReport {
            pid: 1,
            rate_per_s: 100.0,
            threads: 2,
            final_target: 1,
            decisions: 10,
            borrows: 0,
            token_timeouts: 0,
            token_takebacks: 0,
            token_takes: 0,
            chunks: 100,
            exact_cpu: false,
            chunk_ns: 50_000.0,
            summary: SummaryRow {
                offered: 100,
                completed: 100,
                throughput_per_s: tput,
                service_p50_us: 5000.0,
                service_p99_us: p99,
                service_max_us: max,
                e2e_p50_us: 5000.0,
                e2e_p99_us: p99 * 2.0,
                e2e_max_us: max * 2.0,
                queue_p99_us: 0.0,
            },
            series: vec![],
            items: vec![],
            process_cpu_ns: 0,
            workers_cpu_ns: 0,
            wall_ns: 0,
            budget: None,
        }
    }

    #[test]
    fn a_run_takes_the_median_process_p99_the_worst_max_and_the_total_throughput() {
        let f = figures(&[
            report(7000.0, 9000.0, 100.0),
            report(9000.0, 20_000.0, 90.0),
            report(8000.0, 8000.0, 95.0),
        ]);
        assert_eq!((f.service_p99_us, f.service_max_us, f.throughput_per_s), (8000.0, 20_000.0, 285.0));
        assert_eq!(f.e2e_p99_us, 16_000.0);
        assert_eq!(f.completed_fraction, 1.0);
    }

    #[test]
    fn repeats_aggregate_to_median_and_spread() {
        let runs: Vec<RunFigures> = [10.0, 30.0, 20.0].iter().map(|&p| figures(&[report(p, p, p)])).collect();
        let a = aggregate(key(2, PoolKind::Adaptive), &runs);
        assert_eq!((a.median.service_p99_us, a.min.service_p99_us, a.max.service_p99_us), (20.0, 10.0, 30.0));
        assert_eq!(a.repeats, 3);
    }

    #[test]
    fn the_go_worker_gets_its_own_arguments() {
        let config = |kind, go_items| RunConfig {
            processes: 2,
            kind,
            share_factor: 1.0,
            setting: Setting::OneCgroup,
            load: 1.5,
            service_ms: 5.0,
            duration_ms: 5000,
            repeat: 2,
            go_items,
            go_chunks: 0,
            chunks: 0,
        };
        let common = "--processes 2 --fair-cpus 1 --load 1.5 --service-ms 5 --duration-ms 5000 --seed 2";
        let joined = |kind, items| go_worker_args(&config(kind, items), 2).join(" ");
        assert_eq!(joined(PoolKind::GoDefault, GoItems::PerItem), common);
        assert_eq!(joined(PoolKind::GoDefault, GoItems::Limited), format!("{common} --limit"));
        assert_eq!(joined(PoolKind::GoOptimal, GoItems::Limited), format!("{common} --limit --gomaxprocs 1"));
        assert_eq!(joined(PoolKind::GoCotenant, GoItems::PerItem), format!("{common} --cotenant"));
        let calibrated = RunConfig { go_chunks: 110, ..config(PoolKind::GoDefault, GoItems::PerItem) };
        assert_eq!(go_worker_args(&calibrated, 2).join(" "), format!("{common} --chunks 110"));
        // Three processes on two CPUs: a fair share of 2/3 CPU, and still one P each.
        let three =
            go_worker_args(&RunConfig { processes: 3, ..config(PoolKind::GoOptimal, GoItems::PerItem) }, 2);
        assert_eq!(three[3], (2.0f64 / 3.0).to_string());
        assert_eq!(three.last().map(String::as_str), Some("1"));
    }

    #[test]
    fn the_go_verdict_compares_the_controller_with_the_default() {
        let one = |kind, p99, tput| aggregate(key(2, kind), &[figures(&[report(p99, p99, tput)])]);
        let aggs = [
            one(PoolKind::GoDefault, 20_000.0, 400.0),
            one(PoolKind::GoOptimal, 6_000.0, 380.0),
            one(PoolKind::GoCotenant, 7_000.0, 396.0),
        ];
        let v = go_verdict(&aggs, Setting::OneCgroup, 0.7, 2).unwrap();
        assert_eq!(
            v,
            "one cgroup, load 70%, P=2: go + cotenant service p99 0.35x go default's and 1.17x go CPUs/P's; \
             end-to-end p99 0.35x default's; throughput 0.99x default's"
        );
        assert_eq!(verdict(&aggs, Setting::OneCgroup, 0.7, 2), None, "no Rust kinds, no Rust verdict");
        assert_eq!(go_verdict(&aggs[..2], Setting::OneCgroup, 0.7, 2), None);
    }

    #[test]
    fn the_verdict_is_computed_from_the_medians() {
        let one = |kind, p99, max, tput| aggregate(key(2, kind), &[figures(&[report(p99, max, tput)])]);
        let aggs = [
            one(PoolKind::Ignorant, 17_000.0, 40_000.0, 200.0),
            one(PoolKind::Optimal, 7_000.0, 10_000.0, 190.0),
            one(PoolKind::Adaptive, 7_700.0, 12_000.0, 194.0),
        ];
        let v = verdict(&aggs, Setting::OneCgroup, 0.7, 2).unwrap();
        assert!(
            v.starts_with(
                "one cgroup, load 70%, P=2: adaptive service p99 0.45x ignorant's and 1.10x optimal's"
            ),
            "{v}"
        );
        assert!(v.contains("max 0.30x ignorant's and 1.20x optimal's; end-to-end p99 0.45x"), "{v}");
        assert!(v.ends_with("throughput 0.97x ignorant's"), "{v}");
        assert_eq!(verdict(&aggs, Setting::OneCgroup, 0.7, 3), None);
        assert_eq!(verdict(&aggs, Setting::PerProcess, 0.7, 2), None);
        let table = table(&aggs);
        assert!(
            table.contains("| one cgroup | 70% | 2 | adaptive | 7.7 (7.7–7.7) | 12.0 (12.0–12.0) |"),
            "{table}"
        );
    }
}
