//! How many threads a pool whose tasks wait needs (issue 9, seed 002 "Little's Law Applied to
//! Thread Pools"). Pure arithmetic with its working shown, shared by `cotenant size` and, later,
//! the elastic pool.
//!
//! - **Utilisation formula**: threads = Ncpu × U_target × (1 + W_wait / W_compute). A thread
//!   that computes for C and waits for W keeps a CPU busy C / (C + W) of the time, so filling
//!   U_target of Ncpu CPUs takes Ncpu × U_target × (C + W) / C of them. On a shared host Ncpu is
//!   the CPU count cotenant measures (`cpus`), not the host's.
//! - **Little's law**: L = λ × W: at λ requests per second each in the system for W seconds,
//!   λ × W are in the system on average, and each needs a thread.
//!
//! Both give an exact value; the recommendation rounds it to the nearest whole thread (at least
//! one). Seed 002's examples: 8 CPUs, 80 %, 50 ms waiting and 5 ms computing give 70.4, so 70;
//! 500 requests/s of 50 ms give 25.

use std::fmt;

/// A pool size and how it was reached.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Sizing {
    /// The formula's value before rounding.
    pub exact: f64,
    /// The recommended number of threads: `exact` rounded to the nearest integer, at least 1.
    pub threads: u64,
    /// The arithmetic, one line, for people.
    pub arithmetic: String,
}

/// Why a size cannot be computed: the argument and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct InvalidSizing(pub String);

impl fmt::Display for InvalidSizing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvalidSizing {}

fn positive(name: &str, value: f64) -> Result<f64, InvalidSizing> {
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(InvalidSizing(format!("{name} must be a positive number, got {value}")))
    }
}

fn recommend(exact: f64) -> Result<u64, InvalidSizing> {
    // Far beyond any pool a host can run; also keeps the conversion exact.
    const MOST: f64 = 1e12;
    if !exact.is_finite() || exact > MOST {
        return Err(InvalidSizing(format!(
            "the size comes out at {exact:e} threads: check the inputs' units"
        )));
    }
    Ok((exact.round() as u64).max(1))
}

/// Formats a number without trailing zeros (`0.8`, `70.4`, `8`).
fn num(value: f64) -> String {
    let text = format!("{value:.4}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    text.to_owned()
}

/// The utilisation formula: `cpus` × `utilization` × (1 + `wait_s` / `compute_s`).
/// `utilization` is a fraction in (0, 1]; `wait_s` may be 0 (CPU-bound work: about one thread
/// per CPU); `compute_s` must be positive.
pub fn by_utilization(
    cpus: f64,
    utilization: f64,
    wait_s: f64,
    compute_s: f64,
) -> Result<Sizing, InvalidSizing> {
    let cpus = positive("cpus", cpus)?;
    if !(utilization.is_finite() && utilization > 0.0 && utilization <= 1.0) {
        return Err(InvalidSizing(format!(
            "utilization must be a fraction above 0 and at most 1 (0.8 for 80 %), got {utilization}"
        )));
    }
    if !(wait_s.is_finite() && wait_s >= 0.0) {
        return Err(InvalidSizing(format!("wait must be zero or more, got {wait_s}")));
    }
    let compute_s = positive("compute", compute_s)?;
    let ratio = wait_s / compute_s;
    let exact = cpus * utilization * (1.0 + ratio);
    let threads = recommend(exact)?;
    Ok(Sizing {
        exact,
        threads,
        arithmetic: format!(
            "{} CPUs × {} utilization × (1 + {} ms wait / {} ms compute) = {} × {} × {} = {} → {threads} threads",
            num(cpus),
            num(utilization),
            num(wait_s * 1e3),
            num(compute_s * 1e3),
            num(cpus),
            num(utilization),
            num(1.0 + ratio),
            num(exact),
        ),
    })
}

/// Little's law: `rate` requests per second × `latency_s` seconds each.
pub fn by_littles_law(rate: f64, latency_s: f64) -> Result<Sizing, InvalidSizing> {
    let rate = positive("rate", rate)?;
    let latency_s = positive("latency", latency_s)?;
    let exact = rate * latency_s;
    let threads = recommend(exact)?;
    Ok(Sizing {
        exact,
        threads,
        arithmetic: format!(
            "L = λ × W = {} requests/s × {} ms = {} → {threads} threads",
            num(rate),
            num(latency_s * 1e3),
            num(exact)
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seeds_two_examples() {
        let formula = by_utilization(8.0, 0.8, 0.050, 0.005).unwrap();
        assert!((formula.exact - 70.4).abs() < 1e-9);
        assert_eq!(formula.threads, 70);
        assert_eq!(
            formula.arithmetic,
            "8 CPUs × 0.8 utilization × (1 + 50 ms wait / 5 ms compute) = 8 × 0.8 × 11 = 70.4 → 70 threads"
        );
        let little = by_littles_law(500.0, 0.050).unwrap();
        assert_eq!(little.threads, 25);
        assert_eq!(little.arithmetic, "L = λ × W = 500 requests/s × 50 ms = 25 → 25 threads");
    }

    #[test]
    fn cpu_bound_work_gets_about_one_thread_per_cpu_and_never_zero() {
        assert_eq!(by_utilization(8.0, 1.0, 0.0, 0.005).unwrap().threads, 8);
        assert_eq!(by_utilization(0.5, 0.5, 0.0, 1.0).unwrap().threads, 1, "0.25 rounds up to the minimum");
        assert_eq!(by_littles_law(1.0, 0.001).unwrap().threads, 1);
    }

    #[test]
    fn bad_inputs_name_the_argument() {
        let err = |r: Result<Sizing, InvalidSizing>| r.unwrap_err().0;
        assert!(err(by_utilization(0.0, 0.8, 0.05, 0.005)).starts_with("cpus must be"));
        assert!(err(by_utilization(8.0, 80.0, 0.05, 0.005)).starts_with("utilization must be a fraction"));
        assert!(err(by_utilization(8.0, 0.0, 0.05, 0.005)).starts_with("utilization"));
        assert!(err(by_utilization(8.0, f64::NAN, 0.05, 0.005)).starts_with("utilization"));
        assert!(err(by_utilization(8.0, 0.8, -1.0, 0.005)).starts_with("wait must be"));
        assert!(err(by_utilization(8.0, 0.8, 0.05, 0.0)).starts_with("compute must be"));
        assert!(err(by_utilization(8.0, 0.8, 1e300, 1e-300)).contains("units"));
        assert!(err(by_littles_law(-5.0, 0.05)).starts_with("rate must be"));
        assert!(err(by_littles_law(5.0, f64::INFINITY)).starts_with("latency must be"));
    }
}
