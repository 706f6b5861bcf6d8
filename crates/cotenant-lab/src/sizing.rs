//! `cotenant lab sizing` (issue 9 item 5): seed 002's pool-size benchmark scaled to this host.
//!
//! Each task blocks for an I/O delay (a sleep, like the seed's `Thread.sleep`) and then computes
//! for about `COMPUTE` (calibrated fib chunks, the seed's "1-5 ms of CPU work"). A feeder keeps
//! the pool's queue full (closed loop: the pool's throughput, not an offered load, is what is
//! measured). For each delay, fixed pools of 1 to 256 threads and one elastic pool
//! (`Builder::elastic(1, 256)`) run one after another, interleaved within each repeat; each run
//! warms up, then measures for the run time:
//!
//! - throughput: tasks finished per second in the measured part;
//! - CPU %: the process's CPU time (getrusage) over the allowed CPUs' time;
//! - context switches per second: the process's own (getrusage, every thread, exited ones
//!   included) and the host's (`/proc/stat` `ctxt`);
//! - for the elastic pool, the sizes it chose (sampled every 50 ms) and its W/C estimate.
//!
//! The report marks the best fixed size, the contention cliff (the first size above the best
//! whose throughput falls below 90 % of it, if any), the formula's prediction
//! (Ncpu × U × (1 + W/C) with the measured C, at the seed's U = 0.8 and at 1), and the elastic
//! pool's throughput against the best fixed size's (the target: at least 90 %).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::json;

use super::workload::{calibrate, Calibration};
use super::{Chart, Lab, Outcome, Series};
use cotenant_ops::stats::median;

/// The I/O delays of the seed's benchmark (ms).
const DELAYS_MS: [u64; 4] = [0, 5, 20, 50];
const QUICK_DELAYS_MS: [u64; 2] = [0, 20];
/// Fixed pool sizes.
const SIZES: [usize; 9] = [1, 2, 4, 8, 16, 32, 64, 128, 256];
const QUICK_SIZES: [usize; 4] = [1, 4, 16, 64];
/// CPU work per task.
const COMPUTE: Duration = Duration::from_millis(2);
/// The elastic pool's bounds: the fixed sizes' range.
const ELASTIC_MIN: usize = 1;
const ELASTIC_MAX: usize = 256;
/// How often the elastic pool's size is sampled.
const SIZE_SAMPLE: Duration = Duration::from_millis(50);

/// Which pool a run used.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Fixed(usize),
    Elastic,
}

/// What one run measured.
struct Measured {
    tasks: u64,
    seconds: f64,
    cpu_seconds: f64,
    process_switches: u64,
    host_switches: Option<u64>,
    /// Elastic only: the sizes sampled during the measured part, and the W/C estimate at its end.
    sizes: Vec<usize>,
    wait_compute: Option<f64>,
    task_cpu_ms: Option<f64>,
}

impl Measured {
    fn throughput(&self) -> f64 {
        self.tasks as f64 / self.seconds.max(1e-9)
    }
}

/// Process CPU time (s) and context switches (voluntary + involuntary), every thread included.
fn rusage() -> (f64, u64) {
    // SAFETY: `usage` is a valid out-pointer; RUSAGE_SELF has no other precondition.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return (0.0, 0);
    }
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (seconds(usage.ru_utime) + seconds(usage.ru_stime), (usage.ru_nvcsw + usage.ru_nivcsw) as u64)
}

/// The host's context switches since boot (`/proc/stat` `ctxt`); `None` when unreadable.
fn host_switches() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    cotenant::internal::procfs::stat::parse(&text).ok()?.context_switches
}

