//! CPU weights in both cgroup versions, pure: `--weight` parsed, and a cgroup v2 weight
//! converted to v1 `cpu.shares` (and back) the way systemd converts `CPUWeight=` and
//! `CPUShares=`, so that `cotenant cgroup set --weight N` and a unit's `CPUWeight=N` write the
//! same number on the same host.

/// The smallest cgroup v2 weight (`CGROUP_WEIGHT_MIN`).
pub const WEIGHT_MIN: u64 = 1;
/// The default cgroup v2 weight (`CGROUP_WEIGHT_DFL`): a cgroup never given one.
pub const WEIGHT_DEFAULT: u64 = 100;
/// The largest cgroup v2 weight (`CGROUP_WEIGHT_MAX`).
pub const WEIGHT_MAX: u64 = 10_000;
/// The smallest `cpu.shares` the kernel keeps (`MIN_SHARES`).
pub const SHARES_MIN: u64 = 2;
/// The default `cpu.shares`: a nice-0 task's weight.
pub const SHARES_DEFAULT: u64 = 1024;
/// The largest `cpu.shares` the kernel keeps (`MAX_SHARES`, 2^18).
pub const SHARES_MAX: u64 = 262_144;

/// A cgroup v2 weight as v1 `cpu.shares`, by systemd's `cgroup_cpu_weight_to_shares`
/// (src/core/cgroup.c): `clamp(weight × 1024 / 100, 2, 262144)` in integer arithmetic, so the
/// division **truncates**: 100 → 1024, 10 → 102, 15 → 153, 1 → 10, 10000 → 102400.
///
/// The kernel's own mapping of a v2 `cpu.weight` to its internal shares,
/// `sched_weight_from_cgroup` (kernel/sched/core.c), rounds to the nearest instead
/// (`DIV_ROUND_CLOSEST_ULL`: 15 → 154); the two differ by one share at most, a difference of
/// under 1 % in CPU time. systemd's is used because it is what operators' units already write
/// on v1 hosts. Never panics: an out-of-range weight saturates and is clamped.
pub fn weight_to_shares(weight: u64) -> u64 {
    (weight.saturating_mul(SHARES_DEFAULT) / WEIGHT_DEFAULT).clamp(SHARES_MIN, SHARES_MAX)
}

/// v1 `cpu.shares` as a cgroup v2 weight, by systemd's `cgroup_cpu_shares_to_weight`:
/// `clamp(shares × 100 / 1024, 1, 10000)`, truncating: 1024 → 100, 2048 → 200, 102 → 9,
/// 2 → 1. The doctor uses it to suggest a `--weight` against a v1 neighbour.
pub fn shares_to_weight(shares: u64) -> u64 {
    (shares.saturating_mul(WEIGHT_DEFAULT) / SHARES_DEFAULT).clamp(WEIGHT_MIN, WEIGHT_MAX)
}

/// Parses `--weight`: a whole number from 1 to 10000 (cgroup v2 units; the default is 100).
pub fn parse_weight(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(w) if (WEIGHT_MIN..=WEIGHT_MAX).contains(&w) => Ok(w),
        _ => Err(format!(
            "expected a CPU weight, a whole number from {WEIGHT_MIN} to {WEIGHT_MAX} (cgroup v2 units; the \
             default is {WEIGHT_DEFAULT}, 10 is a tenth of it), got {text:?}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weight_to_shares_truncates_as_systemd_does() {
        let cases = [(100, 1024), (10, 102), (15, 153), (1, 10), (50, 512), (200, 2048), (10_000, 102_400)];
        for (weight, shares) in cases {
            assert_eq!(weight_to_shares(weight), shares, "weight {weight}");
        }
        // Outside the v2 range: clamped to what the kernel keeps, never a panic.
        assert_eq!(weight_to_shares(0), SHARES_MIN);
        assert_eq!(weight_to_shares(u64::MAX), SHARES_MAX);
    }

    #[test]
    fn shares_to_weight_truncates_as_systemd_does() {
        let cases = [(1024, 100), (2048, 200), (102, 9), (2, 1), (262_144, 10_000), (10, 1)];
        for (shares, weight) in cases {
            assert_eq!(shares_to_weight(shares), weight, "shares {shares}");
        }
        assert_eq!(shares_to_weight(0), WEIGHT_MIN);
        assert_eq!(shares_to_weight(u64::MAX), WEIGHT_MAX);
    }

    #[test]
    fn every_weight_maps_into_the_kernels_shares_range() {
        for w in WEIGHT_MIN..=WEIGHT_MAX {
            let s = weight_to_shares(w);
            assert!((SHARES_MIN..=SHARES_MAX).contains(&s), "{w} → {s}");
            // Truncating twice loses at most one unit of weight.
            assert!(w - shares_to_weight(s) <= 1, "{w} → {s} → {}", shares_to_weight(s));
        }
    }

    #[test]
    fn parse_weight_takes_the_v2_range_only() {
        assert_eq!(parse_weight("1"), Ok(1));
        assert_eq!(parse_weight("100"), Ok(100));
        assert_eq!(parse_weight(" 10000 "), Ok(10_000));
        for bad in ["0", "10001", "-1", "1.5", "", "idle", "1e3"] {
            let e = parse_weight(bad).unwrap_err();
            assert!(e.contains("from 1 to 10000") && e.contains(&format!("{bad:?}")), "{bad}: {e}");
        }
    }
}
