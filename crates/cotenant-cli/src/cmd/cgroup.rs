//! `cotenant cgroup set`: resolves the directory, runs [`crate::cgroup_set::set`] and prints
//! what it did; the exit code says whether the arguments (2) or the host (1) were at fault.

use crate::{
    args::{CgroupArgs, CgroupCommand, CgroupSetArgs},
    cgroup_set::{self, Applied, Request},
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
    let request = Request { cpus: args.cpus, period_us: args.period_us, burst_us: args.burst_us };
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
        out.write_all(text(&outcome).as_bytes())?;
    }
    out.flush().context("writing to stdout")?;
    Ok(ExitCode::from(exit::OK))
}

/// The human output: one line when unchanged, else one line per write, old → new.
fn text(o: &Applied) -> String {
    let dir = o.dir.display();
    if o.writes.is_empty() {
        let now = &o.now;
        return match now.quota_us {
            Some(q) => format!(
                "{dir}: unchanged (quota {q} µs per {} µs period = {:.2} CPUs)\n",
                now.period_us,
                q as f64 / now.period_us as f64
            ),
            None => format!("{dir}: unchanged (no quota, {} µs period)\n", now.period_us),
        };
    }
    o.writes.iter().map(|w| format!("{dir}: updated {}: {:?} → {:?}\n", w.file, w.old, w.new)).collect()
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
        }
    }
}
