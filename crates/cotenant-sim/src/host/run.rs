//! The runner: a simulation's inputs and outcome, the simulator's state and the event loop that
//! drives the scheduler, the pools and the work.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, VecDeque};

use cotenant::policy::PolicyState;

use crate::rng::SplitMix64;

use super::linux;
use super::linux::{GroupShares, RunningReweight};
use super::pool::{Level, Process};
use super::sched::{Cpu, Fairness, Group, SchedParams, SchedulerModel, Thread};
use super::workload::{Arrivals, ProcessConfig};

/// The most CPUs a simulation takes.
const MAX_CPUS: u32 = 1 << 16;
/// The most scheduler ticks a simulation may process (CPUs × ticks in the longest run).
const MAX_TICKS: u64 = 2_000_000_000;
/// The most run queues of process groups the Linux model keeps (one per process and CPU with
/// per-process cgroups): about 300 MB at most.
const MAX_GROUP_QUEUES: u64 = 1 << 22;

/// A simulation's inputs.
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// CPUs.
    pub cpus: u32,
    /// Who competes.
    pub fairness: Fairness,
    /// The processes.
    pub processes: Vec<ProcessConfig>,
    /// How long items arrive (ns).
    pub duration: u64,
    /// The pools' controller period (ns).
    pub period: u64,
    /// The scheduler's constants.
    pub sched: SchedParams,
    /// Seeds arrivals, tick phases and controller phases.
    pub seed: u64,
    /// Items that arrive before this (ns) are run but left out of the latencies: the pools'
    /// first decisions are a transient the lab's short runs include and a long-running service
    /// does not (0: keep everything).
    pub warmup: u64,
    /// Host CPU tokens beyond one per CPU, for the processes that use them (0: as many tokens
    /// as CPUs). A spare token lets a task start while another's hand-over is in flight.
    pub spare_tokens: u32,
    /// The scheduler model: the idealised one (the default) or Linux's.
    pub scheduler: SchedulerModel,
    /// CPU time a process's submitting thread takes to queue the items that arrived (ns). With
    /// it, each process has that thread, a simulated thread of its own in its cgroup, as the
    /// lab's load generator is: an arrival wakes it (from a timer), it runs this long, then
    /// queues every item that arrived meanwhile and wakes a worker per item from its own CPU,
    /// and sleeps. 0: not simulated (items queue themselves as they arrive, and workers are
    /// woken as from a timer). Modelled simply: one `submit_ns` per wake-up however many items
    /// it queues; it sleeps before its wake-ups take effect (its CPU may look idle to them);
    /// the controller's sample counts its CPU time in the workers' (no policy reads that) and
    /// its waits in nobody's.
    pub submit_ns: u64,
    /// The Linux model's rule for reweighting a queue's running entity (a group entity whose
    /// share changes as its threads wake and sleep): as measured on Linux 6.18 (the default),
    /// or keeping its lag. The idealised model ignores it.
    pub running_reweight: RunningReweight,
    /// How the Linux model splits a process group's weight across CPUs: by counts of runnable
    /// threads (the default) or from load averages, as the kernel does. The idealised model
    /// ignores it.
    pub group_shares: GroupShares,
}

