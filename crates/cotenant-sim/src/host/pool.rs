//! The pool model: workers that park and wake as `crates/cotenant/src/pool` does, the host's CPU
//! tokens, and the controller that asks the library's policy for each period's target.

use std::collections::{BTreeSet, VecDeque};

use cotenant::policy::{PolicyState, Sample};

use crate::rng::SplitMix64;

use super::run::{Event, Sim};
use super::sched::ThreadState;
use super::workload::ProcessConfig;

/// A count over time and its integral: what the controller's counters are made of.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Level {
    pub(super) value: u64,
    since: u64,
    integral: u64,
}

impl Level {
    pub(super) fn change(&mut self, now: u64, up: bool) {
        self.integral += self.value * (now - self.since);
        self.since = now;
        if up {
            self.value += 1;
        } else {
            self.value -= 1;
        }
    }

    pub(super) fn at(&self, now: u64) -> u64 {
        self.integral + self.value * (now - self.since)
    }
}

/// The start of an item taken but not yet run.
const NOT_STARTED: u64 = u64::MAX;

/// What a worker that is about to run does next.
pub(super) enum Claim {
    /// It holds a task (and a token, if its process uses them): run it.
    Run,
    /// No task for it: park.
    Park,
    /// It holds a task but no token: sleep until one is handed to it.
    Block,
}

pub(super) struct Process {
    pub(super) config: ProcessConfig,
    pub(super) rng: SplitMix64,
    pub(super) queue: VecDeque<u64>,
    /// The index of its worker 0 among all threads.
    pub(super) first: u32,
    /// Parked workers, by index in the pool (the library wakes the lowest first).
    pub(super) parked: BTreeSet<u32>,
    pub(super) state: PolicyState,
    pub(super) running: Level,
    pub(super) waiting: Level,
    pub(super) holding: Level,
    /// The counters at the last controller tick, (self, busy, holding, waiting), and when it
    /// was (`None` before the first tick).
    pub(super) last: Option<((u64, u64, u64, u64), u64)>,
    pub(super) next_arrival: u64,
    pub(super) offered: u64,
    pub(super) service: Vec<u64>,
    pub(super) end_to_end: Vec<u64>,
    pub(super) last_end: u64,
    pub(super) completed: u64,
    pub(super) targets: Vec<u32>,
}

impl Sim {
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
        if index >= proc.state.target() {
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
    pub(super) fn claim(&mut self, thread: u32) -> Claim {
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
    pub(super) fn block(&mut self, thread: u32) {
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
    pub(super) fn park(&mut self, thread: u32) {
        let (index, p) = self.worker(thread);
        self.threads[thread as usize].state = ThreadState::Parked;
        let g = self.group_of(thread);
        self.groups[g].runnable -= 1;
        self.processes[p].parked.insert(index);
    }

    /// Parked worker `index` of process `p` wakes (without a task: it takes one when it runs).
    fn wake_worker(&mut self, p: usize, index: u32) {
        let proc = &mut self.processes[p];
        proc.parked.remove(&index);
        let thread = proc.first + index;
        self.wake(thread, None);
    }

    pub(super) fn done(&mut self, cpu: u32, generation: u64) {
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
            // Woken from `cpu`, where the token's last holder ran (it has settled there by now).
            self.wake(next, Some(cpu));
        }
    }

    /// Step W of the pool's protocol: a task was queued; wake the lowest-index parked worker
    /// below the target, if any.
    pub(super) fn wake_one_allowed(&mut self, p: usize) {
        let proc = &self.processes[p];
        if let Some(&index) = proc.parked.first() {
            if index < proc.state.target() {
                self.wake_worker(p, index);
            }
        }
    }

    pub(super) fn control(&mut self, p: u32) {
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
        // No quota and no throttling in this model: those fields keep their defaults.
        let mut sample = Sample::default();
        sample.elapsed_ns = elapsed;
        sample.threads = proc.config.threads;
        sample.cpus = cpus;
        sample.self_ns = self_ns;
        sample.busy_ns = busy_ns;
        sample.idle_ns = (u64::from(cpus) * elapsed).saturating_sub(busy_ns);
        sample.procs_running = Some(u32::try_from(procs_running).unwrap_or(u32::MAX));
        sample.workers_busy_ns = holding_ns;
        sample.workers_cpu_ns = Some(self_ns);
        sample.workers_runq_wait_ns = Some(waiting_ns);
        sample.queued = u32::try_from(proc.queue.len()).unwrap_or(u32::MAX);
        proc.targets.push(proc.state.target());
        let old = proc.state.target();
        let policy = proc.config.policy.clone();
        policy.decide(&sample, &mut proc.state);
        let new = proc.state.target();
        // Step T: wake the newly allowed parked workers, at most one per queued task.
        if new > old {
            let woken: Vec<u32> = proc.parked.range(old..new).take(proc.queue.len()).copied().collect();
            for index in woken {
                self.wake_worker(p, index);
            }
        }
    }
}
