//! [`read_current`] and [`read_scheduling`]: a cgroup directory's version, current quota,
//! period and burst, idle flag and weight, read from its control files through a [`ControlDir`].

use super::{CpuMax, Error, Scheduling, Version, IDLE, V1_BURST, V1_PERIOD, V1_QUOTA, V2_BURST, V2_MAX};
use crate::cgroupfs::ControlDir;
use cotenant::internal::procfs::cgroupfs;
use std::io;

/// Reads a control file; `Ok(None)` when it does not exist.
pub(super) fn read_file(dir: &ControlDir, name: &str) -> Result<Option<String>, Error> {
    match dir.read(name) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::Access(e)),
    }
}

/// Parses the text of a control file.
fn parse_file<T>(
    dir: &ControlDir,
    name: &str,
    text: &str,
    parse: impl FnOnce(&str) -> Result<T, cotenant::internal::procfs::ParseError>,
) -> Result<T, Error> {
    parse(text).map_err(|e| Error::Read { file: dir.path().join(name), why: e.to_string() })
}

/// Reads a file that must exist, and parses it.
fn read_parsed<T>(
    dir: &ControlDir,
    name: &str,
    parse: impl FnOnce(&str) -> Result<T, cotenant::internal::procfs::ParseError>,
) -> Result<T, Error> {
    let text = read_file(dir, name)?.ok_or_else(|| Error::NoSuchCgroup(dir.path().to_owned()))?;
    parse_file(dir, name, &text, parse)
}

/// Reads a burst file, if the kernel has one.
fn read_burst(dir: &ControlDir, name: &'static str) -> Result<Option<u64>, Error> {
    read_number(dir, name)
}

/// Reads the current settings of a cgroup directory.
pub fn read_current(dir: &ControlDir) -> Result<CpuMax, Error> {
    if let Some(text) = read_file(dir, V2_MAX)? {
        let (quota_us, period_us) = parse_file(dir, V2_MAX, &text, parse_cpu_max_fields)?;
        Ok(CpuMax { version: Version::V2, quota_us, period_us, burst_us: read_burst(dir, V2_BURST)? })
    } else if let Some(quota) = read_file(dir, V1_QUOTA)? {
        Ok(CpuMax {
            version: Version::V1,
            period_us: read_parsed(dir, V1_PERIOD, cgroupfs::parse_cfs_period)?,
            quota_us: parse_file(dir, V1_QUOTA, &quota, cgroupfs::parse_cfs_quota)?,
            burst_us: read_burst(dir, V1_BURST)?,
        })
    } else {
        Err(Error::NoCpuFiles(dir.path().to_owned()))
    }
}

/// Reads whether the cgroup is idle (`cpu.idle`) and its weight (`cpu.shares` v1, `cpu.weight`
/// v2); either is `None` when its file does not exist.
pub fn read_scheduling(dir: &ControlDir, version: Version) -> Result<Scheduling, Error> {
    let idle = read_number(dir, IDLE)?.map(|v| v != 0);
    let weight = read_number(dir, version.weight_file())?;
    Ok(Scheduling { version, idle, weight })
}

/// Reads a file holding one number, if it exists.
fn read_number(dir: &ControlDir, name: &'static str) -> Result<Option<u64>, Error> {
    match read_file(dir, name)? {
        None => Ok(None),
        Some(text) => parse_file(dir, name, &text, |t| cgroupfs::parse_number(name, t)).map(Some),
    }
}

/// `cpu.max` as (quota, period): unlike [`cgroupfs::parse_cpu_max`], keeps the period of `max`.
fn parse_cpu_max_fields(text: &str) -> Result<(Option<u64>, u64), cotenant::internal::procfs::ParseError> {
    let quota = cgroupfs::parse_cpu_max(text)?;
    // Valid, so two fields and a non-zero period.
    let period = text.split_ascii_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    Ok((quota.map(|q| q.quota_us), period))
}
