//! Seed 003's isolation experiment, extended (issue 6): tenant A, a real HTTP server doing
//! about 200 µs of CPU work per request on a pool sized to the CPU count, next to tenant B, a
//! CPU-bound batch job on every CPU, under every isolation option; A driven by the open-loop
//! load generator (`loadgen.rs`), B's throughput counted. The tenants are `tenants.rs`.
//!
//! Each run: A and B in their own `cotenant-lab-*` cgroups (equal weights unless the scenario
//! says otherwise) → A listens → B starts → after a warm-up, the load runs for the run's
//! length while B counts its chunks over the same window → B reports, A is stopped. Both
//! tenants are the lab's children (`runner::LabChild`), with deadlines: a run whose tenant
//! hangs or fails is recorded as failed and the others go on. The reduction to tables and
//! verdicts is pure (`aggregate`, `verdicts`) and unit-tested.

use std::fmt::Write as _;
use std::io::BufReader;
use std::net::SocketAddr;
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use serde::Serialize;

use cotenant_ops::cgroup::{Cgroup, Layout, LAB_PREFIX};
use cotenant_ops::stats::median;
use super::runner::{self, LabChild, WorkerFailed};
use super::tenants::{read_port, BatchReport};
use super::{loadgen, Chart, Lab, Outcome, Series};
use crate::args::LabArgs;

/// Requests per second offered to A (about 0.4 CPU of work at 200 µs each).
pub const RATE: f64 = 2000.0;
/// CPU work per request (µs).
pub const WORK_US: u64 = 200;
/// Keep-alive connections of the load generator.
pub const CONNECTIONS: usize = 16;
/// How long `doctor --pid <A>` samples during a run (at most half the run).
const DOCTOR_SAMPLE: Duration = Duration::from_secs(2);
/// Between B's start and the load's: B at full speed, A's pool idle.
const WARM_UP: Duration = Duration::from_millis(500);
/// How long tenant A may take to listen, and to stop once its stdin closes, before it is
/// killed (it calibrates and builds its pool in well under a second).
const A_LIMIT: Duration = Duration::from_secs(30);

/// One isolation option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// A alone.
    Baseline,
    /// A alone, its pool's workers pinned.
    BaselinePinned,
    /// A and B, each in its own cgroup, equal weights, no hints (the seed's containers).
    Unisolated,
    /// B at a tenth of A's weight (`cpu.shares` 102 vs 1024; `cpu.weight` 10 vs 100).
    Weighted,
    /// Disjoint cpusets, half the CPUs each.
    Pinned,
    /// B's threads at nice 19.
    Nice,
    /// B's threads at `SCHED_IDLE`.
    Idle,
    /// B's threads at normal priority, B's cgroup marked idle (`cpu.idle` = 1, Linux 5.15+).
    CgroupIdle,
    /// B's work on a cotenant adaptive pool.
    Cooperative,
    /// B's work on a cotenant background pool (`SCHED_IDLE` workers, fed from `SCHED_IDLE`).
    Background,
    /// The background pool in a cgroup marked idle: the deployment `docs/background.md`
    /// recommends when the batch job has a cgroup of its own.
    BackgroundCgroupIdle,
    /// A and B in one cgroup, no hints (two processes of one container or service).
    UnisolatedOneCgroup,
    /// A and B in one cgroup, B's threads at `SCHED_IDLE`.
    IdleOneCgroup,
    /// A and B in one cgroup, B on a cotenant background pool.
    BackgroundOneCgroup,
}

/// Every scenario, in table order.
pub const SCENARIOS: [Scenario; 14] = [
    Scenario::Baseline,
    Scenario::BaselinePinned,
    Scenario::Unisolated,
    Scenario::Weighted,
    Scenario::Pinned,
    Scenario::Nice,
    Scenario::Idle,
    Scenario::CgroupIdle,
    Scenario::Cooperative,
    Scenario::Background,
    Scenario::BackgroundCgroupIdle,
    Scenario::UnisolatedOneCgroup,
    Scenario::IdleOneCgroup,
    Scenario::BackgroundOneCgroup,
];

