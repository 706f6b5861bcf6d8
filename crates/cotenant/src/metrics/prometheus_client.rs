//! With the `prometheus-client` feature: a [`Registry`] is a
//! [`prometheus_client::collector::Collector`], so a program that serves a
//! `prometheus_client::registry::Registry` exports cotenant's families with its own, read at
//! every scrape:
//!
//! ```
//! let pool = cotenant::Pool::builder().policy(cotenant::Policy::fixed(1)).host_tokens_off().build().unwrap();
//! let cotenant_metrics = cotenant::metrics::Registry::new();
//! cotenant_metrics.register("api", &pool).unwrap();
//! let mut registry = prometheus_client::registry::Registry::default();
//! registry.register_collector(Box::new(cotenant_metrics.clone()));
//! let mut text = String::new();
//! prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
//! assert!(text.contains("cotenant_pool_completed_total{pool=\"api\"} 0"));
//! ```
//!
//! The families are those of [`Registry::render`], written by that library's encoder (the
//! OpenMetrics text): a counter's `# TYPE` line names it without its `_total`, as OpenMetrics
//! wants, and floats are written its way (`1e-6` for `0.000001`).

use std::fmt;

use ::prometheus_client::collector::Collector;
use ::prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use ::prometheus_client::metrics::MetricType;

use super::exposition::{Family, Kind, Value};
use super::histogram::{Histogram, BOUNDS};
use super::Registry;

impl Collector for Registry {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        for family in self.families() {
            encode_family(&mut encoder, &family)?;
        }
        Ok(())
    }
}

/// One family: its descriptor, then each sample under its labels.
fn encode_family(encoder: &mut DescriptorEncoder, family: &Family) -> Result<(), fmt::Error> {
    let (name, metric_type) = match family.kind {
        // The encoder adds `_total` to a counter's samples itself.
        Kind::Counter => (family.name.strip_suffix("_total").unwrap_or(family.name), MetricType::Counter),
        Kind::Gauge => (family.name, MetricType::Gauge),
        Kind::Histogram => (family.name, MetricType::Histogram),
    };
    let mut metric = encoder.encode_descriptor(name, family.help, None, metric_type)?;
    for sample in &family.samples {
        let labels: Vec<(&str, &str)> =
            sample.labels.iter().map(|(key, value)| (*key, value.as_str())).collect();
        let mut one = metric.encode_family(&labels)?;
        match (family.kind, &sample.value) {
            (_, Value::Histogram(histogram)) => {
                let buckets = buckets(histogram);
                let count = buckets.iter().map(|(_, n)| n).sum();
                one.encode_histogram::<NoLabelSet>(histogram.sum_ns as f64 / 1e9, count, &buckets, None)?;
            }
            (Kind::Counter, Value::Count(n)) => one.encode_counter::<NoLabelSet, u64, u64>(n, None)?,
            (Kind::Counter, value) => one.encode_counter::<NoLabelSet, f64, u64>(&value.as_f64(), None)?,
            (_, Value::Count(n)) => one.encode_gauge(n)?,
            (_, value) => one.encode_gauge(&value.as_f64())?,
        }
    }
    Ok(())
}

/// A histogram's buckets as the encoder takes them: upper bound in seconds and the count of
/// that bucket alone (it adds them up), the last one unbounded.
fn buckets(histogram: &Histogram) -> Vec<(f64, u64)> {
    (0..=BOUNDS)
        .map(|i| {
            let bound = Histogram::upper_bound_ns(i).map_or(f64::INFINITY, |ns| ns as f64 / 1e9);
            (bound, histogram.buckets[i])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::metrics::Registry;
    use crate::{Policy, Pool};

    #[test]
    fn a_prometheus_client_registry_exports_the_same_families() {
        let registry = Registry::new().without_cpu_limit();
        let pools: Vec<Pool> = (0..3)
            .map(|_| {
                Pool::builder()
                    .policy(Policy::fixed(1))
                    .threads(1)
                    .host_tokens_off()
                    .task_histograms(true)
                    .build()
                    .unwrap()
            })
            .collect();
        for (i, pool) in pools.iter().enumerate() {
            registry.register(&format!("p{i}"), pool).unwrap();
            for _ in 0..=i {
                pool.spawn(|| ()).join().unwrap();
            }
            pool.shutdown(); // the counters are final
        }
        let mut client = ::prometheus_client::registry::Registry::default();
        client.register_collector(Box::new(registry.clone()));
        let mut text = String::new();
        ::prometheus_client::encoding::text::encode(&mut text, &client).unwrap();

        assert_eq!(text.matches("# TYPE cotenant_pool_completed counter\n").count(), 1, "{text}");
        assert_eq!(text.matches("# TYPE cotenant_pool_threads gauge\n").count(), 1, "{text}");
        for i in 0..3 {
            let line = format!("cotenant_pool_completed_total{{pool=\"p{i}\"}} {}\n", i + 1);
            assert!(text.contains(&line), "{line:?} in\n{text}");
        }
        assert!(text.contains("cotenant_pool_host_tokens{pool=\"p0\",state=\"off\"} 1\n"), "{text}");
        if let Some(histogram) = pools[2].metrics().run_time {
            assert_eq!(
                text.matches("# TYPE cotenant_pool_run_time_seconds histogram\n").count(),
                1,
                "{text}"
            );
            let count =
                format!("cotenant_pool_run_time_seconds_count{{pool=\"p2\"}} {}\n", histogram.count());
            assert!(text.contains(&count), "{count:?} in\n{text}");
            // The encoder puts `le` before the family's labels.
            let inf = text.lines().find(|line| {
                line.starts_with("cotenant_pool_run_time_seconds_bucket{")
                    && line.contains("le=\"+Inf\"")
                    && line.contains("pool=\"p2\"")
            });
            assert!(inf.is_some_and(|line| line.ends_with(" 3")), "{inf:?} in\n{text}");
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
