//! A pool's [`Metrics`] as JSON, for `cotenant_pool_metrics_json`. [`Metrics`] itself has no
//! serde form (its `alerts` have none), so its top-level fields are listed here under their
//! Rust names, which makes the JSON read like the library's documentation; the budget and
//! elastic parts are written by their own serde form (the library's `serde` feature), so they
//! cannot drift from the library. The task histograms get a form of their own, made for C:
//! each bucket says its bound, so a reader needs no knowledge of the bucket layout.

use cotenant::metrics::Histogram;
use cotenant::Metrics;
use serde_json::{json, Value};

/// `metrics` as one line of JSON: the counters and gauges as numbers, `host_tokens` as its
/// word, `alerts` as the names of the raised ones, `budget` and `elastic` as objects or null,
/// `queue_wait` and `run_time` as `histogram_json` objects or null (histograms off).
pub(crate) fn to_json(metrics: &Metrics) -> String {
    let alerts: Vec<&'static str> = metrics.alerts.iter().map(|alert| alert.as_str()).collect();
    json!({
        "threads": metrics.threads,
        "target": metrics.target,
        "running": metrics.running,
        "queued": metrics.queued,
        "queue_capacity": metrics.queue_capacity,
        "completed": metrics.completed,
        "caller_ran": metrics.caller_ran,
        "rejected": metrics.rejected,
        "panicked": metrics.panicked,
        "future_polls": metrics.future_polls,
        "future_wakeups": metrics.future_wakeups,
        "decisions": metrics.decisions,
        "sample_errors": metrics.sample_errors,
        "borrows": metrics.borrows,
        "token_timeouts": metrics.token_timeouts,
        "token_takes": metrics.token_takes,
        "token_errors": metrics.token_errors,
        "token_fallback_periods": metrics.token_fallback_periods,
        "token_takebacks": metrics.token_takebacks,
        "degradations": metrics.degradations,
        "host_tokens": metrics.host_tokens.as_str(),
        "alerts": alerts,
        // `None` is null in serde's form. Structs of integers cannot fail to serialize, but
        // this runs behind a C call: a failure becomes null rather than a panic.
        "budget": serde_json::to_value(metrics.budget).unwrap_or(Value::Null),
        "elastic": serde_json::to_value(metrics.elastic).unwrap_or(Value::Null),
        "queue_wait": metrics.queue_wait.as_ref().map_or(Value::Null, histogram_json),
        "run_time": metrics.run_time.as_ref().map_or(Value::Null, histogram_json),
    })
    .to_string()
}

/// A histogram as `{"count": N, "sum_ns": S, "buckets": [[le_ns, n], ...]}`: `count` values
/// recorded, their sum in nanoseconds, and one pair per bucket, in order, of its upper bound in
/// nanoseconds (1000, 2000, 4000, ... then null for the last bucket, which has no bound) and
/// the values at or below that bound. The counts are cumulative, as Prometheus's buckets are,
/// so that a C reader finds a quantile by scanning for the first pair whose count reaches
/// `q * count`, without adding anything up; the last pair's count is `count`.
///
/// Not the library's serde form of [`Histogram`] (per-bucket counts, bounds implied): that
/// one would make every reader know the layout of the buckets.
fn histogram_json(histogram: &Histogram) -> Value {
    let buckets: Vec<Value> = histogram
        .cumulative()
        .iter()
        .enumerate()
        .map(|(i, &count)| {
            let bound = Histogram::upper_bound_ns(i).map_or(Value::Null, Value::from);
            Value::Array(vec![bound, Value::from(count)])
        })
        .collect();
    json!({
        "count": histogram.count(),
        "sum_ns": histogram.sum_ns,
        "buckets": buckets,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cotenant::metrics::histogram::BOUNDS;
    use cotenant::metrics::{BudgetMetrics, ElasticMetrics};

    /// Every field of a default snapshot is there, under its Rust name, with the right type.
    #[test]
    fn a_snapshot_becomes_an_object_of_its_fields() {
        let value: Value = serde_json::from_str(&to_json(&Metrics::default())).unwrap();
        let object = value.as_object().unwrap();
        assert_eq!(object.len(), 26, "{value}");
        assert_eq!(value["threads"], 0);
        assert_eq!(value["host_tokens"], "off");
        assert_eq!(value["alerts"], json!([]));
        assert!(value["budget"].is_null() && value["elastic"].is_null(), "{value}");
        assert!(value["queue_wait"].is_null() && value["run_time"].is_null(), "{value}");
    }

    /// The budget and elastic parts keep the field names they had when this file wrote them by
    /// hand: C programs read them by those names.
    #[test]
    fn budget_and_elastic_are_objects_under_their_rust_names() {
        let mut budget = BudgetMetrics::default();
        budget.quota_ns = 5_000_000;
        budget.throttled_periods = 3;
        let mut elastic = ElasticMetrics::default();
        elastic.max = 8;
        elastic.task_wait_ns = 42;
        let mut metrics = Metrics::default();
        metrics.budget = Some(budget);
        metrics.elastic = Some(elastic);
        let value: Value = serde_json::from_str(&to_json(&metrics)).unwrap();
        assert_eq!(
            value["budget"],
            json!({
                "quota_ns": 5_000_000,
                "period_ns": 0,
                "periods": 0,
                "throttled_periods": 3,
                "short_periods": 0,
                "charged_ns": 0,
            })
        );
        assert_eq!(
            value["elastic"],
            json!({
                "min": 0,
                "max": 8,
                "live": 0,
                "started": 0,
                "retired": 0,
                "cpus": 0,
                "task_cpu_ns": 0,
                "task_wait_ns": 42,
            })
        );
    }

    /// A histogram's pairs name their bounds and count cumulatively, ending at the count.
    #[test]
    fn a_histogram_is_its_count_sum_and_cumulative_buckets_with_bounds() {
        let mut queue_wait = Histogram::default();
        for ns in [500, 1_500, 1_800, 3_000_000] {
            queue_wait.record(ns);
        }
        let mut metrics = Metrics::default();
        metrics.queue_wait = Some(queue_wait);
        metrics.run_time = Some(Histogram::default());
        let value: Value = serde_json::from_str(&to_json(&metrics)).unwrap();

        let wait = &value["queue_wait"];
        assert_eq!(wait.as_object().unwrap().len(), 3, "{wait}");
        assert_eq!(wait["count"], 4);
        assert_eq!(wait["sum_ns"], 3_003_800);
        let buckets = wait["buckets"].as_array().unwrap();
        assert_eq!(buckets.len(), BOUNDS + 1);
        assert_eq!(buckets[0], json!([1_000, 1]), "500 ns is at or below 1 µs");
        assert_eq!(buckets[1], json!([2_000, 3]), "and 1.5 µs and 1.8 µs at or below 2 µs");
        assert_eq!(buckets[11], json!([2_048_000, 3]));
        assert_eq!(buckets[12], json!([4_096_000, 4]), "3 ms is at or below 4.096 ms");
        assert_eq!(buckets[BOUNDS - 1], json!([8_388_608_000u64, 4]), "the last bound");
        assert_eq!(buckets[BOUNDS], json!([null, 4]), "no bound: everything, the count");

        let run = &value["run_time"];
        assert_eq!(run["count"], 0);
        assert_eq!(run["sum_ns"], 0);
        let buckets = run["buckets"].as_array().unwrap();
        assert_eq!(buckets.len(), BOUNDS + 1);
        assert!(buckets.iter().all(|pair| pair[1] == 0), "{run}");
    }
}