/// Where B runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BCgroup {
    /// In its own cgroup, a sibling of A's.
    Own,
    /// In its own cgroup, marked idle (`cpu.idle` = 1).
    OwnIdle,
    /// In A's cgroup.
    SharedWithA,
}

impl Scenario {
    /// The name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Baseline => "baseline",
            Scenario::BaselinePinned => "baseline-pinned",
            Scenario::Unisolated => "unisolated",
            Scenario::Weighted => "weighted",
            Scenario::Pinned => "pinned",
            Scenario::Nice => "nice",
            Scenario::Idle => "idle",
            Scenario::CgroupIdle => "cgroup-idle",
            Scenario::Cooperative => "cooperative",
            Scenario::Background => "background",
            Scenario::BackgroundCgroupIdle => "background-cgroup-idle",
            Scenario::UnisolatedOneCgroup => "unisolated-one-cgroup",
            Scenario::IdleOneCgroup => "idle-one-cgroup",
            Scenario::BackgroundOneCgroup => "background-one-cgroup",
        }
    }

    /// B's command-line options, or `None` when A runs alone.
    pub fn batch_args(self) -> Option<&'static [&'static str]> {
        match self {
            Scenario::Baseline | Scenario::BaselinePinned => None,
            Scenario::Unisolated
            | Scenario::Weighted
            | Scenario::Pinned
            | Scenario::CgroupIdle
            | Scenario::UnisolatedOneCgroup => Some(&["--mode", "plain"]),
            Scenario::Nice => Some(&["--mode", "plain", "--priority", "nice"]),
            Scenario::Idle | Scenario::IdleOneCgroup => Some(&["--mode", "plain", "--priority", "idle"]),
            Scenario::Cooperative => Some(&["--mode", "adaptive"]),
            Scenario::Background | Scenario::BackgroundCgroupIdle | Scenario::BackgroundOneCgroup => {
                Some(&["--mode", "background"])
            }
        }
    }

    /// Where B runs.
    pub fn b_cgroup(self) -> BCgroup {
        match self {
            Scenario::CgroupIdle | Scenario::BackgroundCgroupIdle => BCgroup::OwnIdle,
            Scenario::UnisolatedOneCgroup | Scenario::IdleOneCgroup | Scenario::BackgroundOneCgroup => {
                BCgroup::SharedWithA
            }
            _ => BCgroup::Own,
        }
    }

    /// Whether this is one of the background-pool scenarios the target applies to.
    pub fn is_background_pool(self) -> bool {
        matches!(self, Scenario::Background | Scenario::BackgroundCgroupIdle | Scenario::BackgroundOneCgroup)
    }

    /// The seed's 22-CPU figures (p50, p95, p99 ms) where it ran this scenario.
    pub fn seed_figures(self) -> Option<[f64; 3]> {
        match self {
            Scenario::Baseline => Some([0.40, 1.50, 2.30]),
            Scenario::Unisolated => Some([1.80, 10.30, 24.70]),
            Scenario::Weighted => Some([1.10, 3.90, 9.00]),
            Scenario::Pinned => Some([0.50, 1.40, 1.80]),
            _ => None,
        }
    }
}

/// The CPU lists of the pinned scenario: A the lower half, B the upper (at least one each).
pub fn split_cpus(cpus: u32) -> (String, String) {
    let cpus = cpus.max(2);
    let half = cpus / 2;
    let list = |lo: u32, hi: u32| if lo == hi { lo.to_string() } else { format!("{lo}-{hi}") };
    (list(0, half - 1), list(half, cpus - 1))
}

/// One run's figures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RunFigures {
    /// A's latency percentiles (µs): p50, p95, p99, p99.9.
    pub latency_us: [f64; 4],
    /// Requests answered / failed / due.
    pub completed: u64,
    /// Failed requests.
    pub errors: u64,
    /// B's chunks per second in the load window (NaN when A ran alone).
    pub b_chunks_per_s: f64,
}

