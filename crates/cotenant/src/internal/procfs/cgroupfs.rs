//! The cgroup CPU controller files: quota, period, burst and weight, usage and throttling, in
//! both versions.
//!
//! | version | quota and period | burst | weight |
//! |---|---|---|---|
//! | v1 | `cpu.cfs_quota_us` (`-1` = none), `cpu.cfs_period_us` | `cpu.cfs_burst_us` | `cpu.shares` (default 1024) |
//! | v2 | `cpu.max` = `"max 100000"` or `"50000 100000"` | `cpu.max.burst` | `cpu.weight` (default 100) |
//!
//! All these times are in microseconds. Usage and throttling come from `cpu.stat` (both
//! versions; the kernel's Documentation/scheduler/sched-bwc.rst for v1,
//! Documentation/admin-guide/cgroup-v2.rst for v2) and v1's `cpuacct.usage_percpu`; their
//! parsers return nanoseconds.

use super::{parse_u64, ParseError};

/// A CPU bandwidth limit: `quota_us` of CPU time per `period_us` of wall time, i.e.
/// `quota_us / period_us` CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    /// CPU time allowed per period, in µs.
    pub quota_us: u64,
    /// The period, in µs; never 0.
    pub period_us: u64,
}

impl Quota {
    /// The limit in CPUs, e.g. 1.5.
    pub fn cpus(&self) -> f64 {
        self.quota_us as f64 / self.period_us as f64
    }
}

/// Parses v2 `cpu.max`: `None` when the quota is `max` (unlimited).
pub fn parse_cpu_max(text: &str) -> Result<Option<Quota>, ParseError> {
    const F: &str = "cpu.max";
    let fields: Vec<&str> = text.split_ascii_whitespace().collect();
    let [quota, period] = fields[..] else {
        return Err(ParseError::new(F, "expected \"<quota|max> <period>\"", text));
    };
    let period_us = parse_period(F, period, text)?;
    if quota == "max" {
        return Ok(None);
    }
    let quota_us = parse_u64(F, "quota", quota).map_err(|e| ParseError::new(F, e.reason.clone(), text))?;
    Ok(Some(Quota { quota_us, period_us }))
}

/// Parses v1 `cpu.cfs_quota_us`: `None` for `-1` (unlimited).
pub fn parse_cfs_quota(text: &str) -> Result<Option<u64>, ParseError> {
    const F: &str = "cpu.cfs_quota_us";
    if text.trim() == "-1" {
        return Ok(None);
    }
    parse_u64(F, "quota (or -1)", text).map(Some)
}

/// Parses v1 `cpu.cfs_period_us`.
pub fn parse_cfs_period(text: &str) -> Result<u64, ParseError> {
    parse_period("cpu.cfs_period_us", text, text)
}

/// Parses a single non-negative number: `cpu.cfs_burst_us`, `cpu.max.burst`, `cpu.shares`,
/// `cpu.weight`. `format` names the file for the error.
pub fn parse_number(format: &'static str, text: &str) -> Result<u64, ParseError> {
    parse_u64(format, "value", text)
}

fn parse_period(format: &'static str, field: &str, text: &str) -> Result<u64, ParseError> {
    match parse_u64(format, "period", field) {
        Ok(0) => Err(ParseError::new(format, "period is 0", text)),
        Ok(p) => Ok(p),
        Err(e) => Err(ParseError::new(format, e.reason.clone(), text)),
    }
}

/// Parses v1 `cpuacct.usage_percpu`, e.g. `"335787734143 418572099613 \n"`: the CPU time the
/// cgroup used on each CPU since it was created, in ns. The kernel prints one number per possible
/// CPU in id order, so the index is the CPU id. At least one number is required.
pub fn parse_usage_percpu(text: &str) -> Result<Vec<u64>, ParseError> {
    const F: &str = "cpuacct.usage_percpu";
    let usage = text
        .split_ascii_whitespace()
        .enumerate()
        .map(|(cpu, field)| {
            let in_cpu = |e: ParseError| ParseError::new(F, format!("CPU {cpu}: {}", e.reason), field);
            parse_u64(F, "usage", field).map_err(in_cpu)
        })
        .collect::<Result<Vec<u64>, ParseError>>()?;
    if usage.is_empty() {
        return Err(ParseError::new(F, "no CPU's usage", text));
    }
    Ok(usage)
}

