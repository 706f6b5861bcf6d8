//! A shared host, event by event: M CPUs under a fair scheduler, processes with thread pools
//! that run **the library's own policy code** ([`cotenant::Policy::decide`]), and open-loop
//! CPU-bound work (issue 10 item 2; seed 000 §5, Figure 7, at sizes this machine lacks).
//!
//! **Scheduler** (an idealised CFS). One run queue for the whole host (idealised load
//! balancing: a thread runs on any CPU that is free). Fairness is by virtual runtime: every
//! running thread's `vruntime` grows with the CPU time it gets. With [`Fairness::Processes`]
//! (one cgroup per process, equal weights, as containers are) the choice is two-level, as in
//! CFS group scheduling: first the process that holds the fewest CPUs (ties: the least group
//! `vruntime`, its threads' CPU time while it competed), then its thread with the least
//! `vruntime`; with [`Fairness::Threads`] (all processes in one cgroup) every thread competes
//! alone. (Fewest CPUs first is the idealised equal-weight share that CFS reaches with per-CPU
//! group entities and load balancing; see [`Sim::lead`].)
//! - A CPU that frees up takes the first thread in that order.
//! - **Ticks** (every `tick`, from a per-CPU phase) charge the running thread; when it has run
//!   its slice, `max(latency / runnable-per-CPU, min_granularity)`, and a waiting thread comes
//!   first in the order, the waiting thread takes the CPU.
//! - **Wake-ups**: a woken thread takes an idle CPU at once; otherwise it is placed at no less
//!   than `min_vruntime - latency / 2` (the sleeper credit; `min_vruntime` follows the least
//!   vruntime of the threads running or waiting, and never goes back) and preempts the
//!   running thread it leads by the most, if that lead exceeds `wakeup_granularity`.
//! - A thread whose item ends at a tick or a preemption finishes it there (it is not put back
//!   on the queue with nothing left to run). If it takes its next item on the CPU instead of
//!   yielding it to the woken thread that preempted it, the woken thread waits for the next
//!   tick (its lead over the other CPUs is not scanned again).
//! - Constants are the kernel's defaults (`sched_latency` 6 ms, `min_granularity` 0.75 ms,
//!   `wakeup_granularity` 1 ms, each scaled by `1 + log2(min(CPUs, 8))`), ticks at 250 Hz.
//!
//! **Pools**, as `crates/cotenant/src/pool` builds them (its README, steps P, S, T and W):
//! `threads` workers indexed from 0, of which those below `target` may run. A task that
//! arrives wakes the lowest-index parked worker below the target, if any; a worker takes the
//! first queued task when it *runs* (so tasks start in arrival order, and a worker that finds
//! the queue empty parks again); after a task it takes the next one if it is still below the
//! target and the queue has one, and parks otherwise. Raising the target wakes the newly
//! allowed parked workers, at most one per queued task. Every `period` (10 ms) a controller
//! builds a [`Sample`] from the simulated counters (the process's CPU time, the allowed CPUs'
//! busy and idle time, the workers' busy time, CPU time and run-queue wait, the queue length)
//! and asks the pool's [`Policy`] for the next target: the same call the library's controller
//! makes. Like the library's, the controller's first tick only records the counters. Not
//! modelled: the workers' brief spin before parking, the submitting thread, caches.
//!
//! **Work**: per process, items of `service` CPU time arriving open-loop (Poisson or evenly
//! spaced) from a seeded generator; latencies are taken from the intended arrival, as in the
//! lab (`crates/cotenant-cli/src/lab/workload.rs`). Arrivals stop at `duration`; the run goes
//! on until every item has finished (or `10 × duration`, whichever comes first).
//!
//! Deterministic: integer nanoseconds, ordered containers, one seeded generator per process.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, VecDeque};

use cotenant::policy::{PolicyState, Sample};
use cotenant::Policy;

use crate::rng::SplitMix64;

const MS: u64 = 1_000_000;
/// The most CPUs a simulation takes.
const MAX_CPUS: u32 = 1 << 16;
/// The most scheduler ticks a simulation may process (CPUs × ticks in the longest run).
const MAX_TICKS: u64 = 2_000_000_000;

/// Who competes for CPU time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fairness {
    /// All processes in one cgroup: every runnable thread gets an equal share.
    Threads,
    /// One cgroup per process, equal weights: every busy process gets an equal share.
    Processes,
}

/// How arrivals are spaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrivals {
    /// Evenly spaced, the first at 0.
    Uniform,
    /// A Poisson process.
    Poisson,
}

/// The scheduler's constants (nanoseconds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedParams {
    /// The scheduler tick.
    pub tick: u64,
    /// `sched_latency`: the period in which every runnable thread should run once.
    pub latency: u64,
    /// `sched_min_granularity`: the shortest slice.
    pub min_granularity: u64,
    /// `sched_wakeup_granularity`: how far a woken thread must lead to preempt.
    pub wakeup_granularity: u64,
}

impl SchedParams {
    /// Linux's defaults for `cpus` CPUs (`sysctl_sched_*` scaled by `1 + ilog2(min(cpus, 8))`,
    /// the kernel's `SCHED_TUNABLESCALING_LOG`) and a 250 Hz tick.
    pub fn linux(cpus: u32) -> Self {
        let factor = 1 + u64::from(cpus.clamp(1, 8).ilog2());
        SchedParams {
            tick: 4 * MS,
            latency: 6 * MS * factor,
            min_granularity: 750_000 * factor,
            wakeup_granularity: MS * factor,
        }
    }
}

