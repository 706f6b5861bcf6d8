//! `cotenant sim neighbours` and `cotenant sim validate` (issue 10 items 2 and 3): seed 000's
//! Figure 7 on a simulated host (`cotenant_sim::host`), reduced, tabulated and judged exactly as
//! `lab neighbours` reduces real runs (`lab::neighbours::{figures_of, aggregate, table,
//! verdict, charts}`), so that a simulated table and a real one compare line for line.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use cotenant::Policy;
use cotenant_sim::host::{
    self, quantile, Arrivals, Fairness, GroupShares, HostConfig, ProcessConfig, RunningReweight, SchedParams,
    SchedulerModel,
};
use serde_json::json;

use super::ns;
use crate::args::{
    GroupSharesArg, PoolKind, RunningReweightArg, SchedulerArg, SchedulerFlag, SettingArg, SimNeighboursArgs,
    SimValidateArgs,
};
use crate::neighbours::{aggregate, charts, figures_of, table, Aggregate, Key, Plan, RunFigures, Setting};
use crate::worker::SummaryRow;
use crate::Outcome;

/// The simulated host's scheduler as `--scheduler`, `--submit-us` and `--running-reweight`
/// make it, for reports.
fn model_description(flag: &SchedulerFlag) -> String {
    let model = scheduler_model(flag.model);
    let mut text = model_text(model).to_string();
    if model == SchedulerModel::Linux {
        text.push_str(match flag.running_reweight {
            RunningReweightArg::AsMeasured => {
                "; a running group entity reweighted as traced on 6.18 (its lead grows)"
            }
            RunningReweightArg::LagConserving => "; a running group entity reweighted keeping its lead",
        });
        if flag.group_shares == GroupSharesArg::Loads {
            text.push_str("; group shares from load averages");
        }
    }
    if flag.submit_us > 0 {
        let _ = write!(
            text,
            "; each process's submitting thread simulated, {} µs of CPU per wake-up",
            flag.submit_us
        );
    }
    text
}

/// The library's rule for `--group-shares`.
fn group_shares(arg: GroupSharesArg) -> GroupShares {
    match arg {
        GroupSharesArg::Counts => GroupShares::Counts,
        GroupSharesArg::Loads => GroupShares::Loads,
    }
}

/// The library's rule for `--running-reweight`.
fn running_reweight(arg: RunningReweightArg) -> RunningReweight {
    match arg {
        RunningReweightArg::AsMeasured => RunningReweight::AsMeasured,
        RunningReweightArg::LagConserving => RunningReweight::LagConserving,
    }
}

/// What the simulated host is, for reports.
fn model_text(scheduler: SchedulerModel) -> &'static str {
    match scheduler {
        SchedulerModel::Idealised => {
            "idealised CFS: one run queue, virtual runtime, minimum slice, wake-up preemption, \
             equal-weight groups; Linux's default constants; ticks at 250 Hz"
        }
        SchedulerModel::Linux => {
            "Linux 6.6 and later, constants and lag clamp as measured on 6.18: a run queue per \
             CPU, earliest eligible virtual deadline first, run to parity, wake-up placement, \
             newly-idle and periodic load balancing, per-CPU group shares; ticks at 250 Hz"
        }
    }
}

/// The library's scheduler model for `--scheduler`.
fn scheduler_model(arg: SchedulerArg) -> SchedulerModel {
    match arg {
        SchedulerArg::Idealised => SchedulerModel::Idealised,
        SchedulerArg::Linux => SchedulerModel::Linux,
    }
}

/// One simulated configuration.
#[derive(Debug, Clone, Copy)]
struct Case {
    cpus: u32,
    setting: Setting,
    load: f64,
    processes: u32,
    kind: PoolKind,
    service_ns: u64,
    duration_ns: u64,
    warmup_ns: u64,
    seed: u64,
    spare_tokens: u32,
    /// `HostConfig::submit_ns` (`--submit-us`).
    submit_ns: u64,
    scheduler: SchedulerModel,
    /// `HostConfig::running_reweight` (`--running-reweight`).
    running_reweight: RunningReweight,
    /// `HostConfig::group_shares` (`--group-shares`).
    group_shares: GroupShares,
    /// The default pool's workers take CPU leases with their tokens (as the library's do).
    leases: bool,
}

