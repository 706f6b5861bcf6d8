//! With the `metrics` feature: [`Registry::record_to_metrics_facade`] writes the registry's
//! families into the [`metrics`](::metrics) facade, for a program whose exporter is a
//! `metrics` recorder (`metrics-exporter-prometheus`, say). The facade has no way to set a
//! histogram's buckets, so a histogram becomes counters, as Prometheus itself spells one:
//! `<name>_bucket{le="..."}` (cumulative, the last `le="+Inf"`) and `<name>_count`, and a
//! gauge `<name>_sum` in seconds. A counter of seconds (the CPU budget's charged time) is a
//! gauge there too, since the facade's counters hold integers. `absolute` never lowers a
//! counter in the usual recorders, so a pool name must not be reused for a new pool while
//! recording to the facade (docs/metrics.md).

use ::metrics::{counter, describe_counter, describe_gauge, gauge, Label};

use super::exposition::{Family, Kind, Value};
use super::histogram::{Histogram, BOUNDS};
use super::text::seconds;
use super::Registry;

impl Registry {
    /// Sets the registry's families in the `metrics` facade's recorder, read now: gauges with
    /// `gauge!(..).set`, counters with `counter!(..).absolute`, histograms as counters of
    /// their cumulative buckets (`docs/metrics.md`). Call it before each export (or on a
    /// timer): the facade keeps the values set last. A pool dropped since the last call keeps
    /// its last values in the recorder (the facade cannot remove a series).
    ///
    /// ```
    /// let pool = cotenant::Pool::builder().policy(cotenant::Policy::fixed(1)).host_tokens_off().build().unwrap();
    /// let registry = cotenant::metrics::Registry::new();
    /// registry.register("api", &pool).unwrap();
    /// registry.record_to_metrics_facade(); // into the recorder installed with metrics::set_global_recorder
    /// ```
    pub fn record_to_metrics_facade(&self) {
        for family in self.families() {
            record_family(&family);
        }
    }
}

/// One family's description and samples.
fn record_family(family: &Family) {
    match family.kind {
        Kind::Gauge => describe_gauge!(family.name, family.help),
        Kind::Counter => {
            if family.samples.iter().any(|s| matches!(s.value, Value::Count(_))) {
                describe_counter!(family.name, family.help);
            } else {
                describe_gauge!(family.name, family.help);
            }
        }
        Kind::Histogram => {
            describe_counter!(format!("{}_bucket", family.name), family.help);
            describe_counter!(format!("{}_count", family.name), family.help);
            describe_gauge!(format!("{}_sum", family.name), family.help);
        }
    }
    for sample in &family.samples {
        let labels: Vec<Label> =
            sample.labels.iter().map(|(key, value)| Label::new(*key, value.clone())).collect();
        match (family.kind, sample.value) {
            (_, Value::Histogram(histogram)) => record_histogram(family.name, labels, &histogram),
            (Kind::Counter, Value::Count(n)) => counter!(family.name, labels).absolute(n),
            (_, value) => gauge!(family.name, labels).set(value.as_f64()),
        }
    }
}

/// A histogram as counters of its cumulative buckets, its count, and a gauge of its sum.
fn record_histogram(name: &'static str, labels: Vec<Label>, histogram: &Histogram) {
    let cumulative = histogram.cumulative();
    let bucket = format!("{name}_bucket");
    for (i, count) in cumulative.iter().enumerate() {
        let le = match Histogram::upper_bound_ns(i) {
            Some(ns) if i < BOUNDS => seconds(ns),
            _ => "+Inf".to_owned(),
        };
        let mut with_le = labels.clone();
        with_le.push(Label::new("le", le));
        counter!(bucket.clone(), with_le).absolute(*count);
    }
    gauge!(format!("{name}_sum"), labels.clone()).set(histogram.sum_ns as f64 / 1e9);
    counter!(format!("{name}_count"), labels).absolute(cumulative[BOUNDS]);
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    use ::metrics::atomics::AtomicU64;
    use ::metrics::{Counter, Gauge, Key, KeyName, Metadata, Recorder, SharedString, Unit};

    use crate::metrics::Registry;
    use crate::{Policy, Pool};

    /// A recorder that keeps every counter and gauge by `name{labels}`: enough to read back
    /// what the registry set (counters as integers, gauges as the bits of a float).
    #[derive(Default)]
    struct Recorded {
        series: Mutex<BTreeMap<String, (&'static str, Arc<AtomicU64>)>>,
    }

    impl Recorded {
        fn cell(&self, kind: &'static str, key: &Key) -> Arc<AtomicU64> {
            let labels: Vec<String> =
                key.labels().map(|l| format!("{}=\"{}\"", l.key(), l.value())).collect();
            let series = format!("{}{{{}}}", key.name(), labels.join(","));
            let mut all = self.series.lock().unwrap();
            Arc::clone(&all.entry(series).or_insert_with(|| (kind, Arc::new(AtomicU64::new(0)))).1)
        }

        fn counter(&self, series: &str) -> Option<u64> {
            let all = self.series.lock().unwrap();
            let (kind, cell) = all.get(series)?;
            (*kind == "counter").then(|| cell.load(std::sync::atomic::Ordering::Relaxed))
        }

        fn gauge(&self, series: &str) -> Option<f64> {
            let all = self.series.lock().unwrap();
            let (kind, cell) = all.get(series)?;
            (*kind == "gauge").then(|| f64::from_bits(cell.load(std::sync::atomic::Ordering::Relaxed)))
        }
    }

    impl Recorder for Recorded {
        fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

        fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
            Counter::from_arc(self.cell("counter", key))
        }

        fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
            Gauge::from_arc(self.cell("gauge", key))
        }

        fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> ::metrics::Histogram {
            ::metrics::Histogram::noop()
        }
    }

    #[test]
    fn the_facade_gets_gauges_counters_and_histograms_as_bucket_counters() {
        let pool = Pool::builder()
            .policy(Policy::fixed(1))
            .threads(1)
            .host_tokens_off()
            .task_histograms(true)
            .build()
            .unwrap();
        for _ in 0..3 {
            pool.spawn(|| ()).join().unwrap();
        }
        pool.shutdown(); // the counters are final
        let registry = Registry::new().without_cpu_limit();
        registry.register("api", &pool).unwrap();
        let recorded = Recorded::default();
        ::metrics::with_local_recorder(&recorded, || registry.record_to_metrics_facade());

        assert_eq!(recorded.counter("cotenant_pool_completed_total{pool=\"api\"}"), Some(3));
        assert_eq!(recorded.gauge("cotenant_pool_threads{pool=\"api\"}"), Some(1.0));
        assert_eq!(recorded.gauge("cotenant_pool_host_tokens{pool=\"api\",state=\"off\"}"), Some(1.0));
        if let Some(histogram) = pool.metrics().queue_wait {
            let count = recorded.counter("cotenant_pool_queue_wait_seconds_count{pool=\"api\"}");
            assert_eq!(count, Some(histogram.count()));
            let inf = recorded.counter("cotenant_pool_queue_wait_seconds_bucket{pool=\"api\",le=\"+Inf\"}");
            assert_eq!(inf, Some(3));
            let first =
                recorded.counter("cotenant_pool_queue_wait_seconds_bucket{pool=\"api\",le=\"0.000001\"}");
            assert!(first.is_some_and(|n| n <= 3), "{first:?}");
            let sum = recorded.gauge("cotenant_pool_queue_wait_seconds_sum{pool=\"api\"}");
            assert!(sum.is_some_and(|s| s >= 0.0), "{sum:?}");
        }
    }
}
