//! Command-line value parsers shared by every subcommand: one duration parser (with the
//! rules each flag needs), fractions and bounded numbers. Each error names the value and what
//! was expected, for clap to print after the flag's name.

use std::time::Duration;

/// What a number without a unit means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BareNumber {
    /// Seconds (`--duration 3`).
    Seconds,
    /// Only `0` may go without a unit (any other unit would be a guess).
    ZeroOnly,
    /// Every duration needs a unit.
    Refused,
}

/// The units a duration may carry, longest suffix first so that `ms` is not read as `s`.
const UNITS: [(&str, f64); 5] = [("ns", 1e-9), ("us", 1e-6), ("µs", 1e-6), ("ms", 1e-3), ("s", 1.0)];

/// The one duration parser: `45ms`, `1.5s`, `200us` (or `µs`), `500ns`; a bare number as
/// `bare` says; the result within `[min, max]` (the error says so with `range`, e.g.
/// "between 100ms and 60s").
pub fn parse_duration_within(
    text: &str,
    bare: BareNumber,
    min: Duration,
    max: Duration,
    range: &str,
) -> Result<Duration, String> {
    let t = text.trim();
    let (number, scale) =
        match UNITS.iter().find_map(|(unit, scale)| t.strip_suffix(unit).map(|n| (n, *scale))) {
            Some(found) => found,
            None if bare == BareNumber::Seconds => (t, 1.0),
            None if bare == BareNumber::ZeroOnly && t == "0" => (t, 1.0),
            None => return Err(format!("{text:?} needs a unit: ns, us, ms or s (e.g. 45ms, 1.5s)")),
        };
    let v: f64 =
        number.trim().parse().map_err(|_| format!("{text:?} is not a duration (e.g. 45ms, 1.5s, 500us)"))?;
    let secs = v * scale;
    if !secs.is_finite() || secs < min.as_secs_f64() || secs > max.as_secs_f64() {
        return Err(format!("the duration must be {range}, got {text:?}"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A sampling duration (`doctor --duration`, `size --duration`): `2s`, `1.5s` or `500ms`, a
/// bare number is seconds, between 100ms and 60s.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    parse_duration_within(
        text,
        BareNumber::Seconds,
        Duration::from_millis(100),
        Duration::from_secs(60),
        "between 100ms and 60s",
    )
}

/// A time with a unit (`45ms`, `1.5s`, `200us`, `200µs`, `500ns`); zero allowed, at most a day.
pub fn parse_time(text: &str) -> Result<Duration, String> {
    parse_duration_within(
        text,
        BareNumber::Refused,
        Duration::ZERO,
        Duration::from_secs(86_400),
        "between 0 and a day",
    )
}

/// A time with a unit in whole microseconds (rounded), as cgroup files take it; `0` needs no
/// unit.
pub fn parse_micros(text: &str) -> Result<u64, String> {
    // u64::MAX µs is far beyond what a Duration from f64 seconds holds exactly; a century is
    // beyond any cgroup time anyway.
    let century = Duration::from_secs(100 * 365 * 86_400);
    let d = parse_duration_within(
        text,
        BareNumber::ZeroOnly,
        Duration::ZERO,
        century,
        "between 0 and a century",
    )?;
    Ok((d.as_secs_f64() * 1e6).round() as u64)
}

/// A fraction in (0, 1].
pub fn parse_fraction(text: &str) -> Result<f64, String> {
    let v: f64 = text.trim().parse().map_err(|_| format!("{text:?} is not a number (e.g. 0.8)"))?;
    if v.is_finite() && v > 0.0 && v <= 1.0 {
        Ok(v)
    } else {
        Err(format!("must be above 0 and at most 1 (0.8 for 80 %), got {text:?}"))
    }
}

/// A finite number in `(0, max]`; `what` says what it is, in the error.
pub fn parse_bounded(text: &str, max: f64, what: &str) -> Result<f64, String> {
    let v: f64 = text.parse().map_err(|_| format!("{text:?} is not a number"))?;
    if v.is_finite() && v > 0.0 && v <= max {
        Ok(v)
    } else {
        Err(format!("{what} must be more than 0 and at most {max}, got {v}"))
    }
}

/// A load, as a fraction of the fair share (up to 10).
pub fn parse_load(text: &str) -> Result<f64, String> {
    parse_bounded(text, 10.0, "the load (a fraction of the fair share)")
}

/// A positive number up to 60,000.
pub fn parse_positive(text: &str) -> Result<f64, String> {
    parse_bounded(text, 60_000.0, "the value")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_durations_take_bare_seconds_and_stay_in_range() {
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_duration("60s"), Ok(Duration::from_secs(60)));
        for bad in ["", "x", "0", "99ms", "61s", "-1s", "NaN", "infs", "2m", "s", "1.5 h"] {
            let e = parse_duration(bad).unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{bad}: {e}");
        }
    }

    #[test]
    fn times_need_a_unit() {
        assert_eq!(parse_time("45ms"), Ok(Duration::from_millis(45)));
        assert_eq!(parse_time("200µs"), Ok(Duration::from_micros(200)));
        assert_eq!(parse_time("500ns"), Ok(Duration::from_nanos(500)));
        assert_eq!(parse_time("0s"), Ok(Duration::ZERO));
        assert!(parse_time("50").unwrap_err().contains("needs a unit"));
        assert!(parse_time("0").unwrap_err().contains("needs a unit"));
        assert!(parse_time("2d").is_err());
        assert!(parse_time("86401s").unwrap_err().contains("a day"));
    }

    #[test]
    fn micros_round_and_allow_a_bare_zero() {
        assert_eq!(parse_micros("100ms"), Ok(100_000));
        assert_eq!(parse_micros("0.1s"), Ok(100_000));
        assert_eq!(parse_micros("50000us"), Ok(50_000));
        assert_eq!(parse_micros("50000µs"), Ok(50_000));
        assert_eq!(parse_micros("1.5ms"), Ok(1_500));
        assert_eq!(parse_micros("0"), Ok(0));
        assert!(parse_micros("5").unwrap_err().contains("needs a unit"));
        for bad in ["100", "ms", "-1ms", "x s", "NaNs", "1e400s"] {
            assert!(parse_micros(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn numbers_are_bounded() {
        assert_eq!(parse_fraction("0.8"), Ok(0.8));
        assert!(parse_fraction("0").is_err() && parse_fraction("1.1").is_err());
        assert_eq!(parse_load("1.5"), Ok(1.5));
        assert!(parse_load("11").unwrap_err().contains("the load"));
        assert!(parse_positive("-1").is_err() && parse_positive("inf").is_err());
    }
}
