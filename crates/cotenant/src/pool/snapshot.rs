//! Reading a pool's [`Shared`] state into [`Metrics`], and the health alerts' sliding window
//! fed from it (by `Pool::metrics` and, every `HEALTH_EVERY`, by the controller).

#[cfg(not(loom))]
use std::time::Duration;

#[cfg(not(loom))]
use super::worker;
use super::worker::WorkerStats;
use super::Shared;
use crate::metrics::histogram::Histogram;
use crate::metrics::Metrics;
#[cfg(not(loom))]
use crate::sync::lock;
use crate::sync::Ordering;

/// How often the controller adds a point to a pool's health window (`crate::health`).
#[cfg(not(loom))]
const HEALTH_EVERY: Duration = Duration::from_secs(1);

impl Shared {
    /// The pool's counters and gauges now (alerts not evaluated).
    pub(crate) fn snapshot(&self) -> Metrics {
        let shared = self;
        let sum = |f: fn(&WorkerStats) -> u64| shared.workers.iter().map(|w| f(w)).sum::<u64>();
        let (queue_wait, run_time) = shared.histograms_now();
        Metrics {
            threads: shared.workers.len(),
            target: shared.roster.target(),
            running: shared.running(),
            queued: shared.queue.len(),
            queue_capacity: shared.queue.capacity(),
            completed: sum(|w| w.completed.load(Ordering::Relaxed))
                + shared.caller_ran.load(Ordering::Relaxed),
            caller_ran: shared.caller_ran.load(Ordering::Relaxed),
            rejected: shared.rejected.load(Ordering::Relaxed),
            panicked: sum(|w| w.panicked.load(Ordering::Relaxed)),
            #[cfg(not(loom))]
            future_polls: shared.future_polls.load(std::sync::atomic::Ordering::Relaxed),
            #[cfg(not(loom))]
            future_wakeups: shared.future_wakeups.load(std::sync::atomic::Ordering::Relaxed),
            // The executor is not built under loom: no future is ever polled there.
            #[cfg(loom)]
            future_polls: 0,
            #[cfg(loom)]
            future_wakeups: 0,
            decisions: shared.decisions.load(Ordering::Relaxed),
            sample_errors: shared.sample_errors.load(Ordering::Relaxed),
            borrows: shared.borrows.load(Ordering::Relaxed),
            degradations: shared.degradations.load(std::sync::atomic::Ordering::Relaxed)
                + sum(|w| w.degradations.load(std::sync::atomic::Ordering::Relaxed)),
            #[cfg(not(loom))]
            token_timeouts: shared.host_tokens.as_ref().map_or(0, |t| t.timeouts.load(Ordering::Relaxed)),
            #[cfg(not(loom))]
            token_takes: shared.host_tokens.as_ref().map_or(0, |t| t.taken.load(Ordering::Relaxed)),
            #[cfg(not(loom))]
            token_errors: shared.host_tokens.as_ref().map_or(0, |t| t.errors.load(Ordering::Relaxed)),
            #[cfg(not(loom))]
            token_fallback_periods: shared
                .host_tokens
                .as_ref()
                .map_or(0, |t| t.fallback_periods.load(Ordering::Relaxed)),
            #[cfg(not(loom))]
            token_takebacks: shared.host_tokens.as_ref().map_or(0, |t| t.taken_back.load(Ordering::Relaxed)),
            #[cfg(not(loom))]
            host_tokens: match &shared.host_tokens {
                Some(tokens) if tokens.is_engaged() => crate::metrics::TokenState::Engaged,
                Some(_) => crate::metrics::TokenState::Alone,
                None => shared.tokens_state,
            },
            #[cfg(loom)]
            token_takebacks: 0,
            #[cfg(loom)]
            token_timeouts: 0,
            #[cfg(loom)]
            token_fallback_periods: 0,
            #[cfg(loom)]
            token_takes: 0,
            #[cfg(loom)]
            token_errors: 0,
            #[cfg(loom)]
            host_tokens: crate::metrics::TokenState::Off,
            #[cfg(not(loom))]
            budget: shared.budget.as_ref().map(|budget| crate::metrics::BudgetMetrics {
                quota_ns: budget.bandwidth.quota_ns(),
                period_ns: budget.bandwidth.period_ns(),
                periods: budget.periods(),
                throttled_periods: budget.bandwidth.throttled_periods(),
                short_periods: budget.bandwidth.short_periods(),
                charged_ns: budget.bandwidth.charged_ns(),
            }),
            #[cfg(loom)]
            budget: None,
            #[cfg(not(loom))]
            elastic: shared.elastic.as_ref().map(|elastic| {
                use std::sync::atomic::Ordering::Relaxed;
                crate::metrics::ElasticMetrics {
                    min: elastic.config.min as usize,
                    max: elastic.config.max as usize,
                    live: *lock(&shared.live),
                    started: elastic.started.load(Relaxed),
                    retired: elastic.retired.load(Relaxed),
                    cpus: elastic.cpus.load(Relaxed),
                    task_cpu_ns: elastic.compute_ns.load(Relaxed),
                    task_wait_ns: elastic.wait_ns.load(Relaxed),
                }
            }),
            #[cfg(loom)]
            elastic: None,
            queue_wait,
            run_time,
            alerts: crate::health::Alerts::default(),
        }
    }

