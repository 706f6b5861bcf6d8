//! `cpu-pressure` and `host-overcommitted`: runnable tasks waiting for CPUs, by PSI and by the
//! run queue per CPU.

use super::{ev, pct, Finding, Severity};
use crate::doctor::analyze::{Context, Measurements, OVERCOMMIT_RUNNABLE_PER_CPU, PSI_SOME_MIN};

pub(in crate::doctor::analyze) fn find_pressure(cx: &Context<'_>, m: &Measurements) -> Option<Finding> {
    let cg = m.cgroups.first().filter(|c| c.pressure_some.is_some());
    let (file, some) = match cg {
        Some(c) => (format!("{}/cpu.pressure", c.dir), c.pressure_some?),
        None => ("/proc/pressure/cpu".to_owned(), m.host.psi_some?),
    };
    if some < PSI_SOME_MIN {
        return None;
    }
    let mut evidence =
        vec![ev(&file, "some: share of the sample a runnable task waited for a CPU", pct(some))];
    if let (Some(h), true) = (m.host.psi_some, cg.is_some()) {
        evidence.push(ev("/proc/pressure/cpu", "host some during the sample", pct(h)));
    }
    if let Some(a) = m.host.psi_some_avg10 {
        evidence.push(ev("/proc/pressure/cpu", "host some avg10", format!("{a:.2}%")));
    }
    if let Some(f) = m.host.psi_full {
        evidence.push(ev("/proc/pressure/cpu", "host full during the sample", pct(f)));
    }
    Some(Finding {
        kind: "cpu-pressure",
        severity: Severity::Medium,
        title: format!("CPU pressure: runnable tasks waited for a CPU {} of the sample", pct(some)),
        evidence,
        recommendation: if cx.pid.is_some() {
            "Tasks wait for CPUs: see the contention, weight and cpuset findings for who and what to change."
                .into()
        } else {
            "The host has more runnable work than CPUs: run `cotenant doctor --pid PID` on the latency-sensitive \
             service to see whether it is the one waiting, and give batch work a low weight or SCHED_IDLE."
                .into()
        },
        commands: Vec::new(),
        score: some,
    })
}

pub(in crate::doctor::analyze) fn find_overcommit(m: &Measurements) -> Option<Finding> {
    let r = m.host.runnable_per_cpu?;
    if r < OVERCOMMIT_RUNNABLE_PER_CPU {
        return None;
    }
    let mut evidence = vec![
        ev(
            "/proc/stat",
            "runnable threads (procs_running, mean of the two snapshots)",
            format!("{:.1}", m.host.runnable.unwrap_or(0.0)),
        ),
        ev("/sys/devices/system/cpu/online", "online CPUs", m.cpus.online.clone().unwrap_or_default()),
        ev("/proc/stat", "runnable threads per online CPU", format!("{r:.2}")),
    ];
    if let Some(b) = m.host.busy_cpus {
        evidence.push(ev(
            "/proc/stat",
            "busy CPUs during the sample (of the allowed ones)",
            format!("{b:.2}"),
        ));
    }
    Some(Finding {
        kind: "host-overcommitted",
        severity: Severity::Medium,
        title: format!("The host is overcommitted: {r:.1} runnable threads per CPU"),
        evidence,
        recommendation:
            "More threads want to run than there are CPUs: size pools to the CPUs they really have \
             (`cotenant run`, cotenant::Pool) and move batch work to SCHED_IDLE or a low weight."
                .into(),
        commands: Vec::new(),
        score: r,
    })
}