/// One process: a pool and the work offered to it.
#[derive(Debug, Clone)]
pub struct ProcessConfig {
    /// The pool's policy (the library's type; fixed, share or adaptive).
    pub policy: Policy,
    /// The pool's threads.
    pub threads: u32,
    /// Items offered per second.
    pub rate: f64,
    /// CPU time per item (ns).
    pub service: u64,
    /// How arrivals are spaced.
    pub arrivals: Arrivals,
    /// Its workers hold one of the host's CPU tokens while they run a task (`cotenant::tokens`:
    /// as many tokens as CPUs, shared by every process that uses them, handed on in FIFO
    /// order). A worker that finds none sleeps until one is handed to it.
    pub uses_tokens: bool,
}

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
        let threads: u64 = self.processes.iter().map(|p| u64::from(p.threads)).sum();
        if threads > 1 << 22 {
            return Err(format!("{threads} threads in all: at most 4194304"));
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
    /// The target in force in each controller period, in order.
    pub targets: Vec<u32>,
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
}

/// The `q`-quantile (0..=1) of sorted `values` (nearest rank), 0 when empty.
pub fn quantile(values: &[u64], q: f64) -> u64 {
    if values.is_empty() {
        return 0;
    }
    let rank = (q.clamp(0.0, 1.0) * values.len() as f64).ceil() as usize;
    values[rank.clamp(1, values.len()) - 1]
}

/// A count over time and its integral: what the controller's counters are made of.
#[derive(Debug, Clone, Copy, Default)]
struct Level {
    value: u64,
    since: u64,
    integral: u64,
}

impl Level {
    fn change(&mut self, now: u64, up: bool) {
        self.integral += self.value * (now - self.since);
        self.since = now;
        if up {
            self.value += 1;
        } else {
            self.value -= 1;
        }
    }

