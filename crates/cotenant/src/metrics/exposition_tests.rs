//! The exposition's renderer fed recorded values (one help and type per family, escaping,
//! cumulative histograms, the CPU limit and the token sets once), and the registry over real
//! pools (a dropped pool leaves the exposition, a name names one pool).

use super::*;
use crate::cpus::Constraint;
use crate::{Policy, Pool};

/// A histogram of recorded times (ns).
fn histogram(times: &[u64]) -> Histogram {
    let mut histogram = Histogram::default();
    for &ns in times {
        histogram.record(ns);
    }
    histogram
}

/// A pool's metrics as recorded: `completed` tasks, each timed in both histograms.
fn recorded(completed: u64, times: &[u64]) -> Metrics {
    let h = histogram(times);
    assert_eq!(h.count(), completed, "a recorded pool times every task it ran");
    Metrics { threads: 2, target: 2, completed, queue_wait: Some(h), run_time: Some(h), ..Metrics::default() }
}

/// The family names of the `# TYPE` lines, in order.
fn types(text: &str) -> Vec<&str> {
    text.lines().filter_map(|line| line.strip_prefix("# TYPE ")?.split(' ').next()).collect()
}

/// The value of the sample line that starts with `series` (name and labels, exactly).
fn value(text: &str, series: &str) -> Option<String> {
    text.lines().find_map(|line| Some(line.strip_prefix(series)?.strip_prefix(' ')?.to_owned()))
}

#[test]
fn three_pools_share_one_help_and_one_type_per_family_and_each_family_is_one_block() {
    let (a, b, c) = (recorded(2, &[500, 1_500]), recorded(1, &[3_000_000]), Metrics::default());
    let process = ProcessReading::new(Some(CpuLimitReading::new(1.5, 1, Constraint::Quota)), 0);
    let text = render(&[("a", &a), ("b", &b), ("c", &c)], Some(&process), &[]);
    let names = types(&text);
    let mut distinct = names.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(names.len(), distinct.len(), "a family typed twice:\n{text}");
    let helps = text.lines().filter(|line| line.starts_with("# HELP ")).count();
    assert_eq!(helps, names.len(), "one help per family:\n{text}");
    // Every sample belongs to the family typed last (no family is split in two).
    let mut current = "";
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            current = rest.split(' ').next().unwrap_or("");
        } else if !line.starts_with('#') {
            assert!(!current.is_empty() && line.starts_with(current), "{line:?} outside its family:\n{text}");
        }
    }
    for pool in ["a", "b", "c"] {
        assert!(text.contains(&format!("cotenant_pool_threads{{pool=\"{pool}\"}} ")), "{pool}:\n{text}");
    }
    assert_eq!(value(&text, "cotenant_pool_completed_total{pool=\"a\"}").as_deref(), Some("2"));
    // Pool c has no histograms: the families are there for a and b only.
    assert!(names.contains(&"cotenant_pool_queue_wait_seconds"), "{text}");
    assert!(!text.contains("cotenant_pool_queue_wait_seconds_count{pool=\"c\"}"), "{text}");
    assert_eq!(value(&text, "cotenant_pool_run_time_seconds_count{pool=\"b\"}").as_deref(), Some("1"));
    // The CPU limit comes first, the pools' families after, in the one-pool order.
    assert_eq!(
        names[..4],
        [
            "cotenant_cpu_limit",
            "cotenant_cpu_limit_threads",
            "cotenant_cpu_limit_binding",
            "cotenant_cpu_limit_errors_total"
        ]
    );
    assert_eq!(names[4], "cotenant_pool_threads", "{text}");
}

#[test]
fn the_family_order_does_not_depend_on_which_pool_comes_first() {
    let budget = BudgetMetrics { quota_ns: 50_000_000, period_ns: 100_000_000, ..BudgetMetrics::default() };
    let with_budget = Metrics { budget: Some(budget), ..recorded(1, &[1_000]) };
    let plain = recorded(1, &[1_000]);
    let one = types(&render(&[("x", &with_budget), ("y", &plain)], None, &[])).join(" ");
    let other = types(&render(&[("y", &plain), ("x", &with_budget)], None, &[])).join(" ");
    assert_eq!(one, other);
    assert!(
        one.starts_with("cotenant_pool_budget_quota_seconds cotenant_pool_budget_period_seconds"),
        "{one}"
    );
}