impl HostConfig {
    /// `Err` names the input that is out of range.
    pub fn validate(&self) -> Result<(), String> {
        if self.cpus == 0 || self.cpus > MAX_CPUS {
            return Err(format!("cpus must be in 1..={MAX_CPUS}, got {}", self.cpus));
        }
        if self.processes.is_empty() {
            return Err("at least one process".into());
        }
        for (name, value) in [
            ("duration", self.duration),
            ("period", self.period),
            ("tick", self.sched.tick),
            ("latency", self.sched.latency),
            ("min_granularity", self.sched.min_granularity),
            ("base_slice", self.sched.base_slice),
        ] {
            if value == 0 {
                return Err(format!("{name} must be positive"));
            }
        }
        for (i, p) in self.processes.iter().enumerate() {
            if p.threads == 0 {
                return Err(format!("process {i}: threads must be at least 1"));
            }
            if p.service == 0 {
                return Err(format!("process {i}: service time must be positive"));
            }
            if !(p.rate.is_finite() && p.rate >= 0.0) {
                return Err(format!("process {i}: rate must be finite and >= 0, got {}", p.rate));
            }
            p.policy.validate().map_err(|e| format!("process {i}: {e}"))?;
        }
        let submitters = if self.submit_ns > 0 { self.processes.len() as u64 } else { 0 };
        let threads: u64 = self.processes.iter().map(|p| u64::from(p.threads)).sum::<u64>() + submitters;
        if threads > 1 << 22 {
            return Err(format!("{threads} threads in all: at most 4194304"));
        }
        let group_queues = u64::from(self.cpus) * self.processes.len() as u64;
        if self.scheduler == SchedulerModel::Linux
            && self.fairness == Fairness::Processes
            && group_queues > MAX_GROUP_QUEUES
        {
            return Err(format!(
                "the Linux scheduler model keeps a run queue per process and CPU with per-process \
                 cgroups: processes × cpus is {group_queues}, at most {MAX_GROUP_QUEUES}"
            ));
        }
        let offered: f64 = self.processes.iter().map(|p| p.rate * self.duration as f64 / 1e9).sum();
        if offered > 1e8 {
            return Err(format!("{offered:.0} items offered: at most 10^8"));
        }
        // The run may go on to 10 × duration to finish the backlog; every busy CPU ticks.
        let ticks = u128::from(self.cpus) * u128::from(self.duration) * 10 / u128::from(self.sched.tick);
        if ticks > u128::from(MAX_TICKS) {
            return Err(format!(
                "up to {ticks} scheduler ticks (CPUs × 10 × duration / tick): at most {MAX_TICKS}; \
                 shorten the run or use fewer CPUs"
            ));
        }
        Ok(())
    }
}

/// One process's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessRun {
    /// Items offered (arrived before `duration`).
    pub offered: u64,
    /// Items finished.
    pub completed: u64,
    /// Service latency (end - start) of every finished item that arrived after the warm-up,
    /// sorted (ns).
    pub service: Vec<u64>,
    /// End-to-end latency (end - intended arrival) of the same items, sorted (ns).
    pub end_to_end: Vec<u64>,
    /// Completed items per second over `duration` or until the last one ended, if later.
    pub throughput_per_s: f64,
    /// CPU time the process got (ns).
    pub cpu_ns: u64,
    /// The target in force in each controller period, in order (periods it coasted through
    /// included; not those while its controller napped).
    pub targets: Vec<u32>,
    /// The samples its controller took (fewer than the periods while it coasted or napped).
    pub samples: u64,
}

/// A simulation's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct HostRun {
    /// Per process, in the configuration's order.
    pub processes: Vec<ProcessRun>,
    /// Simulated time (ns).
    pub simulated: u64,
    /// Events processed.
    pub events: u64,
    /// Token holders' waits for a CPU while a CPU idled: the integral over time of the lesser
    /// of the holders waiting and the idle CPUs (ns). Two holders sharing a CPU while another
    /// idles (a wake-up placed on a busy CPU, until a balance moves one) count here; CPU
    /// leases are what removes it. 0 under the idealised model, whose one run queue never
    /// leaves a CPU idle while a thread waits.
    pub holder_wait_beside_idle_ns: u64,
    /// Under the Linux model with per-process cgroups: how many times a CPU's running group
    /// entity had its weight changed (each grows its lead under
    /// [`RunningReweight::AsMeasured`]). 0 otherwise.
    pub running_reweights: u64,
}