    fn at(&self, now: u64) -> u64 {
        self.integral + self.value * (now - self.since)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ThreadState {
    Parked,
    /// Holding a task, asleep until a CPU token is handed to it.
    Blocked,
    Waiting,
    Running(u32),
}

/// The start of an item taken but not yet run.
const NOT_STARTED: u64 = u64::MAX;

/// What a worker that is about to run does next.
enum Claim {
    /// It holds a task (and a token, if its process uses them): run it.
    Run,
    /// No task for it: park.
    Park,
    /// It holds a task but no token: sleep until one is handed to it.
    Block,
}

#[derive(Debug, Clone)]
struct Thread {
    process: u32,
    state: ThreadState,
    vruntime: u64,
    /// CPU time the current item still needs.
    remaining: u64,
    /// The current item's intended arrival and start (`None`: woken, not yet running a task).
    item: Option<(u64, u64)>,
    /// Holds one of the host's CPU tokens.
    token: bool,
}

/// A competitor at the upper level: a process (`Fairness::Processes`) or the whole host.
#[derive(Debug, Clone, Default)]
struct Group {
    /// CPU time its threads got while it competed: the tie-break between groups that hold
    /// as many CPUs.
    vruntime: u64,
    /// Follows the least vruntime of its threads running or waiting, never going back (CFS's
    /// `min_vruntime`); the floor of the sleeper credit.
    min_vruntime: u64,
    /// Threads waiting for a CPU, by (vruntime, thread).
    waiting: BTreeSet<(u64, u32)>,
    /// Threads running, by (vruntime at their last tick or dispatch, thread): a lower bound of
    /// their vruntime, at most a tick behind (every running CPU ticks).
    running_v: BTreeSet<(u64, u32)>,
    /// Threads waiting or running.
    runnable: u32,
    /// Threads running.
    running: u32,
}

impl Group {
    /// Its place among the groups with waiting threads: fewest CPUs held first, then least
    /// CPU time (the idealised equal-weight share, see [`Sim::lead`]).
    fn key(&self, g: usize) -> (u32, u64, u32) {
        (self.running, self.vruntime, g as u32)
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Cpu {
    current: Option<u32>,
    /// Since when `current` ran uncharged.
    since: u64,
    /// When `current` got the CPU (its slice counts from here).
    slice_start: u64,
    /// Bumped at every dispatch so that stale completions are ignored.
    generation: u64,
    /// `current`'s key in its group's `running_v` (its vruntime at its last tick or dispatch).
    charged_v: u64,
    phase: u64,
    tick_pending: bool,
}

struct Process {
    config: ProcessConfig,
    rng: SplitMix64,
    queue: VecDeque<u64>,
    /// The index of its worker 0 among all threads.
    first: u32,
    /// Parked workers, by index in the pool (the library wakes the lowest first).
    parked: BTreeSet<u32>,
    state: PolicyState,
    running: Level,
    waiting: Level,
    holding: Level,
    /// The counters at the last controller tick, (self, busy, holding, waiting), and when it
    /// was (`None` before the first tick).
    last: Option<((u64, u64, u64, u64), u64)>,
    next_arrival: u64,
    offered: u64,
    service: Vec<u64>,
    end_to_end: Vec<u64>,
    last_end: u64,
    completed: u64,
    targets: Vec<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// The period boundary of a controller (process).
    Control(u32),
    /// The next item of a process arrives.
    Arrival(u32),
    /// A CPU's scheduler tick.
    Tick(u32),
    /// A CPU's thread finishes its item, if the CPU's generation still matches.
    Done(u32, u64),
}

struct Sim {
    params: SchedParams,
    fairness: Fairness,
    cpus: Vec<Cpu>,
    idle: Vec<u32>,
    threads: Vec<Thread>,
    groups: Vec<Group>,
    /// Groups with waiting threads, by [`Group::key`].
    ready: BTreeSet<(u32, u64, u32)>,
    root_min_vruntime: u64,
    processes: Vec<Process>,
    busy: Level,
    queue: BinaryHeap<Reverse<(u64, u64, Event)>>,
    seq: u64,
    now: u64,
    /// Items arrived and not finished, over all processes.
    outstanding: u64,
    events: u64,
    period: u64,
    warmup: u64,
    /// The host's CPU tokens nobody holds (as many as CPUs at the start).
    tokens_free: u32,
    /// Threads asleep waiting for a token, first come first served.
    token_waiters: VecDeque<u32>,
    /// Tokens in all: one per CPU plus the spares.
    tokens_total: u32,
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
    fn new(config: &HostConfig) -> Sim {
        let m = config.cpus;
        let mut phases = SplitMix64::stream(config.seed, u64::MAX);
        let cpus = (0..m).map(|_| Cpu { phase: phases.below(config.sched.tick), ..Cpu::default() }).collect();
        let mut threads = Vec::new();
        let mut processes = Vec::new();
        for (i, p) in config.processes.iter().enumerate() {
            let i = i as u32;
            let first = threads.len() as u32;
            threads.extend((0..p.threads).map(|_| Thread {
                process: i,
                state: ThreadState::Parked,
                vruntime: 0,
                remaining: 0,
                item: None,
                token: false,
            }));
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
                holding: Level::default(),
                last: None,
                next_arrival: 0,
                offered: 0,
                service: Vec::new(),
                end_to_end: Vec::new(),
                last_end: 0,
                completed: 0,
                targets: Vec::new(),
            });
        }
        let groups = match config.fairness {
            Fairness::Threads => 1,
            Fairness::Processes => processes.len(),
        };
        let mut sim = Sim {
            params: config.sched.clone(),
            fairness: config.fairness,
            cpus,
            idle: (0..m).rev().collect(),
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
            sim.push(phase, Event::Control(p as u32));
        }
        sim
    }

    fn push(&mut self, at: u64, event: Event) {
        self.seq += 1;
        self.queue.push(Reverse((at, self.seq, event)));
    }

    fn group_of(&self, thread: u32) -> usize {
        match self.fairness {
            Fairness::Threads => 0,
            Fairness::Processes => self.threads[thread as usize].process as usize,
        }
    }

    /// Charges `cpu`'s running thread (and its group) for the time since the last charge.
    fn charge(&mut self, cpu: u32) {
        let c = &mut self.cpus[cpu as usize];
        let Some(t) = c.current else { return };
        let ran = self.now - c.since;
        c.since = self.now;
        if ran == 0 {
            return;
        }
        let thread = &mut self.threads[t as usize];
        thread.vruntime += ran;
        thread.remaining = thread.remaining.saturating_sub(ran);
        let g = self.group_of(t);
        self.update_group(g, |group| group.vruntime += ran);
    }

    /// Brings `cpu`'s thread's key in `running_v` up to its (charged) vruntime. Done at ticks
    /// and when a worker chains tasks, not at every charge: the wake-up scan charges every CPU,
    /// and re-keying there tripled the 192-CPU benchmark's time.
    fn rekey(&mut self, cpu: u32) {
        let c = &mut self.cpus[cpu as usize];
        let Some(t) = c.current else { return };
        let (old_v, new_v) = (c.charged_v, self.threads[t as usize].vruntime);
        if old_v == new_v {
            return;
        }
        c.charged_v = new_v;
        let g = self.group_of(t);
        let group = &mut self.groups[g];
        group.running_v.remove(&(old_v, t));
        group.running_v.insert((new_v, t));
    }

    /// Changes group `g`, keeping its place in `ready` right.
    fn update_group(&mut self, g: usize, change: impl FnOnce(&mut Group)) {
        let group = &mut self.groups[g];
        let queued = !group.waiting.is_empty();
        if queued {
            self.ready.remove(&group.key(g));
        }
        change(group);
        if queued {
            self.ready.insert(group.key(g));
        }
    }

    /// Puts `thread` on the run queue of its group.
    fn enqueue(&mut self, thread: u32) {
        let g = self.group_of(thread);
        let v = self.threads[thread as usize].vruntime;
        let group = &mut self.groups[g];
        if group.waiting.is_empty() {
            // A group that used CPUs nobody else wanted owes nothing for them: at most one
            // latency ahead of the groups already waiting (per-CPU run queues keep no debt).
            if let Some(&(_, least, _)) = self.ready.iter().min_by_key(|k| k.1) {
                group.vruntime = group.vruntime.min(least + self.params.latency);
            }
            self.ready.insert(group.key(g));
        }
        group.waiting.insert((v, thread));
        self.threads[thread as usize].state = ThreadState::Waiting;
        let p = self.threads[thread as usize].process as usize;
        self.processes[p].waiting.change(self.now, true);
    }

    /// The first waiting thread in the scheduler's order, without taking it.
    fn first_waiting(&self) -> Option<(u32, u32)> {
        let &(_, _, g) = self.ready.first()?;
        let &(_, t) = self.groups[g as usize].waiting.first()?;
        Some((g, t))
    }

    /// Takes `thread` (waiting) off the run queue.
    fn dequeue(&mut self, thread: u32) {
        let g = self.group_of(thread);
        let v = self.threads[thread as usize].vruntime;
        let group = &mut self.groups[g];
        group.waiting.remove(&(v, thread));
        if group.waiting.is_empty() {
            self.ready.remove(&group.key(g));
        }
        let p = self.threads[thread as usize].process as usize;
        self.processes[p].waiting.change(self.now, false);
    }

    /// Runs `thread` (taken off the queue or just woken, holding an item) on the idle `cpu`.
    fn dispatch(&mut self, cpu: u32, thread: u32) {
        let now = self.now;
        let g = self.group_of(thread);
        let v = self.threads[thread as usize].vruntime;
        self.update_group(g, |group| {
            group.running += 1;
            group.running_v.insert((v, thread));
        });
        let c = &mut self.cpus[cpu as usize];
        c.current = Some(thread);
        c.since = now;
        c.slice_start = now;
        c.generation += 1;
        c.charged_v = v;
        let generation = c.generation;
        let needs_tick = !c.tick_pending;
        c.tick_pending = true;
        let phase = c.phase;
        let t = &mut self.threads[thread as usize];
        t.state = ThreadState::Running(cpu);
        let done = now + t.remaining.max(1);
        let p = t.process as usize;
        self.processes[p].running.change(now, true);
        self.busy.change(now, true);
        self.push(done, Event::Done(cpu, generation));
        if needs_tick {
            // The CPU's next tick on its own grid (an idle CPU does not tick).
            let tick = self.params.tick;
            let next = if now < phase { phase } else { phase + ((now - phase) / tick + 1) * tick };
            self.push(next, Event::Tick(cpu));
        }
    }

    /// Takes `cpu`'s thread off it (charged), leaving the CPU free.
    fn undispatch(&mut self, cpu: u32) -> u32 {
        self.charge(cpu);
        let c = &mut self.cpus[cpu as usize];
        let thread = c.current.take().expect("a running thread");
        c.generation += 1;
        let charged_v = c.charged_v;
        let g = self.group_of(thread);
        self.update_group(g, |group| {
            group.running -= 1;
            group.running_v.remove(&(charged_v, thread));
        });
        let p = self.threads[thread as usize].process as usize;
        self.processes[p].running.change(self.now, false);
        self.busy.change(self.now, false);
        thread
    }

    /// Worker `thread`'s index in its pool and its process.
    fn worker(&self, thread: u32) -> (u32, usize) {
        let p = self.threads[thread as usize].process as usize;
        (thread - self.processes[p].first, p)
    }

    /// A worker about to run takes the first queued task (the library's worker loop: only
    /// below the target). `false`: nothing for it, it must park.
    fn take_item(&mut self, thread: u32) -> bool {
        let (index, p) = self.worker(thread);
        let proc = &mut self.processes[p];
        if index >= proc.state.target {
            return false;
        }
        let Some(arrived) = proc.queue.pop_front() else { return false };
        let t = &mut self.threads[thread as usize];
        // Started when it first runs (a worker may block for a token in between).
        t.item = Some((arrived, NOT_STARTED));
        t.remaining = proc.config.service;
        true
    }

    /// A worker starts holding a task it has just taken.
    fn start_holding(&mut self, thread: u32) {
        let (_, p) = self.worker(thread);
        self.processes[p].holding.change(self.now, true);
    }

    /// What `thread`, about to run, does: run the task it holds (it holds a token too), or
    /// take the first queued task and a token, park without a task, or block without a token.
    fn claim(&mut self, thread: u32) -> Claim {
        if self.threads[thread as usize].item.is_none() {
            if !self.take_item(thread) {
                return Claim::Park;
            }
            self.start_holding(thread);
        }
        let now = self.now;
        let t = &mut self.threads[thread as usize];
        let uses_tokens = self.processes[t.process as usize].config.uses_tokens;
        if uses_tokens && !t.token {
            if self.tokens_free == 0 {
                self.token_waiters.push_back(thread);
                return Claim::Block;
            }
            self.tokens_free -= 1;
            t.token = true;
        }
        if let Some((_, started)) = t.item.as_mut() {
            if *started == NOT_STARTED {
                *started = now;
            }
        }
        Claim::Run
    }

    /// `thread` (neither running nor waiting), holding a task, sleeps until a token comes.
    fn block(&mut self, thread: u32) {
        self.threads[thread as usize].state = ThreadState::Blocked;
        let g = self.group_of(thread);
        self.groups[g].runnable -= 1;
    }

    /// `thread` gives its token back: to the first waiter (returned, to be woken by the caller
    /// once the CPU the token came from is settled), or to the free ones.
    fn release_token(&mut self, thread: u32) -> Option<u32> {
        let t = &mut self.threads[thread as usize];
        if !t.token {
            return None;
        }
        t.token = false;
        match self.token_waiters.pop_front() {
            Some(next) => {
                self.threads[next as usize].token = true;
                Some(next)
            }
            None => {
                self.tokens_free += 1;
                None
            }
        }
    }

    /// `thread` (neither running nor waiting) parks.
    fn park(&mut self, thread: u32) {
        let (index, p) = self.worker(thread);
        self.threads[thread as usize].state = ThreadState::Parked;
        let g = self.group_of(thread);
        self.groups[g].runnable -= 1;
        self.processes[p].parked.insert(index);
    }

    /// Gives the free `cpu` the first waiting thread that has a task to run (a woken worker
    /// that finds none parks again), or leaves it idle.
    fn pick_next(&mut self, cpu: u32) {
        while let Some((_, thread)) = self.first_waiting() {
            self.dequeue(thread);
            match self.claim(thread) {
                Claim::Run => {
                    self.dispatch(cpu, thread);
                    return;
                }
                Claim::Park => self.park(thread),
                Claim::Block => self.block(thread),
            }
        }
        self.idle.push(cpu);
    }

    fn runnable(&self) -> u64 {
        self.busy.value + self.processes.iter().map(|p| p.waiting.value).sum::<u64>()
    }

    fn slice(&self) -> u64 {
        let per_cpu = self.runnable().div_ceil(self.cpus.len() as u64).max(1);
        (self.params.latency / per_cpu).max(self.params.min_granularity)
    }

    /// How far waiting `(group, thread)` leads running `other` (positive: it should go first).
    ///
    /// In one group, by virtual runtime. Between groups (equal weights), the idealised share:
    /// a group holding at least two CPUs fewer than `other`'s must get one (`i64::MAX`: at
    /// once); one fewer, they take turns by group virtual runtime; otherwise it waits. (CFS
    /// gets there with per-CPU group entities and load balancing; a global order on
    /// cumulative group time alone would make a group pay later for CPUs nobody wanted.)
    fn lead(&self, group: u32, thread: u32, other: u32) -> i64 {
        let other_group = self.group_of(other) as u32;
        if other_group == group {
            return self.threads[other as usize].vruntime as i64
                - self.threads[thread as usize].vruntime as i64;
        }
        let (mine, theirs) = (&self.groups[group as usize], &self.groups[other_group as usize]);
        match theirs.running.cmp(&(mine.running + 1)) {
            std::cmp::Ordering::Greater => i64::MAX,
            std::cmp::Ordering::Equal => theirs.vruntime as i64 - mine.vruntime as i64,
            std::cmp::Ordering::Less => i64::MIN,
        }
    }

    /// Group `g`'s `min_vruntime`, brought up to date: the least vruntime among its threads
    /// running or waiting, if that is later than the last value.
    fn min_vruntime(&mut self, g: usize) -> u64 {
        let group = &mut self.groups[g];
        let least = [group.running_v.first(), group.waiting.first()].into_iter().flatten().map(|k| k.0).min();
        if let Some(least) = least {
            group.min_vruntime = group.min_vruntime.max(least);
        }
        group.min_vruntime
    }

    /// The groups' `min_vruntime` (per-process fairness): the least group vruntime among the
    /// runnable groups, if that is later than the last value.
    fn root_min_vruntime(&mut self) -> u64 {
        let least = self.groups.iter().filter(|g| g.runnable > 0).map(|g| g.vruntime).min();
        if let Some(least) = least {
            self.root_min_vruntime = self.root_min_vruntime.max(least);
        }
        self.root_min_vruntime
    }

    /// Parked worker `index` of process `p` wakes (without a task: it takes one when it runs).
    fn wake_worker(&mut self, p: usize, index: u32) {
        let proc = &mut self.processes[p];
        proc.parked.remove(&index);
        let thread = proc.first + index;
        self.wake(thread);
    }

    /// `thread`, parked, becomes runnable: on an idle CPU at once, or queued, maybe
    /// preempting a running thread.
    fn wake(&mut self, thread: u32) {
        let g = self.group_of(thread);
        let latency_credit = self.params.latency / 2;
        if self.groups[g].runnable == 0 && self.fairness == Fairness::Processes {
            // Sleeper credit for the group (CFS's place_entity one level up).
            let root_floor = self.root_min_vruntime().saturating_sub(latency_credit);
            self.update_group(g, |group| group.vruntime = group.vruntime.max(root_floor));
        }
        self.groups[g].runnable += 1;
        // Sleeper credit (CFS's place_entity): at most half a latency behind the queue.
        let floor = self.min_vruntime(g).saturating_sub(latency_credit);
        let t = &mut self.threads[thread as usize];
        t.vruntime = t.vruntime.max(floor);
        t.state = ThreadState::Waiting;
        if let Some(cpu) = self.idle.pop() {
            match self.claim(thread) {
                Claim::Run => self.dispatch(cpu, thread),
                Claim::Park => {
                    self.idle.push(cpu);
                    self.park(thread);
                }
                Claim::Block => {
                    self.idle.push(cpu);
                    self.block(thread);
                }
            }
            return;
        }
        self.enqueue(thread);
        // Wake-up preemption: the running thread the woken one leads by the most.
        let mut best: Option<(i64, u32)> = None;
        for cpu in 0..self.cpus.len() as u32 {
            self.charge(cpu);
            if let Some(other) = self.cpus[cpu as usize].current {
                let lead = self.lead(g as u32, thread, other);
                if best.is_none_or(|(l, _)| lead > l) {
                    best = Some((lead, cpu));
                }
            }
        }
        if let Some((lead, cpu)) = best {
            if lead > self.params.wakeup_granularity as i64 {
                self.preempt(cpu);
            }
        }
    }

    /// `cpu`'s thread goes back to the queue and the first waiting thread runs; a thread whose
    /// task is done by now finishes it instead.
    fn preempt(&mut self, cpu: u32) {
        self.charge(cpu);
        if self.finished_now(cpu) {
            return;
        }
        let thread = self.undispatch(cpu);
        self.enqueue(thread);
        self.pick_next(cpu);
    }

    /// If `cpu`'s thread (charged) has nothing left to run, completes its task now (its `Done`
    /// at this instant may not have been processed yet) and returns `true`.
    fn finished_now(&mut self, cpu: u32) -> bool {
        let c = &self.cpus[cpu as usize];
        match c.current {
            Some(t) if self.threads[t as usize].remaining == 0 => {
                let generation = c.generation;
                self.done(cpu, generation);
                true
            }
            _ => false,
        }
    }

    fn tick(&mut self, cpu: u32) {
        let c = self.cpus[cpu as usize];
        let Some(current) = c.current else {
            self.cpus[cpu as usize].tick_pending = false;
            return;
        };
        self.push(self.now + self.params.tick, Event::Tick(cpu));
        self.charge(cpu);
        if self.finished_now(cpu) {
            return;
        }
        self.rekey(cpu);
        let other = self.first_waiting().map_or(i64::MIN, |(g, t)| self.lead(g, t, current));
        let h = self.group_of(current);
        let sibling =
            self.groups[h].waiting.first().map_or(i64::MIN, |&(_, t)| self.lead(h as u32, t, current));
        // A group short of its share gets the CPU at the next tick (the balancer's pace); turns
        // within a share, or within the group, wait for the slice to end. `preempt` then picks
        // whoever is first with the current thread back in the queue.
        let expired = self.now - c.slice_start >= self.slice();
        if other == i64::MAX || (expired && (other > 0 || sibling > 0)) {
            self.preempt(cpu);
        }
    }

    fn done(&mut self, cpu: u32, generation: u64) {
        if self.cpus[cpu as usize].generation != generation {
            return;
        }
        self.charge(cpu);
        let thread = self.cpus[cpu as usize].current.expect("a running thread");
        let now = self.now;
        let t = &mut self.threads[thread as usize];
        t.remaining = 0;
        let (intended, started) = t.item.take().expect("a running worker holds a task");
        let p = t.process as usize;
        let proc = &mut self.processes[p];
        if intended >= self.warmup {
            proc.service.push(now - started);
            proc.end_to_end.push(now - intended);
        }
        proc.completed += 1;
        proc.last_end = now;
        self.outstanding -= 1;
        // The token goes back after every task, so that a waiter gets it first (FIFO); with no
        // waiter, `claim` takes it again at once, which is what the library's worker keeping
        // its token for the next task amounts to here (system calls cost nothing in the model).
        let handed = self.release_token(thread);
        // The busy stretch ends here; `claim` starts another at once if it takes a task.
        self.processes[p].holding.change(now, false);
        match self.claim(thread) {
            Claim::Run => {
                // The worker takes the next task without leaving the CPU.
                self.rekey(cpu);
                let service = self.threads[thread as usize].remaining;
                let c = &mut self.cpus[cpu as usize];
                c.generation += 1;
                let generation = c.generation;
                self.push(now + service, Event::Done(cpu, generation));
            }
            Claim::Park => {
                self.undispatch(cpu);
                self.park(thread);
                self.pick_next(cpu);
            }
            Claim::Block => {
                self.undispatch(cpu);
                self.block(thread);
                self.pick_next(cpu);
            }
        }
        if let Some(next) = handed {
            self.wake(next);
        }
    }

    /// Step W of the pool's protocol: a task was queued; wake the lowest-index parked worker
    /// below the target, if any.
    fn wake_one_allowed(&mut self, p: usize) {
        let proc = &self.processes[p];
        if let Some(&index) = proc.parked.first() {
            if index < proc.state.target {
                self.wake_worker(p, index);
            }
        }
    }

    fn arrival(&mut self, p: u32, duration: u64) {
        let p = p as usize;
        let now = self.now;
        let proc = &mut self.processes[p];
        proc.queue.push_back(proc.next_arrival);
        proc.offered += 1;
        self.outstanding += 1;
        let gap = 1e9 / proc.config.rate;
        let next = match proc.config.arrivals {
            Arrivals::Poisson => proc.next_arrival as f64 + proc.rng.exponential(gap),
            Arrivals::Uniform => proc.next_arrival as f64 + gap,
        };
        if next < duration as f64 {
            let at = (next as u64).max(now);
            proc.next_arrival = at;
            self.push(at, Event::Arrival(p as u32));
        }
        self.wake_one_allowed(p);
    }

    fn control(&mut self, p: u32) {
        let p = p as usize;
        let now = self.now;
        self.push(now + self.period, Event::Control(p as u32));
        let busy_now = self.busy.at(now);
        let procs_running = self.runnable();
        let cpus = self.cpus.len() as u32;
        let proc = &mut self.processes[p];
        let counters = (proc.running.at(now), busy_now, proc.holding.at(now), proc.waiting.at(now));
        let Some((last, last_at)) = proc.last.replace((counters, now)) else {
            return; // the first tick: a baseline for the next one
        };
        let (self_ns, busy_ns, holding_ns, waiting_ns) =
            (counters.0 - last.0, counters.1 - last.1, counters.2 - last.2, counters.3 - last.3);
        let elapsed = now - last_at;
        let sample = Sample {
            elapsed_ns: elapsed,
            threads: proc.config.threads,
            cpus,
            quota_cpus: None,
            self_ns,
            busy_ns,
            idle_ns: (u64::from(cpus) * elapsed).saturating_sub(busy_ns),
            procs_running: Some(u32::try_from(procs_running).unwrap_or(u32::MAX)),
            throttled_ns: 0,
            workers_busy_ns: holding_ns,
            workers_cpu_ns: Some(self_ns),
            workers_runq_wait_ns: Some(waiting_ns),
            queued: u32::try_from(proc.queue.len()).unwrap_or(u32::MAX),
        };
        proc.targets.push(proc.state.target);
        let old = proc.state.target;
        let policy = proc.config.policy.clone();
        policy.decide(&sample, &mut proc.state);
        let new = proc.state.target;
        // Step T: wake the newly allowed parked workers, at most one per queued task.
        if new > old {
            let woken: Vec<u32> = proc.parked.range(old..new).take(proc.queue.len()).copied().collect();
            for index in woken {
                self.wake_worker(p, index);
            }
        }
    }

    fn finish(mut self, duration: u64) -> HostRun {
        let now = self.now;
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
                }
            })
            .collect();
        HostRun { processes, simulated: now, events: self.events }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(policy: Policy, threads: u32, rate: f64, service: u64, arrivals: Arrivals) -> ProcessConfig {
        ProcessConfig { policy, threads, rate, service, arrivals, uses_tokens: false }
    }

