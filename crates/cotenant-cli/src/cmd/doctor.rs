//! `cotenant doctor`: runs [`crate::doctor::diagnose`] and prints the report, compared with a
//! report saved before a change when `--verify` names one; the exit code says whether the
//! process asked about could be diagnosed.

use crate::{args::DoctorArgs, doctor, exit, usage};
use anyhow::Context;
use std::{io::Write, path::PathBuf, process::ExitCode};

pub fn run(args: &DoctorArgs) -> anyhow::Result<ExitCode> {
    let root = args.root.clone().unwrap_or_else(|| PathBuf::from("/"));
    if !root.is_dir() {
        return usage::bail(format!("--root {}: not a directory", root.display()));
    }
    // Read before sampling: a wrong file is said at once, not after the sample.
    let baseline = match &args.verify {
        Some(file) => match doctor::verify::read_baseline(file) {
            Ok(baseline) => Some(baseline),
            Err(why) => return usage::bail(format!("--verify {}: {why}", file.display())),
        },
        None => None,
    };
    let opts = doctor::DoctorOptions { pid: args.pid, duration: args.duration, root };
    let mut report = doctor::diagnose(&opts);
    if let Some(baseline) = &baseline {
        report.verify = Some(doctor::verify::compare(baseline, &report));
    }
    let mut out = std::io::stdout().lock();
    let text = if args.json { doctor::render::json(&report) } else { doctor::render::text(&report) };
    out.write_all(text.as_bytes())?;
    out.flush().context("writing to stdout")?;
    if report.process_missing() {
        let why = report.error.as_deref().unwrap_or("it cannot be read");
        let pid = args.pid.unwrap_or_default();
        eprintln!("cotenant: cannot diagnose process {pid}: {why}; the report covers the host only");
        return Ok(ExitCode::from(exit::FAILURE));
    }
    Ok(ExitCode::from(exit::OK))
}
