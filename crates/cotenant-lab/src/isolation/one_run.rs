//! One run of `lab isolation`: both tenants started in their cgroups as children of the lab,
//! A's port, B's measuring window, the load, the doctor's sample of A, and B's report; and the
//! probe for `cpu.idle`.

use std::io::BufReader;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;

use crate::runner::{self, LabChild, WorkerFailed};
use crate::tenants::{read_port, BatchReport};
use crate::{loadgen, Lab};
use cotenant_ops::cgroup::{Cgroup, Layout, LAB_PREFIX};
use cotenant_ops::cgroup_set;

use super::plan::{doctor_sample, split_cpus, BCgroup, Scenario};
use super::report::{Diagnosis, RunFigures};
use super::{CONNECTIONS, WARM_UP, WORK_US};

/// How long tenant A may take to listen, and to stop once its stdin closes, before it is
/// killed (it calibrates and builds its pool in well under a second).
const A_LIMIT: Duration = Duration::from_secs(30);

/// What every run is told: its length, the load's rate, how the load generator's threads run.
pub(super) struct Config {
    pub(super) seconds: f64,
    pub(super) rate: f64,
    pub(super) client: loadgen::ClientPriority,
}

/// One run's figures and how it ran.
pub(super) struct OneRun {
    pub(super) figures: RunFigures,
    /// How B's threads were scheduled (empty without B).
    pub(super) b_ran_as: String,
    /// How the load generator's threads were scheduled.
    pub(super) client_ran_as: String,
    pub(super) diagnosis: Diagnosis,
}

pub(super) fn run_once(
    lab: &Lab,
    layout: &Layout,
    scenario: Scenario,
    config: &Config,
) -> anyhow::Result<OneRun> {
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
    match scenario.b_cgroup() {
        BCgroup::OwnIdle => {
            Cgroup::set_idle(cg_b.cpu_dir(false), true).context("marking B's cgroup idle (cpu.idle)")?;
        }
        BCgroup::OwnIdleByCgroupSet => {
            // The command's own path (resolve, read, plan, write what differs, read back), not a
            // write of our own: this scenario measures the remedy the doctor prints.
            let request = cgroup_set::Request { idle: Some(true), ..cgroup_set::Request::default() };
            cgroup_set::resolve(cg_b.cpu_dir(false), Path::new("/"))
                .and_then(|target| cgroup_set::set(&target, &request))
                .context("marking B's cgroup idle with `cotenant cgroup set --idle`")?;
        }
        BCgroup::Own | BCgroup::SharedWithA => {}
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
pub(super) fn has_cpu_idle(layout: &Layout) -> bool {
    Cgroup::create(layout, LAB_PREFIX, "iso-probe", false, None)
        .map(|probe| probe.cpu_dir(false).join("cpu.idle").exists())
        .unwrap_or(false)
}