/// A scenario over its repeats: medians.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Aggregate {
    /// The scenario.
    pub scenario: Scenario,
    /// Repeats.
    pub repeats: usize,
    /// Median of each percentile (µs).
    pub latency_us: [f64; 4],
    /// Smallest and largest p99 over repeats (µs).
    pub p99_range_us: (f64, f64),
    /// Median of B's throughput.
    pub b_chunks_per_s: f64,
    /// Errors over all repeats.
    pub errors: u64,
}

/// Reduces one scenario's runs (at least one).
pub fn aggregate(scenario: Scenario, runs: &[RunFigures]) -> Aggregate {
    let pick = |f: &dyn Fn(&RunFigures) -> f64| median(&mut runs.iter().map(f).collect::<Vec<_>>());
    let p99s: Vec<f64> = runs.iter().map(|r| r.latency_us[2]).collect();
    Aggregate {
        scenario,
        repeats: runs.len(),
        latency_us: [0, 1, 2, 3].map(|i| pick(&|r| r.latency_us[i])),
        p99_range_us: (
            p99s.iter().copied().fold(f64::INFINITY, f64::min),
            p99s.iter().copied().fold(0.0, f64::max),
        ),
        b_chunks_per_s: pick(&|r| r.b_chunks_per_s),
        errors: runs.iter().map(|r| r.errors).sum(),
    }
}

fn find(aggregates: &[Aggregate], scenario: Scenario) -> Option<&Aggregate> {
    aggregates.iter().find(|a| a.scenario == scenario)
}

/// A's p99 over the baseline's, and B's throughput over the unisolated one's.
pub fn ratios(aggregates: &[Aggregate], a: &Aggregate) -> (f64, f64) {
    let p99 = find(aggregates, Scenario::Baseline).map_or(f64::NAN, |b| a.latency_us[2] / b.latency_us[2]);
    let tput =
        find(aggregates, Scenario::Unisolated).map_or(f64::NAN, |u| a.b_chunks_per_s / u.b_chunks_per_s);
    (p99, tput)
}

/// The verdict lines: what isolated A and what it cost B.
pub fn verdicts(aggregates: &[Aggregate]) -> Vec<String> {
    let mut out = Vec::new();
    for a in aggregates.iter().filter(|a| a.scenario.batch_args().is_some()) {
        let (p99, tput) = ratios(aggregates, a);
        out.push(format!(
            "{}: A's p99 {:.2}x baseline's; B keeps {:.0}% of its unisolated throughput",
            a.scenario.name(),
            p99,
            tput * 100.0
        ));
    }
    for bg in aggregates.iter().filter(|a| a.scenario.is_background_pool()) {
        let (p99, tput) = ratios(aggregates, bg);
        let holds = p99 <= 1.2 && tput >= 0.9;
        out.push(format!(
            "{}: A's p99 {p99:.2}x baseline's (target at most 1.2x), B {:.0}% of unisolated (target at least 90%): {}",
            bg.scenario.name(),
            tput * 100.0,
            if holds { "met" } else { "NOT met" }
        ));
    }
    out
}

/// The Markdown table, with the seed's figures beside ours.
pub fn table(aggregates: &[Aggregate]) -> String {
    let mut out = String::from(
        "| scenario | p50 ms | p95 ms | p99 ms (range) | p99.9 ms | p99 vs baseline | B throughput vs unisolated | errors | seed 003 (22 CPUs) p50 / p95 / p99 ms |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for a in aggregates {
        let (p99, tput) = ratios(aggregates, a);
        let ms = |us: f64| us / 1000.0;
        let seed = a
            .scenario
            .seed_figures()
            .map_or("—".to_owned(), |s| format!("{:.2} / {:.2} / {:.2}", s[0], s[1], s[2]));
        let _ = writeln!(
            out,
            "| {} | {:.2} | {:.2} | {:.2} ({:.2}–{:.2}) | {:.2} | {:.2}x | {} | {} | {} |",
            a.scenario.name(),
            ms(a.latency_us[0]),
            ms(a.latency_us[1]),
            ms(a.latency_us[2]),
            ms(a.p99_range_us.0),
            ms(a.p99_range_us.1),
            ms(a.latency_us[3]),
            p99,
            if tput.is_nan() { "—".to_owned() } else { format!("{:.0}%", tput * 100.0) },
            a.errors,
            seed
        );
    }
    out
}