    /// The queue-wait and run-time histograms of every task the pool ran: each worker's, and
    /// those of the tasks run by the threads that submitted them (`Full::CallerRuns`, a full
    /// queue under a scope). `None` when the pool does not time its tasks
    /// (`Builder::task_histograms`). Read histogram by histogram while tasks run: a snapshot
    /// in which a task may be counted in one and not yet in the other (`TaskClock`).
    fn histograms_now(&self) -> (Option<Histogram>, Option<Histogram>) {
        if !self.task_histograms {
            return (None, None);
        }
        let (mut queue_wait, mut run_time) = (Histogram::default(), Histogram::default());
        for worker in self.workers.iter() {
            worker.histograms.add_to(&mut queue_wait, &mut run_time);
        }
        self.caller_histograms.add_to(&mut queue_wait, &mut run_time);
        (Some(queue_wait), Some(run_time))
    }

    /// Adds `metrics` to the health window and logs each alert that changed, once.
    #[cfg(not(loom))]
    pub(crate) fn observe_health(&self, metrics: &Metrics) -> crate::health::Alerts {
        let now = self.epoch.elapsed();
        self.health_at_ns.store(u64::try_from(now.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
        let mut health = self.health.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        for transition in health.observe(now, metrics) {
            let alert = transition.alert.as_str();
            if transition.raised {
                tracing::warn!(
                    pool = %self.name,
                    alert,
                    advice = transition.alert.advice(),
                    %metrics,
                    "cotenant pool alert raised"
                );
            } else {
                tracing::info!(pool = %self.name, alert, %metrics, "cotenant pool alert cleared");
            }
        }
        health.alerts()
    }

    /// The controller's call each period: a health point at most every `HEALTH_EVERY`, so that
    /// alerts are logged even when nobody reads the metrics.
    #[cfg(not(loom))]
    pub(crate) fn health_tick(&self) {
        let now = worker::nanos_since(self.epoch);
        let last = self.health_at_ns.load(Ordering::Relaxed);
        if last == 0 || now.saturating_sub(last) >= HEALTH_EVERY.as_nanos() as u64 {
            let metrics = self.snapshot();
            self.observe_health(&metrics);
        }
    }
}

// In `pool/tests/` with the pool's other in-crate tests; declared here (a child of `pool`) so
// that it can reach the histograms of the tasks run by their submitters.
#[cfg(all(test, not(loom)))]
#[path = "tests/histograms.rs"]
mod histogram_tests;
