//! The request: `--cpus` and `--period` parsed; [`check`], the rules a request must follow on
//! its own; and [`desired`] / [`desired_scheduling`], the request made concrete against the
//! current settings and checked against the kernel's rules.

use super::{
    parse_micros, weight_to_shares, CpuMax, Cpus, Desired, DesiredScheduling, Error, Request, Scheduling,
    Version, IDLE, MAX_PERIOD_US, MIN_PERIOD_US, MIN_QUOTA_US, WEIGHT_MAX, WEIGHT_MIN,
};
use std::path::Path;

/// Parses `--cpus`: `max`, or a positive finite number.
pub fn parse_cpus(text: &str) -> Result<Cpus, String> {
    let t = text.trim();
    if t == "max" {
        return Ok(Cpus::Max);
    }
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(Cpus::Limit(v)),
        _ => Err(format!("expected a positive number of CPUs (e.g. 1.5) or `max`, got {text:?}")),
    }
}

/// Parses `--period`: a duration between the kernel's 1 ms and 1 s.
pub fn parse_period(text: &str) -> Result<u64, String> {
    let us = parse_micros(text)?;
    if !(MIN_PERIOD_US..=MAX_PERIOD_US).contains(&us) {
        return Err(format!("the period must be between 1ms and 1s (the kernel's range), got {text}"));
    }
    Ok(us)
}

/// The rules a request must follow whatever the cgroup holds, checked before anything is read:
/// something to set; `--period` and `--burst` only with `--cpus`; a weight in 1..=10000; and
/// not `--idle` with `--weight`. The kernel gives an idle cgroup the smallest weight
/// (`WEIGHT_IDLEPRIO`) and refuses a weight write while it is idle (`sched_group_set_shares`
/// returns `EINVAL`), so the pair could only half succeed: it is refused as a usage error.
pub fn check(request: &Request) -> Result<(), Error> {
    if request.is_empty() {
        return Err(Error::NothingRequested);
    }
    if request.cpus.is_none() {
        if request.period_us.is_some() {
            return Err(Error::NeedsCpus("--period"));
        }
        if request.burst_us.is_some() {
            return Err(Error::NeedsCpus("--burst"));
        }
    }
    if let Some(w) = request.weight {
        if request.idle == Some(true) {
            return Err(Error::IdleWithWeight);
        }
        if !(WEIGHT_MIN..=WEIGHT_MAX).contains(&w) {
            return Err(Error::WeightOutOfRange(w));
        }
    }
    Ok(())
}

/// Makes a request concrete: the quota from CPUs × period (the current period unless
/// `--period`), and the kernel's rules checked: quota ≥ 1 ms, burst ≤ quota (`--burst`'s, or
/// the current one when it stays), `--burst` only where a burst file exists. `dir` is only
/// for the messages.
///
/// Without `--cpus` the quota and period stay as they are (no write), and `--period` or
/// `--burst` is an error.
pub fn desired(dir: &Path, current: &CpuMax, request: &Request) -> Result<Desired, Error> {
    let Some(cpus) = request.cpus else {
        if request.period_us.is_some() {
            return Err(Error::NeedsCpus("--period"));
        }
        if request.burst_us.is_some() {
            return Err(Error::NeedsCpus("--burst"));
        }
        return Ok(Desired { quota_us: current.quota_us, period_us: current.period_us, burst_us: None });
    };
    let period_us = request.period_us.unwrap_or(current.period_us);
    let quota_us = match cpus {
        Cpus::Max => None,
        Cpus::Limit(cpus) => {
            let quota = (cpus * period_us as f64).round();
            if quota < MIN_QUOTA_US as f64 {
                return Err(Error::QuotaTooSmall { cpus, period_us });
            }
            // Saturates for absurd values; the kernel refuses those (EINVAL, explained).
            Some(quota as u64)
        }
    };
    let burst_file = dir.join(current.version.burst_file());
    if request.burst_us.is_some() && current.burst_us.is_none() {
        return Err(Error::NoBurstFile(burst_file));
    }
    if let Some(quota_us) = quota_us {
        match (request.burst_us, current.burst_us) {
            (Some(burst_us), _) if burst_us > quota_us => {
                return Err(Error::BurstAboveQuota { burst_us, quota_us })
            }
            (None, Some(burst_us)) if burst_us > quota_us => {
                return Err(Error::CurrentBurstAboveQuota { file: burst_file, burst_us, quota_us })
            }
            _ => {}
        }
    }
    Ok(Desired { quota_us, period_us, burst_us: request.burst_us })
}

/// Makes `--idle`/`--no-idle` and `--weight` concrete for the cgroup: the weight in its
/// version's file units (v1 `cpu.shares` by [`weight_to_shares`], v2 `cpu.weight` as given),
/// after the kernel's rules: `--idle` needs `cpu.idle` (Linux 5.15+); `--weight` needs a weight
/// file, and on a cgroup that is idle now also `--no-idle` (the kernel refuses a weight for an
/// idle cgroup). `--no-idle` where the kernel has no `cpu.idle` asks for what already holds
/// (no cgroup can be idle there): nothing to write. `dir` is only for the messages.
pub fn desired_scheduling(
    dir: &Path,
    current: &Scheduling,
    request: &Request,
) -> Result<DesiredScheduling, Error> {
    let idle = match (request.idle, current.idle) {
        (Some(true), None) => return Err(Error::NoIdleFile(dir.join(IDLE))),
        (Some(false), None) => None,
        (asked, _) => asked,
    };
    let weight = match request.weight {
        None => None,
        Some(_) if current.weight.is_none() => {
            return Err(Error::NoWeightFile(dir.join(current.version.weight_file())))
        }
        Some(_) if current.idle == Some(true) && idle != Some(false) => {
            return Err(Error::WeightWhileIdle(dir.join(IDLE)))
        }
        Some(w) => Some(match current.version {
            Version::V1 => weight_to_shares(w),
            Version::V2 => w,
        }),
    };
    Ok(DesiredScheduling { idle, weight })
}
