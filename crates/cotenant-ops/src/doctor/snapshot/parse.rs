//! Parsers of the formats the library does not have: PSI, `se.nr_migrations` of `sched`, a
//! number line of `status`, `numa_maps`. Pure, never panic.

use super::{Psi, PsiLine};
use std::collections::BTreeMap;

/// A PSI file: `some avg10=.. avg60=.. avg300=.. total=..` and optionally a `full` line.
pub fn parse_psi(text: &str) -> Result<Psi, String> {
    let mut psi = Psi::default();
    let mut saw_some = false;
    for line in text.lines() {
        let mut words = line.split_ascii_whitespace();
        let kind = words.next();
        let mut l = PsiLine::default();
        for w in words {
            let (k, v) = w.split_once('=').ok_or(format!("{w:?} is not key=value"))?;
            let bad = || format!("{k}={v:?} is not a number");
            match k {
                "avg10" => l.avg10 = v.parse().map_err(|_| bad())?,
                "avg60" => l.avg60 = v.parse().map_err(|_| bad())?,
                "total" => l.total_us = v.parse().map_err(|_| bad())?,
                _ => {}
            }
        }
        match kind {
            Some("some") => {
                psi.some = l;
                saw_some = true;
            }
            Some("full") => psi.full = Some(l),
            _ => {}
        }
    }
    if !saw_some {
        return Err("no \"some\" line".into());
    }
    Ok(psi)
}

/// `se.nr_migrations` from `/proc/<pid>/task/<tid>/sched`.
pub fn parse_sched_migrations(text: &str) -> Result<u64, String> {
    for line in text.lines() {
        if let Some((k, v)) = line.split_once(':') {
            if k.trim() == "se.nr_migrations" {
                return v
                    .trim()
                    .parse()
                    .map_err(|_| format!("se.nr_migrations {:?} is not a number", v.trim()));
            }
        }
    }
    Err("no se.nr_migrations line (a kernel without CONFIG_SCHED_DEBUG?)".into())
}

/// A `key:\tnumber` line of a `status` file.
pub fn status_number(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| l.strip_prefix(key)).and_then(|v| v.trim().parse().ok())
}

/// `/proc/<pid>/numa_maps`: resident bytes per node (`N<node>=<pages>` × `kernelpagesize_kB`).
pub fn parse_numa_maps(text: &str) -> Result<BTreeMap<u32, u64>, String> {
    let mut per_node = BTreeMap::new();
    for line in text.lines() {
        let mut page_kb = 4u64;
        let mut pages: Vec<(u32, u64)> = Vec::new();
        for w in line.split_ascii_whitespace() {
            if let Some(kb) = w.strip_prefix("kernelpagesize_kB=") {
                page_kb = kb.parse().map_err(|_| format!("bad page size {kb:?}"))?;
            } else if let Some((n, count)) = w.strip_prefix('N').and_then(|r| r.split_once('=')) {
                if let (Ok(n), Ok(count)) = (n.parse::<u32>(), count.parse::<u64>()) {
                    pages.push((n, count));
                }
            }
        }
        for (n, count) in pages {
            *per_node.entry(n).or_insert(0u64) =
                per_node.get(&n).copied().unwrap_or(0).saturating_add(count.saturating_mul(page_kb * 1024));
        }
    }
    Ok(per_node)
}
