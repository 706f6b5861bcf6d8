//! Pool health alerts (the section "Measuring Thread Pool Health" of the contention-cliff
//! chapter, "Thread Pool Sizing and the Contention Cliff"): pure, fed with timestamped
//! [`Metrics`] snapshots, so that every alert is tested on recorded sequences.
//!
//! The chapter's four alerts, over a sliding window (`HealthConfig::window`, default 60 s):
//!
//! | alert | raised when |
//! |---|---|
//! | [`Alert::QueueOverload`] | tasks queued > 2 × the pool size (its target) in the latest snapshot |
//! | [`Alert::AtCapacity`] | running / size > 0.95 in every snapshot of the last 60 s, and the snapshots span 60 s |
//! | [`Alert::Rejecting`] | a task was rejected or run by its submitter (a full queue) within the window |
//! | [`Alert::CompletionFalling`] | completions per second in the newer half of the window < 80 % of the older half's, while tasks wait |
//!
//! The last one departs from the chapter ("completed tasks growth rate declining") in one way: it
//! also needs tasks waiting in the queue, because a completion rate that falls with the load
//! (the evening) is not a regression; one that falls while work waits is.
//!
//! [`Health::observe`] returns the transitions, which the pool logs once each via tracing.
//! `QueueOverload` follows the chapter to the letter (one snapshot): an elastic pool that starts
//! small raises it briefly on a burst before it has grown.

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use crate::metrics::Metrics;

/// One of the chapter's four alerts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Alert {
    /// More than twice as many tasks queued as the pool's size.
    QueueOverload,
    /// Over 95 % of the workers busy for a minute.
    AtCapacity,
    /// Tasks rejected or run by their submitters within the window.
    Rejecting,
    /// Completions per second falling while tasks wait.
    CompletionFalling,
}

impl Alert {
    /// Every alert, in the chapter's order.
    pub const ALL: [Alert; 4] =
        [Alert::QueueOverload, Alert::AtCapacity, Alert::Rejecting, Alert::CompletionFalling];

    /// The alert's name in Prometheus labels and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Alert::QueueOverload => "queue_overload",
            Alert::AtCapacity => "at_capacity",
            Alert::Rejecting => "rejecting",
            Alert::CompletionFalling => "completion_falling",
        }
    }

    /// What it means and what to do, for people.
    pub fn advice(self) -> &'static str {
        match self {
            Alert::QueueOverload => {
                "queue above twice the pool size: overload if it lasts; grow the pool or push back upstream"
            }
            Alert::AtCapacity => "over 95 % of the workers busy for a minute: the pool is at capacity",
            Alert::Rejecting => "tasks rejected or run by their submitters: the pool and its queue are full",
            Alert::CompletionFalling => {
                "completions per second fell by over 20 % while tasks wait: a throughput regression"
            }
        }
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl fmt::Display for Alert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The set of alerts raised now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Alerts(u8);

impl Alerts {
    /// Whether `alert` is raised.
    pub fn contains(self, alert: Alert) -> bool {
        self.0 & alert.bit() != 0
    }

    /// Whether no alert is raised.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The raised alerts, in the chapter's order.
    pub fn iter(self) -> impl Iterator<Item = Alert> {
        Alert::ALL.into_iter().filter(move |&alert| self.contains(alert))
    }

    fn with(self, alert: Alert, raised: bool) -> Self {
        if raised {
            Alerts(self.0 | alert.bit())
        } else {
            Alerts(self.0 & !alert.bit())
        }
    }
}

impl fmt::Display for Alerts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("none");
        }
        let names: Vec<&str> = self.iter().map(Alert::as_str).collect();
        f.write_str(&names.join(", "))
    }
}

/// An alert raised or cleared by the latest snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Transition {
    /// Which alert.
    pub alert: Alert,
    /// Raised (true) or cleared (false).
    pub raised: bool,
}