struct Config {
    seconds: f64,
    rate: f64,
    client: loadgen::ClientPriority,
}

/// One run's figures and how it ran.
struct OneRun {
    figures: RunFigures,
    /// How B's threads were scheduled (empty without B).
    b_ran_as: String,
    /// How the load generator's threads were scheduled.
    client_ran_as: String,
    diagnosis: Diagnosis,
}

fn run_once(lab: &Lab, layout: &Layout, scenario: Scenario, config: &Config) -> anyhow::Result<OneRun> {
    let exe = std::env::current_exe().context("locating the cotenant binary")?;
    let parent = std::process::id().to_string();
    let (cpus_a, cpus_b) = split_cpus(lab.host.cpus);
    let pinned = scenario == Scenario::Pinned;
    let cg_a = Cgroup::create(layout, LAB_PREFIX, "iso-a", false, pinned.then_some(cpus_a.as_str()))
        .context("creating tenant A's cgroup")?;
    let cg_b = Cgroup::create(layout, LAB_PREFIX, "iso-b", false, pinned.then_some(cpus_b.as_str()))
        .context("creating tenant B's cgroup")?;
    Cgroup::set_weight(layout, cg_a.cpu_dir(false), 100).context("setting A's weight")?;
    let b_weight = if scenario == Scenario::Weighted { 10 } else { 100 };
    Cgroup::set_weight(layout, cg_b.cpu_dir(false), b_weight).context("setting B's weight")?;
    if scenario.b_cgroup() == BCgroup::OwnIdle {
        Cgroup::set_idle(cg_b.cpu_dir(false), true).context("marking B's cgroup idle (cpu.idle)")?;
    }

    let mut a_args = vec!["lab-tenant", "server", "--parent", &parent];
    let work = WORK_US.to_string();
    a_args.extend(["--work-us", &work]);
    if scenario == Scenario::BaselinePinned {
        a_args.push("--pin");
    }
    // Both tenants are the lab's children (killed and reaped however the run ends, a signal
    // included), and their default pools share the lab's token set, as the workers' do.
    let mut a_command = cg_a.command(&exe, &a_args, None);
    runner::lab_environment(&mut a_command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut a = LabChild::spawn(&mut a_command).context("starting tenant A")?;
    let port = a_port(&mut a)?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));

    let window = Duration::from_secs_f64(config.seconds);
    let measure_from = SystemTime::now() + WARM_UP;
    let from_ns =
        measure_from.duration_since(UNIX_EPOCH).context("clock before 1970")?.as_nanos().to_string();
    let window_ms = window.as_millis().to_string();
    let mut b = match scenario.batch_args() {
        Some(extra) => {
            let mut b_args = vec!["lab-tenant", "batch", "--parent", &parent];
            b_args.extend(extra);
            b_args.extend(["--measure-from-ns", &from_ns, "--measure-ms", &window_ms]);
            let home = if scenario.b_cgroup() == BCgroup::SharedWithA { &cg_a } else { &cg_b };
            let mut b_command = home.command(&exe, &b_args, None);
            runner::lab_environment(&mut b_command)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            Some(LabChild::spawn(&mut b_command).context("starting tenant B")?)
        }
        None => None,
    };
    // B reports once its measuring window is over; it gets the runner's grace beyond that.
    let b_deadline = runner::deadline_for(WARM_UP, window)?;
    if let Ok(wait) = measure_from.duration_since(SystemTime::now()) {
        std::thread::sleep(wait);
    }
    // The doctor samples A in the middle of the load window, as an engineer would run it
    // while the service is slow (issue 6, item 5).
    let a_pid = a.id();
    let sample = doctor_sample(window);
    let doctor = std::thread::spawn(move || {
        std::thread::sleep(window.saturating_sub(sample) / 2);
        cotenant_ops::doctor::diagnose(&cotenant_ops::doctor::DoctorOptions {
            pid: Some(a_pid),
            duration: sample,
            root: "/".into(),
        })
    });
    let load = loadgen::drive(addr, config.rate, window, CONNECTIONS, config.client)?;
    let report = doctor.join().map_err(|_| anyhow::anyhow!("the doctor thread panicked"))?;
    let diagnosis = Diagnosis {
        scenario,
        top: report.findings.first().map_or("nothing-wrong", |f| f.kind).to_owned(),
        summary: report.summary(),
    };
    let (b_chunks_per_s, b_ran_as) = match b.as_mut() {
        Some(b) => {
            // stdout and stderr read at once, by the deadline (a failed run otherwise).
            let finished = runner::collect(std::slice::from_mut(b), b_deadline)
                .context("tenant B")?
                .pop()
                .context("tenant B left no status")?;
            if !finished.status.success() {
                let why = format!("tenant B failed ({}): {}", finished.status, finished.stderr.trim());
                return Err(WorkerFailed(why).into());
            }
            let out = String::from_utf8_lossy(&finished.stdout);
            let report: BatchReport = serde_json::from_str(out.trim()).map_err(|e| {
                WorkerFailed(format!("tenant B printed {:?}, not its report: {e}", out.trim()))
            })?;
            (report.chunks_per_s, report.priority)
        }
        None => (f64::NAN, String::new()),
    };
    drop(a.take_stdin()); // A serves until its stdin closes
                          // The run's figures are in: an A that does not stop is killed when dropped.
    let _ = a.wait_until(Instant::now() + A_LIMIT);
    let q = |p: f64| load.latency_us.value_at_quantile(p) as f64;
    let figures = RunFigures {
        latency_us: [q(0.50), q(0.95), q(0.99), q(0.999)],
        completed: load.completed,
        errors: load.errors + (load.due - load.completed - load.errors),
        b_chunks_per_s,
    };
    Ok(OneRun { figures, b_ran_as, client_ran_as: load.client_ran_as, diagnosis })
}