/// A simulated run, reduced like a real one, with what only a simulation can tell.
struct Simulated {
    figures: RunFigures,
    mean_target: f64,
    events: u64,
    wall: Duration,
    /// Token holders' wait for a CPU while a CPU idled (`HostRun::holder_wait_beside_idle_ns`).
    beside_idle_ms: f64,
    /// `HostRun::running_reweights`.
    running_reweights: u64,
}

/// The library policy each lab pool kind stands for.
fn policy(kind: PoolKind, cpus: u32, processes: u32) -> anyhow::Result<Policy> {
    Ok(match kind {
        PoolKind::Ignorant => Policy::fixed(cpus as usize),
        // Adaptive: the default pool, with tokens as in the lab (the simulated pool applies
        // `Policy::sharing_host_tokens`, as the library's builder does); plain: without.
        PoolKind::Adaptive | PoolKind::Plain => Policy::adaptive(),
        PoolKind::Optimal => Policy::fixed((cpus / processes).max(1) as usize),
        PoolKind::Share => Policy::share(1.0),
        other => bail!(
            "--pools: {} is not simulated (ignorant, optimal, share, plain and adaptive are)",
            crate::neighbours::kind_name(other)
        ),
    })
}

/// The host a case describes; `Err` names what is out of range (checked for every case before
/// any runs, so that a bad combination fails at once and not after an hour of simulation).
fn host_config(case: &Case) -> anyhow::Result<HostConfig> {
    if case.service_ns == 0 {
        bail!("the service time rounds to 0 ns (--service-ms, or service_ms in the real run's file): it must be at least 0.000001 ms");
    }
    let policy = policy(case.kind, case.cpus, case.processes)?;
    // The lab's offered load: a fraction of the process's fair share of the CPUs.
    let fair_cpus = f64::from(case.cpus) / f64::from(case.processes);
    let rate = case.load * fair_cpus / (case.service_ns as f64 / 1e9);
    let process = ProcessConfig {
        policy,
        threads: case.cpus,
        rate,
        service: case.service_ns,
        arrivals: Arrivals::Poisson,
        // The default pool engages its tokens only while another process shares them.
        uses_tokens: case.kind == PoolKind::Adaptive && case.processes > 1,
        uses_leases: case.leases,
    };
    let config = HostConfig {
        cpus: case.cpus,
        fairness: match case.setting {
            Setting::OneCgroup => Fairness::Threads,
            Setting::PerProcess => Fairness::Processes,
        },
        processes: vec![process; case.processes as usize],
        duration: case.duration_ns,
        period: 10_000_000,
        sched: SchedParams::linux(case.cpus),
        seed: case.seed,
        warmup: case.warmup_ns,
        spare_tokens: case.spare_tokens,
        submit_ns: case.submit_ns,
        scheduler: case.scheduler,
        running_reweight: case.running_reweight,
        group_shares: case.group_shares,
    };
    config.validate().map_err(|e| {
        anyhow::anyhow!(
            "{} CPUs, {}, load {}, {} processes, {}: {e}",
            case.cpus,
            case.setting.name(),
            case.load,
            case.processes,
            crate::neighbours::kind_name(case.kind)
        )
    })?;
    Ok(config)
}

fn simulate(case: &Case) -> anyhow::Result<Simulated> {
    let config = host_config(case)?;
    let started = Instant::now();
    let run = host::simulate(&config).map_err(|e| anyhow::anyhow!("sim: {e}"))?;
    let wall = started.elapsed();
    let us = |ns: u64| ns as f64 / 1e3;
    let rows: Vec<SummaryRow> = run
        .processes
        .iter()
        .map(|p| SummaryRow {
            offered: p.offered as usize,
            completed: p.completed as usize,
            throughput_per_s: p.throughput_per_s,
            service_p50_us: us(quantile(&p.service, 0.5)),
            service_p99_us: us(quantile(&p.service, 0.99)),
            service_max_us: us(quantile(&p.service, 1.0)),
            e2e_p50_us: us(quantile(&p.end_to_end, 0.5)),
            e2e_p99_us: us(quantile(&p.end_to_end, 0.99)),
            e2e_max_us: us(quantile(&p.end_to_end, 1.0)),
            queue_p99_us: 0.0,
        })
        .collect();
    let refs: Vec<&SummaryRow> = rows.iter().collect();
    let targets: Vec<f64> = run
        .processes
        .iter()
        .map(|p| p.targets.iter().map(|&t| f64::from(t)).sum::<f64>() / p.targets.len().max(1) as f64)
        .collect();
    Ok(Simulated {
        figures: figures_of(&refs),
        mean_target: targets.iter().sum::<f64>() / targets.len().max(1) as f64,
        events: run.events,
        wall,
        beside_idle_ms: run.holder_wait_beside_idle_ns as f64 / 1e6,
        running_reweights: run.running_reweights,
    })
}