    fn host(cpus: u32, fairness: Fairness, processes: Vec<ProcessConfig>, duration: u64) -> HostConfig {
        HostConfig {
            cpus,
            fairness,
            processes,
            duration,
            period: 10 * MS,
            sched: SchedParams::linux(cpus),
            seed: 1,
            warmup: 0,
            spare_tokens: 0,
        }
    }

    /// Seed 000 Figure 7's setting: `processes` identical processes with pools of `cpus`
    /// threads, each offered `load` of its fair share in 5 ms items.
    fn figure_7(cpus: u32, processes: u32, policy: &Policy, load: f64, fairness: Fairness) -> HostConfig {
        let rate = load * f64::from(cpus) / f64::from(processes) / 0.005;
        let p = process(policy.clone(), cpus, rate, 5 * MS, Arrivals::Poisson);
        let mut config = host(cpus, fairness, vec![p; processes as usize], 5_000 * MS);
        config.warmup = 1_000 * MS;
        config
    }

    fn worst(run: &HostRun) -> u64 {
        run.processes.iter().map(|p| quantile(&p.service, 1.0)).max().unwrap_or(0)
    }

    fn throughput(run: &HostRun) -> f64 {
        run.processes.iter().map(|p| p.throughput_per_s).sum()
    }

    #[test]
    fn alone_on_a_cpu_an_item_takes_its_service_time() {
        let p = process(Policy::fixed(1), 1, 50.0, 5 * MS, Arrivals::Uniform);
        let run = simulate(&host(1, Fairness::Threads, vec![p], 1_000 * MS)).unwrap();
        let only = &run.processes[0];
        assert_eq!((only.offered, only.completed), (50, 50));
        assert!(only.service.iter().all(|&s| s == 5 * MS), "{:?}", &only.service[..3]);
        assert!(only.end_to_end.iter().all(|&s| s == 5 * MS));
        assert_eq!(only.cpu_ns, 50 * 5 * MS);
    }