/// The port tenant A listens on, read within [`A_LIMIT`]: an A that never says fails the run
/// (and is killed when dropped).
fn a_port(a: &mut LabChild) -> anyhow::Result<u16> {
    let stdout = a.take_stdout().context("tenant A's stdout")?;
    let (sender, port) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("lab-tenant-a".into())
        .spawn(move || {
            let _ = sender.send(read_port(&mut BufReader::new(stdout)));
        })
        .context("starting a thread to read tenant A's port")?;
    match port.recv_timeout(A_LIMIT) {
        Ok(Ok(port)) => Ok(port),
        Ok(Err(e)) => Err(WorkerFailed(format!("tenant A did not start: {e:#}")).into()),
        Err(_) => {
            let why = format!("tenant A printed no port within {} s; killed", A_LIMIT.as_secs());
            Err(WorkerFailed(why).into())
        }
    }
}

/// Whether a new cgroup here has `cpu.idle` (Linux 5.15+), probed with a throw-away cgroup.
fn has_cpu_idle(layout: &Layout) -> bool {
    Cgroup::create(layout, LAB_PREFIX, "iso-probe", false, None)
        .map(|probe| probe.cpu_dir(false).join("cpu.idle").exists())
        .unwrap_or(false)
}

/// How long the doctor samples during a run of `window`: 2 s, or half a shorter window.
pub fn doctor_sample(window: Duration) -> Duration {
    DOCTOR_SAMPLE.min(window / 2)
}

/// What `doctor --pid <A>` said during one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diagnosis {
    /// The scenario.
    pub scenario: Scenario,
    /// The top finding's kind (`cpu-contention`, `nothing-wrong`, ...).
    pub top: String,
    /// The report's one-line summary.
    pub summary: String,
}

