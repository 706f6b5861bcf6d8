//! The Linux scheduler model (the parent module's **Scheduler (Linux)**): CFS as Linux 6.6 and
//! later run it, with EEVDF, per-CPU run queues, wake-up placement and load balancing, behind
//! the same entry points as the idealised model (`host/sched.rs` hands over to the `lx_*`
//! methods here when [`SchedulerModel::Linux`] is chosen). Where a trace of the kernel it was
//! checked on (6.18) showed rules other than 6.6's, the model follows the trace: the base
//! slice, the lag clamp and the running entity's reweighting (`eevdf.rs`).
//!
//! | file | what it owns | kernel/sched/fair.c |
//! |---|---|---|
//! | `eevdf.rs` | one run queue: `V`, eligibility, deadlines, the pick, placement, reweighting | `avg_vruntime`, `entity_eligible`, `update_deadline`, `pick_eevdf`, `place_entity`, `update_entity_lag`, `reweight_entity` |
//! | `group.rs` | the hierarchy: a thread's queue, a process's per-CPU group entity and its shares | `enqueue_task_fair`, `dequeue_task_fair`, `pick_next_task_fair`, `check_preempt_wakeup_fair`, `update_cfs_group` |
//! | `shares.rs` | a group queue's load average and the group's weight on each CPU | `update_load_avg`, `update_tg_load_avg`, `calc_group_shares` |
//! | `placement.rs` | where a woken thread goes, the idle scan's limit | `select_task_rq_fair`, `wake_affine`, `select_idle_sibling`, `select_idle_cpu`, `update_idle_cpu_scan` |
//! | `balance.rs` | newly-idle, periodic and idle (nohz) balancing | `newidle_balance`, `load_balance`, `rebalance_domains`, `nohz_balancer_kick`, `can_migrate_task`, `task_hot` |
//! | this file | the state, the entry points, a CPU starting, stopping and going idle | `update_curr`, `scheduler_tick`, `try_to_wake_up`, `__schedule` |
//!
//! The host is one last-level-cache domain (every CPU shares it), with no SMT siblings and no
//! NUMA: the kernel's domain hierarchy reduces to one level whose span is every CPU.
//!
//! [`SchedulerModel::Linux`]: super::SchedulerModel::Linux

mod balance;
mod eevdf;
mod group;
mod placement;
mod shares;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;

use super::pool::Claim;
use super::run::{Event, HostConfig, Sim};
use super::sched::{Fairness, Thread, ThreadState};
use super::MS;

use balance::balance_interval;
pub use eevdf::RunningReweight;
use eevdf::{Entity, LagRule, Queue, NICE_0};
pub use shares::GroupShares;
use shares::{group_shares, GroupLoad};

/// A thread's scheduling facts beyond its entity.
#[derive(Debug, Clone, Copy, Default)]
struct Task {
    /// Its process.
    process: u32,
    /// The CPU it runs or waits on, or ran on last (`task_cpu`).
    cpu: u32,
    /// `p->recent_used_cpu`: the CPU it was placed from at its last wake-up.
    recent: u32,
    /// When it last ran (`se.exec_start`): `task_hot` compares it with the migration cost.
    last_ran: u64,
    /// Its place in its CPU's `cfs_tasks` list: larger is nearer the head (queued or picked
    /// more recently); the balancer takes from the tail.
    order: u64,
}

/// A CPU's run-queue facts beyond its queues (`struct rq` and its domain's `sched_domain`).
#[derive(Debug, Clone, Default)]
struct CpuState {
    /// Threads runnable here, running or waiting (`rq->nr_running`).
    nr: u32,
    /// The root queue's load (Σ weight), as last counted in [`State::total_load`].
    load: u64,
    /// `TIF_NEED_RESCHED`: schedule at the next chance (the tick, or at once on a wake-up).
    need_resched: bool,
    /// `sd->balance_interval` (ns, before the busy factor): from the domain's `min_interval`
    /// (its span weight in ms) up to `max_interval` (twice that).
    interval: u64,
    /// `sd->last_balance`.
    last_balance: u64,
    /// `rq->next_balance`: when its periodic balance is next due.
    next_balance: u64,
    /// `sd->nr_balance_failed`: balances in a row that found an imbalance and moved nothing.
    failed: u32,
    /// `rq->cfs_tasks`: its runnable threads by (order, thread), tail first.
    tasks: BTreeSet<(u64, u32)>,
    /// Its key in [`State::overloaded`], if there.
    key: Option<(u64, u32)>,
}

