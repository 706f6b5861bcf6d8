//! The request: `--cpus` and `--period` parsed, and [`desired`], the request made concrete
//! against the current settings and checked against the kernel's rules.

use super::{
    parse_micros, CpuMax, Cpus, Desired, Error, Request, MAX_PERIOD_US, MIN_PERIOD_US, MIN_QUOTA_US,
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

/// Makes a request concrete: the quota from CPUs × period (the current period unless
/// `--period`), and the kernel's rules checked: quota ≥ 1 ms, burst ≤ quota (`--burst`'s, or
/// the current one when it stays), `--burst` only where a burst file exists. `dir` is only
/// for the messages.
pub fn desired(dir: &Path, current: &CpuMax, request: &Request) -> Result<Desired, Error> {
    let period_us = request.period_us.unwrap_or(current.period_us);
    let quota_us = match request.cpus {
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
