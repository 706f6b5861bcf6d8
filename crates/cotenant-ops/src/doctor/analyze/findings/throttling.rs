//! `throttling`: a CPU quota of the process's cgroup or an ancestor ran out during the sample
//! (High), or in the past (Low).

use super::{ev, pct, Evidence, Finding, Severity};
use crate::doctor::analyze::{Context, Measurements, THROTTLE_RATIO_MIN};

pub(in crate::doctor::analyze) fn find_throttling(cx: &Context<'_>, m: &Measurements) -> Vec<Finding> {
    let leaf = m.cgroups.first().map(|c| c.cgroup.clone());
    let mut out = Vec::new();
    for c in &m.cgroups {
        let file = format!("{}/cpu.stat", c.dir);
        let quota = c.quota_cpus.map_or("none read".to_owned(), cotenant::cpus::cpus_word);
        let whose = match (&leaf, cx.pid) {
            (_, None) => format!("cgroup {}", c.cgroup),
            (Some(l), Some(_)) if *l == c.cgroup => format!("its own cgroup {}", c.cgroup),
            _ => format!("ancestor cgroup {}", c.cgroup),
        };
        let threads = m
            .cpus
            .threads
            .map_or(String::new(), |t| format!(" ({t} thread{})", if t == 1 { "" } else { "s" }));
        let totals = |e: &mut Vec<Evidence>| {
            e.push(ev(&file, "nr_periods since creation", c.periods_total.unwrap_or(0).to_string()));
            e.push(ev(&file, "nr_throttled since creation", c.throttled_total.unwrap_or(0).to_string()));
            e.push(ev(
                &file,
                "throttled time since creation",
                format!("{:.1} ms", c.throttled_ms_total.unwrap_or(0.0)),
            ));
            e.push(ev(
                &file,
                "throttled ratio since creation",
                c.throttled_ratio_total.map_or("-".into(), pct),
            ));
            e.push(ev(&c.dir, "CPU quota", quota.clone()));
        };
        let (Some(periods), Some(throttled), Some(ratio)) = (c.periods, c.throttled, c.throttled_ratio)
        else {
            continue;
        };
        if throttled > 0 && ratio >= THROTTLE_RATIO_MIN {
            let ms = c.throttled_ms.unwrap_or(0.0);
            let mut evidence = vec![
                ev(&file, "nr_periods during the sample", periods.to_string()),
                ev(&file, "nr_throttled during the sample", throttled.to_string()),
                ev(&file, "throttled time during the sample", format!("{ms:.1} ms in {:.2} s", cx.secs)),
                ev(&file, "throttled ratio during the sample", pct(ratio)),
            ];
            totals(&mut evidence);
            out.push(Finding {
                kind: "throttling",
                severity: Severity::High,
                title: format!(
                    "CPU quota throttling at {whose}: {throttled} of {periods} periods throttled ({}) during the sample",
                    pct(ratio)
                ),
                evidence,
                recommendation: format!(
                    "The quota of {whose} ({quota}) runs out before the end of its period and every thread \
                     below it stops until the next one: a request caught there waits up to a whole period. \
                     Size thread pools to the quota{threads} with `cotenant run` or cotenant::Pool (never more \
                     runnable threads than the quota pays for), raise the quota ({}), or allow short bursts \
                     (cpu.max.burst / cpu.cfs_burst_us).",
                    if c.dir.is_empty() { "cpu.max".into() } else { c.dir.clone() }
                ),
                commands: Vec::new(),
                score: ms,
            });
        } else if c.throttled_total.unwrap_or(0) > 0
            && c.throttled_ratio_total.is_some_and(|r| r >= THROTTLE_RATIO_MIN)
        {
            let mut evidence = vec![ev(&file, "nr_throttled during the sample", throttled.to_string())];
            totals(&mut evidence);
            out.push(Finding {
                kind: "throttling",
                severity: Severity::Low,
                title: format!(
                    "{whose} was throttled in the past ({} of periods since creation), not during the sample",
                    pct(c.throttled_ratio_total.unwrap_or(0.0))
                ),
                evidence,
                recommendation: format!(
                    "Throttling comes in bursts: run doctor again while the latency is bad. If it recurs, size \
                     pools to the quota ({quota}{threads}) or raise it."
                ),
                commands: Vec::new(),
                score: c.throttled_ms_total.unwrap_or(0.0),
            });
        }
    }
    out
}