/// The Linux model's state (empty for a host under the idealised model).
#[derive(Debug, Default)]
pub(super) struct State {
    ncpus: u32,
    nthreads: u32,
    /// Per-process cgroups: a group level between each CPU's root queue and the threads.
    groups: bool,
    /// `sysctl_sched_base_slice` (scaled as the kernel scales it).
    slice: u64,
    /// The scheduler tick.
    tick: u64,
    /// What a reweight needs: the lag clamp's slice and tick, and the running entity's rule.
    lag_rule: LagRule,
    /// Threads' entities, then (with `groups`) one group entity per process and CPU.
    ents: Vec<Entity>,
    /// One root queue per CPU, then (with `groups`) one group queue per process and CPU.
    queues: Vec<Queue>,
    tasks: Vec<Task>,
    cpus: Vec<CpuState>,
    /// CPUs with nothing to run (`available_idle_cpu`).
    idle: BTreeSet<u32>,
    /// The idle CPUs by (`next_balance`, CPU): `nohz.idle_cpus_mask` and `nohz.next_balance`.
    nohz: BTreeSet<(u64, u32)>,
    /// CPUs with a thread waiting (at least two runnable) by (load, CPU): the candidates for
    /// the busiest queue; empty means the kernel's `rd->overload` is clear.
    overloaded: BTreeSet<(u64, u32)>,
    /// Σ of the CPUs' loads (`sds->total_load` of the one domain).
    total_load: u64,
    /// How a group's weight is split across CPUs.
    group_shares: GroupShares,
    /// Changes of weight of a root queue's running entity so far (`HostRun::running_reweights`).
    pub(super) running_reweights: u64,
    /// Runnable threads per process, over all CPUs (the group's load under
    /// [`GroupShares::Counts`]).
    proc_runnable: Vec<u32>,
    /// With `groups` and [`GroupShares::Loads`], each group queue's load average, by process
    /// then CPU.
    loads: Vec<GroupLoad>,
    /// With `groups`, each process's total of its queues' reported loads (`tg->load_avg`).
    tg_load: Vec<f64>,
    /// Per process, the CPU its control thread (and its submitting thread, unless that is
    /// simulated: `HostConfig::submit_ns`) last ran on: only their placement is modelled, see
    /// `placement.rs`.
    submitter: Vec<u32>,
    /// The last `Task::order` handed out.
    order: u64,
    /// The CPUs' summed utilisation (busy CPUs, decayed with PELT's 32 ms half-life).
    util: f64,
    /// When `util` was last brought up to date, and the host's busy CPU-time then.
    util_at: u64,
    busy_at: u64,
    /// `sd_llc_shared->nr_idle_scan`: how many CPUs a wake-up's idle scan may look at.
    nr_idle_scan: u32,
}