    #[test]
    fn the_same_seed_gives_the_same_run_and_another_seed_another() {
        let config = figure_7(8, 4, &Policy::adaptive(), 1.0, Fairness::Processes);
        let run = simulate(&config).unwrap();
        assert_eq!(run, simulate(&config).unwrap());
        let other = simulate(&HostConfig { seed: 2, ..config }).unwrap();
        assert_ne!(run.processes[0].service, other.processes[0].service);
    }

    #[test]
    fn every_item_runs_and_cpu_time_adds_up() {
        for fairness in [Fairness::Threads, Fairness::Processes] {
            for policy in [Policy::fixed(4), Policy::share(1.0), Policy::adaptive()] {
                let config = figure_7(4, 3, &policy, 1.5, fairness);
                let run = simulate(&config).unwrap();
                for p in &run.processes {
                    assert_eq!(p.offered, p.completed, "{policy} {fairness:?}");
                    assert_eq!(p.cpu_ns, p.completed * 5 * MS, "{policy} {fairness:?}");
                    assert!(p.service.iter().all(|&s| s >= 5 * MS));
                }
                let cpu: u64 = run.processes.iter().map(|p| p.cpu_ns).sum();
                assert!(cpu <= 4 * run.simulated, "{policy} {fairness:?}");
            }
        }
    }