/// One line per scenario: the top finding of each repeat's diagnosis, the most frequent first
/// with its count, and the first repeat's summary.
pub fn doctor_lines(scenarios: &[Scenario], diagnoses: &[Diagnosis]) -> Vec<String> {
    let mut out = Vec::new();
    for &scenario in scenarios {
        let mine: Vec<&Diagnosis> = diagnoses.iter().filter(|d| d.scenario == scenario).collect();
        let Some(first) = mine.first() else { continue };
        let mut counts: Vec<(&str, usize)> = Vec::new();
        for d in &mine {
            match counts.iter_mut().find(|(k, _)| *k == d.top) {
                Some((_, n)) => *n += 1,
                None => counts.push((&d.top, 1)),
            }
        }
        // Stable: ties keep the order of first appearance.
        counts.sort_by_key(|c| std::cmp::Reverse(c.1));
        let tally: Vec<String> = counts.iter().map(|(k, n)| format!("{k} {n}/{}", mine.len())).collect();
        out.push(format!("{}: {} — \"{}\"", scenario.name(), tally.join(", "), first.summary));
    }
    out
}

/// The scenarios to run: the requested ones (all when none), always with baseline and
/// unisolated (the ratios' denominators), in table order; pinned only with a cpuset controller.
pub fn chosen_scenarios(requested: &[Scenario], has_cpuset: bool, has_cpu_idle: bool) -> Vec<Scenario> {
    SCENARIOS
        .iter()
        .copied()
        .filter(|s| {
            requested.is_empty()
                || requested.contains(s)
                || matches!(s, Scenario::Baseline | Scenario::Unisolated)
        })
        .filter(|s| *s != Scenario::Pinned || has_cpuset)
        .filter(|s| s.b_cgroup() != BCgroup::OwnIdle || has_cpu_idle)
        .collect()
}

