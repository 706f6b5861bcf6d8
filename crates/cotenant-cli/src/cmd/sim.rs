//! `cotenant sim ...`: the deterministic simulations of `crates/cotenant-sim` (issue 10).
//!
//! `sim bandwidth`: seed 001's CFS bandwidth control, period by period and event by event.

use std::process::ExitCode;

use anyhow::Context;
use cotenant_sim::bandwidth::{self, Config, Kind, Variant};
use serde_json::json;

use crate::args::{SimArgs, SimCommand, SimVariant};

pub fn run(args: &SimArgs) -> anyhow::Result<ExitCode> {
    match &args.command {
        SimCommand::Bandwidth(a) => bandwidth_run(a),
    }
}

fn ns(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn ms(ns: i64) -> f64 {
    ns as f64 / 1e6
}

fn bandwidth_run(a: &crate::args::SimBandwidthArgs) -> anyhow::Result<ExitCode> {
    let threads = a.threads as usize;
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
        },
    };
    let run = match bandwidth::simulate(&config) {
        Ok(run) => run,
        Err(why) => {
            eprintln!("cotenant sim bandwidth: {why}");
            return Ok(ExitCode::from(crate::exit::USAGE));
        }
    };
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
        return Ok(ExitCode::from(crate::exit::OK));
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
    Ok(ExitCode::from(crate::exit::OK))
}