    /// Two CPUs, a pool of 8 busy threads and a pool of 1: per thread, the single thread gets
    /// 2/9 of the CPUs; per process (a cgroup each), a whole CPU.
    #[test]
    fn fairness_is_per_thread_in_one_cgroup_and_per_process_across_cgroups() {
        let saturated = |threads: u32| {
            process(Policy::fixed(threads as usize), threads, 10_000.0, 5 * MS, Arrivals::Uniform)
        };
        for (fairness, expected) in [(Fairness::Threads, 2.0 / 9.0), (Fairness::Processes, 1.0)] {
            let config = host(2, fairness, vec![saturated(8), saturated(1)], 100 * MS);
            let run = simulate(&config).unwrap();
            let small = run.processes[1].cpu_ns as f64 / run.simulated as f64;
            assert!(
                (small / expected - 1.0).abs() < 0.1,
                "{fairness:?}: {small:.3} CPUs, expected {expected:.3}"
            );
        }
    }

    /// One CPU: a 100 ms item starts at 0; 1 ms items of another process arrive every 10 ms.
    /// Each short item's worker wakes with the smaller virtual runtime and preempts the long
    /// one, so it finishes in about its service time.
    #[test]
    fn a_woken_thread_preempts_a_cpu_hog() {
        let hog = process(Policy::fixed(1), 1, 1.0, 100 * MS, Arrivals::Uniform);
        let short = process(Policy::fixed(1), 1, 100.0, MS, Arrivals::Uniform);
        let run = simulate(&host(1, Fairness::Threads, vec![hog, short], 50 * MS)).unwrap();
        let quick = &run.processes[1];
        assert_eq!(quick.completed, 5);
        assert!(quantile(&quick.service, 1.0) <= 2 * MS, "{:?}", quick.service);
        assert!(quantile(&run.processes[0].service, 1.0) >= 105 * MS);
    }

