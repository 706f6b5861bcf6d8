//! `cotenant tokens list | remove`: this user's host CPU token sets (`cotenant::tokens::list`).

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::Context;
use cotenant::tokens::list::{self, SetInfo};
use serde::Serialize;

use crate::args::{TokensArgs, TokensCommand, TokensListArgs, TokensRemoveArgs};
use crate::exit;
use crate::usage;

pub fn run(args: &TokensArgs) -> anyhow::Result<ExitCode> {
    match &args.command {
        TokensCommand::List(a) => list_sets(a),
        TokensCommand::Remove(a) => remove(a),
    }
}

/// One set in `--json` (public interface: add fields, never rename).
#[derive(Debug, Serialize)]
struct SetJson {
    name: Option<String>,
    key: String,
    semid: i32,
    tokens: Option<u32>,
    free: Option<u32>,
    waiting: Option<u32>,
    members: Option<u32>,
    leases: u32,
    owner: u32,
    creator: u32,
    mode: String,
    refused: Option<String>,
}

impl From<&SetInfo> for SetJson {
    fn from(s: &SetInfo) -> Self {
        SetJson {
            name: s.name.clone(),
            key: key_text(s.key),
            semid: s.semid,
            tokens: s.tokens,
            free: s.free,
            waiting: s.waiting,
            members: s.members,
            leases: s.leases,
            owner: s.owner,
            creator: s.creator,
            mode: format!("{:04o}", s.mode),
            refused: s.refused.clone(),
        }
    }
}

fn key_text(key: i32) -> String {
    format!("{:#010x}", key as u32)
}

fn count(n: Option<u32>) -> String {
    n.map_or_else(|| "-".into(), |n| n.to_string())
}

fn list_sets(args: &TokensListArgs) -> anyhow::Result<ExitCode> {
    let sets = list::list()?;
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &sets.iter().map(SetJson::from).collect::<Vec<_>>())?;
        writeln!(out)?;
    } else if sets.is_empty() {
        writeln!(out, "no host token sets for this user")?;
    } else {
        writeln!(
            out,
            "{:<24} {:<10} {:>6} {:>5} {:>7} {:>7} {:>6}  {:<18} state",
            "NAME", "KEY", "TOKENS", "FREE", "WAITING", "MEMBERS", "LEASES", "OWNER/CREATOR MODE"
        )?;
        for s in &sets {
            writeln!(
                out,
                "{:<24} {:<10} {:>6} {:>5} {:>7} {:>7} {:>6}  {:<18} {}",
                s.name.as_deref().unwrap_or("(unnamed)"),
                key_text(s.key),
                count(s.tokens),
                count(s.free),
                count(s.waiting),
                count(s.members),
                s.leases,
                format!("{}/{} {:04o}", s.owner, s.creator, s.mode),
                s.refused.as_deref().map_or_else(|| "ok".to_owned(), |why| format!("refused: {why}")),
            )?;
        }
    }
    out.flush().context("writing to stdout")?;
    Ok(ExitCode::from(exit::OK))
}

#[derive(Debug, Serialize)]
struct RemovedJson {
    removed: Vec<String>,
    kept: Vec<KeptJson>,
}

#[derive(Debug, Serialize)]
struct KeptJson {
    set: String,
    why: String,
}

fn remove(args: &TokensRemoveArgs) -> anyhow::Result<ExitCode> {
    let targets: Vec<(String, i32)> = if args.all {
        list::list()?.iter().map(|s| (s.name.clone().unwrap_or_else(|| key_text(s.key)), s.key)).collect()
    } else {
        let name = args.name.as_deref().unwrap_or_default();
        match list::resolve(name) {
            Ok(key) => vec![(name.to_owned(), key)],
            Err(e) => return usage::bail(format!("tokens remove: {e}")),
        }
    };
    let mut report = RemovedJson { removed: Vec::new(), kept: Vec::new() };
    let listed: Vec<i32> = list::list()?.iter().map(|s| s.key).collect();
    for (label, key) in targets {
        let removed = if listed.contains(&key) || args.all {
            list::remove(key, args.force)
        } else {
            // Not listed: a set left uninitialised by a creator that died, removed by name
            // (`HostTokens::remove_named` refuses a set that is not cotenant's or not ours).
            match cotenant::tokens::HostTokens::remove_named(&label) {
                Ok(true) => Ok(()),
                Ok(false) => list::remove(key, args.force), // nothing there: its error says so
                Err(e) => Err(e),
            }
        };
        match removed {
            Ok(()) => report.removed.push(label),
            Err(e) => report.kept.push(KeptJson { set: label, why: e.to_string() }),
        }
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        for name in &report.removed {
            writeln!(out, "removed {name}")?;
        }
        if report.removed.is_empty() && report.kept.is_empty() {
            writeln!(out, "no host token sets to remove")?;
        }
    }
    out.flush().context("writing to stdout")?;
    for kept in &report.kept {
        eprintln!("cotenant: tokens remove: {}: {}", kept.set, kept.why);
    }
    Ok(ExitCode::from(if report.kept.is_empty() { exit::OK } else { exit::FAILURE }))
}
