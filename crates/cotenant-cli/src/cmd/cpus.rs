//! `cotenant cpus`: the CPU count, as an integer, a fraction, an explanation or JSON.

use crate::{args::CpusArgs, exit, output::CpusJson, usage};
use anyhow::Context;
use cotenant::cpus::{cpus_word, Constraint, Limit, Probe, Rounding, SourceRow};
use std::{io::Write, process::ExitCode};

pub fn run(args: &CpusArgs) -> anyhow::Result<ExitCode> {
    let probe = match &args.root {
        Some(root) if !root.is_dir() => {
            return usage::bail(format!("--root {}: not a directory", root.display()));
        }
        Some(root) => Probe::with_root(root),
        None => Probe::system(),
    };
    let budget = match args.pid {
        Some(pid) => probe.detect_pid(pid),
        None => probe.detect(),
    };
    let budget = match budget {
        Ok(b) => b,
        Err(e) => {
            let who = args.pid.map_or("this process".to_owned(), |p| format!("process {p}"));
            eprintln!("cotenant: cannot determine the CPU count of {who}: {e}");
            return Ok(ExitCode::from(exit::FAILURE));
        }
    };
    let rounding: Rounding = args.rounding.into();
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &CpusJson::new(&budget, args.pid))?;
        writeln!(out)?;
    } else if args.explain {
        out.write_all(explain(&budget, rounding).as_bytes())?;
    } else if args.fractional {
        writeln!(out, "{}", budget.limit())?;
    } else {
        writeln!(out, "{}", budget.threads(rounding))?;
    }
    out.flush().context("writing to stdout")?;
    Ok(ExitCode::from(exit::OK))
}

/// The `--explain` text: a one-line answer, then a table of every source.
fn explain(b: &Limit, rounding: Rounding) -> String {
    let threads = b.threads(rounding);
    let what = match (b.binding(), b.binding_level()) {
        (_, Some(level)) if std::ptr::eq(level, &b.quotas()[0]) => {
            format!("the CPU quota of its own cgroup {}", level.cgroup)
        }
        (_, Some(level)) => format!("the CPU quota of ancestor cgroup {}", level.cgroup),
        (Constraint::Cpuset, None) => "the cgroup cpuset".to_owned(),
        (Constraint::Affinity, None) => "the affinity mask".to_owned(),
        (Constraint::Online | Constraint::Quota, None) => "the online CPUs".to_owned(),
    };
    let file = b.binding_origin().map_or(String::new(), |o| format!(", {o}"));
    let mut s = format!(
        "{threads} thread{} ({} rounding of a limit of {}; bound by {what}{file})\n\n",
        if threads == 1 { "" } else { "s" },
        rounding.as_str(),
        cpus_word(b.limit())
    );
    let rows: Vec<SourceRow> = b.sources();
    let header = ["", "SOURCE", "CGROUP", "VALUE", "FILE"];
    let cells: Vec<[String; 5]> = rows
        .iter()
        .map(|r| {
            [
                if r.binds { "*".into() } else { " ".into() },
                r.kind.into(),
                r.cgroup.clone().unwrap_or_else(|| "-".into()),
                r.value.clone(),
                r.origin.as_ref().map_or("-".into(), |o| o.to_string()),
            ]
        })
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut line = |cols: [&str; 5]| {
        let mut l = String::new();
        for (i, c) in cols.iter().enumerate() {
            if i + 1 == cols.len() {
                l.push_str(c);
            } else {
                l.push_str(&format!("{c:<w$}  ", w = widths[i]));
            }
        }
        s.push_str(l.trim_end());
        s.push('\n');
    };
    line(header);
    for row in &cells {
        line([&row[0], &row[1], &row[2], &row[3], &row[4]]);
    }
    s.push_str(&format!(
        "\n* binds. cgroup version: {}. Threads by rounding: floor {}, ceil {}, nearest {} \
         (always at least 1 and at most the {} allowed CPUs).\n",
        b.cgroup_version(),
        b.threads(Rounding::Floor),
        b.threads(Rounding::Ceil),
        b.threads(Rounding::Nearest),
        b.allowed_cpus()
    ));
    s
}