#[test]
fn pool_names_are_escaped_and_a_repeated_name_is_written_once() {
    let metrics = Metrics { target: 3, ..Metrics::default() };
    let other = Metrics { target: 9, ..Metrics::default() };
    let name = "a \"quoted\\ name\"\nnext";
    let text = render(&[(name, &metrics), (name, &other)], None, &[]);
    let series = "cotenant_pool_target{pool=\"a \\\"quoted\\\\ name\\\"\\nnext\"}";
    assert_eq!(value(&text, series).as_deref(), Some("3"), "{text}");
    assert_eq!(text.matches(series).count(), 1, "the first of a repeated name only:\n{text}");
    assert!(text.lines().all(|line| !line.is_empty()), "no raw line feed inside a label:\n{text}");
}

#[test]
fn histogram_lines_are_cumulative_with_exact_bounds_and_a_count_equal_to_inf() {
    // 500 ns and 1.5 µs in the first two buckets, 3 ms under 4.096 ms, 20 s beyond the last.
    let metrics = recorded(4, &[500, 1_500, 3_000_000, 20_000_000_000]);
    let text = metrics.to_prometheus("p");
    assert_eq!(text.matches("# TYPE cotenant_pool_queue_wait_seconds histogram\n").count(), 1, "{text}");
    let buckets: Vec<(String, u64)> = text
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("cotenant_pool_queue_wait_seconds_bucket{pool=\"p\",le=\"")?;
            let (le, count) = rest.split_once("\"} ")?;
            Some((le.to_owned(), count.parse().ok()?))
        })
        .collect();
    assert_eq!(buckets.len(), histogram::BOUNDS + 1, "{text}");
    assert!(buckets.windows(2).all(|pair| pair[0].1 <= pair[1].1), "cumulative: {buckets:?}");
    assert_eq!(buckets[0], ("0.000001".to_owned(), 1));
    assert_eq!(buckets[1], ("0.000002".to_owned(), 2));
    assert_eq!(buckets[12], ("0.004096".to_owned(), 3));
    assert_eq!(buckets[histogram::BOUNDS - 1], ("8.388608".to_owned(), 3));
    assert_eq!(buckets[histogram::BOUNDS], ("+Inf".to_owned(), 4));
    let count = value(&text, "cotenant_pool_queue_wait_seconds_count{pool=\"p\"}");
    assert_eq!(count.as_deref(), Some("4"), "{text}");
    let sum = value(&text, "cotenant_pool_queue_wait_seconds_sum{pool=\"p\"}");
    assert_eq!(sum.as_deref(), Some("20.003002"), "{text}");
    assert_eq!(text, metrics.to_prometheus("p"), "the same text on every render");
}

#[test]
fn the_cpu_limit_marks_its_binding_source_and_nothing_else() {
    let process = ProcessReading::new(Some(CpuLimitReading::new(1.5, 1, Constraint::Quota)), 2);
    let text = render(&[], Some(&process), &[]);
    assert_eq!(value(&text, "cotenant_cpu_limit").as_deref(), Some("1.5"), "{text}");
    assert_eq!(value(&text, "cotenant_cpu_limit_threads").as_deref(), Some("1"), "{text}");
    for (source, marked) in [("online", "0"), ("affinity", "0"), ("cpuset", "0"), ("quota", "1")] {
        let series = format!("cotenant_cpu_limit_binding{{source=\"{source}\"}}");
        assert_eq!(value(&text, &series).as_deref(), Some(marked), "{source}:\n{text}");
    }
    assert_eq!(value(&text, "cotenant_cpu_limit_errors_total").as_deref(), Some("2"), "{text}");
}