fn run_once(
    kind: Kind,
    delay: Duration,
    work: Calibration,
    warmup: Duration,
    measure: Duration,
) -> anyhow::Result<Measured> {
    let builder = cotenant::Pool::builder().name("sizing").queue_capacity(2 * ELASTIC_MAX);
    let builder = match kind {
        Kind::Fixed(n) => builder.policy(cotenant::Policy::fixed(n)).threads(n),
        Kind::Elastic => builder.elastic(ELASTIC_MIN, ELASTIC_MAX),
    };
    let pool = Arc::new(builder.build().context("building the pool")?);
    let completed = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let feeder = {
        let (pool, completed, stop) = (pool.clone(), completed.clone(), stop.clone());
        std::thread::Builder::new()
            .name("sizing-feeder".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let completed = completed.clone();
                    // Full::Block: waits while the queue is full; rejected once the pool shuts down.
                    pool.execute(move || {
                        if !delay.is_zero() {
                            std::thread::sleep(delay);
                        }
                        std::hint::black_box(work.work());
                        completed.fetch_add(1, Ordering::Relaxed);
                    });
                }
            })
            .context("starting the feeder thread")?
    };
    let finish = |pool: &cotenant::Pool| {
        stop.store(true, Ordering::Relaxed);
        pool.shutdown_now();
    };
    std::thread::sleep(warmup);
    let (cpu0, switches0) = rusage();
    let (host0, done0, start) = (host_switches(), completed.load(Ordering::Relaxed), Instant::now());
    let mut sizes = Vec::new();
    while start.elapsed() < measure {
        if kind == Kind::Elastic {
            sizes.push(pool.target());
        }
        std::thread::sleep(SIZE_SAMPLE.min(measure.saturating_sub(start.elapsed())));
    }
    let (done1, seconds) = (completed.load(Ordering::Relaxed), start.elapsed().as_secs_f64());
    let (cpu1, switches1) = rusage();
    let host1 = host_switches();
    let metrics = pool.metrics();
    finish(&pool);
    let _ = feeder.join();
    let elastic = metrics.elastic;
    Ok(Measured {
        tasks: done1 - done0,
        seconds,
        cpu_seconds: cpu1 - cpu0,
        process_switches: switches1.saturating_sub(switches0),
        host_switches: host0.zip(host1).map(|(a, b)| b.saturating_sub(a)),
        sizes,
        wait_compute: elastic
            .filter(|e| e.task_cpu_ns > 0)
            .map(|e| e.task_wait_ns as f64 / e.task_cpu_ns as f64),
        task_cpu_ms: elastic.filter(|e| e.task_cpu_ns > 0).map(|e| e.task_cpu_ns as f64 / 1e6),
    })
}

/// Medians over repeats of one (delay, pool) cell.
#[derive(Default)]
struct Cell {
    throughput: Vec<f64>,
    cpu_percent: Vec<f64>,
    switches: Vec<f64>,
    sizes: Vec<f64>,
    wait_compute: Vec<f64>,
    task_cpu_ms: Vec<f64>,
}

/// The first size above the best whose throughput is below 90 % of the best's.
fn cliff(curve: &[(usize, f64)]) -> Option<usize> {
    let (best_at, best) = curve.iter().copied().fold((0, f64::MIN), |a, b| if b.1 > a.1 { b } else { a });
    curve.iter().find(|&&(size, t)| size > best_at && t < 0.9 * best).map(|&(size, _)| size)
}