    /// Seed 000 Figure 7 at 16 CPUs and 8 processes (issue 10 item 2): at no throughput cost,
    /// adaptive pools cut the service p99 at least 5x against ignorant ones in every cell, and
    /// the worst service time at least 5x at full load in per-process cgroups (the issue's
    /// criterion), 3x in one cgroup (4.9x for this seed; 2.7-6.5x over seeds) and 2x in
    /// overload. `RESULTS.md` "simulator" has the per-seed figures and why the others fall short.
    #[test]
    fn figure_7_at_16_cpus_adaptive_cuts_latency_at_no_throughput_cost() {
        let cells = [
            (Fairness::Processes, 1.0, 5.0),
            (Fairness::Threads, 1.0, 3.0),
            (Fairness::Processes, 1.5, 2.0),
            (Fairness::Threads, 1.5, 2.0),
        ];
        for (fairness, load, max_cut) in cells {
            let ignorant = simulate(&figure_7(16, 8, &Policy::fixed(16), load, fairness)).unwrap();
            let adaptive = simulate(&figure_7(16, 8, &Policy::adaptive(), load, fairness)).unwrap();
            let median_p99 = |run: &HostRun| {
                let mut v: Vec<u64> = run.processes.iter().map(|p| quantile(&p.service, 0.99)).collect();
                v.sort_unstable();
                v[v.len() / 2]
            };
            let cell = format!(
                "{fairness:?} at {load}: p99 {} vs {}, max {} vs {}, throughput {:.3}x",
                median_p99(&ignorant),
                median_p99(&adaptive),
                worst(&ignorant),
                worst(&adaptive),
                throughput(&adaptive) / throughput(&ignorant)
            );
            assert!(median_p99(&ignorant) >= 5 * median_p99(&adaptive), "{cell}");
            assert!(worst(&ignorant) as f64 >= max_cut * worst(&adaptive) as f64, "{cell}");
            assert!(throughput(&adaptive) >= 0.95 * throughput(&ignorant), "{cell}");
        }
    }

