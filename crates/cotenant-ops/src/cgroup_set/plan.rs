//! [`plan`] and [`plan_scheduling`] (pure): the writes that take the current settings to the
//! desired ones, none when everything matches, in an order the kernel accepts at every step.

use super::{
    CpuMax, Desired, DesiredScheduling, Scheduling, Version, Write, IDLE, V1_PERIOD, V1_QUOTA, V2_MAX,
};

/// The writes that take `current` to `desired`: none when everything matches (seed 001
/// §IV-A2), otherwise one per differing file.
///
/// v2: `cpu.max` (quota and period together), `cpu.max.burst`. v1: `cpu.cfs_period_us`,
/// `cpu.cfs_quota_us`, `cpu.cfs_burst_us`. The kernel checks each write against the values
/// in place at that moment, so the order matters:
///
/// - the burst goes last, unless the current burst exceeds the new quota (the quota write
///   would be refused): then first. Either way burst ≤ quota holds at every step, given
///   burst ≤ quota before and after.
/// - v1: the period goes before the quota, unless the period shrinks: then after. The quota
///   per period in between is then never above both the old and the new one (v1 refuses a
///   child cgroup more CPUs than its parent).
///
/// A burst in `desired` assumes the burst file exists ([`desired`](super::desired) checks it).
pub fn plan(current: &CpuMax, desired: &Desired) -> Vec<Write> {
    let mut core = Vec::new();
    let quota_differs = current.quota_us != desired.quota_us;
    let period_differs = current.period_us != desired.period_us;
    match current.version {
        Version::V2 => {
            if quota_differs || period_differs {
                core.push(Write {
                    file: V2_MAX,
                    old: v2_max_text(current.quota_us, current.period_us),
                    new: v2_max_text(desired.quota_us, desired.period_us),
                });
            }
        }
        Version::V1 => {
            let period = period_differs.then(|| Write {
                file: V1_PERIOD,
                old: current.period_us.to_string(),
                new: desired.period_us.to_string(),
            });
            let quota = quota_differs.then(|| Write {
                file: V1_QUOTA,
                old: v1_quota_text(current.quota_us),
                new: v1_quota_text(desired.quota_us),
            });
            if desired.period_us < current.period_us {
                core.extend(quota.into_iter().chain(period));
            } else {
                core.extend(period.into_iter().chain(quota));
            }
        }
    }
    let burst = desired.burst_us.filter(|&b| current.burst_us != Some(b)).map(|b| Write {
        file: current.version.burst_file(),
        old: current.burst_us.map_or_else(String::new, |o| o.to_string()),
        new: b.to_string(),
    });
    let Some(burst) = burst else { return core };
    let old_burst = current.burst_us.unwrap_or(0);
    let quota_write_sees_big_burst = quota_differs && desired.quota_us.is_some_and(|q| old_burst > q);
    if quota_write_sees_big_burst {
        core.insert(0, burst);
    } else {
        core.push(burst);
    }
    core
}

/// The writes that take `current` idle and weight settings to `desired`: none when they match.
///
/// `cpu.idle` goes first: the kernel refuses a weight for an idle cgroup, so a cgroup leaving
/// idle must leave before its weight is written. Leaving idle, the kernel also puts the weight
/// back to its default (`sched_group_set_idle` sets `NICE_0_LOAD`): the weight's old value is
/// then that default, and a requested weight is written even when it equals it, so that the
/// result never rests on that kernel detail. Entering idle needs no weight write
/// ([`check`](super::check) refuses `--idle` with `--weight`).
pub fn plan_scheduling(current: &Scheduling, desired: &DesiredScheduling) -> Vec<Write> {
    let mut out = Vec::new();
    let mut weight_now = current.weight;
    let mut leaves_idle = false;
    if let Some(idle) = desired.idle.filter(|&i| current.idle != Some(i)) {
        out.push(Write { file: IDLE, old: idle_text(current.idle), new: idle_text(Some(idle)) });
        if !idle && current.idle == Some(true) {
            leaves_idle = true;
            weight_now = Some(current.version.default_weight_value());
        }
    }
    if let Some(w) = desired.weight.filter(|&w| leaves_idle || weight_now != Some(w)) {
        out.push(Write {
            file: current.version.weight_file(),
            old: weight_now.map_or_else(String::new, |v| v.to_string()),
            new: w.to_string(),
        });
    }
    out
}

/// `cpu.idle`'s text: `1` or `0` (empty when the file does not exist).
fn idle_text(idle: Option<bool>) -> String {
    idle.map_or_else(String::new, |i| String::from(if i { "1" } else { "0" }))
}

fn v2_max_text(quota_us: Option<u64>, period_us: u64) -> String {
    format!("{} {period_us}", quota_us.map_or_else(|| "max".to_owned(), |q| q.to_string()))
}

fn v1_quota_text(quota_us: Option<u64>) -> String {
    quota_us.map_or_else(|| "-1".to_owned(), |q| q.to_string())
}