fn settings(arg: SettingArg) -> Vec<Setting> {
    match arg {
        SettingArg::OneCgroup => vec![Setting::OneCgroup],
        SettingArg::PerProcess => vec![Setting::PerProcess],
        SettingArg::Both => vec![Setting::OneCgroup, Setting::PerProcess],
    }
}

pub fn run(args: &SimNeighboursArgs) -> anyhow::Result<ExitCode> {
    let or =
        |given: &[u32], default: &[u32]| if given.is_empty() { default.to_vec() } else { given.to_vec() };
    let pools = if args.pools.is_empty() {
        vec![PoolKind::Ignorant, PoolKind::Optimal, PoolKind::Share, PoolKind::Plain, PoolKind::Adaptive]
    } else {
        args.pools.clone()
    };
    for &kind in &pools {
        // A pool the simulator cannot run is a usage error (exit 2), found before any work.
        policy(kind, args.cpus, 1).map_err(|e| cotenant_ops::usage::UsageError::new(format!("{e:#}")))?;
    }
    if args.warmup >= args.duration {
        let why =
            format!("--warmup ({:?}) must be shorter than --duration ({:?})", args.warmup, args.duration);
        return cotenant_ops::usage::bail(why);
    }
    let plan = Plan {
        settings: settings(args.setting),
        loads: if args.load.is_empty() { vec![1.0, 1.5] } else { args.load.clone() },
        processes: or(&args.processes, &[1, 2, 4, 8]),
        pools: pools.iter().map(|&k| (k, 1.0)).collect(),
        repeats: args.repeats,
        seconds: args.duration.as_secs(),
        go_chunks: 0,
        by_load: false,
    };
    if !(args.service_ms.is_finite() && args.service_ms > 0.0) {
        bail!("--service-ms must be a positive number of milliseconds, got {}", args.service_ms);
    }
    let case = |setting, load, processes, kind, repeat: u32| Case {
        cpus: args.cpus,
        setting,
        load,
        processes,
        kind,
        service_ns: (args.service_ms * 1e6).round() as u64,
        duration_ns: ns(args.duration),
        warmup_ns: ns(args.warmup),
        seed: args.seed.wrapping_add(u64::from(repeat)),
        spare_tokens: args.spare_tokens,
        submit_ns: u64::from(args.scheduler.submit_us) * 1000,
        scheduler: scheduler_model(args.scheduler.model),
        running_reweight: running_reweight(args.scheduler.running_reweight),
        group_shares: group_shares(args.scheduler.group_shares),
        leases: !args.no_leases,
    };
    // Every configuration is checked before the first runs.
    for key in plan.keys() {
        host_config(&case(key.setting, key.load, key.processes, key.kind, 0))?;
    }
    let mut outcome = Outcome::default();
    let mut wall_most = Duration::ZERO;
    let (aggregates, verdicts) = plan.execute(|key, repeat| {
        let case = case(key.setting, key.load, key.processes, key.kind, repeat);
        let sim = simulate(&case)?;
        wall_most = wall_most.max(sim.wall);
        eprintln!(
            "sim neighbours: {} CPUs, {}, load {:.0}%, P={}, {}, random stream {}: {} events in {:.3} s",
            args.cpus,
            key.setting.name(),
            key.load * 100.0,
            key.processes,
            key.pool_name(),
            case.seed,
            sim.events,
            sim.wall.as_secs_f64()
        );
        outcome.rows.push(row(&case, key, &sim));
        Ok(sim.figures)
    })?;
    outcome.verdicts = verdicts;
    let model = model_description(&args.scheduler);
    let _ = write!(
        outcome.report,
        "Simulated host: {} CPUs ({model}). Each process: a pool of {} threads and Poisson arrivals of \
         {} ms items at the given fraction of its fair share; {} s of arrivals, latencies of the items \
         arriving after the first {} s; {} random streams from {}.\n\n{}",
        args.cpus,
        args.cpus,
        args.service_ms,
        args.duration.as_secs_f64(),
        args.warmup.as_secs_f64(),
        args.repeats,
        args.seed,
        table(&aggregates)
    );
    outcome.charts = charts(&aggregates, &plan);
    outcome.summary = serde_json::to_value(&aggregates)?;
    let results = json!({
        "experiment": "sim-neighbours",
        "host": {"cpus": args.cpus, "model": model, "simulated": true},
        "rows": outcome.rows,
        "summary": outcome.summary,
        "verdicts": outcome.verdicts,
        "slowest_run_wall_s": wall_most.as_secs_f64(),
    });
    emit("sim-neighbours", args.out.as_deref(), args.json, &results, &outcome)?;
    Ok(ExitCode::from(cotenant_ops::exit::OK))
}