/// Runs the experiment: at each I/O delay, every fixed pool size and the elastic pool,
/// interleaved within each repeat.
pub fn run(lab: &Lab, args: &crate::args::LabArgs) -> anyhow::Result<Outcome> {
    let quick = args.quick;
    let delays: &[u64] = if quick { &QUICK_DELAYS_MS } else { &DELAYS_MS };
    let sizes: &[usize] = if quick { &QUICK_SIZES } else { &SIZES };
    let repeats = args.repeats.unwrap_or(if quick { 1 } else { 3 }) as usize;
    let measure = Duration::from_secs_f64(args.seconds.map_or(if quick { 0.3 } else { 2.0 }, |s| s as f64));
    let warmup = if quick { Duration::from_millis(200) } else { Duration::from_millis(1500) };
    let cpus = cotenant::cpus::detect().map(|b| b.allowed_cpus().max(1)).unwrap_or(lab.host.cpus.max(1));
    let work = calibrate(COMPUTE);
    let mut outcome = Outcome::default();
    let mut cells: std::collections::BTreeMap<(u64, Option<usize>), Cell> = Default::default();
    let kinds: Vec<Kind> = sizes.iter().map(|&n| Kind::Fixed(n)).chain([Kind::Elastic]).collect();
    for repeat in 0..repeats {
        for &delay_ms in delays {
            for &kind in &kinds {
                let name = match kind {
                    Kind::Fixed(n) => format!("fixed {n}"),
                    Kind::Elastic => "elastic".into(),
                };
                eprintln!("lab sizing: repeat {}/{repeats}, delay {delay_ms} ms, {name}", repeat + 1);
                let m = run_once(kind, Duration::from_millis(delay_ms), work, warmup, measure)?;
                let cpu_percent = 100.0 * m.cpu_seconds / (m.seconds * f64::from(cpus));
                let mut sizes_seen: Vec<f64> = m.sizes.iter().map(|&s| s as f64).collect();
                let size = match kind {
                    Kind::Fixed(n) => n as f64,
                    Kind::Elastic => median(&mut sizes_seen),
                };
                let cell = cells
                    .entry((delay_ms, if let Kind::Fixed(n) = kind { Some(n) } else { None }))
                    .or_default();
                cell.throughput.push(m.throughput());
                cell.cpu_percent.push(cpu_percent);
                cell.switches.push(m.process_switches as f64 / m.seconds);
                cell.sizes.push(size);
                cell.wait_compute.extend(m.wait_compute);
                cell.task_cpu_ms.extend(m.task_cpu_ms);
                let mut row = json!({
                    "repeat": repeat,
                    "delay_ms": delay_ms,
                    "pool": if kind == Kind::Elastic { "elastic" } else { "fixed" },
                    "size": size,
                    "tasks": m.tasks,
                    "seconds": m.seconds,
                    "throughput": m.throughput(),
                    "cpu_percent": cpu_percent,
                    "process_switches_per_s": m.process_switches as f64 / m.seconds,
                    "host_switches_per_s": m.host_switches.map(|n| n as f64 / m.seconds),
                });
                if kind == Kind::Elastic {
                    row["size_max"] = json!(m.sizes.iter().max());
                    row["wait_compute"] = json!(m.wait_compute);
                    row["task_cpu_ms"] = json!(m.task_cpu_ms);
                }
                if let serde_json::Value::Object(map) = row {
                    outcome.rows.push(map);
                }
            }
        }
    }

    // Tables, charts and verdicts from the medians.
    let mut report = format!(
        "Tasks block for the delay, then compute {:.1} ms (calibrated: {} × fib({}) chunks of {:.0} µs); \
         a feeder keeps the queue full. Each run warms up for {:?}, then measures for {:?}; {repeats} \
         repeat(s), pools interleaved. Medians over repeats. CPU % is the process's CPU time over {cpus} \
         CPU(s); switches are the process's own (getrusage).\n\n",
        COMPUTE.as_secs_f64() * 1e3,
        work.chunks,
        super::workload::CHUNK_FIB,
        work.chunk_ns / 1e3,
        warmup,
        measure
    );
    let mut summary = Vec::new();
    let mut chart = Chart {
        file_stem: "throughput".into(),
        title: "Throughput by pool size (elastic: its median size)".into(),
        x_label: "log2(pool size)".into(),
        y_label: "tasks per second".into(),
        log_y: false,
        beside: Vec::new(),
        series: Vec::new(),
    };
    let mut all_met = true;
    for &delay_ms in delays {
        let mut med = |delay: u64, size: Option<usize>, pick: fn(&mut Cell) -> &mut Vec<f64>| -> f64 {
            cells.get_mut(&(delay, size)).map_or(f64::NAN, |cell| median(pick(cell)))
        };
        report.push_str(&format!(
            "### I/O delay {delay_ms} ms\n\n| pool | size | tasks/s | CPU % | switches/s |\n|---|---:|---:|---:|---:|\n"
        ));
        let mut curve = Vec::new();
        for &size in sizes {
            let t = med(delay_ms, Some(size), |c| &mut c.throughput);
            curve.push((size, t));
            report.push_str(&format!(
                "| fixed | {size} | {t:.0} | {:.0} | {:.0} |\n",
                med(delay_ms, Some(size), |c| &mut c.cpu_percent),
                med(delay_ms, Some(size), |c| &mut c.switches)
            ));
        }
        let elastic_t = med(delay_ms, None, |c| &mut c.throughput);
        let elastic_size = med(delay_ms, None, |c| &mut c.sizes);
        let wait_compute = med(delay_ms, None, |c| &mut c.wait_compute);
        let task_cpu_ms = med(delay_ms, None, |c| &mut c.task_cpu_ms);
        report.push_str(&format!(
            "| **elastic** | {elastic_size:.0} | {elastic_t:.0} | {:.0} | {:.0} |\n\n",
            med(delay_ms, None, |c| &mut c.cpu_percent),
            med(delay_ms, None, |c| &mut c.switches)
        ));
        let (best_size, best) =
            curve.iter().copied().fold((0, f64::MIN), |a, b| if b.1 > a.1 { b } else { a });
        let ratio = elastic_t / best;
        let met = ratio >= 0.9;
        all_met &= met;
        // The formula with the measured CPU per task (the calibrated target if none measured).
        let c_ms = if task_cpu_ms.is_finite() { task_cpu_ms } else { COMPUTE.as_secs_f64() * 1e3 };
        let predict = |u: f64| f64::from(cpus) * u * (1.0 + delay_ms as f64 / c_ms);
        let cliff = cliff(&curve);
        report.push_str(&format!(
            "Best fixed size {best_size} ({best:.0} tasks/s); contention cliff: {}; formula \
             Ncpu × U × (1 + W/C) with C = {c_ms:.2} ms measured: {:.1} at U = 0.8, {:.1} at U = 1. \
             Elastic: median size {elastic_size:.0}, W/C estimate {wait_compute:.1}, {:.0} % of the best \
             fixed size's throughput.\n\n",
            cliff.map_or_else(
                || format!("none up to {}", sizes.last().copied().unwrap_or(0)),
                |s| format!("at {s}")
            ),
            predict(0.8),
            predict(1.0),
            100.0 * ratio
        ));
        outcome.verdicts.push(format!(
            "delay {delay_ms} ms: elastic {elastic_t:.0} tasks/s at median size {elastic_size:.0} is {:.0} % of \
             the best fixed size ({best_size}: {best:.0} tasks/s){}; the formula predicts {:.0} (U = 1)",
            100.0 * ratio,
            if met { "" } else { ", below the 90 % target" },
            predict(1.0)
        ));
        summary.push(json!({
            "delay_ms": delay_ms,
            "best_size": best_size,
            "best_throughput": best,
            "cliff": cliff,
            "elastic_throughput": elastic_t,
            "elastic_size": elastic_size,
            "elastic_wait_compute": wait_compute,
            "elastic_ratio": ratio,
            "formula_u08": predict(0.8),
            "formula_u1": predict(1.0),
        }));
        chart.series.push(Series {
            name: format!("fixed, {delay_ms} ms"),
            points: curve.iter().map(|&(s, t)| ((s as f64).log2(), t)).collect(),
        });
        chart.series.push(Series {
            name: format!("elastic, {delay_ms} ms"),
            points: vec![(elastic_size.max(1.0).log2(), elastic_t)],
        });
    }
    outcome.verdicts.push(format!(
        "the elastic pool reached at least 90 % of the best fixed size's throughput at {} I/O delay",
        if all_met { "every" } else { "not every" }
    ));
    outcome.report = report;
    outcome.summary = json!({ "delays": summary, "cpus": cpus, "compute_ms": COMPUTE.as_secs_f64() * 1e3 });
    outcome.charts.push(chart);
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cliff_is_the_first_size_past_the_best_that_loses_a_tenth() {
        let curve = [(1, 100.0), (2, 190.0), (4, 200.0), (8, 185.0), (16, 170.0), (32, 150.0)];
        assert_eq!(cliff(&curve), Some(16));
        assert_eq!(cliff(&[(1, 100.0), (2, 200.0), (4, 199.0)]), None);
    }
}
