//! The pool model: workers that park and wake as `crates/cotenant/src/pool` does, the host's CPU
//! tokens, and the controller that asks the library's policy for each period's target.

use std::collections::{BTreeSet, VecDeque};

use cotenant::internal::coast;
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
    /// It holds a task, a token and the lease of this other CPU (the Linux model only):
    /// move there, and run when that CPU picks it.
    Move(u32),
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
    /// Its workers waiting for a CPU while they hold a token: the only run-queue wait the
    /// library's controller counts while the tokens are shared (`pool/host_tokens.rs`).
    pub(super) holder_waiting: Level,
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
    /// Its submitting thread (`HostConfig::submit_ns`), and the intended arrivals of the items
    /// it has not queued yet.
    pub(super) submitter: Option<u32>,
    pub(super) pending: VecDeque<u64>,
    /// Periods to its next sample (`coast::next_stride`: more than one while it coasts).
    pub(super) stride: u32,
    /// Samples taken.
    pub(super) samples: u64,
    /// Samples in a row that found it idle (nothing queued, no worker busy, none was since
    /// the last sample).
    pub(super) idle_periods: u32,
    /// When its next `Control` event counts (an earlier one still in the event queue was
    /// superseded: a nap, or a submit that ended it); `u64::MAX` while it naps.
    pub(super) next_control: u64,
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

    /// `thread` starts (`up`) or stops waiting for a CPU: its process's count, and the count
    /// of token holders waiting (which the sample of a pool sharing tokens reports, and
    /// `HostRun::holder_wait_beside_idle_ns` integrates against the idle CPUs). A thread counts
    /// as a holder for the whole wait if it held a token when the wait began.
    pub(super) fn note_waiting(&mut self, thread: u32, up: bool) {
        let now = self.now;
        let t = &mut self.threads[thread as usize];
        if t.submitter {
            return; // the controller's sample counts its workers' waits only
        }
        let proc = &mut self.processes[t.process as usize];
        proc.waiting.change(now, up);
        let holder = if up { t.token } else { t.holder_waits };
        t.holder_waits = up && t.token;
        if holder {
            proc.holder_waiting.change(now, up);
            if up {
                self.holders_waiting += 1;
            } else {
                self.holders_waiting -= 1;
            }
        }
    }

    /// What `thread`, about to run on `cpu`, does: run the task it holds (it holds a token
    /// too), or take the first queued task and a token, park without a task, block without a
    /// token, or move to the CPU it leased.
    pub(super) fn claim(&mut self, thread: u32, cpu: u32) -> Claim {
        if self.threads[thread as usize].submitter {
            return Claim::Run; // it runs `submit_ns`, set when an arrival woke it
        }
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
        if let Some(leased) = self.take_lease(thread, cpu) {
            return Claim::Move(leased);
        }
        let t = &mut self.threads[thread as usize];
        if let Some((_, started)) = t.item.as_mut() {
            if *started == NOT_STARTED {
                *started = now;
            }
        }
        Claim::Run
    }

    /// A token holder without a lease, about to run on `cpu`, takes a lease as the library's
    /// worker does (`pool/host_tokens.rs`, `take_lease`): `cpu`'s if it is free, else the next
    /// free one after `cpu` in id order (wrapping), and moves there (`Some`). Under the Linux
    /// model only: with one run queue no CPU is ever shared while another idles. None free (spare
    /// tokens): it runs without one. Unlike the library's worker, which keeps its lease with a
    /// kept token and moves back to it for its next task, a simulated worker gives both back
    /// after every task (`done`) and leases anew, so it leases the CPU it is on when it can.
    fn take_lease(&mut self, thread: u32, cpu: u32) -> Option<u32> {
        let t = &self.threads[thread as usize];
        if !t.token || t.lease.is_some() || !self.linux_model() {
            return None;
        }
        if !self.processes[t.process as usize].config.uses_leases {
            return None;
        }
        let leased = next_free_lease(&self.leases, cpu)?;
        self.leases[leased as usize] = true;
        self.threads[thread as usize].lease = Some(leased);
        (leased != cpu).then_some(leased)
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
        // The lease first, as the library gives it back: a holder never finds every lease
        // taken while there are no more tokens than leases.
        if let Some(leased) = t.lease.take() {
            self.leases[leased as usize] = false;
        }
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

    /// Parked worker `index` of process `p` wakes (without a task: it takes one when it runs);
    /// `waker`: the CPU of the simulated thread that wakes it (see `Sim::wake`).
    fn wake_worker(&mut self, p: usize, index: u32, waker: Option<u32>) {
        let proc = &mut self.processes[p];
        proc.parked.remove(&index);
        let thread = proc.first + index;
        self.wake(thread, waker);
    }

    /// Process `p`'s submitting thread, done on `cpu`: queues the items that arrived, sleeps,
    /// then wakes a worker per item from `cpu`, as the library's submit does after its push.
    fn submitted(&mut self, cpu: u32, thread: u32) {
        let p = self.threads[thread as usize].process as usize;
        let proc = &mut self.processes[p];
        let items = proc.pending.len();
        proc.queue.extend(proc.pending.drain(..));
        self.threads[thread as usize].remaining = 0;
        self.undispatch(cpu);
        self.threads[thread as usize].state = ThreadState::Parked;
        let g = self.group_of(thread);
        self.groups[g].runnable -= 1;
        self.pick_next(cpu);
        self.work_arrived(p);
        for _ in 0..items {
            self.wake_one_allowed(p, Some(cpu));
        }
    }

    pub(super) fn done(&mut self, cpu: u32, generation: u64) {
        if self.cpus[cpu as usize].generation != generation {
            return;
        }
        self.charge(cpu);
        let thread = self.cpus[cpu as usize].current.expect("a running thread");
        if self.threads[thread as usize].submitter {
            self.submitted(cpu, thread);
            return;
        }
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
        match self.claim(thread, cpu) {
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
            Claim::Move(leased) => {
                // The lease of `cpu` was given back just above, so it is free unless this
                // worker runs on a CPU another holder leases (moved there by a balance, or
                // holding a spare token): then it moves to a free lease.
                self.undispatch(cpu);
                self.lx_activate(thread, leased);
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
    pub(super) fn wake_one_allowed(&mut self, p: usize, waker: Option<u32>) {
        let proc = &self.processes[p];
        if let Some(&index) = proc.parked.first() {
            if index < proc.state.target() {
                self.wake_worker(p, index, waker);
            }
        }
    }

    /// A controller's sample, as `pool/control/tick.rs` takes it: the counters since the last
    /// sample, the policy's decision, then when to sample next (`policy::coast`: every period,
    /// every two or four while the pool coasts, or not until the next submit once it has been
    /// idle for a nap's periods; the first sample after a nap only records the counters).
    pub(super) fn control(&mut self, p: u32) {
        let p = p as usize;
        let now = self.now;
        if self.processes[p].next_control != now {
            return; // superseded: the controller naps, or a submit brought its sample forward
        }
        let busy_now = self.busy.at(now);
        let procs_running = self.runnable();
        let cpus = self.cpus.len() as u32;
        let token_waiters = u32::try_from(self.token_waiters.len()).unwrap_or(u32::MAX);
        let period = self.period;
        let proc = &mut self.processes[p];
        proc.samples += 1;
        let engaged = proc.config.uses_tokens;
        let holding_now = proc.holding.at(now);
        // As the library's tick: busy since the last sample, or work queued or running now.
        let had_work = proc.last.is_none_or(|((_, _, holding, _), _)| holding != holding_now)
            || !proc.queue.is_empty()
            || proc.holding.value > 0;
        proc.idle_periods = if had_work { 0 } else { proc.idle_periods.saturating_add(1) };
        // The wait the policy counts as contention: with the tokens shared, only the holders'
        // (`pool/control/tick.rs`, `sharing_tokens`).
        let wait_now = if engaged { proc.holder_waiting.at(now) } else { proc.waiting.at(now) };
        let counters = (proc.running.at(now), busy_now, holding_now, wait_now);
        let stride = std::mem::replace(&mut proc.stride, 1);
        let Some((last, last_at)) = proc.last.replace((counters, now)) else {
            // The first sample (at the start, or after a nap) only records the counters.
            self.schedule_control(p, now + period);
            return;
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
        // The target in force in each period since the last sample (more than one while it
        // coasted).
        let periods = ((elapsed + period / 2) / period).max(1);
        let old = proc.state.target();
        proc.targets.extend(std::iter::repeat_n(old, periods as usize));
        let policy = proc.config.policy.clone();
        let decision = policy.decide(&sample, &mut proc.state);
        let new = proc.state.target();
        // A simulated token never fails and never times out; the set's waiters are read only
        // when the period is otherwise calm, as the library reads them.
        let calm = coast::is_calm(&decision, &sample, true)
            && coast::tokens_quiet(engaged, false, Some(token_waiters));
        let coasts = coast::may_coast(proc.idle_periods, coast::NAP_AFTER_PERIODS, calm);
        proc.stride = coast::next_stride(stride, coasts);
        let naps = proc.idle_periods >= coast::NAP_AFTER_PERIODS;
        if naps {
            // Its only pool has been idle for a nap's periods: the control thread sleeps until
            // the next submit (`arrival`), after which it starts afresh.
            proc.next_control = u64::MAX;
            proc.last = None;
        } else {
            let next = now + u64::from(proc.stride) * period;
            self.schedule_control(p, next);
        }
        // Step T: wake the newly allowed parked workers, at most one per queued task.
        if new > old {
            let proc = &self.processes[p];
            let woken: Vec<u32> = proc.parked.range(old..new).take(proc.queue.len()).copied().collect();
            for index in woken {
                self.wake_worker(p, index, None);
            }
        }
    }

    /// Process `p`'s next sample is at `at` (any earlier one still queued no longer counts).
    pub(super) fn schedule_control(&mut self, p: usize, at: u64) {
        self.processes[p].next_control = at;
        self.push(at, Event::Control(p as u32));
    }

    /// A submit to process `p` while its controller naps wakes it: sampled now, to start afresh
    /// (`pool/control.rs`, the end of a nap).
    pub(super) fn work_arrived(&mut self, p: usize) {
        let proc = &mut self.processes[p];
        if proc.next_control == u64::MAX {
            proc.idle_periods = 0;
            proc.stride = 1;
            let now = self.now;
            self.schedule_control(p, now);
        }
    }
}

/// The first CPU whose lease is free (`held[cpu]` false), from `here` on in id order, wrapping
/// (`pool/host_tokens.rs`, `take_lease`: here first, then the next ones after it, so that
/// holders moving at once spread).
pub(super) fn next_free_lease(held: &[bool], here: u32) -> Option<u32> {
    let n = held.len() as u32;
    (0..n).map(|i| (here + i) % n.max(1)).find(|&cpu| !held[cpu as usize])
}

#[cfg(test)]
mod tests {
    use super::next_free_lease;

    #[test]
    fn a_lease_is_the_cpus_own_if_free_else_the_next_free_one_wrapping() {
        assert_eq!(next_free_lease(&[false, false], 1), Some(1));
        assert_eq!(next_free_lease(&[false, true, true, false], 1), Some(3));
        assert_eq!(next_free_lease(&[false, true, true, true], 2), Some(0), "wraps");
        assert_eq!(next_free_lease(&[true, true], 0), None);
        assert_eq!(next_free_lease(&[], 0), None);
    }
}