fn row(case: &Case, key: &Key, sim: &Simulated) -> serde_json::Map<String, serde_json::Value> {
    let value = json!({
        "cpus": case.cpus,
        "setting": case.setting.name(),
        "load": case.load,
        "processes": case.processes,
        "pool": key.pool_name(),
        "seed": case.seed,
        "service_p99_us": sim.figures.service_p99_us,
        "service_max_us": sim.figures.service_max_us,
        "e2e_p99_us": sim.figures.e2e_p99_us,
        "throughput_per_s": sim.figures.throughput_per_s,
        "completed_fraction": sim.figures.completed_fraction,
        "mean_target": sim.mean_target,
        "events": sim.events,
        "wall_s": sim.wall.as_secs_f64(),
        "holder_wait_beside_idle_ms": sim.beside_idle_ms,
        "running_reweights": sim.running_reweights,
    });
    match value {
        serde_json::Value::Object(map) => map,
        _ => unreachable!("a JSON object literal"),
    }
}

/// Prints the report (or the JSON) and, with `out`, writes `out/<name>/`.
fn emit(
    name: &str,
    out: Option<&Path>,
    as_json: bool,
    results: &serde_json::Value,
    outcome: &Outcome,
) -> anyhow::Result<()> {
    let report = |with_charts: bool| {
        let mut text = format!("# {}\n\n{}", name.replace('-', " "), outcome.report);
        if with_charts && !outcome.charts.is_empty() {
            text.push_str("\n## Charts\n\n");
            for chart in &outcome.charts {
                let _ = writeln!(text, "![{}]({}.svg)\n", chart.title, chart.file_stem);
            }
        }
        if !outcome.verdicts.is_empty() {
            text.push_str("\n## Verdict\n\n");
            for v in &outcome.verdicts {
                let _ = writeln!(text, "- {v}");
            }
        }
        text
    };
    if as_json {
        println!("{}", serde_json::to_string_pretty(results)?);
    } else {
        print!("{}", report(false));
    }
    let Some(out) = out else { return Ok(()) };
    let dir = out.join(name);
    crate::command::write_files(&dir, &serde_json::to_string_pretty(results)?, &report(true), outcome)?;
    eprintln!("sim: wrote {}", dir.display());
    Ok(())
}

/// One real configuration's medians, read back from a lab run's `summary`.
#[derive(Debug, Clone, Copy)]
struct RealCell {
    setting: Setting,
    load: f64,
    processes: u32,
    kind: PoolKind,
    median: RunFigures,
}

/// What `sim validate` needs from a real `lab neighbours` run's `results.json`.
struct RealRun {
    cpus: u32,
    seconds: u64,
    service_ms: f64,
    cells: Vec<RealCell>,
}

