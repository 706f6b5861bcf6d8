//! The report as text (the comparison with a saved report when verifying, the findings with
//! their commands, the process's cooperating neighbours, then the numbers, then what could not
//! be read) or as JSON (`docs/doctor.md`).

use super::analyze::{Consumer, Measurements, ThreadFacts};
use super::Report;
use std::fmt::Write;

/// Pretty JSON, with a final newline.
pub fn json(r: &Report) -> String {
    // Serializing plain structs of strings and numbers cannot fail; fall back to an error
    // object rather than panic anyway.
    let mut s =
        serde_json::to_string_pretty(r).unwrap_or_else(|e| format!("{{\"error\": {:?}}}", e.to_string()));
    s.push('\n');
    s
}

/// Human-readable text.
pub fn text(r: &Report) -> String {
    let mut s = String::new();
    let who = match (r.pid, &r.comm) {
        (Some(pid), Some(comm)) => format!("process {pid} ({comm})"),
        (Some(pid), None) => format!("process {pid}"),
        (None, _) => "the host".to_owned(),
    };
    let _ = writeln!(s, "cotenant doctor: {who}, sampled for {:.2} s", r.duration_ms as f64 / 1000.0);
    if let Some(v) = &r.verify {
        let _ = writeln!(s, "Verified {}", v.summary);
    }
    if let Some(top) = r.findings.first() {
        let _ = writeln!(s, "Most likely: {}\n", top.title);
    }
    for (i, f) in r.findings.iter().enumerate() {
        let sev = serde_json::to_value(f.severity).ok().and_then(|v| v.as_str().map(str::to_owned));
        let _ = writeln!(s, "{}. [{}] {}: {}", i + 1, sev.unwrap_or_default(), f.kind, f.title);
        for e in &f.evidence {
            let _ = writeln!(s, "     {} = {}    ({})", e.what, e.value, e.file);
        }
        let _ = writeln!(s, "   → {}", f.recommendation);
        for c in &f.commands {
            let _ = writeln!(s, "     $ {c}");
        }
        s.push('\n');
    }
    if let (Some(pid), Some(cooperation)) = (r.pid, &r.cooperating_neighbours) {
        let _ = writeln!(s, "{}\n", cooperation.line(pid));
    }
    measurements(&mut s, &r.measurements);
    if !r.not_read.is_empty() || r.unreadable_processes > 0 {
        let _ = writeln!(s, "\nCould not read ({} file(s)):", r.not_read.len());
        for n in &r.not_read {
            let _ = writeln!(s, "  not read: {}: {}", n.file, n.reason);
        }
        if r.unreadable_processes > 0 {
            let _ = writeln!(s, "  ({} other processes exited or could not be read)", r.unreadable_processes);
        }
    }
    s
}

fn opt<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref().map_or("-".to_owned(), |v| v.to_string())
}

fn pct(v: Option<f64>) -> String {
    v.map_or("-".to_owned(), |v| format!("{:.1}%", v * 100.0))
}

/// Writes one line per item, as `line` words it: the lists under a heading line.
fn lines<T>(s: &mut String, items: &[T], line: fn(&T) -> String) {
    for item in items {
        let _ = writeln!(s, "{}", line(item));
    }
}

/// One of the process's busiest threads, under the process's line.
fn thread_line(t: &ThreadFacts) -> String {
    let ThreadFacts { tid, comm, run_ms, wait_ms, .. } = t;
    format!(
        "    thread {tid} ({comm}): run {run_ms:.1} ms, wait {wait_ms:.1} ms ({}), migrations {}, CPU {}",
        opt(&t.wait_fraction),
        opt(&t.migrations),
        opt(&t.cpu)
    )
}

/// One of the host's top CPU consumers, under `top CPU consumers:`.
fn consumer_line(c: &Consumer) -> String {
    let Consumer { pid, comm, cpus, .. } = c;
    format!(
        "    {pid:>7} {comm:<16} {cpus:.2} CPUs  cgroup {}  CPUs {}{}",
        opt(&c.cgroup),
        opt(&c.allowed),
        if c.overlaps { "" } else { " (not ours)" }
    )
}

fn measurements(s: &mut String, m: &Measurements) {
    let c = &m.cpus;
    let _ = writeln!(s, "Measurements:");
    let _ = writeln!(
        s,
        "  CPUs: online {}, allowed {} ({}), cotenant limit {} → {} threads, bound by {}{} (cgroup {})",
        opt(&c.online),
        opt(&c.allowed),
        opt(&c.allowed_count),
        opt(&c.limit),
        opt(&c.threads),
        opt(&c.binding),
        c.binding_cgroup.as_ref().map_or(String::new(), |g| format!(" of {g}")),
        opt(&c.cgroup_version),
    );
    let h = &m.host;
    let _ = writeln!(
        s,
        "  host: busy CPUs {}, runnable {} ({} per CPU), PSI some {} full {} (avg10 {})",
        opt(&h.busy_cpus),
        opt(&h.runnable),
        opt(&h.runnable_per_cpu),
        pct(h.psi_some),
        pct(h.psi_full),
        h.psi_some_avg10.map_or("-".to_owned(), |a| format!("{a:.2}%")),
    );
    if let Some(p) = &m.process {
        let _ = writeln!(
            s,
            "  process: {} threads ({} busy), {:.2} CPUs used, run-queue wait {:.1} ms / run {:.1} ms = {}, \
             migrations {}/s, switches {}/s voluntary {}/s involuntary, ran on {}",
            p.threads,
            p.busy_threads,
            p.cpus_used,
            p.wait_ms,
            p.run_ms,
            opt(&p.wait_fraction),
            opt(&p.migrations_per_s),
            opt(&p.voluntary_switches_per_s),
            opt(&p.involuntary_switches_per_s),
            if p.ran_on.is_empty() { "-" } else { &p.ran_on },
        );
        lines(s, &p.top_threads, thread_line);
    }
    for g in &m.cgroups {
        let _ = writeln!(
            s,
            "  cgroup {}: weight {}{}, quota {} CPUs; sample: {} of {} periods throttled ({}), {} ms; since creation: \
             {} of {} ({}), {} ms; pressure {}",
            g.cgroup,
            opt(&g.weight),
            if g.idle == Some(true) { " (idle)" } else { "" },
            opt(&g.quota_cpus),
            opt(&g.throttled),
            opt(&g.periods),
            pct(g.throttled_ratio),
            opt(&g.throttled_ms),
            opt(&g.throttled_total),
            opt(&g.periods_total),
            pct(g.throttled_ratio_total),
            opt(&g.throttled_ms_total),
            pct(g.pressure_some),
        );
    }
    if !m.top_consumers.is_empty() {
        let _ = writeln!(s, "  top CPU consumers:");
        lines(s, &m.top_consumers, consumer_line);
    }
    if let Some(n) = &m.numa {
        let mem: Vec<String> = n
            .bytes_per_node
            .iter()
            .map(|(k, v)| format!("node {k}: {:.1} MiB", *v as f64 / 1048576.0))
            .collect();
        let _ = writeln!(
            s,
            "  NUMA: {} node(s), ran on nodes {:?}, memory {}, remote {}",
            n.nodes,
            n.local_nodes,
            if mem.is_empty() { "-".into() } else { mem.join(", ") },
            pct(n.remote_fraction)
        );
    }
}