impl State {
    /// The Linux model of `config`'s host (validated) with `threads`, every CPU idle.
    pub(super) fn new(config: &HostConfig, threads: &[Thread]) -> State {
        let cpus = config.cpus.max(1);
        let processes = config.processes.len();
        let groups = config.fairness == Fairness::Processes;
        let group_entities = if groups { processes * cpus as usize } else { 0 };
        let tick = config.sched.tick;
        let min_interval = u64::from(cpus) * MS;
        let first_balance = balance_interval(min_interval, false, tick, cpus);
        State {
            ncpus: cpus,
            nthreads: threads.len() as u32,
            groups,
            slice: config.sched.base_slice,
            lag_rule: LagRule { slice: config.sched.base_slice, tick, running: config.running_reweight },
            tick,
            ents: vec![Entity::nice_0(); threads.len() + group_entities],
            queues: vec![Queue::default(); cpus as usize + group_entities],
            tasks: threads
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    // Pool workers start spread over the CPUs, as fork balancing leaves them.
                    let cpu = (i % cpus as usize) as u32;
                    Task { process: t.process, cpu, recent: cpu, last_ran: 0, order: 0 }
                })
                .collect(),
            cpus: (0..cpus)
                .map(|_| CpuState {
                    interval: min_interval,
                    next_balance: first_balance,
                    ..CpuState::default()
                })
                .collect(),
            idle: (0..cpus).collect(),
            nohz: (0..cpus).map(|c| (first_balance, c)).collect(),
            overloaded: BTreeSet::new(),
            total_load: 0,
            group_shares: config.group_shares,
            running_reweights: 0,
            proc_runnable: vec![0; processes],
            loads: vec![GroupLoad::default(); group_entities],
            tg_load: vec![0.0; if groups { processes } else { 0 }],
            submitter: (0..processes).map(|p| (p % cpus as usize) as u32).collect(),
            order: 0,
            util: 0.0,
            util_at: 0,
            busy_at: 0,
            nr_idle_scan: cpus,
        }
    }

    /// `update_cfs_group`: process `process`'s group entity on `cpu` gets its share of the
    /// group's weight (`calc_group_shares`); a change to the running entity is counted.
    fn update_cfs_group(&mut self, process: u32, cpu: u32) {
        let shares = self.group_share(process, cpu);
        let entity = self.group_entity(process, cpu);
        let running = self.queues[cpu as usize].reweight(&mut self.ents, entity, shares, self.lag_rule);
        self.running_reweights += u64::from(running);
    }

    /// `update_load_avg` and `update_tg_load_avg` for process `process`'s group queue on `cpu`
    /// at `now`, before its count of queued threads changes.
    fn update_group_load(&mut self, process: u32, cpu: u32, now: u64) {
        if self.group_shares == GroupShares::Counts {
            return;
        }
        let queued = self.queues[self.group_queue(process, cpu)].nr;
        let index = self.load_index(process, cpu);
        let load = &mut self.loads[index];
        load.update(now, queued);
        self.tg_load[process as usize] += load.report(now);
    }

    /// Process `process`'s group queue on `cpu` in `loads`.
    fn load_index(&self, process: u32, cpu: u32) -> usize {
        (process * self.ncpus + cpu) as usize
    }

    /// `calc_group_shares` for process `process`'s group entity on `cpu`, as its queue is now.
    fn group_share(&self, process: u32, cpu: u32) -> u64 {
        let queued = self.queues[self.group_queue(process, cpu)].nr;
        match self.group_shares {
            GroupShares::Counts => group_shares(NICE_0, queued, self.proc_runnable[process as usize]),
            GroupShares::Loads => self.loads[self.load_index(process, cpu)].shares(
                NICE_0,
                queued,
                self.tg_load[process as usize],
            ),
        }
    }

    /// `update_blocked_averages` for `cpu`: every group queue there brings its load (decaying
    /// while nothing is queued) up to date and reports it.
    fn update_blocked_loads(&mut self, cpu: u32, now: u64) {
        if !self.groups || self.group_shares == GroupShares::Counts {
            return;
        }
        for process in 0..self.tg_load.len() as u32 {
            self.update_group_load(process, cpu, now);
        }
    }

    /// The domain's `min_interval`: its span weight in milliseconds.
    fn min_interval(&self) -> u64 {
        u64::from(self.ncpus) * MS
    }

    /// Process `process`'s group entity on `cpu`.
    fn group_entity(&self, process: u32, cpu: u32) -> u32 {
        self.nthreads + process * self.ncpus + cpu
    }

    /// Process `process`'s group queue on `cpu`.
    fn group_queue(&self, process: u32, cpu: u32) -> usize {
        (self.ncpus + process * self.ncpus + cpu) as usize
    }

    /// The queue a group entity's threads wait on.
    fn queue_of_group_entity(&self, entity: u32) -> usize {
        (entity - self.nthreads + self.ncpus) as usize
    }

    /// The queue `thread`'s entity sits on: its CPU's root queue, or its group's queue there.
    fn thread_queue(&self, thread: u32) -> usize {
        let t = &self.tasks[thread as usize];
        if self.groups {
            self.group_queue(t.process, t.cpu)
        } else {
            t.cpu as usize
        }
    }

    /// After a change on `cpu`'s queues: its load in the total and its place among the
    /// overloaded CPUs.
    fn refresh_cpu(&mut self, cpu: u32) {
        let load = self.queues[cpu as usize].load();
        let c = &mut self.cpus[cpu as usize];
        self.total_load = self.total_load + load - c.load;
        c.load = load;
        let key = (c.nr >= 2).then_some((load, cpu));
        if key != c.key {
            if let Some(old) = c.key {
                self.overloaded.remove(&old);
            }
            if let Some(new) = key {
                self.overloaded.insert(new);
            }
            c.key = key;
        }
    }

    /// Sets `cpu`'s `next_balance`, keeping the idle CPUs' order right.
    fn set_next_balance(&mut self, cpu: u32, at: u64) {
        let c = &mut self.cpus[cpu as usize];
        if self.idle.contains(&cpu) {
            self.nohz.remove(&(c.next_balance, cpu));
            self.nohz.insert((at, cpu));
        }
        c.next_balance = at;
    }
}

