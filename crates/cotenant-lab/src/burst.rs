//! Seed 000 §4: a bursty tenant (quiet, then a burst of work) and a steady one that has more
//! work than half the host. Three ways to share the host:
//!
//! - `quotas`: each tenant in its own cgroup with a quota of half the host, pools sized to all
//!   CPUs (what runtimes do): the bursty tenant is throttled in its bursts, and the half it
//!   does not use while quiet is lost to the steady one;
//! - `no quotas, ignorant`: one cgroup per tenant, equal weights, pools of all CPUs;
//! - `no quotas, adaptive`: the same with cotenant's adaptive pools.
//!
//! Reported: the bursty tenant's latency (all its items arrive in bursts), the steady
//! tenant's throughput, and the CPU left idle while either tenant had work waiting, computed
//! from host busy time sampled every 10 ms and the tenants' item timelines.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use serde::Serialize;

use super::runner::{cgroup_run_length, run_workers_at, schedule_args, WorkerSpec, START_DELAY};
use super::{Lab, Outcome};
use cotenant_ops::cgroup::{Cgroup, LAB_PREFIX};
use cotenant_ops::stats::column_medians;

/// The three configurations, in table order.
const CONFIGS: [(&str, Option<f64>, &str); 3] = [
    ("quotas of half the host, ignorant pools", Some(0.5), "ignorant"),
    ("no quotas, ignorant pools", None, "ignorant"),
    ("no quotas, adaptive pools", None, "adaptive"),
];

/// Host busy time sampled during a run: `(ns since the common start, idle CPUs since the
/// previous sample)`.
type IdleSamples = Vec<(i64, f64)>;

/// CPU-seconds per second left idle while some tenant had an item waiting or running:
/// each sample interval counts when, at its midpoint, an item of any tenant had arrived and
/// not finished. `items` are `[intended, started, ended]` ns from the common start.
pub fn idle_while_work(samples: &[(i64, f64)], interval_ns: i64, items: &[[u64; 3]]) -> f64 {
    let mut spans: Vec<(i64, i64)> =
        items.iter().filter(|i| i[2] >= i[0] && i[1] != 0).map(|i| (i[0] as i64, i[2] as i64)).collect();
    spans.sort_unstable();
    let busy_at = |t: i64| spans.iter().take_while(|s| s.0 <= t).any(|s| s.1 > t);
    let (mut idle, mut counted) = (0.0, 0usize);
    for &(t, idle_cpus) in samples {
        let mid = t - interval_ns / 2;
        if mid < 0 {
            continue;
        }
        counted += 1;
        if busy_at(mid) {
            idle += idle_cpus;
        }
    }
    if counted == 0 {
        0.0
    } else {
        idle / counted as f64
    }
}

/// One run's row of `results.csv`: one configuration, one repeat.
#[derive(Serialize)]
struct BurstRow<'a> {
    /// The configuration, the first column of [`CONFIGS`].
    configuration: &'a str,
    /// Which repeat of the configuration (from 0).
    repeat: u32,
    /// CPUs other processes kept busy just before the run (the quiet-host check).
    host_busy_cpus_before: f64,
    /// The bursty tenant's service time, 99th percentile (µs).
    bursty_service_p99_us: f64,
    /// The bursty tenant's service time, maximum (µs).
    bursty_service_max_us: f64,
    /// The bursty tenant's end-to-end time (from the intended arrival), 99th percentile (µs).
    bursty_e2e_p99_us: f64,
    /// The bursty tenant's items completed per second.
    bursty_throughput_per_s: f64,
    /// The steady tenant's items completed per second.
    steady_throughput_per_s: f64,
    /// The steady tenant's service time, 99th percentile (µs).
    steady_service_p99_us: f64,
    /// CPUs left idle while some tenant had an item waiting or running ([`idle_while_work`]).
    idle_cpus_while_work: f64,
}

