//! `cotenant sim bandwidth`: seed 001's CFS bandwidth control, period by period and event by
//! event.

use std::process::ExitCode;

use anyhow::Context;
use cotenant_sim::bandwidth::{self, Config, Duty, Kind, Variant};
use serde_json::json;

use super::{ms, ns};
use crate::args::{SimVariant, SimWorkloadArgs};
use crate::{Chart, Series};

/// The duty cycle and the configuration writes the options ask for.
fn workload(w: &SimWorkloadArgs) -> (Option<Duty>, Option<u64>) {
    let duty = match (w.run, w.sleep) {
        (Some(run), Some(sleep)) => Some(Duty { run: ns(run), sleep: ns(sleep) }),
        _ => None,
    };
    (duty, w.update_every.map(ns))
}

/// The workload in words, for table headers.
fn workload_words(w: &SimWorkloadArgs) -> String {
    let mut words = match (w.run, w.sleep) {
        (Some(run), Some(sleep)) => format!("each thread runs {run:?} then blocks {sleep:?}"),
        _ => "threads never block".to_owned(),
    };
    match w.update_every {
        Some(every) => words.push_str(&format!(", a same-value configuration write every {every:?}")),
        None => words.push_str(", no configuration writes"),
    }
    words
}

pub fn run(a: &crate::args::SimBandwidthArgs) -> anyhow::Result<ExitCode> {
    let threads = a.threads as usize;
    let (duty, update_every) = workload(&a.workload);
    let config = Config {
        period: ns(a.period),
        quota: ns(a.quota),
        slice: ns(a.slice),
        tick: ns(a.tick),
        phases: vec![ns(a.tick_phase); threads],
        starts: vec![0; threads],
        periods: a.periods,
        variant: match a.variant {
            SimVariant::Baseline => Variant::Baseline,
            SimVariant::Slush => Variant::Slush,
            SimVariant::All => Variant::All,
            SimVariant::Mainline => Variant::Mainline,
        },
        duty,
        update_every,
    };
    let run = match bandwidth::simulate(&config) {
        Ok(run) => run,
        Err(why) => {
            eprintln!("cotenant sim bandwidth: {why}");
            return Ok(ExitCode::from(cotenant_ops::exit::USAGE));
        }
    };
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let written = crate::plot::render(&timeline_chart(&config, &run), dir)
            .with_context(|| format!("drawing the timeline in {}", dir.display()))?;
        for path in written {
            eprintln!("sim bandwidth: wrote {}", path.display());
        }
    }
    if a.json {
        let periods: Vec<_> = run
            .periods
            .iter()
            .map(|p| json!({"index": p.index, "ran_ms": ms(p.ran as i64), "throttled_ms": ms(p.throttled as i64)}))
            .collect();
        let events: Vec<_> = run
            .events
            .iter()
            .map(|e| {
                let (kind, detail) = match e.kind {
                    Kind::Refill { leftover } => ("refill", json!({"leftover_ms": ms(leftover)})),
                    Kind::Tick { charged, asked, got, slush_paid } => (
                        "tick",
                        json!({"charged_ms": ms(charged as i64), "asked_ms": ms(asked as i64),
                               "got_ms": ms(got as i64), "slush_paid_ms": ms(slush_paid as i64)}),
                    ),
                    Kind::Throttle => ("throttle", json!({})),
                    Kind::Unthrottle { granted } => ("unthrottle", json!({"granted_ms": ms(granted as i64)})),
                    Kind::Start => ("start", json!({})),
                    Kind::Block { charged, asked, got, returned } => (
                        "block",
                        json!({"charged_ms": ms(charged as i64), "asked_ms": ms(asked as i64),
                               "got_ms": ms(got as i64), "returned_ms": ms(returned as i64)}),
                    ),
                    Kind::Wake { asked, got } => {
                        ("wake", json!({"asked_ms": ms(asked as i64), "got_ms": ms(got as i64)}))
                    }
                    Kind::Update { noop } => ("update", json!({"noop": noop})),
                };
                let mut event = json!({"at_ms": ms(e.at as i64), "cpu": e.cpu, "kind": kind,
                    "local_ms": ms(e.local), "global_ms": ms(e.global), "slush_ms": ms(e.slush)});
                if let (Some(event), Some(detail)) = (event.as_object_mut(), detail.as_object()) {
                    event.extend(detail.clone());
                }
                event
            })
            .collect();
        let out = json!({"variant": config.variant.name(), "periods": periods,
                         "throttled_ratio": run.throttled_ratio(), "events": events});
        println!("{}", serde_json::to_string_pretty(&out).context("printing JSON")?);
        return Ok(ExitCode::from(cotenant_ops::exit::OK));
    }
    if a.timeline {
        for event in &run.events {
            println!("{event}");
        }
        println!();
    }
    println!("{:>6}  {:>10}  {:>13}", "period", "ran (ms)", "throttled (ms)");
    for p in &run.periods {
        println!("{:>6}  {:>10.3}  {:>13.3}", p.index, ms(p.ran as i64), ms(p.throttled as i64));
    }
    println!("{}: {:.1} % of periods throttled", config.variant.name(), 100.0 * run.throttled_ratio());
    Ok(ExitCode::from(cotenant_ops::exit::OK))
}