impl Sim {
    /// `update_curr`: charges `cpu`'s running thread, and its group entity, for the time since
    /// the last charge; a request used up gets a new deadline and asks for a reschedule.
    pub(super) fn lx_charge(&mut self, cpu: u32) {
        let now = self.now;
        let c = &mut self.cpus[cpu as usize];
        let Some(thread) = c.current else { return };
        let ran = now - c.since;
        c.since = now;
        if ran == 0 {
            return;
        }
        let t = &mut self.threads[thread as usize];
        t.remaining = t.remaining.saturating_sub(ran);
        self.linux.tasks[thread as usize].last_ran = now;
        self.lx_charge_levels(cpu, thread, ran);
    }

    /// `cpu`'s thread (charged) leaves it to sleep: off the CPU and off its run queues.
    pub(super) fn lx_undispatch(&mut self, cpu: u32) -> u32 {
        self.lx_charge(cpu);
        let thread = self.lx_stop(cpu);
        self.lx_dequeue_thread(thread);
        thread
    }

    /// `__schedule` on `cpu` (its running thread, if any, charged): the hierarchical EEVDF pick
    /// runs, the running thread goes back to waiting if another is picked, a picked worker
    /// with nothing to do sleeps again, and a CPU left with nothing balances as it goes idle.
    pub(super) fn lx_schedule(&mut self, cpu: u32) {
        self.linux.cpus[cpu as usize].need_resched = false;
        loop {
            let current = self.cpus[cpu as usize].current;
            let Some(next) = self.lx_pick(cpu) else {
                if self.lx_newidle_balance(cpu) {
                    continue;
                }
                self.lx_go_idle(cpu);
                return;
            };
            if Some(next) == current {
                return;
            }
            if current.is_some() {
                let prev = self.lx_stop(cpu);
                self.lx_set_waiting(prev);
            }
            match self.claim(next, cpu) {
                Claim::Run => {
                    self.lx_start(cpu, next);
                    return;
                }
                Claim::Move(leased) => {
                    // The worker binds itself to its leased CPU (`sched_setaffinity` →
                    // `__set_cpus_allowed_ptr` → `move_queued_task`): it leaves this queue for
                    // that CPU's, keeping its lag, and this CPU picks again. It ran here just
                    // now to make that call, so a balance sees it cache-hot (`task_hot`) and
                    // does not pull it straight back.
                    self.linux.tasks[next as usize].last_ran = self.now;
                    self.lx_dequeue_thread(next);
                    self.lx_activate(next, leased);
                }
                Claim::Park => {
                    self.lx_dequeue_thread(next);
                    self.park(next);
                }
                Claim::Block => {
                    self.lx_dequeue_thread(next);
                    self.block(next);
                }
            }
        }
    }

    /// `try_to_wake_up`: `thread`, parked or blocked, becomes runnable on the CPU
    /// `select_task_rq_fair` gives it, and runs there at once if that CPU is idle, or preempts
    /// its thread if the EEVDF pick prefers the woken one.
    pub(super) fn lx_wake(&mut self, thread: u32, waker: Option<u32>) {
        let g = self.group_of(thread);
        self.groups[g].runnable += 1;
        let process = self.linux.tasks[thread as usize].process;
        let waker = match waker {
            Some(cpu) => cpu,
            // A simulated submitting thread wakes from its timer, which fires on the CPU it
            // slept on: the waker is its own previous CPU (no `wake_affine` choice to make).
            None if self.threads[thread as usize].submitter => self.linux.tasks[thread as usize].cpu,
            None => self.lx_submitter_cpu(process),
        };
        let cpu = self.lx_select_cpu(thread, waker);
        self.lx_activate(thread, cpu);
    }

    /// `activate_task` and `wakeup_preempt`: `thread`, runnable, joins `cpu`'s queue, and runs
    /// there at once if that CPU is idle, or preempts its thread if the EEVDF pick prefers it.
    pub(super) fn lx_activate(&mut self, thread: u32, cpu: u32) {
        let idle = self.linux.idle.contains(&cpu);
        if !idle {
            self.lx_charge(cpu);
        }
        self.lx_enqueue_thread(thread, cpu);
        if idle {
            self.lx_leave_idle(cpu);
            self.lx_schedule(cpu);
        } else if self.lx_wakeup_preempt(cpu, thread) {
            self.lx_resched(cpu);
        }
    }

