//! What `neighbours` and its configurations run: the settings, one run's parameters, the keys
//! of the tables, and the plan (its configurations in table order, and how it executes them).
//! Pure: no processes, cgroups or files.

use serde::Serialize;

use super::aggregate::{aggregate, Aggregate, RunFigures};
use super::headline;
use super::verdict::{async_acceptance, async_verdict, go_verdict, verdict, verdict_of};
use crate::args::{GoItems, Items, LabArgs, PoolKind};
use crate::Lab;

/// Every pool kind, in table order.
pub const KINDS: [PoolKind; 5] =
    [PoolKind::Ignorant, PoolKind::Optimal, PoolKind::Share, PoolKind::Plain, PoolKind::Adaptive];

/// Every executor of async items (`--items async`), in table order.
pub const ASYNC_KINDS: [PoolKind; 3] =
    [PoolKind::TokioDefault, PoolKind::TokioOptimal, PoolKind::CotenantAsync];

/// The pool kinds `args` asks for (`--pools`), or every kind of its items.
fn kinds(args: &LabArgs) -> Vec<PoolKind> {
    if !args.pools.is_empty() {
        args.pools.clone()
    } else if args.items == Items::Async {
        ASYNC_KINDS.to_vec()
    } else {
        KINDS.to_vec()
    }
}

/// Whether `args`' items, pool kinds and wait agree (checked before the lab starts anything):
/// the executors serve async items only and the pools thread items only, and
/// `--async-wait-ms` is for async items. `Err` names the option and what to do instead.
pub fn check_items(args: &LabArgs) -> Result<(), String> {
    let asynchronous = args.items == Items::Async;
    if let Some(&kind) = args.pools.iter().find(|kind| kind.is_async() != asynchronous) {
        return Err(if asynchronous {
            format!(
                "--pools {}: with --items async the kinds are tokio-default, tokio-optimal and cotenant-async",
                kind_name(kind)
            )
        } else {
            format!(
                "--pools {}: this kind serves async items (`lab neighbours --items async`)",
                kind_name(kind)
            )
        });
    }
    if !asynchronous && args.async_wait_ms.is_some() {
        return Err("--async-wait-ms: only with --items async (thread items do not wait)".to_owned());
    }
    Ok(())
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
    /// Items of exactly `service_ms` of CPU time (`lab-worker --exact-cpu`; `chunks` is 0).
    pub exact_cpu: bool,
    /// How long an async item waits on its timer before it computes (ms; the async kinds).
    pub async_wait_ms: f64,
}

/// The name of `kind` in tables, verdicts and rows: its one spelling, the same as its JSON
/// name and, for the Rust kinds, its `--pool` value (`go-default`, never "go default").
pub fn kind_name(kind: PoolKind) -> &'static str {
    match kind {
        PoolKind::Ignorant => "ignorant",
        PoolKind::Optimal => "optimal",
        PoolKind::Share => "share",
        PoolKind::Adaptive => "adaptive",
        PoolKind::Plain => "plain",
        PoolKind::Fixed => "fixed",
        PoolKind::GoDefault => "go-default",
        PoolKind::GoOptimal => "go-optimal",
        PoolKind::GoCotenant => "go-cotenant",
        PoolKind::TokioDefault => "tokio-default",
        PoolKind::TokioOptimal => "tokio-optimal",
        PoolKind::CotenantAsync => "cotenant-async",
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
    /// Report the plan as curves against the load (`headline.rs`: one picture, one verdict
    /// line per pool) rather than per load (charts against P, a verdict line per load).
    pub by_load: bool,
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
                        Err(e) if crate::runner::failed_run(&e).is_some() => {}
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
                .or_else(|| async_verdict(&aggregates, setting, load, processes))
            {
                verdicts.push(v);
            }
            verdicts.extend(verdict_of(PoolKind::Plain, &aggregates, setting, load, processes));
        }
        // The targets of the async items, once for the plan: each says which load it needs.
        if self.pools.iter().any(|&(kind, _)| kind == PoolKind::CotenantAsync) {
            verdicts.extend(async_acceptance(&aggregates));
        }
        Ok((aggregates, verdicts))
    }

    /// The `neighbours` plan for `args` on `lab`'s host: P = 1..2×CPUs (quick: 1, 2), loads
    /// from `--load` (default 70 % and the 150 % overload), both settings when real cgroups
    /// exist; the pool kinds, or with `--items async` the executors of async items.
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
            by_load: false,
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
            by_load: false,
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
            by_load: false,
        }
    }

    /// `headline` (what `make demo` runs, `headline.rs`): P = 2 in one cgroup at four loads,
    /// the four pools a user compares, one run of 8 s each: about 2.5 minutes on 2 CPUs.
    /// `--quick`: two loads of 1 s.
    pub fn headline(_lab: &Lab, args: &LabArgs) -> Plan {
        let loads: &[f64] = if args.quick { &headline::QUICK_LOADS } else { &headline::LOADS };
        Plan {
            settings: vec![Setting::OneCgroup],
            loads: if args.load.is_empty() { loads.to_vec() } else { args.load.clone() },
            processes: if args.processes.is_empty() { vec![2] } else { args.processes.clone() },
            pools: if args.pools.is_empty() { headline::KINDS.to_vec() } else { args.pools.clone() }
                .into_iter()
                .map(|k| (k, 1.0))
                .collect(),
            repeats: args.repeats.unwrap_or(1),
            seconds: args.seconds.unwrap_or(if args.quick { 1 } else { 8 }),
            go_chunks: 0,
            by_load: true,
        }
    }
}