/// The pools over time as steps: the global pool, the slush fund (variants that have one)
/// and each CPU's local pool, in ms.
fn timeline_chart(config: &Config, run: &bandwidth::Run) -> Chart {
    let cpus = config.phases.len();
    let mut global = Series { name: "global pool".into(), points: vec![(0.0, 0.0)] };
    let mut slush = Series { name: "slush fund".into(), points: vec![(0.0, 0.0)] };
    let mut locals: Vec<Series> = (0..cpus)
        .map(|i| Series { name: format!("local pool, CPU {i}"), points: vec![(0.0, 0.0)] })
        .collect();
    let step = |series: &mut Series, at: f64, value: f64| {
        let last = series.points.last().map_or(0.0, |p| p.1);
        series.points.push((at, last));
        series.points.push((at, value));
    };
    for e in &run.events {
        let at = ms(e.at as i64);
        step(&mut global, at, ms(e.global));
        step(&mut slush, at, ms(e.slush));
        if let Some(cpu) = e.cpu {
            step(&mut locals[cpu], at, ms(e.local));
        }
        if e.kind == (Kind::Update { noop: false }) {
            // The write empties every local pool.
            for local in &mut locals {
                step(local, at, 0.0);
            }
        }
    }
    let end = ms((config.period * u64::from(config.periods)) as i64);
    let mut series = vec![global];
    if config.variant == Variant::Slush || config.variant == Variant::All {
        series.push(slush);
    }
    series.extend(locals);
    for s in &mut series {
        let last = s.points.last().map_or(0.0, |p| p.1);
        s.points.push((end, last));
    }
    Chart {
        file_stem: "bandwidth-timeline".into(),
        title: format!(
            "{}: period {:.0} ms, quota {:.1} ms, slice {:.1} ms, tick {:.2} ms",
            config.variant.name(),
            ms(config.period as i64),
            ms(config.quota as i64),
            ms(config.slice as i64),
            ms(config.tick as i64)
        ),
        x_label: "time (ms)".into(),
        y_label: "runtime in the pool (ms)".into(),
        log_y: false,
        beside: Vec::new(),
        series,
    }
}

/// Seed 001 Table II (3 sysbench threads on 3 CPUs, mean of 10 runs): period (ms), periods,
/// throttled periods, ratio (%), throttled time (ms). Printed beside the simulation as a
/// citation, never used in a computation.
const SEED_TABLE_II: [(u64, u32, u32, f64, u64); 3] =
    [(100, 735, 50, 6.8, 94), (50, 1486, 661, 45.0, 2457), (10, 7840, 3835, 49.0, 14_608)];