fn read_real(path: &Path) -> anyhow::Result<RealRun> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{}: not JSON (expected a lab run's results.json)", path.display()))?;
    let bad = |what: &str| {
        anyhow::anyhow!("{}: {what} (expected `cotenant lab neighbours`' results.json)", path.display())
    };
    if value["experiment"] != "neighbours" && value["experiment"] != "headline" {
        return Err(bad(&format!("experiment is {}", value["experiment"])));
    }
    let cpus = value["host"]["cpus"]
        .as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .filter(|&n| n >= 1)
        .ok_or_else(|| bad("host.cpus is not a CPU count"))?;
    let first = value["rows"].get(0).ok_or_else(|| bad("no rows"))?;
    let seconds = first["seconds"]
        .as_u64()
        .filter(|&s| (1..=86_400).contains(&s))
        .ok_or_else(|| bad("rows[0].seconds is not a duration in 1..=86400"))?;
    let service_ms = first["service_ms"]
        .as_f64()
        .filter(|&ms| ms.is_finite() && ms > 0.0)
        .ok_or_else(|| bad("rows[0].service_ms is not a positive number"))?;
    let summary = value["summary"].as_array().ok_or_else(|| bad("no summary array"))?;
    let mut cells = Vec::new();
    for (i, a) in summary.iter().enumerate() {
        let key = &a["key"];
        let setting = match key["setting"].as_str() {
            Some("one-cgroup") => Setting::OneCgroup,
            Some("per-process") => Setting::PerProcess,
            _ => return Err(bad(&format!("summary[{i}].key.setting is {}", key["setting"]))),
        };
        let kind = match key["kind"].as_str() {
            Some("ignorant") => PoolKind::Ignorant,
            Some("adaptive") => PoolKind::Adaptive,
            Some("plain") => PoolKind::Plain,
            _ => continue, // only the pools the ratios compare
        };
        let median: RunFigures = serde_json::from_value(a["median"].clone())
            .map_err(|e| bad(&format!("summary[{i}].median: {e}")))?;
        let load = key["load"].as_f64().ok_or_else(|| bad(&format!("summary[{i}].key.load")))?;
        let processes = key["processes"]
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|&n| n >= 1)
            .ok_or_else(|| bad(&format!("summary[{i}].key.processes is not a process count")))?;
        if !(load.is_finite() && load > 0.0) {
            return Err(bad(&format!("summary[{i}].key.load is not a positive number")));
        }
        cells.push(RealCell { setting, load, processes, kind, median });
    }
    if cells.is_empty() {
        return Err(bad("no ignorant, plain or adaptive configuration in summary"));
    }
    Ok(RealRun { cpus, seconds, service_ms, cells })
}

/// The three ratios the validation compares for a pool (the default pool, `adaptive`, or the
/// plain adaptive policy without tokens, `plain`): ignorant/pool service p99 and max (how much
/// the pool cuts them), pool/ignorant throughput.
/// A ratio is NaN when its denominator is not positive (an empty run), and then never
/// counts as within the tolerance.
fn ratios(ignorant: &RunFigures, adaptive: &RunFigures) -> [f64; 3] {
    let ratio = |a: f64, b: f64| if b > 0.0 && a.is_finite() && b.is_finite() { a / b } else { f64::NAN };
    [
        ratio(ignorant.service_p99_us, adaptive.service_p99_us),
        ratio(ignorant.service_max_us, adaptive.service_max_us),
        ratio(adaptive.throughput_per_s, ignorant.throughput_per_s),
    ]
}

/// The band a simulated ratio must fall in around the real one (issue 10 item 3).
const TOLERANCE: f64 = 0.25;

