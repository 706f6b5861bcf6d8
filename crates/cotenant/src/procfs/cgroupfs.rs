//! The cgroup CPU controller files: quota, period, burst and weight, in both versions.
//!
//! | version | quota and period | burst | weight |
//! |---|---|---|---|
//! | v1 | `cpu.cfs_quota_us` (`-1` = none), `cpu.cfs_period_us` | `cpu.cfs_burst_us` | `cpu.shares` (default 1024) |
//! | v2 | `cpu.max` = `"max 100000"` or `"50000 100000"` | `cpu.max.burst` | `cpu.weight` (default 100) |
//!
//! All times are in microseconds.

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
    }
}