/// `cotenant sim table2`: Table II per variant over seeds.
pub fn table_ii(a: &crate::args::SimTable2Args) -> anyhow::Result<ExitCode> {
    let longest = SEED_TABLE_II.iter().map(|row| row.0).max().unwrap_or(0) * 1_000_000;
    if ns(a.duration) < longest {
        eprintln!(
            "cotenant sim table2: --duration {:?} is shorter than the longest period (100ms): every period \
             must fit at least once",
            a.duration
        );
        return Ok(ExitCode::from(cotenant_ops::exit::USAGE));
    }
    let mut rows = Vec::new();
    let mut text = format!(
        "The CFS throttling paper's Table II simulated: {} CPU-bound threads on {} CPUs, quota {} CPUs, \
         slice {:?}, tick {:?}, {:.0} s per run, tick phases and starts (within a tick) from random streams \
         1..={}; {}.\n\n\
         | period | variant | throttled periods % (median, range) | throttled time ms (median) \
         | CFS throttling paper (5.12, sysbench) |\n\
         |---:|---|---:|---:|---:|\n",
        a.threads,
        a.threads,
        a.threads,
        a.slice,
        a.tick,
        a.duration.as_secs_f64(),
        a.seeds,
        workload_words(&a.workload)
    );
    let (duty, update_every) = workload(&a.workload);
    for (period_ms, _, _, seed_ratio, seed_time) in SEED_TABLE_II {
        let period = period_ms * 1_000_000;
        let periods = u32::try_from(ns(a.duration) / period).unwrap_or(u32::MAX).max(1);
        for variant in Variant::ALL {
            let mut ratios = Vec::new();
            let mut times = Vec::new();
            for seed in 1..=u64::from(a.seeds) {
                let config = Config {
                    duty,
                    update_every,
                    ..bandwidth::table_ii(
                        a.threads as usize,
                        period,
                        ns(a.slice),
                        ns(a.tick),
                        periods,
                        variant,
                        seed,
                    )
                };
                let run = match bandwidth::simulate(&config) {
                    Ok(run) => run,
                    Err(why) => {
                        eprintln!("cotenant sim table2: {why}");
                        return Ok(ExitCode::from(cotenant_ops::exit::USAGE));
                    }
                };
                ratios.push(run.throttled_ratio() * 100.0);
                times.push(run.periods.iter().map(|p| p.throttled).sum::<u64>() as f64 / 1e6);
            }
            let median = |v: &mut Vec<f64>| cotenant_ops::stats::median(v);
            let (lo, hi) = (
                ratios.iter().copied().fold(f64::INFINITY, f64::min),
                ratios.iter().copied().fold(0.0, f64::max),
            );
            let (ratio, time) = (median(&mut ratios), median(&mut times));
            // The seed's figures are for its workload only: 3 threads that never block, no
            // configuration writes, the kernel's 5 ms slice (its tick is not given).
            let seeds_workload = duty.is_none()
                && update_every.is_none()
                && a.threads == 3
                && a.slice == std::time::Duration::from_millis(5);
            let seed = match variant {
                _ if !seeds_workload => "–".to_owned(),
                Variant::Baseline => format!("{seed_ratio} %, {seed_time} ms"),
                Variant::Slush | Variant::All if period_ms == 10 => "< 1 % (Fig. 6)".to_owned(),
                Variant::Slush | Variant::All if period_ms == 100 => "0 (Fig. 5)".to_owned(),
                Variant::Slush | Variant::All | Variant::Mainline => "–".to_owned(),
            };
            text.push_str(&format!(
                "| {period_ms} ms | {} | {ratio:.1} ({lo:.1}–{hi:.1}) | {time:.0} | {seed} |\n",
                variant.name()
            ));
            rows.push(json!({"period_ms": period_ms, "variant": variant.name(), "periods": periods,
                "throttled_ratio_median": ratio / 100.0, "throttled_ratio_min": lo / 100.0,
                "throttled_ratio_max": hi / 100.0, "throttled_ms_median": time}));
        }
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"threads": a.threads, "seeds": a.seeds,
                "workload": workload_words(&a.workload), "rows": rows}))?
        );
    } else {
        print!("{text}");
    }
    Ok(ExitCode::from(cotenant_ops::exit::OK))
}
