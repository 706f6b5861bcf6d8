//! `cotenant cgroup set`: resolves the directory, runs [`crate::cgroup_set::set`] and prints
//! what it did; the exit code says whether the arguments (2) or the host (1) were at fault.

use crate::{
    args::{CgroupArgs, CgroupCommand, CgroupSetArgs},
    cgroup_set::{self, Applied, Request, Version},
    exit, usage,
};
use anyhow::Context;
use serde::Serialize;
use std::{io::Write as _, path::PathBuf, process::ExitCode};

pub fn run(args: &CgroupArgs) -> anyhow::Result<ExitCode> {
    match &args.command {
        CgroupCommand::Set(a) => set(a),
    }
}

fn set(args: &CgroupSetArgs) -> anyhow::Result<ExitCode> {
    let root = args.root.clone().unwrap_or_else(|| PathBuf::from("/"));
    if !root.is_dir() {
        return usage::bail(format!("--root {}: not a directory", root.display()));
    }
    let idle = match (args.idle, args.no_idle) {
        (true, _) => Some(true),
        (false, true) => Some(false),
        (false, false) => None,
    };
    let request = Request {
        cpus: args.cpus,
        period_us: args.period_us,
        burst_us: args.burst_us,
        idle,
        weight: args.weight,
    };
    let outcome = cgroup_set::resolve(&args.cgroup, &root).and_then(|dir| cgroup_set::set(&dir, &request));
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) if e.is_usage() => return usage::bail(format!("cgroup set: {e}")),
        Err(e) => {
            eprintln!("cotenant: cgroup set: {e}");
            return Ok(ExitCode::from(exit::FAILURE));
        }
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &SetJson::new(&outcome))?;
        writeln!(out)?;
    } else {
        out.write_all(text(&outcome, &request).as_bytes())?;
    }
    out.flush().context("writing to stdout")?;
    Ok(ExitCode::from(exit::OK))
}

/// The human output: one line when unchanged (the settings asked about, as they are), else one
/// line per write, old → new, and a note when leaving idle reset the weight.
fn text(o: &Applied, request: &Request) -> String {
    let dir = o.dir.display();
    if o.writes.is_empty() {
        return format!("{dir}: unchanged ({})\n", settings(o, request).join("; "));
    }
    let mut out: String =
        o.writes.iter().map(|w| format!("{dir}: updated {}: {:?} → {:?}\n", w.file, w.old, w.new)).collect();
    if o.left_idle() && request.weight.is_none() {
        let version = o.scheduling.version;
        out.push_str(&format!(
            "{dir}: no longer idle, so the kernel put the weight back to its default ({} {})\n",
            version.weight_file(),
            version.default_weight_value()
        ));
    }
    out
}

/// The settings a request asked about, in words, as they are now.
fn settings(o: &Applied, request: &Request) -> Vec<String> {
    let mut parts = Vec::new();
    if request.cpus.is_some() {
        let now = &o.now;
        parts.push(match now.quota_us {
            Some(q) => format!(
                "quota {q} µs per {} µs period = {:.2} CPUs",
                now.period_us,
                q as f64 / now.period_us as f64
            ),
            None => format!("no quota, {} µs period", now.period_us),
        });
    }
    if request.idle.is_some() {
        parts.push(match o.scheduling.idle {
            Some(true) => "idle".to_owned(),
            Some(false) => "not idle".to_owned(),
            None => "not idle: this kernel has no cpu.idle".to_owned(),
        });
    }
    if let (Some(asked), Some(value)) = (request.weight, o.scheduling.weight) {
        parts.push(match o.scheduling.version {
            Version::V1 => format!("cpu.shares {value} for weight {asked}"),
            Version::V2 => format!("cpu.weight {value}"),
        });
    }
    parts
}

/// `cotenant cgroup set --json` (a public interface: add fields, never rename).
#[derive(Debug, Serialize)]
struct SetJson {
    /// The cgroup directory.
    cgroup: String,
    /// `v1` or `v2`.
    version: &'static str,
    /// `unchanged` or `updated`.
    action: &'static str,
    /// The writes made, in order.
    writes: Vec<WriteJson>,
    /// quota / period now; `null` = unlimited.
    cpus: Option<f64>,
    period_us: u64,
    /// `null` = unlimited.
    quota_us: Option<u64>,
    /// `null` when the kernel has no burst file.
    burst_us: Option<u64>,
    /// `cpu.idle` now; `null` when the kernel has no `cpu.idle` (before Linux 5.15).
    idle: Option<bool>,
    /// v2 `cpu.weight` now; `null` on v1 or without the file.
    weight: Option<u64>,
    /// v1 `cpu.shares` now; `null` on v2 or without the file.
    shares: Option<u64>,
}

#[derive(Debug, Serialize)]
struct WriteJson {
    file: &'static str,
    old: String,
    new: String,
}

impl SetJson {
    fn new(o: &Applied) -> SetJson {
        let now = &o.now;
        let s = &o.scheduling;
        SetJson {
            cgroup: o.dir.display().to_string(),
            version: now.version.as_str(),
            action: if o.writes.is_empty() { "unchanged" } else { "updated" },
            writes: o
                .writes
                .iter()
                .map(|w| WriteJson { file: w.file, old: w.old.clone(), new: w.new.clone() })
                .collect(),
            cpus: now.quota_us.map(|q| q as f64 / now.period_us as f64),
            period_us: now.period_us,
            quota_us: now.quota_us,
            burst_us: now.burst_us,
            idle: s.idle,
            weight: s.weight.filter(|_| s.version == Version::V2),
            shares: s.weight.filter(|_| s.version == Version::V1),
        }
    }
}