pub fn validate(args: &SimValidateArgs) -> anyhow::Result<ExitCode> {
    let real = read_real(&args.real)?;
    let case = |cell: &RealCell, kind, seed| Case {
        cpus: real.cpus,
        setting: cell.setting,
        load: cell.load,
        processes: cell.processes,
        kind,
        service_ns: (real.service_ms * 1e6).round() as u64,
        duration_ns: real.seconds * 1_000_000_000,
        warmup_ns: 0, // the lab keeps every item
        seed,
        spare_tokens: 0,
        submit_ns: u64::from(args.scheduler.submit_us) * 1000,
        scheduler: scheduler_model(args.scheduler.model),
        running_reweight: running_reweight(args.scheduler.running_reweight),
        group_shares: group_shares(args.scheduler.group_shares),
        leases: true, // as the lab's pools ran
    };
    for cell in &real.cells {
        host_config(&case(cell, cell.kind, 1)).with_context(|| format!("{}", args.real.display()))?;
    }
    let mut outcome = Outcome::default();
    let mut lines = String::from(
        "| setting | load | P | pool | p99 ign/pool real | sim | within 25 % | max ign/pool real | sim | within 25 % | \
         throughput pool/ign real | sim | within 25 % |\n|---|---:|---:|---|---:|---:|---|---:|---:|---|---:|---:|---|\n",
    );
    let (mut within, mut total) = (0, 0);
    let mut compared = Vec::new();
    let simulate_cell =
        |cell: &RealCell, kind: PoolKind, rows: &mut crate::Rows| -> anyhow::Result<Aggregate> {
            let key = Key {
                setting: cell.setting,
                load: cell.load,
                processes: cell.processes,
                kind,
                share_factor: 1.0,
            };
            let mut runs = Vec::new();
            for seed in 1..=u64::from(args.repeats) {
                let case = case(cell, kind, seed);
                let sim = simulate(&case)?;
                rows.push(row(&case, &key, &sim));
                runs.push(sim.figures);
            }
            Ok(aggregate(key, &runs))
        };
    for cell in real.cells.iter().filter(|c| c.kind == PoolKind::Ignorant) {
        let pools: Vec<&RealCell> = real
            .cells
            .iter()
            .filter(|c| {
                matches!(c.kind, PoolKind::Plain | PoolKind::Adaptive)
                    && c.setting == cell.setting
                    && c.load == cell.load
                    && c.processes == cell.processes
            })
            .collect();
        if pools.is_empty() {
            continue;
        }
        let ignorant = simulate_cell(cell, PoolKind::Ignorant, &mut outcome.rows)?;
        for pool in pools {
            let simulated = simulate_cell(pool, pool.kind, &mut outcome.rows)?;
            let real_ratios = ratios(&cell.median, &pool.median);
            let sim_ratios = ratios(&ignorant.median, &simulated.median);
            let name = if pool.kind == PoolKind::Adaptive { "default" } else { "plain" };
            let _ = write!(
                lines,
                "| {} | {:.0}% | {} | {name} ",
                cell.setting.name(),
                cell.load * 100.0,
                cell.processes
            );
            let mut verdicts = Vec::new();
            for (r, s) in real_ratios.iter().zip(&sim_ratios) {
                let ok = (s / r - 1.0).abs() <= TOLERANCE; // false when either is NaN
                total += 1;
                within += usize::from(ok);
                verdicts.push(ok);
                let _ = write!(lines, "| {r:.2} | {s:.2} | {} ", if ok { "yes" } else { "no" });
            }
            lines.push_str("|\n");
            compared.push(json!({
                "setting": cell.setting.name(), "load": cell.load, "processes": cell.processes,
                "pool": name,
                "real": {"p99": real_ratios[0], "max": real_ratios[1], "throughput": real_ratios[2]},
                "simulated": {"p99": sim_ratios[0], "max": sim_ratios[1], "throughput": sim_ratios[2]},
                "within": verdicts,
            }));
        }
    }
    if total == 0 {
        bail!("{}: no configuration has both ignorant and adaptive or plain", args.real.display());
    }
    let model = model_description(&args.scheduler);
    let _ = write!(
        outcome.report,
        "Real run: {} ({} CPUs, {} s per run, {} ms items). Simulated: the same configurations, \
         {} random streams, every item counted as the lab does ({model}).\n\n{lines}\n\
         {within} of {total} ratios within {:.0} % of the real ones.\n",
        args.real.display(),
        real.cpus,
        real.seconds,
        real.service_ms,
        args.repeats,
        TOLERANCE * 100.0
    );
    outcome
        .verdicts
        .push(format!("{within} of {total} ratios within {:.0} % of the real run's", TOLERANCE * 100.0));
    let results = json!({
        "experiment": "sim-validate",
        "real": args.real.display().to_string(),
        "host": {"cpus": real.cpus, "model": model, "simulated": true},
        "compared": compared,
        "within": within,
        "total": total,
        "rows": outcome.rows,
    });
    emit("sim-validate", args.out.as_deref(), args.json, &results, &outcome)?;
    Ok(ExitCode::from(cotenant_ops::exit::OK))
}