#[test]
fn a_token_set_is_written_once_and_an_unreadable_value_is_left_out() {
    let mut shared = TokenSetReading::new("default", 2);
    shared.available = Some(1);
    shared.waiting = Some(0);
    let again = TokenSetReading::new("default", 2);
    let mut other = TokenSetReading::new("batch", 4);
    other.members = Some(3);
    let text = render(&[], None, &[shared, again, other]);
    assert_eq!(text.matches("cotenant_token_set_tokens{set=\"default\"}").count(), 1, "{text}");
    assert_eq!(value(&text, "cotenant_token_set_available{set=\"default\"}").as_deref(), Some("1"));
    assert_eq!(value(&text, "cotenant_token_set_members{set=\"batch\"}").as_deref(), Some("3"));
    assert_eq!(value(&text, "cotenant_token_set_members{set=\"default\"}"), None, "unread: left out");
    assert_eq!(value(&text, "cotenant_token_set_available{set=\"batch\"}"), None, "unread: left out");
    assert!(!text.contains("cotenant_cpu_limit"), "no process part asked for:\n{text}");
}

#[test]
fn an_empty_exposition_is_empty() {
    assert_eq!(render(&[], None, &[]), "");
}

/// A fixed pool of one worker with no host tokens: no controller, so dropping it drops its
/// state at once.
fn small_pool() -> Pool {
    Pool::builder()
        .policy(Policy::fixed(1))
        .threads(1)
        .host_tokens_off()
        .task_histograms(true)
        .build()
        .unwrap()
}

#[test]
fn a_dropped_pool_leaves_the_registry_and_frees_its_name() {
    let registry = Registry::new().without_cpu_limit();
    let (kept, dropped) = (small_pool(), small_pool());
    registry.register("kept", &kept).unwrap();
    registry.register("dropped", &dropped).unwrap();
    assert_eq!(registry.names(), ["dropped", "kept"]);
    assert!(registry.render().contains("cotenant_pool_threads{pool=\"dropped\"} 1\n"));
    drop(dropped);
    let text = registry.render();
    assert!(!text.contains("pool=\"dropped\""), "{text}");
    assert!(text.contains("cotenant_pool_threads{pool=\"kept\"} 1\n"), "{text}");
    assert_eq!(registry.names(), ["kept"]);
    let newcomer = small_pool();
    registry.register("dropped", &newcomer).expect("the name of a dropped pool is free");
}

#[test]
fn a_name_names_one_pool() {
    let registry = Registry::new().without_cpu_limit();
    let (first, second) = (small_pool(), small_pool());
    registry.register("api", &first).unwrap();
    registry.register("api", &first).expect("the same pool again: nothing to do");
    assert_eq!(registry.register("api", &second), Err(RegistryError::NameTaken { name: "api".to_owned() }));
    assert_eq!(registry.register("", &second), Err(RegistryError::EmptyName));
    assert!(registry.unregister("api"));
    assert!(!registry.unregister("api"), "gone already");
    registry.register("api", &second).expect("free again after unregister");
    assert!(!registry.render().contains("cotenant_cpu_limit"), "the CPU limit was turned off");
}

#[test]
fn a_registry_renders_live_pools_with_counts_that_match_their_histograms() {
    let registry = Registry::new().without_cpu_limit();
    let pools: Vec<Pool> = (0..3).map(|_| small_pool()).collect();
    for (i, pool) in pools.iter().enumerate() {
        registry.register(&format!("pool-{i}"), pool).unwrap();
        for _ in 0..=i {
            pool.spawn(|| ()).join().unwrap();
        }
        pool.shutdown(); // every worker gone: the counters are final
    }
    let text = registry.render();
    assert_eq!(text.matches("# TYPE cotenant_pool_completed_total counter\n").count(), 1, "{text}");
    for (i, pool) in pools.iter().enumerate() {
        let metrics = pool.metrics();
        assert_eq!(metrics.completed, i as u64 + 1);
        let completed = format!("cotenant_pool_completed_total{{pool=\"pool-{i}\"}}");
        assert_eq!(value(&text, &completed), Some((i + 1).to_string()), "{text}");
        for histogram in [metrics.queue_wait, metrics.run_time].into_iter().flatten() {
            assert_eq!(histogram.count(), metrics.completed, "a histogram counts every task run");
        }
    }
}
