//! `cotenant size`: how many threads a pool needs, by seed 002's utilisation formula or by
//! Little's law, with the arithmetic shown (`cotenant::sizing`). `--cpus` defaults to this
//! process's cotenant CPU limit: on a shared host the formula's Ncpu is what the process may
//! really use, not the host's CPU count.

use std::process::ExitCode;

use anyhow::Context as _;
use cotenant::sizing::{by_littles_law, by_utilization, Sizing};
use serde::Serialize;

use crate::args::SizeArgs;
use crate::usage::{self, UsageError};

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

#[derive(Serialize)]
struct PidJson<'a> {
    pid: u32,
    cpus: f64,
    seconds: f64,
    groups: &'a [crate::size_pid::Group],
}

/// `--pid`: sample the process, group its threads, size each group.
fn run_pid(args: &SizeArgs, pid: u32) -> anyhow::Result<ExitCode> {
    if args.wait.is_some()
        || args.compute.is_some()
        || args.rate.is_some()
        || args.latency.is_some()
        || args.util.is_some()
    {
        return usage::bail("--pid measures W/C itself: it takes only --cpus, --duration and --json");
    }
    let duration = args.duration.unwrap_or(std::time::Duration::from_secs(10));
    let cpus = match args.cpus {
        Some(cpus) => cpus,
        None => cotenant::cpus::detect_pid(pid)
            .with_context(|| format!("finding the CPU count of pid {pid} (give --cpus N to skip it)"))?
            .limit(),
    };
    let threads = crate::size_pid::sample(std::path::Path::new("/proc"), pid, duration)
        .with_context(|| format!("sampling the threads of pid {pid}"))?;
    let groups = crate::size_pid::groups(&threads, cpus);
    if args.json {
        let json = PidJson { pid, cpus, seconds: duration.as_secs_f64(), groups: &groups };
        println!("{}", serde_json::to_string_pretty(&json)?);
        return Ok(ExitCode::from(crate::exit::OK));
    }
    println!(
        "pid {pid}: {} threads in {} groups over {:.1} s; Ncpu = {} (W = blocked, not waiting for a CPU)\n",
        threads.len(),
        groups.len(),
        duration.as_secs_f64(),
        cpus
    );
    println!("{:<24} {:>7} {:>8} {:>8} {:>11}", "group", "threads", "running", "W/C", "recommended");
    for g in &groups {
        println!(
            "{:<24} {:>7} {:>7.0}% {:>8} {:>11}{}",
            g.pattern,
            g.threads,
            g.running_fraction * 100.0,
            g.wait_compute_ratio.map_or("—".to_owned(), |r| format!("{r:.2}")),
            g.recommended.map_or("—".to_owned(), |r| r.to_string()),
            if g.oversized { "  CPU-bound and larger than the CPU count" } else { "" }
        );
    }
    println!("\n(measure under the load you size for: idle pool threads waiting for work count as W)");
    Ok(ExitCode::from(crate::exit::OK))
}

/// `cotenant size`. Which flags go together is checked here, not by clap, for the messages: each
/// says which method a flag belongs to and what else it needs (a [`UsageError`], exit 2); an
/// input the arithmetic refuses ([`cotenant::sizing::InvalidSizing`]) is one too.
pub fn run(args: &SizeArgs) -> anyhow::Result<ExitCode> {
    if let Some(pid) = args.pid {
        return run_pid(args, pid);
    }
    let little = args.rate.is_some() || args.latency.is_some();
    let formula = args.wait.is_some() || args.compute.is_some() || args.util.is_some() || args.cpus.is_some();
    let (method, sizing, cpus_source): (&'static str, Sizing, Option<String>) = match (little, formula) {
        (true, true) => return usage::bail(
            "give either --rate and --latency (Little's law) or --wait and --compute (the utilisation formula), not both",
        ),
        (false, false) => return usage::bail(
            "nothing to size: give --wait W --compute C [--util U] [--cpus N] (the utilisation formula) \
             or --rate R --latency W (Little's law); e.g. `cotenant size --cpus 8 --util 0.8 --wait 50ms --compute 5ms`",
        ),
        (true, false) => {
            let rate =
                args.rate.ok_or_else(|| UsageError::new("--rate is missing (requests per second) for Little's law"))?;
            let latency =
                args.latency.ok_or_else(|| UsageError::new("--latency is missing (e.g. 50ms) for Little's law"))?;
            ("littles-law", by_littles_law(rate, latency.as_secs_f64()).map_err(UsageError::new)?, None)
        }
        (false, true) => {
            let wait = args.wait.ok_or_else(|| UsageError::new("--wait is missing (time a task waits, e.g. 45ms)"))?;
            let compute =
                args.compute.ok_or_else(|| UsageError::new("--compute is missing (CPU time of a task, e.g. 5ms)"))?;
            let (cpus, source) = match args.cpus {
                Some(cpus) => (cpus, "--cpus".to_owned()),
                None => {
                    let budget = cotenant::cpus::detect()
                        .context("finding this process's CPU count for --cpus (give --cpus N to skip it)")?;
                    (budget.limit(), "cotenant cpus (this process's limit)".to_owned())
                }
            };
            let util = args.util.unwrap_or(1.0);
            let sizing =
                by_utilization(cpus, util, wait.as_secs_f64(), compute.as_secs_f64()).map_err(UsageError::new)?;
            ("utilization", sizing, Some(source))
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
