//! Unit tests of `lab spin`: the shape, the increase, the medians, and a short real run per strategy.

use std::time::Duration;

use super::aggregate::median;
use super::plan::boosted_for;
use super::*;

#[test]
fn the_shape_follows_the_seeds_ratios() {
    assert_eq!(shape(2), (1, 4, 1), "2 CPUs: 4 sessions on 1 CPU, one boosted");
    assert_eq!(shape(1), (1, 4, 1));
    assert_eq!(shape(8), (2, 8, 1));
    assert_eq!(shape(40), (10, 40, 4), "the seed: 40 sessions on 10 cores, 4 boosted");
    assert_eq!(boosted_for(80), 8);
}

#[test]
fn the_increase_is_relative_and_nan_without_a_baseline() {
    assert!((increase(1.0, 22.68) - 21.68).abs() < 1e-9);
    assert!((increase(2.0, 2.14) - 0.07).abs() < 1e-9);
    assert!(increase(0.0, 1.0).is_nan());
    assert!(increase(f64::NAN, 1.0).is_nan());
}

#[test]
fn medians_skip_missing_values() {
    assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
    assert_eq!(median(vec![4.0, 1.0, f64::NAN, 2.0, 3.0]), 2.5);
    assert!(median(vec![]).is_nan());
}

/// A short real run with one session per CPU and no boost: every strategy completes
/// transactions and stops (no assertion on timing).
#[test]
fn every_strategy_runs_and_stops() {
    let cpus = allowed_cpus().unwrap();
    for strategy in Strategy::ALL {
        let spec = RunSpec {
            strategy,
            sessions: 2,
            cpus: cpus.clone(),
            boosted: 0,
            boost: Boost::Never,
            duration: Duration::from_millis(100),
            round_trip: Duration::ZERO,
        };
        let result = run_once(&spec).unwrap();
        assert!(result.latencies.transactions > 0, "{}: no transaction", strategy.name());
        assert_eq!(result.latencies.total.len(), result.latencies.transactions);
    }
}
