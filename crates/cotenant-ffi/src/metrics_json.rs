//! A pool's [`Metrics`] as JSON, for `cotenant_pool_metrics_json`. The library has a Prometheus
//! writer but no JSON one (it does not depend on serde), so the fields are listed here under
//! their Rust names, which makes the JSON read like the library's documentation.

use cotenant::metrics::{BudgetMetrics, ElasticMetrics};
use cotenant::Metrics;
use serde_json::{json, Value};

/// `metrics` as one line of JSON: the counters and gauges as numbers, `host_tokens` as its
/// word, `alerts` as the names of the raised ones, `budget` and `elastic` as objects or null.
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
        "budget": metrics.budget.as_ref().map(budget),
        "elastic": metrics.elastic.as_ref().map(elastic),
    })
    .to_string()
}

/// The CPU budget's counters (times in nanoseconds, as in the library).
fn budget(budget: &BudgetMetrics) -> Value {
    json!({
        "quota_ns": budget.quota_ns,
        "period_ns": budget.period_ns,
        "periods": budget.periods,
        "throttled_periods": budget.throttled_periods,
        "short_periods": budget.short_periods,
        "charged_ns": budget.charged_ns,
    })
}

/// An elastic pool's sizes and estimates (times in nanoseconds, as in the library).
fn elastic(elastic: &ElasticMetrics) -> Value {
    json!({
        "min": elastic.min,
        "max": elastic.max,
        "live": elastic.live,
        "started": elastic.started,
        "retired": elastic.retired,
        "cpus": elastic.cpus,
        "task_cpu_ns": elastic.task_cpu_ns,
        "task_wait_ns": elastic.task_wait_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every field of a default snapshot is there, under its Rust name, with the right type.
    #[test]
    fn a_snapshot_becomes_an_object_of_its_fields() {
        let value: Value = serde_json::from_str(&to_json(&Metrics::default())).unwrap();
        let object = value.as_object().unwrap();
        assert_eq!(object.len(), 22, "{value}");
        assert_eq!(value["threads"], 0);
        assert_eq!(value["host_tokens"], "off");
        assert_eq!(value["alerts"], json!([]));
        assert!(value["budget"].is_null() && value["elastic"].is_null(), "{value}");
    }
}