/// The `q`-quantile (0..=1) of sorted `values` (nearest rank), 0 when empty.
pub fn quantile(values: &[u64], q: f64) -> u64 {
    if values.is_empty() {
        return 0;
    }
    let rank = (q.clamp(0.0, 1.0) * values.len() as f64).ceil() as usize;
    values[rank.clamp(1, values.len()) - 1]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Event {
    /// The period boundary of a controller (process).
    Control(u32),
    /// The next item of a process arrives.
    Arrival(u32),
    /// A CPU's scheduler tick.
    Tick(u32),
    /// A CPU's thread finishes its item, if the CPU's generation still matches.
    Done(u32, u64),
}

pub(super) struct Sim {
    pub(super) params: SchedParams,
    pub(super) fairness: Fairness,
    pub(super) scheduler: SchedulerModel,
    /// The Linux model's run queues and balancing state (empty with the idealised model).
    pub(super) linux: linux::State,
    pub(super) cpus: Vec<Cpu>,
    pub(super) idle: Vec<u32>,
    pub(super) threads: Vec<Thread>,
    pub(super) groups: Vec<Group>,
    /// Groups with waiting threads, by [`Group::key`].
    pub(super) ready: BTreeSet<(u32, u64, u32)>,
    pub(super) root_min_vruntime: u64,
    pub(super) processes: Vec<Process>,
    pub(super) busy: Level,
    queue: BinaryHeap<Reverse<(u64, u64, Event)>>,
    seq: u64,
    pub(super) now: u64,
    /// Items arrived and not finished, over all processes.
    pub(super) outstanding: u64,
    events: u64,
    pub(super) period: u64,
    pub(super) warmup: u64,
    /// The host's CPU tokens nobody holds (as many as CPUs at the start).
    pub(super) tokens_free: u32,
    /// Threads asleep waiting for a token, first come first served.
    pub(super) token_waiters: VecDeque<u32>,
    /// Tokens in all: one per CPU plus the spares.
    tokens_total: u32,
    /// Per CPU, whether a token holder holds its lease.
    pub(super) leases: Vec<bool>,
    /// Token holders waiting for a CPU, over all processes (`Sim::note_waiting`).
    pub(super) holders_waiting: u64,
    /// `HostRun::holder_wait_beside_idle_ns` so far, and the time it was brought up to.
    beside_idle: u64,
    beside_idle_at: u64,
    /// `HostConfig::submit_ns`.
    pub(super) submit_ns: u64,
}

/// Runs the simulation.
pub fn simulate(config: &HostConfig) -> Result<HostRun, String> {
    config.validate()?;
    let mut sim = Sim::new(config);
    let hard_stop = config.duration.saturating_mul(10);
    while let Some(Reverse((at, _, event))) = sim.queue.pop() {
        if at >= config.duration && sim.outstanding == 0 || at > hard_stop {
            sim.now = at.min(hard_stop);
            break;
        }
        sim.count_beside_idle(at);
        sim.now = at;
        sim.events += 1;
        match event {
            Event::Control(p) => sim.control(p),
            Event::Arrival(p) => sim.arrival(p, config.duration),
            Event::Tick(c) => sim.tick(c),
            Event::Done(c, generation) => sim.done(c, generation),
        }
    }
    Ok(sim.finish(config.duration))
}

impl Sim {
    /// The host of `config` at time 0 (`config` validated), every worker parked.
    pub(super) fn new(config: &HostConfig) -> Sim {
        let m = config.cpus;
        let mut phases = SplitMix64::stream(config.seed, u64::MAX);
        let cpus = (0..m).map(|_| Cpu { phase: phases.below(config.sched.tick), ..Cpu::default() }).collect();
        let mut threads = Vec::new();
        let mut processes = Vec::new();
        for (i, p) in config.processes.iter().enumerate() {
            let i = i as u32;
            let first = threads.len() as u32;
            threads.extend((0..p.threads).map(|_| Thread::parked(i, false)));
            let start = p.policy.fixed_target().map_or(p.threads, |n| n.min(p.threads as usize) as u32);
            // As the library's builder does for a pool with host tokens.
            let mut process = p.clone();
            if process.uses_tokens {
                process.policy = process.policy.sharing_host_tokens();
            }
            processes.push(Process {
                config: process,
                rng: SplitMix64::stream(config.seed, u64::from(i)),
                queue: VecDeque::new(),
                first,
                parked: (0..p.threads).collect(),
                state: PolicyState::new(start.max(1)),
                running: Level::default(),
                waiting: Level::default(),
                holder_waiting: Level::default(),
                holding: Level::default(),
                last: None,
                next_arrival: 0,
                offered: 0,
                service: Vec::new(),
                end_to_end: Vec::new(),
                last_end: 0,
                completed: 0,
                targets: Vec::new(),
                stride: 1,
                samples: 0,
                idle_periods: 0,
                next_control: 0,
                submitter: None,
                pending: VecDeque::new(),
            });
        }
        // The submitting threads after every worker, so that each pool's workers keep their
        // consecutive indices.
        if config.submit_ns > 0 {
            for (i, process) in processes.iter_mut().enumerate() {
                process.submitter = Some(threads.len() as u32);
                threads.push(Thread::parked(i as u32, true));
            }
        }
        let groups = match config.fairness {
            Fairness::Threads => 1,
            Fairness::Processes => processes.len(),
        };
        let linux_model = config.scheduler == SchedulerModel::Linux;
        let linux = if linux_model { linux::State::new(config, &threads) } else { linux::State::default() };
        let mut sim = Sim {
            params: config.sched.clone(),
            fairness: config.fairness,
            scheduler: config.scheduler,
            linux,
            cpus,
            // The Linux model keeps its own idle CPUs (`linux::State`).
            idle: if linux_model { Vec::new() } else { (0..m).rev().collect() },
            threads,
            groups: vec![Group::default(); groups],
            ready: BTreeSet::new(),
            root_min_vruntime: 0,
            processes,
            busy: Level::default(),
            queue: BinaryHeap::new(),
            seq: 0,
            now: 0,
            outstanding: 0,
            events: 0,
            period: config.period,
            warmup: config.warmup,
            tokens_free: m.saturating_add(config.spare_tokens),
            tokens_total: m.saturating_add(config.spare_tokens),
            token_waiters: VecDeque::new(),
            leases: vec![false; m as usize],
            holders_waiting: 0,
            beside_idle: 0,
            beside_idle_at: 0,
            submit_ns: config.submit_ns,
        };
        let mut controller_phases = SplitMix64::stream(config.seed, u64::MAX - 1);
        for p in 0..sim.processes.len() {
            let proc = &mut sim.processes[p];
            let rate = proc.config.rate;
            if rate > 0.0 {
                let gap = 1e9 / rate;
                let first = match proc.config.arrivals {
                    Arrivals::Poisson => proc.rng.exponential(gap),
                    Arrivals::Uniform => 0.0, // as the lab's schedule: the first item at 0
                };
                if (first as u64) < config.duration {
                    proc.next_arrival = first as u64;
                    sim.push(first as u64, Event::Arrival(p as u32));
                }
            }
            // The first tick only records the counters, as the library's controller does.
            let phase = controller_phases.below(config.period);
            sim.schedule_control(p, phase);
        }
        sim
    }

    /// Brings `HostRun::holder_wait_beside_idle_ns` up to `at`: the counts it integrates only
    /// change at events, so between two events they are constant.
    fn count_beside_idle(&mut self, at: u64) {
        let idle = (self.cpus.len() as u64).saturating_sub(self.busy.value);
        self.beside_idle += self.holders_waiting.min(idle) * (at - self.beside_idle_at);
        self.beside_idle_at = at;
    }

    pub(super) fn push(&mut self, at: u64, event: Event) {
        self.seq += 1;
        self.queue.push(Reverse((at, self.seq, event)));
    }

    fn finish(mut self, duration: u64) -> HostRun {
        let now = self.now;
        self.count_beside_idle(now);
        // Every token is free or held, and nobody waits for one while one is free.
        let held = self.threads.iter().filter(|t| t.token).count() as u32;
        debug_assert_eq!(self.tokens_free + held, self.tokens_total);
        debug_assert!(self.token_waiters.is_empty() || self.tokens_free == 0);
        let processes = self
            .processes
            .iter_mut()
            .map(|proc| {
                proc.service.sort_unstable();
                proc.end_to_end.sort_unstable();
                let span = proc.last_end.max(duration) as f64 / 1e9;
                let completed = proc.completed;
                ProcessRun {
                    offered: proc.offered,
                    completed,
                    service: std::mem::take(&mut proc.service),
                    end_to_end: std::mem::take(&mut proc.end_to_end),
                    throughput_per_s: completed as f64 / span,
                    cpu_ns: proc.running.at(now),
                    targets: std::mem::take(&mut proc.targets),
                    samples: proc.samples,
                }
            })
            .collect();
        HostRun {
            processes,
            simulated: now,
            events: self.events,
            holder_wait_beside_idle_ns: self.beside_idle,
            running_reweights: self.linux.running_reweights,
        }
    }
}