/// Runs the experiment.
pub fn run(lab: &Lab, args: &crate::args::LabArgs) -> anyhow::Result<Outcome> {
    let (layout, seconds, repeats) = match cgroup_run_length(lab, "burst", args, (2, 10), (1, 3)) {
        Ok(start) => start,
        Err(skipped) => return Ok(*skipped),
    };
    let cpus = f64::from(lab.host.cpus.max(1));
    let mut outcome = Outcome::default();
    let mut report = format!(
        "Two tenants. Bursty: quiet {} ms, then {} ms of Poisson arrivals, on average 30% of half the host \
         (1.5x half the host during a burst). Steady: Poisson arrivals at 150% of half the host. {} ms items, \
         {seconds} s runs.\n\n\
         | configuration | bursty service p99 ms | bursty end-to-end p99 ms | steady throughput /s | CPUs idle while work waited | repeats |\n\
         |---|---:|---:|---:|---:|---:|\n",
        super::workload::BURST_OFF.as_millis(),
        super::workload::BURST_ON.as_millis(),
        args.service_ms
    );
    let mut medians = Vec::new();
    for (name, quota, pool) in CONFIGS {
        let mut runs: Vec<[f64; 4]> = Vec::new();
        for repeat in 0..repeats {
            let busy_before = lab.quiet_check();
            eprintln!("lab burst: {name}, repeat {}/{repeats}", repeat + 1);
            let mut cgroups = Vec::new();
            for tenant in ["bursty", "steady"] {
                let cg = Cgroup::create(layout, LAB_PREFIX, &format!("burst-{tenant}"), false, None)
                    .context("creating a lab cgroup")?;
                Cgroup::set_weight(layout, cg.cpu_dir(false), 100)?;
                if let Some(q) = quota {
                    let period = 100_000u64;
                    Cgroup::set_quota(
                        layout,
                        cg.cpu_dir(false),
                        Some((q * cpus * period as f64) as u64),
                        period,
                    )?;
                }
                cgroups.push(cg);
            }
            let worker = |arrivals: &str, load: f64, tenant: usize| -> anyhow::Result<WorkerSpec<'_>> {
                let mut a = vec!["--pool".to_owned(), pool.to_owned()];
                a.extend(schedule_args(2, load, None, args.service_ms, Duration::from_secs(seconds)));
                a.extend(["--arrivals".to_owned(), arrivals.to_owned()]);
                a.extend(["--seed".to_owned(), repeat.to_string(), "--items".to_owned()]);
                WorkerSpec::lab_worker(a, Some(&cgroups[tenant]))
            };
            let specs = [worker("bursty", 0.3, 0)?, worker("poisson", 1.5, 1)?];
            let start_at = SystemTime::now() + START_DELAY;
            let interval = Duration::from_millis(10);
            let stop = AtomicBool::new(false);
            let (reports, samples) = std::thread::scope(|scope| {
                let sampler = scope.spawn(|| sample_idle(start_at, interval, &stop));
                let reports = run_workers_at(&specs, start_at);
                stop.store(true, Ordering::Relaxed);
                (reports, sampler.join().unwrap_or_default())
            });
            let reports = reports?;
            let all_items: Vec<[u64; 3]> = reports.iter().flat_map(|r| r.items.iter().copied()).collect();
            let idle = idle_while_work(&samples, interval.as_nanos() as i64, &all_items);
            let (bursty, steady) = (&reports[0].summary, &reports[1].summary);
            let figures = [bursty.service_p99_us, bursty.e2e_p99_us, steady.throughput_per_s, idle];
            outcome.rows.push(crate::row_of(&BurstRow {
                configuration: name,
                repeat,
                host_busy_cpus_before: busy_before,
                bursty_service_p99_us: figures[0],
                bursty_service_max_us: bursty.service_max_us,
                bursty_e2e_p99_us: figures[1],
                bursty_throughput_per_s: bursty.throughput_per_s,
                steady_throughput_per_s: figures[2],
                steady_service_p99_us: steady.service_p99_us,
                idle_cpus_while_work: figures[3],
            }));
            runs.push(figures);
        }
        let med = column_medians(&runs);
        let _ = writeln!(
            report,
            "| {name} | {:.1} | {:.1} | {:.1} | {:.2} | {repeats} |",
            med[0] / 1000.0,
            med[1] / 1000.0,
            med[2],
            med[3]
        );
        medians.push((name, med));
    }
    report.push_str("\nMedians over repeats (every run is in results.csv).\n");
    if let (Some(q), Some(a)) = (medians.first(), medians.last()) {
        let r = |i: usize| if q.1[i] > 0.0 { a.1[i] / q.1[i] } else { f64::NAN };
        outcome.verdicts.push(format!(
            "adaptive without quotas against quotas: bursty end-to-end p99 {:.2}x, steady throughput {:.2}x, \
             idle CPU while work waited {:.2} against {:.2}",
            r(1),
            r(2),
            a.1[3],
            q.1[3]
        ));
    }
    outcome.summary = serde_json::json!(medians
        .iter()
        .map(|(n, m)| serde_json::json!({"configuration": n, "bursty_service_p99_us": m[0],
            "bursty_e2e_p99_us": m[1], "steady_throughput_per_s": m[2], "idle_cpus_while_work": m[3]}))
        .collect::<Vec<_>>());
    outcome.report = report;
    Ok(outcome)
}

/// Samples host idle CPUs every `interval` until `stop`: `(ns since start_at, idle CPUs)`.
fn sample_idle(start_at: SystemTime, interval: Duration, stop: &AtomicBool) -> IdleSamples {
    let mut out = Vec::new();
    let Ok(mut sampler) = cotenant::internal::sampler::HostSampler::system() else { return out };
    let Ok(mut before) = sampler.read() else { return out };
    let start_ns = start_at.duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0);
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(interval);
        let Ok(now) = sampler.read() else { continue };
        if let Some(delta) = cotenant::internal::sampler::HostDelta::between(&before, &now) {
            let wall = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0);
            let idle = delta.idle_ns as f64 / delta.elapsed_ns.max(1) as f64;
            out.push((wall - start_ns, idle));
        }
        before = now;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_counts_only_while_an_item_was_outstanding() {
        const MS: i64 = 1_000_000;
        // Samples every 10 ms with 1.5 idle CPUs; one item outstanding from 5 ms to 25 ms.
        let samples: Vec<(i64, f64)> = (1..=4).map(|i| (i * 10 * MS, 1.5)).collect();
        let items = [[5 * MS as u64, 6 * MS as u64, 25 * MS as u64]];
        // Midpoints 5, 15, 25, 35 ms: outstanding at 5 and 15 (ends at 25, exclusive).
        let idle = idle_while_work(&samples, 10 * MS, &items);
        assert!((idle - 1.5 * 2.0 / 4.0).abs() < 1e-9, "{idle}");
        assert_eq!(idle_while_work(&samples, 10 * MS, &[]), 0.0);
        assert_eq!(idle_while_work(&[], 10 * MS, &items), 0.0);
    }
}