    /// `resched_curr` acted on at once: reschedules busy `cpu`, after finishing its thread's
    /// item if it ends at this instant (its `Done` may not have been processed yet).
    fn lx_resched(&mut self, cpu: u32) {
        self.lx_charge(cpu);
        self.finished_now(cpu);
        if self.cpus[cpu as usize].current.is_some() {
            self.lx_schedule(cpu);
        }
    }

    /// `scheduler_tick`: charges the running thread (`entity_tick` at every level, a request
    /// used up asking for a reschedule), brings its group's weight here up to date
    /// (`update_cfs_group`), runs this CPU's periodic balance and the idle CPUs' when due
    /// (`trigger_load_balance`), then reschedules if asked. An idle CPU does not tick.
    pub(super) fn lx_tick(&mut self, cpu: u32) {
        let Some(thread) = self.cpus[cpu as usize].current else {
            self.cpus[cpu as usize].tick_pending = false;
            return;
        };
        self.push(self.now + self.params.tick, Event::Tick(cpu));
        self.lx_charge(cpu);
        if self.finished_now(cpu) {
            return;
        }
        if self.linux.groups {
            let process = self.linux.tasks[thread as usize].process;
            self.lx_update_shares(process, cpu);
        }
        self.lx_periodic_balance(cpu);
        self.lx_nohz_kick(cpu);
        if self.linux.cpus[cpu as usize].need_resched {
            self.lx_schedule(cpu);
        }
    }

    /// `thread`, picked and holding its item, runs on `cpu` (`set_next_task` on the CPU side:
    /// the counters, its item's end and the CPU's tick).
    fn lx_start(&mut self, cpu: u32, thread: u32) {
        let now = self.now;
        let tick = self.params.tick;
        let t = &mut self.threads[thread as usize];
        t.state = ThreadState::Running(cpu);
        let done = now + t.remaining.max(1);
        let p = t.process as usize;
        self.processes[p].running.change(now, true);
        self.note_waiting(thread, false);
        self.busy.change(now, true);
        let c = &mut self.cpus[cpu as usize];
        c.current = Some(thread);
        c.since = now;
        c.slice_start = now;
        c.generation += 1;
        let generation = c.generation;
        let needs_tick = !c.tick_pending;
        c.tick_pending = true;
        let phase = c.phase;
        self.push(done, Event::Done(cpu, generation));
        if needs_tick {
            // The CPU's next tick on its own grid, as the idealised model arms it.
            let next = if now < phase { phase } else { phase + ((now - phase) / tick + 1) * tick };
            self.push(next, Event::Tick(cpu));
        }
    }

    /// `cpu`'s thread (charged) stops running: the CPU side only (it stays on its queue, or
    /// the caller takes it off).
    fn lx_stop(&mut self, cpu: u32) -> u32 {
        let now = self.now;
        let c = &mut self.cpus[cpu as usize];
        let thread = c.current.take().expect("a running thread");
        c.generation += 1;
        let p = self.threads[thread as usize].process as usize;
        self.processes[p].running.change(now, false);
        self.busy.change(now, false);
        thread
    }

    /// `thread`, preempted, waits on its queue.
    fn lx_set_waiting(&mut self, thread: u32) {
        self.threads[thread as usize].state = ThreadState::Waiting;
        self.note_waiting(thread, true);
    }

    /// `cpu` has nothing to run: it idles (tickless) until a wake-up or an idle balance gives
    /// it a thread; its next balance is due one idle interval after its last
    /// (`newidle_balance` sets `rq->next_balance` so).
    fn lx_go_idle(&mut self, cpu: u32) {
        let lx = &mut self.linux;
        if !lx.idle.insert(cpu) {
            return;
        }
        let c = &lx.cpus[cpu as usize];
        let at = c.last_balance + balance_interval(c.interval, false, lx.tick, lx.ncpus);
        lx.cpus[cpu as usize].next_balance = at;
        lx.nohz.insert((at, cpu));
    }

    /// `cpu` is about to run something: no longer idle.
    fn lx_leave_idle(&mut self, cpu: u32) {
        let lx = &mut self.linux;
        if lx.idle.remove(&cpu) {
            let at = lx.cpus[cpu as usize].next_balance;
            lx.nohz.remove(&(at, cpu));
        }
    }
}
