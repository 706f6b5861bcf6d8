//! `cotenant size`: how many threads a pool needs, by seed 002's utilisation formula or by
//! Little's law, with the arithmetic shown (`cotenant::sizing`). `--cpus` defaults to this
//! process's cotenant CPU limit: on a shared host the formula's Ncpu is what the process may
//! really use, not the host's CPU count.

use std::process::ExitCode;

use anyhow::Context as _;
use cotenant::sizing::{by_littles_law, by_utilization, Sizing};
use serde::Serialize;

use crate::args::SizeArgs;

#[derive(Serialize)]
struct SizeJson<'a> {
    method: &'static str,
    exact: f64,
    threads: u64,
    arithmetic: &'a str,
    /// Where the CPU count came from (the formula only).
    #[serde(skip_serializing_if = "Option::is_none")]
    cpus_source: Option<String>,
}

pub fn run(args: &SizeArgs) -> anyhow::Result<ExitCode> {
    let little = args.rate.is_some() || args.latency.is_some();
    let formula = args.wait.is_some() || args.compute.is_some() || args.util.is_some() || args.cpus.is_some();
    let (method, sizing, cpus_source): (&'static str, Sizing, Option<String>) = match (little, formula) {
        (true, true) => anyhow::bail!(
            "give either --rate and --latency (Little's law) or --wait and --compute (the utilisation formula), not both"
        ),
        (false, false) => anyhow::bail!(
            "nothing to size: give --wait W --compute C [--util U] [--cpus N] (the utilisation formula) \
             or --rate R --latency W (Little's law); e.g. `cotenant size --cpus 8 --util 0.8 --wait 50ms --compute 5ms`"
        ),
        (true, false) => {
            let rate = args.rate.context("--rate is missing (requests per second) for Little's law")?;
            let latency = args.latency.context("--latency is missing (e.g. 50ms) for Little's law")?;
            ("littles-law", by_littles_law(rate, latency.as_secs_f64())?, None)
        }
        (false, true) => {
            let wait = args.wait.context("--wait is missing (time a task waits, e.g. 45ms)")?;
            let compute = args.compute.context("--compute is missing (CPU time of a task, e.g. 5ms)")?;
            let (cpus, source) = match args.cpus {
                Some(cpus) => (cpus, "--cpus".to_owned()),
                None => {
                    let budget = cotenant::cpus::detect()
                        .context("finding this process's CPU count for --cpus (give --cpus N to skip it)")?;
                    (budget.limit(), "cotenant cpus (this process's limit)".to_owned())
                }
            };
            let util = args.util.unwrap_or(1.0);
            ("utilization", by_utilization(cpus, util, wait.as_secs_f64(), compute.as_secs_f64())?, Some(source))
        }
    };
    if args.json {
        let json = SizeJson {
            method,
            exact: sizing.exact,
            threads: sizing.threads,
            arithmetic: &sizing.arithmetic,
            cpus_source,
        };
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        println!("{}", sizing.threads);
        println!("  {}", sizing.arithmetic);
        if let Some(source) = cpus_source {
            println!("  CPUs from {source}");
        }
        if method == "littles-law" {
            println!("  (L = λ × W: threads busy or waiting at once, on average; add headroom for bursts)");
        } else {
            println!("  (a thread that waits W and computes C keeps a CPU busy C / (C + W) of the time)");
        }
    }
    Ok(ExitCode::from(crate::exit::OK))
}
