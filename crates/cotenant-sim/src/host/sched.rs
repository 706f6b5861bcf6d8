//! The CPU scheduler model: an idealised CFS with one run queue for the host, fair by thread or
//! by process (the parent module's **Scheduler**), and its ticks, wake-ups and preemptions; and
//! the choice between it and the Linux model of `host/linux/` ([`SchedulerModel`]): the run loop
//! and the pools call the entry points here, which hand over to `linux` when it is chosen.

use std::collections::BTreeSet;

use super::pool::Claim;
use super::run::{Event, Sim};
use super::MS;

/// Who competes for CPU time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fairness {
    /// All processes in one cgroup: every runnable thread gets an equal share.
    Threads,
    /// One cgroup per process, equal weights: every busy process gets an equal share.
    Processes,
}

/// Which scheduler model runs the simulated host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SchedulerModel {
    /// One run queue for the whole host, fair by virtual runtime (the parent module's
    /// **Scheduler**): the first model, kept so that results compare side by side.
    #[default]
    Idealised,
    /// Linux as it schedules today (6.6 and later, with the base slice, lag clamp and
    /// reweighting of a running entity traced on 6.18): a run queue per CPU, the earliest
    /// eligible virtual deadline first, wake-up placement, newly-idle and periodic load
    /// balancing and per-CPU group shares (the parent module's **Scheduler (Linux)**).
    Linux,
}

/// The scheduler's constants (nanoseconds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedParams {
    /// The scheduler tick.
    pub tick: u64,
    /// `sched_latency`: the period in which every runnable thread should run once.
    pub latency: u64,
    /// `sched_min_granularity`: the idealised model's shortest slice.
    pub min_granularity: u64,
    /// `sysctl_sched_base_slice`: the Linux model's EEVDF request. 0.7 ms scaled as above, as
    /// on the 6.18 kernel measured here (every entity's `se->slice` read 1.4 ms on 2 CPUs;
    /// 6.6 had 0.75 ms).
    pub base_slice: u64,
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
            base_slice: 700_000 * factor,
            wakeup_granularity: MS * factor,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ThreadState {
    Parked,
    /// Holding a task, asleep until a CPU token is handed to it.
    Blocked,
    Waiting,
    Running(u32),
}

#[derive(Debug, Clone)]
pub(super) struct Thread {
    pub(super) process: u32,
    pub(super) state: ThreadState,
    pub(super) vruntime: u64,
    /// CPU time the current item still needs.
    pub(super) remaining: u64,
    /// The current item's intended arrival and start (`None`: woken, not yet running a task).
    pub(super) item: Option<(u64, u64)>,
    /// Holds one of the host's CPU tokens.
    pub(super) token: bool,
    /// The CPU whose lease it holds with its token (`ProcessConfig::uses_leases`).
    pub(super) lease: Option<u32>,
    /// Counted among the token holders waiting for a CPU (`Sim::note_waiting`).
    pub(super) holder_waits: bool,
    /// The process's submitting thread (`HostConfig::submit_ns`), not a worker of its pool.
    pub(super) submitter: bool,
}

impl Thread {
    /// A parked thread of process `process`: a worker of its pool, or its submitting thread.
    pub(super) fn parked(process: u32, submitter: bool) -> Thread {
        Thread {
            process,
            state: ThreadState::Parked,
            vruntime: 0,
            remaining: 0,
            item: None,
            token: false,
            lease: None,
            holder_waits: false,
            submitter,
        }
    }
}

/// A competitor at the upper level: a process (`Fairness::Processes`) or the whole host.
#[derive(Debug, Clone, Default)]
pub(super) struct Group {
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
    pub(super) runnable: u32,
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
pub(super) struct Cpu {
    pub(super) current: Option<u32>,
    /// Since when `current` ran uncharged.
    pub(super) since: u64,
    /// When `current` got the CPU (its slice counts from here).
    pub(super) slice_start: u64,
    /// Bumped at every dispatch so that stale completions are ignored.
    pub(super) generation: u64,
    /// `current`'s key in its group's `running_v` (its vruntime at its last tick or dispatch).
    pub(super) charged_v: u64,
    pub(super) phase: u64,
    pub(super) tick_pending: bool,
}

impl Sim {
    /// The Linux model runs this host.
    pub(super) fn linux_model(&self) -> bool {
        self.scheduler == SchedulerModel::Linux
    }

    pub(super) fn group_of(&self, thread: u32) -> usize {
        match self.fairness {
            Fairness::Threads => 0,
            Fairness::Processes => self.threads[thread as usize].process as usize,
        }
    }

    /// Charges `cpu`'s running thread (and its group) for the time since the last charge.
    pub(super) fn charge(&mut self, cpu: u32) {
        if self.linux_model() {
            self.lx_charge(cpu);
            return;
        }
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
    pub(super) fn rekey(&mut self, cpu: u32) {
        if self.linux_model() {
            return; // its run queues are keyed by deadline, and the running thread is out of them
        }
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
        self.note_waiting(thread, true);
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
        self.note_waiting(thread, false);
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
    pub(super) fn undispatch(&mut self, cpu: u32) -> u32 {
        if self.linux_model() {
            return self.lx_undispatch(cpu);
        }
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

    /// Gives the free `cpu` the first waiting thread that has a task to run (a woken worker
    /// that finds none parks again), or leaves it idle.
    pub(super) fn pick_next(&mut self, cpu: u32) {
        if self.linux_model() {
            self.lx_schedule(cpu);
            return;
        }
        while let Some((_, thread)) = self.first_waiting() {
            self.dequeue(thread);
            // One run queue: a lease never moves a thread here (`Sim::claim`).
            match self.claim(thread, cpu) {
                Claim::Run | Claim::Move(_) => {
                    self.dispatch(cpu, thread);
                    return;
                }
                Claim::Park => self.park(thread),
                Claim::Block => self.block(thread),
            }
        }
        self.idle.push(cpu);
    }

    pub(super) fn runnable(&self) -> u64 {
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

    /// `thread`, parked, becomes runnable: on an idle CPU at once, or queued, maybe
    /// preempting a running thread. `waker`: the CPU of the simulated thread that wakes it (a
    /// token handed over, a simulated submitting thread), or `None` for a timer: the process's
    /// control thread, or its submitting thread when the model does not run it, or a simulated
    /// submitting thread waking itself; only the Linux model's placement looks at it.
    pub(super) fn wake(&mut self, thread: u32, waker: Option<u32>) {
        if self.linux_model() {
            self.lx_wake(thread, waker);
            return;
        }
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
            match self.claim(thread, cpu) {
                Claim::Run | Claim::Move(_) => self.dispatch(cpu, thread),
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
    pub(super) fn finished_now(&mut self, cpu: u32) -> bool {
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

    pub(super) fn tick(&mut self, cpu: u32) {
        if self.linux_model() {
            self.lx_tick(cpu);
            return;
        }
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
}