    #[test]
    fn with_host_tokens_no_item_waits_for_a_cpu_and_none_is_lost() {
        // Every process shares the host's CPU tokens (`cotenant::tokens`): at most 16 items run
        // at once, so each runs on a CPU of its own from start to end, in either setting and
        // even in overload; the pools stay work-conserving, so throughput is ignorant's.
        for (fairness, load) in
            [(Fairness::Threads, 1.0), (Fairness::Processes, 1.0), (Fairness::Threads, 1.5)]
        {
            let ignorant = simulate(&figure_7(16, 8, &Policy::fixed(16), load, fairness)).unwrap();
            let mut config = figure_7(16, 8, &Policy::adaptive(), load, fairness);
            for p in &mut config.processes {
                p.uses_tokens = true;
            }
            let tokens = simulate(&config).unwrap();
            let cell = format!("{fairness:?} at {load}");
            assert_eq!(worst(&tokens), 5 * MS, "{cell}: an item waited for a CPU");
            assert!(worst(&ignorant) >= 10 * worst(&tokens), "{cell}");
            assert!(throughput(&tokens) >= 0.99 * throughput(&ignorant), "{cell}");
            let offered: u64 = tokens.processes.iter().map(|p| p.offered).sum();
            let completed: u64 = tokens.processes.iter().map(|p| p.completed).sum();
            assert_eq!(offered, completed, "{cell}: every item ran");
        }
    }

    #[test]
    fn a_spare_token_lets_one_more_task_run_than_cpus() {
        // One CPU, a pool of 2 workers, 5 ms items arriving every 3.3 ms for 10 ms: with one token per
        // CPU they run one after another (5 ms each); with a spare, two share the CPU.
        let run = |spare| {
            let mut p = process(Policy::fixed(2), 2, 300.0, 5 * MS, Arrivals::Uniform);
            p.uses_tokens = true;
            let mut config = host(1, Fairness::Threads, vec![p], 10 * MS);
            config.spare_tokens = spare;
            simulate(&config).unwrap()
        };
        let (exact, spare) = (run(0), run(1));
        for run in [&exact, &spare] {
            assert_eq!(run.processes[0].completed, run.processes[0].offered);
        }
        assert_eq!(worst(&exact), 5 * MS);
        assert!(worst(&spare) > 5 * MS, "two items shared the CPU: {}", worst(&spare));
    }

    #[test]
    fn bad_inputs_are_named() {
        let p = process(Policy::fixed(1), 1, 10.0, MS, Arrivals::Poisson);
        let mut config = host(0, Fairness::Threads, vec![p.clone()], 100 * MS);
        assert!(simulate(&config).unwrap_err().contains("cpus"));
        config.cpus = 1;
        config.processes[0].rate = f64::NAN;
        assert!(simulate(&config).unwrap_err().contains("process 0: rate"));
        config.processes[0].rate = 1.0;
        config.processes[0].policy = Policy::share(-1.0);
        assert!(simulate(&config).unwrap_err().contains("process 0: Policy::share"));
        config.processes.clear();
        assert!(simulate(&config).unwrap_err().contains("at least one process"));
    }
}