/// Runs the experiment.
pub fn run(lab: &Lab, args: &LabArgs) -> anyhow::Result<Outcome> {
    let layout = match &lab.layout {
        Ok(layout) => layout,
        Err(why) => {
            return Ok(Outcome {
                report: format!("Skipped: the isolation experiment needs real cgroups ({why}).\n"),
                ..Outcome::default()
            })
        }
    };
    let config = Config {
        seconds: args.seconds.map_or(if args.quick { 1.0 } else { 5.0 }, |s| s as f64),
        rate: RATE,
        client: args.client_priority,
    };
    let repeats = args.repeats.unwrap_or(if args.quick { 1 } else { 5 }) as usize;
    let has_cpu_idle = has_cpu_idle(layout);
    let scenarios = chosen_scenarios(&args.scenarios, layout.has_cpuset(), has_cpu_idle);
    let mut outcome = Outcome::default();
    let mut runs: Vec<Vec<RunFigures>> = vec![Vec::new(); scenarios.len()];
    let mut priorities = Vec::new();
    let mut diagnoses = Vec::new();
    let mut clients: Vec<String> = Vec::new();
    // Repeats are interleaved (every scenario once, then again) so that a slow drift in the
    // host's background noise spreads over all scenarios instead of biasing one.
    for repeat in 0..repeats {
        for (i, &scenario) in scenarios.iter().enumerate() {
            let busy_before = lab.quiet_check();
            eprintln!("lab isolation: repeat {}/{repeats}, {}", repeat + 1, scenario.name());
            let mut row = serde_json::Map::new();
            row.insert("scenario".into(), scenario.name().into());
            row.insert("repeat".into(), repeat.into());
            let OneRun { figures, b_ran_as, client_ran_as, diagnosis } =
                match run_once(lab, layout, scenario, &config) {
                    Ok(one) => one,
                    // A failed run (a tenant hung or crashed) gets its row; the others go on.
                    Err(e) => match runner::failed_run(&e) {
                        Some(why) => {
                            eprintln!("lab isolation: the run failed and is recorded as such: {why}");
                            outcome.rows.push(super::failed_row(row, &why));
                            continue;
                        }
                        None => return Err(e),
                    },
                };
            row.insert("rate_per_s".into(), config.rate.into());
            row.insert("work_us".into(), WORK_US.into());
            row.insert("seconds".into(), config.seconds.into());
            row.insert("host_busy_cpus_before".into(), busy_before.into());
            for (name, v) in ["p50_us", "p95_us", "p99_us", "p999_us"].iter().zip(figures.latency_us) {
                row.insert((*name).into(), v.into());
            }
            row.insert("completed".into(), figures.completed.into());
            row.insert("errors".into(), figures.errors.into());
            row.insert(
                "b_chunks_per_s".into(),
                if figures.b_chunks_per_s.is_nan() {
                    serde_json::Value::Null
                } else {
                    figures.b_chunks_per_s.into()
                },
            );
            row.insert("b_ran_as".into(), b_ran_as.clone().into());
            row.insert("client_ran_as".into(), client_ran_as.clone().into());
            if !clients.contains(&client_ran_as) {
                clients.push(client_ran_as);
            }
            row.insert("doctor_top".into(), diagnosis.top.clone().into());
            row.insert("doctor_summary".into(), diagnosis.summary.clone().into());
            outcome.rows.push(row);
            runs[i].push(figures);
            diagnoses.push(diagnosis);
            if repeat == 0 && !b_ran_as.is_empty() {
                priorities.push(format!("{}: {b_ran_as}", scenario.name()));
            }
        }
    }
    // A scenario whose every run failed has no figures (its failed rows are in the report).
    let aggregates: Vec<Aggregate> = scenarios
        .iter()
        .zip(&runs)
        .filter(|(_, runs)| !runs.is_empty())
        .map(|(&scenario, runs)| aggregate(scenario, runs))
        .collect();
    let mut report = format!(
        "Tenant A: an HTTP/1.1 server (tiny_http) doing {WORK_US} µs of CPU work per request on a pool of one \
         worker per CPU, offered {RATE} requests/s open loop over {CONNECTIONS} keep-alive loopback connections \
         (latency from each request's intended send time). Tenant B: CPU-bound chunks on every CPU. Each in its \
         own cgroup (sibling cgroups of equal weight) unless the scenario says otherwise; {:.0} s runs after a {} ms warm-up, {repeats} repeats \
         interleaved, medians.\n\n",
        config.seconds,
        WARM_UP.as_millis()
    );
    report.push_str(&table(&aggregates));
    if !layout.has_cpuset() {
        report.push_str("\nThe pinned scenario was skipped: no cpuset controller.\n");
    }
    if !has_cpu_idle {
        report.push_str("\nThe cgroup-idle scenarios were skipped: this kernel's cgroups have no cpu.idle (Linux 5.15+).\n");
    }
    let _ = writeln!(report, "\nB ran as: {}.", priorities.join("; "));
    let _ = writeln!(
        report,
        "\nThe load generator's threads ran as: {} (`--client-priority`; realtime stands in for a client on \
         another host, which B cannot delay).",
        clients.join("; ")
    );
    let _ = writeln!(
        report,
        "\n`cotenant doctor --pid <A>` during each run ({} s in the middle of the load), top finding per \
         repeat:\n",
        doctor_sample(Duration::from_secs_f64(config.seconds)).as_secs_f64()
    );
    for line in doctor_lines(&scenarios, &diagnoses) {
        let _ = writeln!(report, "- {line}");
    }
    outcome.report = report;
    outcome.verdicts = verdicts(&aggregates);
    outcome.charts = vec![Chart {
        file_stem: "percentiles".into(),
        title: "tenant A's latency by percentile".into(),
        x_label: "percentile (50, 95, 99, 99.9)".into(),
        y_label: "latency (ms)".into(),
        log_y: true,
        series: aggregates
            .iter()
            .map(|a| Series {
                name: a.scenario.name().into(),
                points: [50.0, 95.0, 99.0, 99.9]
                    .iter()
                    .zip(a.latency_us)
                    .map(|(&p, v)| (p, v / 1000.0))
                    .collect(),
            })
            .collect(),
    }];
    outcome.summary = serde_json::to_value(&aggregates)?;
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(p99: f64, b: f64) -> RunFigures {
        RunFigures {
            latency_us: [p99 / 4.0, p99 / 2.0, p99, p99 * 2.0],
            completed: 100,
            errors: 0,
            b_chunks_per_s: b,
        }
    }

    #[test]
    fn the_cpus_split_in_halves_with_at_least_one_each() {
        assert_eq!(split_cpus(2), ("0".into(), "1".into()));
        assert_eq!(split_cpus(22), ("0-10".into(), "11-21".into()));
        assert_eq!(split_cpus(1), ("0".into(), "1".into()), "one CPU: the scenario needs two");
    }

    #[test]
    fn ratios_are_to_the_baseline_and_to_the_unisolated_batch() {
        let aggs = [
            aggregate(Scenario::Baseline, &[run(1000.0, f64::NAN)]),
            aggregate(Scenario::Unisolated, &[run(8000.0, 100.0), run(6000.0, 120.0), run(7000.0, 110.0)]),
            aggregate(Scenario::Background, &[run(1100.0, 99.0)]),
        ];
        assert_eq!(aggs[1].latency_us[2], 7000.0);
        assert_eq!(aggs[1].p99_range_us, (6000.0, 8000.0));
        assert_eq!(ratios(&aggs, &aggs[1]), (7.0, 1.0));
        let (p99, tput) = ratios(&aggs, &aggs[2]);
        assert!((p99 - 1.1).abs() < 1e-9 && (tput - 0.9).abs() < 1e-9);
        let v = verdicts(&aggs);
        assert_eq!(v[0], "unisolated: A's p99 7.00x baseline's; B keeps 100% of its unisolated throughput");
        assert!(v.last().unwrap().ends_with(": met"), "{v:?}");
        let t = table(&aggs);
        assert!(
            t.contains(
                "| baseline | 0.25 | 0.50 | 1.00 (1.00–1.00) | 2.00 | 1.00x | — | 0 | 0.40 / 1.50 / 2.30 |"
            ),
            "{t}"
        );
    }

    #[test]
    fn baseline_and_unisolated_always_run_and_missing_controllers_skip_their_scenarios() {
        assert_eq!(chosen_scenarios(&[], true, true), SCENARIOS.to_vec());
        assert_eq!(
            chosen_scenarios(&[Scenario::Background], true, true),
            vec![Scenario::Baseline, Scenario::Unisolated, Scenario::Background]
        );
        let without = chosen_scenarios(&[], false, false);
        assert!(!without.contains(&Scenario::Pinned));
        assert!(
            !without.contains(&Scenario::CgroupIdle) && !without.contains(&Scenario::BackgroundCgroupIdle)
        );
        assert!(without.contains(&Scenario::BackgroundOneCgroup), "needs no controller beyond cpu");
    }

    #[test]
    fn doctor_lines_count_each_top_finding_over_the_repeats() {
        let d = |scenario, top: &str| Diagnosis { scenario, top: top.into(), summary: format!("{top}: ...") };
        let diagnoses = [
            d(Scenario::Unisolated, "cpu-pressure"),
            d(Scenario::Unisolated, "cpu-contention"),
            d(Scenario::Baseline, "nothing-wrong"),
            d(Scenario::Unisolated, "cpu-contention"),
        ];
        let lines = doctor_lines(&[Scenario::Baseline, Scenario::Unisolated, Scenario::Idle], &diagnoses);
        assert_eq!(
            lines,
            vec![
                "baseline: nothing-wrong 1/1 — \"nothing-wrong: ...\"".to_owned(),
                "unisolated: cpu-contention 2/3, cpu-pressure 1/3 — \"cpu-pressure: ...\"".to_owned(),
            ]
        );
    }
}