// The `cpu.stat` keys cotenant reads. v1 prints the first three; v2 prints the first two (when
// the cpu controller is enabled) and the last two.
const NR_PERIODS: &str = "nr_periods";
const NR_THROTTLED: &str = "nr_throttled";
const THROTTLED_TIME: &str = "throttled_time";
const THROTTLED_USEC: &str = "throttled_usec";
const USAGE_USEC: &str = "usage_usec";

const NS_PER_US: u64 = 1000;

/// A cgroup's CPU usage and bandwidth throttling, cumulative since the cgroup was created, from
/// `cpu.stat`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuStat {
    /// Enforcement periods that have elapsed (`nr_periods`).
    pub nr_periods: u64,
    /// Periods in which the cgroup ran out of quota and was throttled (`nr_throttled`).
    pub nr_throttled: u64,
    /// Total time the cgroup's threads were throttled, in ns (v1 `throttled_time`, v2
    /// `throttled_usec` × 1000, saturating).
    pub throttled_ns: u64,
    /// Total CPU time used by the cgroup, in ns (v2 `usage_usec` × 1000, saturating); `None` in
    /// v1, whose `cpu.stat` does not have it (`cpuacct.usage` does).
    pub usage_ns: Option<u64>,
}

/// Parses `cpu.stat` of either version: a `key value` line per statistic. Lines with other keys
/// (`user_usec`, `nr_bursts`, `wait_sum`, ...) are ignored, their values unchecked. A missing key
/// counts as 0 (`usage_ns` as `None`): in v2 without the cpu controller enabled, only the usage
/// keys are present.
pub fn parse_cpu_stat(text: &str) -> Result<CpuStat, ParseError> {
    const F: &str = "cpu.stat";
    let mut stat = CpuStat::default();
    for line in text.lines() {
        let trimmed = line.trim();
        let (key, value) = trimmed.split_once(|c: char| c.is_ascii_whitespace()).unwrap_or((trimmed, ""));
        let number = || parse_u64(F, key, value).map_err(|e| ParseError::new(F, e.reason, line));
        match key {
            NR_PERIODS => stat.nr_periods = number()?,
            NR_THROTTLED => stat.nr_throttled = number()?,
            THROTTLED_TIME => stat.throttled_ns = number()?,
            THROTTLED_USEC => stat.throttled_ns = number()?.saturating_mul(NS_PER_US),
            USAGE_USEC => stat.usage_ns = Some(number()?.saturating_mul(NS_PER_US)),
            _ => {}
        }
    }
    Ok(stat)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn cpu_max() {
        assert_eq!(parse_cpu_max("max 100000\n").unwrap(), None);
        let q = parse_cpu_max("150000 100000\n").unwrap().unwrap();
        assert_eq!((q.quota_us, q.period_us), (150000, 100000));
        assert_eq!(q.cpus(), 1.5);
    }

    #[test]
    fn malformed_cpu_max_names_the_text() {
        for bad in ["banana 100000", "max", "50000 0", "50000 100000 7", "-5 100000", ""] {
            let err = parse_cpu_max(bad).unwrap_err();
            assert_eq!(err.format(), "cpu.max");
            assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
        }
    }

    #[test]
    fn cfs_files() {
        assert_eq!(parse_cfs_quota("-1\n").unwrap(), None);
        assert_eq!(parse_cfs_quota("50000\n").unwrap(), Some(50000));
        assert!(parse_cfs_quota("-2").is_err());
        assert!(parse_cfs_quota("12abc").unwrap_err().to_string().contains("12abc"));
        assert_eq!(parse_cfs_period("100000\n").unwrap(), 100000);
        assert!(parse_cfs_period("0\n").is_err());
        assert_eq!(parse_number("cpu.shares", "1024\n").unwrap(), 1024);
    }

    #[test]
    fn usage_percpu() {
        let usage = parse_usage_percpu("335787734143 418572099613 \n").unwrap();
        assert_eq!(usage, vec![335787734143, 418572099613]);
        assert_eq!(parse_usage_percpu("0\n").unwrap(), vec![0]);
        let err = parse_usage_percpu("1 2 x3 4\n").unwrap_err();
        assert_eq!(err.excerpt(), "x3");
        assert!(err.to_string().contains("CPU 2"), "{err}");
        assert!(parse_usage_percpu(" \n").is_err());
    }

    #[test]
    fn cpu_stat_v1() {
        let zero = "nr_periods 0\nnr_throttled 0\nthrottled_time 0\nnr_bursts 0\nburst_time 0\n";
        assert_eq!(parse_cpu_stat(zero).unwrap(), CpuStat::default());
        let text = "nr_periods 120\nnr_throttled 7\nthrottled_time 123456789\nwait_sum 5\n";
        let s = parse_cpu_stat(text).unwrap();
        assert_eq!(s, CpuStat { nr_periods: 120, nr_throttled: 7, throttled_ns: 123456789, usage_ns: None });
    }

    #[test]
    fn cpu_stat_v2() {
        let text = "usage_usec 1003429\nuser_usec 586133\nsystem_usec 417296\n\
                    core_sched.force_idle_usec 0\nnr_periods 120\nnr_throttled 7\nthrottled_usec 35000\n\
                    nr_bursts 0\nburst_usec 0\n";
        let s = parse_cpu_stat(text).unwrap();
        let expected = CpuStat {
            nr_periods: 120,
            nr_throttled: 7,
            throttled_ns: 35_000_000,
            usage_ns: Some(1_003_429_000),
        };
        assert_eq!(s, expected);
        // Without the cpu controller enabled, only the usage keys.
        let s = parse_cpu_stat("usage_usec 5\nuser_usec 3\nsystem_usec 2\n").unwrap();
        assert_eq!(s, CpuStat { usage_ns: Some(5000), ..CpuStat::default() });
        let text = format!("usage_usec {}\nthrottled_usec {}\n", u64::MAX, u64::MAX / 999);
        let huge = parse_cpu_stat(&text).unwrap();
        assert_eq!((huge.usage_ns, huge.throttled_ns), (Some(u64::MAX), u64::MAX));
    }

    #[test]
    fn malformed_cpu_stat_names_the_line() {
        for bad in ["nr_periods x", "nr_throttled", "throttled_usec 1 2", "usage_usec -1"] {
            let err = parse_cpu_stat(&format!("user_usec 1\n{bad}\nnr_bursts 0\n")).unwrap_err();
            assert_eq!(err.format(), "cpu.stat");
            assert_eq!(err.excerpt(), bad, "{err}");
        }
        assert!(parse_cpu_stat("user_usec banana\nwait_sum\n\n").is_ok(), "unknown keys are not read");
    }

    proptest! {
        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let s = String::from_utf8_lossy(&bytes);
            let _ = parse_cpu_max(&s);
            let _ = parse_cfs_quota(&s);
            let _ = parse_cfs_period(&s);
            let _ = parse_number("cpu.weight", &s);
        }

        #[test]
        fn well_formed_cpu_max_round_trips(q in 1u64..u64::MAX, p in 1u64..u64::MAX) {
            let got = parse_cpu_max(&format!("{q} {p}\n")).unwrap().unwrap();
            prop_assert_eq!((got.quota_us, got.period_us), (q, p));
        }

        #[test]
        fn usage_parsers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let s = String::from_utf8_lossy(&bytes);
            let _ = parse_usage_percpu(&s);
            let _ = parse_cpu_stat(&s);
        }

        #[test]
        fn cpu_stat_never_panics_on_line_shaped_input(
            key in "nr_periods|nr_throttled|throttled_time|throttled_usec|usage_usec|nr_bursts",
            value in "[0-9 \\-a-z]{0,30}",
        ) {
            let _ = parse_cpu_stat(&format!("{key} {value}\n"));
        }

        #[test]
        fn usage_percpu_round_trips(usage in proptest::collection::vec(any::<u64>(), 1..300)) {
            let text: String = usage.iter().map(|u| format!("{u} ")).collect();
            prop_assert_eq!(parse_usage_percpu(&format!("{text}\n")).unwrap(), usage);
        }
    }
}