/// The thresholds (the chapter's, by default).
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct HealthConfig {
    /// The sliding window: how long a rejection keeps `Rejecting` raised, and the span whose
    /// halves `CompletionFalling` compares.
    pub window: Duration,
    /// `QueueOverload`: queued > this × the pool size.
    pub queue_factor: f64,
    /// `AtCapacity`: running / size above this ...
    pub busy_fraction: f64,
    /// ... in every snapshot for this long.
    pub busy_for: Duration,
    /// `CompletionFalling`: the newer half's rate below this × the older half's ...
    pub completion_drop: f64,
    /// ... and the older half completed at least this many tasks (fewer say nothing).
    pub completion_min: u64,
    /// Snapshots closer than this to the one before the latest replace the latest instead of
    /// adding a point, so that polling `metrics()` in a loop keeps the window small.
    pub min_spacing: Duration,
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            window: Duration::from_secs(60),
            queue_factor: 2.0,
            busy_fraction: 0.95,
            busy_for: Duration::from_secs(60),
            completion_drop: 0.8,
            completion_min: 20,
            min_spacing: Duration::from_secs(1),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Point {
    at: Duration,
    size: usize,
    running: usize,
    queued: usize,
    completed: u64,
    refused: u64,
}

/// The sliding window of snapshots and the alerts in force.
#[derive(Debug, Clone)]
pub struct Health {
    config: HealthConfig,
    points: VecDeque<Point>,
    alerts: Alerts,
}

impl Health {
    /// An empty window with `config`'s thresholds.
    pub fn new(config: HealthConfig) -> Self {
        Health { config, points: VecDeque::new(), alerts: Alerts::default() }
    }

    /// The alerts in force after the latest snapshot.
    pub fn alerts(&self) -> Alerts {
        self.alerts
    }

    /// Adds the snapshot taken at `at` (time since any fixed origin; snapshots older than the
    /// latest are ignored) and returns the alerts that changed.
    pub fn observe(&mut self, at: Duration, metrics: &Metrics) -> Vec<Transition> {
        if self.points.back().is_some_and(|last| at < last.at) {
            return Vec::new();
        }
        let n = self.points.len();
        if n >= 2 && at.saturating_sub(self.points[n - 2].at) < self.config.min_spacing {
            self.points.pop_back(); // the latest point is replaced, not kept beside this one
        }
        self.points.push_back(Point {
            at,
            size: metrics.target,
            running: metrics.running,
            queued: metrics.queued,
            completed: metrics.completed,
            refused: metrics.rejected + metrics.caller_ran,
        });
        // Keep one point at or before the window's start, as the baseline of its counters.
        let keep_from = at.saturating_sub(self.config.window.max(self.config.busy_for));
        while self.points.len() > 1 && self.points[1].at <= keep_from {
            self.points.pop_front();
        }
        let now = self.evaluate();
        let changed = Alert::ALL
            .into_iter()
            .filter(|&alert| now.contains(alert) != self.alerts.contains(alert))
            .map(|alert| Transition { alert, raised: now.contains(alert) })
            .collect();
        self.alerts = now;
        changed
    }

    fn evaluate(&self) -> Alerts {
        let c = &self.config;
        let latest = *self.points.back().expect("observe pushed one");
        let overload = latest.queued as f64 > c.queue_factor * latest.size.max(1) as f64;

        let busy_from = latest.at.checked_sub(c.busy_for);
        let covers = busy_from.zip(self.points.front()).is_some_and(|(from, first)| first.at <= from);
        let busy_from = busy_from.unwrap_or_default();
        let at_capacity = covers
            && self
                .points
                .iter()
                .filter(|p| p.at >= busy_from)
                .all(|p| p.running as f64 > c.busy_fraction * p.size.max(1) as f64);

        let window_from = latest.at.saturating_sub(c.window);
        let baseline = self.points.iter().rev().find(|p| p.at <= window_from).or(self.points.front());
        let rejecting = baseline.is_some_and(|first| latest.refused > first.refused);

        let falling = baseline.is_some_and(|first| {
            let middle_at = first.at + (latest.at - first.at) / 2;
            let Some(middle) = self.points.iter().rev().find(|p| p.at <= middle_at) else { return false };
            let older = (middle.at - first.at).as_secs_f64();
            let newer = (latest.at - middle.at).as_secs_f64();
            let older_done = middle.completed.saturating_sub(first.completed);
            let newer_done = latest.completed.saturating_sub(middle.completed);
            // Only over a full window, split into comparable halves.
            latest.at - first.at >= c.window
                && older > 0.0
                && newer > 0.0
                && older_done >= c.completion_min
                && latest.queued > 0
                && (newer_done as f64 / newer) < c.completion_drop * (older_done as f64 / older)
        });
        Alerts::default()
            .with(Alert::QueueOverload, overload)
            .with(Alert::AtCapacity, at_capacity)
            .with(Alert::Rejecting, rejecting)
            .with(Alert::CompletionFalling, falling)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(size: usize, running: usize, queued: usize, completed: u64, rejected: u64) -> Metrics {
        Metrics { threads: size, target: size, running, queued, completed, rejected, ..Metrics::default() }
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn queue_overload_follows_the_latest_snapshot() {
        let mut health = Health::new(HealthConfig::default());
        assert!(health.observe(secs(0), &snapshot(8, 8, 16, 0, 0)).is_empty(), "16 = 2 × 8 is not above");
        let raised = health.observe(secs(1), &snapshot(8, 8, 17, 0, 0));
        assert_eq!(raised, [Transition { alert: Alert::QueueOverload, raised: true }]);
        assert!(health.observe(secs(2), &snapshot(8, 8, 30, 0, 0)).is_empty(), "logged once");
        let cleared = health.observe(secs(3), &snapshot(8, 8, 3, 0, 0));
        assert_eq!(cleared, [Transition { alert: Alert::QueueOverload, raised: false }]);
    }

    #[test]
    fn at_capacity_needs_a_full_minute_above_95_percent() {
        let mut health = Health::new(HealthConfig::default());
        // 20 of 20 busy every 10 s: raised once the snapshots span 60 s.
        for t in (0..60).step_by(10) {
            health.observe(secs(t), &snapshot(20, 20, 0, t, 0));
            assert!(!health.alerts().contains(Alert::AtCapacity), "at {t} s");
        }
        let raised = health.observe(secs(60), &snapshot(20, 20, 0, 60, 0));
        assert_eq!(raised, [Transition { alert: Alert::AtCapacity, raised: true }]);
        // 19 of 20 is exactly 0.95, not above: one such snapshot clears it.
        let cleared = health.observe(secs(70), &snapshot(20, 19, 0, 70, 0));
        assert_eq!(cleared, [Transition { alert: Alert::AtCapacity, raised: false }]);
        // And it comes back only after another full minute above.
        for t in (80..130).step_by(10) {
            health.observe(secs(t), &snapshot(20, 20, 0, t, 0));
            assert!(!health.alerts().contains(Alert::AtCapacity), "at {t} s");
        }
        health.observe(secs(130), &snapshot(20, 20, 0, 130, 0));
        assert!(!health.alerts().contains(Alert::AtCapacity), "70 s was not busy: 130 - 60 = 70");
        health.observe(secs(140), &snapshot(20, 20, 0, 140, 0));
        assert!(health.alerts().contains(Alert::AtCapacity));
    }

    #[test]
    fn a_rejection_raises_rejecting_for_one_window() {
        let mut health = Health::new(HealthConfig::default());
        health.observe(secs(0), &snapshot(4, 1, 0, 0, 0));
        let raised = health.observe(secs(5), &snapshot(4, 4, 100, 50, 3));
        assert_eq!(
            raised,
            [
                Transition { alert: Alert::QueueOverload, raised: true },
                Transition { alert: Alert::Rejecting, raised: true }
            ]
        );
        for t in [10, 30, 60] {
            health.observe(secs(t), &snapshot(4, 1, 0, 60, 3));
            assert!(health.alerts().contains(Alert::Rejecting), "at {t} s the rejection is in the window");
        }
        health.observe(secs(66), &snapshot(4, 1, 0, 60, 3));
        assert!(!health.alerts().contains(Alert::Rejecting), "the window has moved past it");
        // Tasks run by their submitter count too (Full::CallerRuns).
        let mut callers = snapshot(4, 4, 0, 70, 3);
        callers.caller_ran = 1;
        health.observe(secs(70), &callers);
        assert!(health.alerts().contains(Alert::Rejecting));
    }

    #[test]
    fn completions_falling_while_tasks_wait_raise_an_alert() {
        let mut health = Health::new(HealthConfig::default());
        // 100 tasks/s for 30 s, then 50 tasks/s while 10 tasks wait.
        let mut completed = 0;
        for t in 0..=60u64 {
            if t > 0 {
                completed += if t <= 30 { 100 } else { 50 };
            }
            health.observe(secs(t), &snapshot(8, 8, 10, completed, 0));
        }
        assert!(health.alerts().contains(Alert::CompletionFalling), "{}", health.alerts());
        // The same fall with an empty queue is the load going down, not a regression.
        let mut quiet = Health::new(HealthConfig::default());
        let mut completed = 0;
        for t in 0..=60u64 {
            if t > 0 {
                completed += if t <= 30 { 100 } else { 50 };
            }
            quiet.observe(secs(t), &snapshot(8, 3, 0, completed, 0));
        }
        assert!(!quiet.alerts().contains(Alert::CompletionFalling));
    }

    #[test]
    fn a_steady_or_rising_rate_raises_nothing() {
        let mut health = Health::new(HealthConfig::default());
        let mut completed = 0;
        for t in 0..=120u64 {
            completed += 100 + t; // slowly rising
            health.observe(secs(t), &snapshot(8, 5, 4, completed, 0));
            assert!(health.alerts().is_empty(), "at {t}: {}", health.alerts());
        }
    }

    #[test]
    fn a_small_or_short_history_says_nothing_about_completions() {
        let mut health = Health::new(HealthConfig::default());
        // 10 tasks then none, with tasks waiting: below the 20-task minimum.
        health.observe(secs(0), &snapshot(2, 2, 5, 0, 0));
        health.observe(secs(30), &snapshot(2, 2, 5, 10, 0));
        health.observe(secs(60), &snapshot(2, 2, 5, 10, 0));
        assert!(!health.alerts().contains(Alert::CompletionFalling));
        // Under a full window: nothing either.
        let mut short = Health::new(HealthConfig::default());
        short.observe(secs(0), &snapshot(2, 2, 5, 0, 0));
        short.observe(secs(10), &snapshot(2, 2, 5, 1000, 0));
        short.observe(secs(20), &snapshot(2, 2, 5, 1001, 0));
        assert!(!short.alerts().contains(Alert::CompletionFalling));
    }

    #[test]
    fn snapshots_out_of_order_are_ignored_and_history_stays_bounded() {
        let mut health = Health::new(HealthConfig::default());
        health.observe(secs(10), &snapshot(1, 1, 5, 0, 0));
        assert!(health.observe(secs(5), &snapshot(1, 1, 0, 0, 0)).is_empty());
        assert!(health.alerts().contains(Alert::QueueOverload));
        for t in 11..10_000 {
            health.observe(secs(t), &snapshot(1, 0, 0, t, 0));
        }
        assert!(health.points.len() <= 62, "{} points kept", health.points.len());
    }

    #[test]
    fn polling_in_a_loop_keeps_the_window_small_and_still_sees_the_latest() {
        let mut health = Health::new(HealthConfig::default());
        for i in 0..100_000u64 {
            health.observe(Duration::from_micros(i * 100), &snapshot(4, 1, 0, i, 0));
        }
        // 10 s of snapshots every 100 µs: about one point per second is kept.
        assert!(health.points.len() <= 12, "{} points", health.points.len());
        health.observe(Duration::from_secs(10), &snapshot(4, 4, 9, 0, 0));
        assert!(health.alerts().contains(Alert::QueueOverload), "the latest snapshot counts at once");
    }

    #[test]
    fn alerts_display_and_iterate_in_the_seeds_order() {
        let alerts = Alerts::default().with(Alert::Rejecting, true).with(Alert::QueueOverload, true);
        assert_eq!(alerts.to_string(), "queue_overload, rejecting");
        assert_eq!(Alerts::default().to_string(), "none");
        assert_eq!(alerts.iter().collect::<Vec<_>>(), [Alert::QueueOverload, Alert::Rejecting]);
    }
}
