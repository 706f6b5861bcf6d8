//! Load balancing in the Linux model, over one domain that spans the host:
//!
//! - **Newly idle** (`newidle_balance`, `sched_balance_newidle` since 6.10): a CPU about to idle
//!   pulls one waiting thread from the busiest CPU, if some CPU has one waiting
//!   (`rd->overload`). The kernel also skips it when the CPU's average idle time is shorter
//!   than a balance costs (`avg_idle`, microseconds): not modelled.
//! - **Periodic** (`trigger_load_balance` → `rebalance_domains`): a busy CPU balances at its tick
//!   once `balance_interval × busy_factor` (16) has passed since its last balance; the
//!   interval starts at the domain's `min_interval`, its span weight in ms (2 ms on 2 CPUs),
//!   doubles after a balance that finds nothing to do, up to `max_interval` (twice), and goes
//!   back to the minimum after one that finds an imbalance. Times are whole ticks
//!   (`msecs_to_jiffies` rounds up), at most `max_load_balance_interval` (CPUs × 100 ms).
//! - **Idle** (NO_HZ: `nohz_balancer_kick` → `_nohz_idle_balance`): idle CPUs do not tick; a busy
//!   CPU's tick, once the earliest idle CPU's balance is due, and if it has a thread waiting
//!   (or two CPUs are busy and some CPU has one waiting), balances every due idle CPU, each
//!   pulling toward itself.
//!
//! `load_balance` pulls toward the balancing CPU from the busiest other CPU that has a thread
//! waiting. An idle CPU takes threads by count (half the difference, at least one:
//! `migrate_task`, `sibling_imbalance`); a busy one takes load toward the domain's average
//! when the busiest CPU's load exceeds its own by more than the margin (`migrate_load`, loads
//! as the root queues' weights, a thread's share through its group: `task_h_load`).
//! `detach_tasks` looks at up to `sysctl_sched_nr_migrate` (32) threads from the tail of the
//! busiest CPU's `cfs_tasks` (the least recently queued or picked), never the running one,
//! and skips a thread that ran within `sysctl_sched_migration_cost` (0.5 ms: cache hot,
//! `task_hot`) unless balances have failed more than `cache_nice_tries` (1) times in a row
//! (`can_migrate_task`), or whose load exceeds what is left to move (halved per failure).
//! Active balancing (moving the running thread) is not modelled.

use crate::host::run::Sim;
use crate::host::MS;

/// `sd->imbalance_pct` of a last-level-cache domain (`sd_init`).
pub(super) const IMBALANCE_PCT: u64 = 117;
/// `sysctl_sched_migration_cost`: a thread that ran this recently is cache hot (ns).
pub(super) const MIGRATION_COST: u64 = 500_000;
/// `sd->cache_nice_tries` of a last-level-cache domain.
const CACHE_NICE_TRIES: u32 = 1;
/// `sd->busy_factor`: a busy CPU balances this many times less often.
const BUSY_FACTOR: u64 = 16;
/// `sysctl_sched_nr_migrate`: the most threads one balance looks at.
const NR_MIGRATE: usize = 32;

/// Who balances (the kernel's `enum cpu_idle_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BalanceKind {
    /// A CPU about to idle (`CPU_NEWLY_IDLE`).
    NewlyIdle,
    /// An idle CPU, at its periodic balance (`CPU_IDLE`).
    Idle,
    /// A busy CPU, at its periodic balance (`CPU_NOT_IDLE`).
    Busy,
}

/// What one balance is to move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Imbalance {
    /// This many threads (`migrate_task`).
    Tasks(u32),
    /// This much load, in weight units (`migrate_load`).
    Load(u64),
}

/// `get_sd_balance_interval`: the time between periodic balances of a CPU whose domain's
/// `balance_interval` is `interval` (ns), times `busy_factor` when the CPU is busy, in whole
/// ticks, at least one, at most `max_load_balance_interval` (`HZ × CPUs / 10` ticks).
pub(super) fn balance_interval(interval: u64, busy: bool, tick: u64, cpus: u32) -> u64 {
    let tick = tick.max(1);
    let wanted = if busy { interval.saturating_mul(BUSY_FACTOR) } else { interval };
    let most = (u64::from(cpus) * 100 * MS).div_ceil(tick).max(1);
    wanted.div_ceil(tick).clamp(1, most) * tick
}

/// `can_migrate_task` for a waiting thread that last ran at `last_ran`: cold threads move;
/// hot ones (`task_hot`: ran within the migration cost) only after more than
/// `cache_nice_tries` failed balances.
pub(super) fn can_migrate(now: u64, last_ran: u64, failed: u32) -> bool {
    now.saturating_sub(last_ran) >= MIGRATION_COST || failed > CACHE_NICE_TRIES
}

impl Sim {
    /// `newidle_balance`: `cpu` has nothing to run; `true` if it pulled a thread.
    pub(super) fn lx_newidle_balance(&mut self, cpu: u32) -> bool {
        if self.linux.overloaded.is_empty() {
            return false; // !rd->overload: no thread waits anywhere
        }
        self.lx_load_balance(cpu, BalanceKind::NewlyIdle) > 0
    }

    /// `trigger_load_balance` on busy `cpu`'s tick: its periodic balance, if due.
    pub(super) fn lx_periodic_balance(&mut self, cpu: u32) {
        if self.now >= self.linux.cpus[cpu as usize].next_balance {
            self.lx_rebalance(cpu, true);
        }
    }

    /// `nohz_balancer_kick` on busy `cpu`'s tick, and the idle balance it starts
    /// (`_nohz_idle_balance`): every idle CPU whose balance is due balances, and one that
    /// pulls a thread runs it.
    pub(super) fn lx_nohz_kick(&mut self, cpu: u32) {
        let now = self.now;
        let lx = &self.linux;
        let Some(&(earliest, _)) = lx.nohz.first() else { return };
        if now < earliest {
            return;
        }
        let busy_cpus = lx.ncpus as usize - lx.idle.len();
        let kick = lx.cpus[cpu as usize].nr >= 2 || (busy_cpus > 1 && !lx.overloaded.is_empty());
        if !kick {
            return;
        }
        let due: Vec<u32> = lx.nohz.range(..=(now, u32::MAX)).map(|&(_, c)| c).collect();
        for idle_cpu in due {
            if self.linux.overloaded.is_empty() {
                break; // nothing waits anywhere: the rest would find nothing to pull
            }
            if !self.linux.idle.contains(&idle_cpu) {
                continue;
            }
            if self.lx_rebalance(idle_cpu, false) > 0 {
                self.lx_leave_idle(idle_cpu);
                self.lx_schedule(idle_cpu);
            }
        }
    }

    /// `rebalance_domains` for `cpu` (busy or idle): balances if its interval has passed since
    /// its last balance, then sets when the next is due. Returns the threads it pulled.
    fn lx_rebalance(&mut self, cpu: u32, busy: bool) -> u32 {
        let now = self.now;
        // The balancing softirq first brings the CPU's blocked loads up to date.
        self.linux.update_blocked_loads(cpu, now);
        let (tick, cpus) = (self.linux.tick, self.linux.ncpus);
        let c = &self.linux.cpus[cpu as usize];
        let mut moved = 0;
        if now >= c.last_balance + balance_interval(c.interval, busy, tick, cpus) {
            // Periodic balances keep the idle scan's length up to date (not newly-idle ones).
            self.lx_update_idle_scan();
            moved = self.lx_load_balance(cpu, if busy { BalanceKind::Busy } else { BalanceKind::Idle });
            self.linux.cpus[cpu as usize].last_balance = now;
        }
        let c = &self.linux.cpus[cpu as usize];
        let next = c.last_balance + balance_interval(c.interval, busy, tick, cpus);
        self.linux.set_next_balance(cpu, next);
        moved
    }

    /// `load_balance` toward `dst`: finds the busiest other CPU with a thread waiting, what to
    /// move, moves it, and keeps the failure count and the interval as the kernel does.
    /// Returns the threads moved.
    fn lx_load_balance(&mut self, dst: u32, kind: BalanceKind) -> u32 {
        let min_interval = self.linux.min_interval();
        let src = self.linux.overloaded.iter().rev().map(|&(_, c)| c).find(|&c| c != dst);
        let plan = src.and_then(|src| self.lx_imbalance(dst, src, kind).map(|i| (src, i)));
        let Some((src, imbalance)) = plan else {
            // out_balanced: nothing to do; balance less often (not after a newly-idle one).
            let c = &mut self.linux.cpus[dst as usize];
            c.failed = 0;
            if kind != BalanceKind::NewlyIdle {
                c.interval = (c.interval * 2).min(2 * min_interval);
            }
            return 0;
        };
        let moved = self.lx_move_threads(src, dst, imbalance, kind);
        let c = &mut self.linux.cpus[dst as usize];
        if moved > 0 {
            c.failed = 0;
        } else if kind != BalanceKind::NewlyIdle {
            c.failed += 1;
        }
        // Unbalanced, moved or not: back to the shortest interval.
        c.interval = min_interval;
        moved
    }

    /// `find_busiest_group` and `calculate_imbalance` reduced to two CPUs: what `dst` should
    /// take from `src`, or `None` if they are balanced.
    fn lx_imbalance(&self, dst: u32, src: u32, kind: BalanceKind) -> Option<Imbalance> {
        let lx = &self.linux;
        let (d, s) = (&lx.cpus[dst as usize], &lx.cpus[src as usize]);
        if s.nr < 2 {
            return None; // nothing waits there
        }
        if d.nr == 0 {
            // The local CPU has room: spread the threads; a newly idle CPU takes one.
            let n = if kind == BalanceKind::NewlyIdle { 1 } else { (s.nr / 2).max(1) };
            return Some(Imbalance::Tasks(n));
        }
        if kind == BalanceKind::NewlyIdle {
            return None;
        }
        // Both busy: move load toward the domain's average, if the busiest exceeds the local
        // CPU by more than the margin and the local CPU is below the average.
        let (local, busiest) = (d.load, s.load);
        if local >= busiest || 100 * busiest <= IMBALANCE_PCT * local {
            return None;
        }
        let average = lx.total_load / u64::from(lx.ncpus.max(1));
        if local >= average {
            return None;
        }
        let load = busiest.saturating_sub(average).min(average - local);
        (load > 0).then_some(Imbalance::Load(load))
    }

    /// `detach_tasks` + `attach_tasks`: moves waiting threads from `src` to `dst` (see the
    /// module doc for which); a moved thread keeps its lag and may preempt `dst`'s thread
    /// (`wakeup_preempt`; acted on at `dst`'s tick or schedule). Returns the threads moved.
    fn lx_move_threads(&mut self, src: u32, dst: u32, imbalance: Imbalance, kind: BalanceKind) -> u32 {
        let now = self.now;
        let failed = self.linux.cpus[dst as usize].failed;
        let nr = self.linux.cpus[src as usize].nr as usize;
        let candidates: Vec<u32> =
            self.linux.cpus[src as usize].tasks.iter().take(nr.min(NR_MIGRATE)).map(|&(_, t)| t).collect();
        // The queues' running threads are charged first (update_curr on dequeue and enqueue).
        self.lx_charge(src);
        self.lx_charge(dst);
        let mut left = imbalance;
        let mut moved = 0;
        for thread in candidates {
            if self.cpus[src as usize].current == Some(thread) {
                continue; // task_on_cpu
            }
            if !can_migrate(now, self.linux.tasks[thread as usize].last_ran, failed) {
                continue;
            }
            match &mut left {
                Imbalance::Tasks(n) => *n = n.saturating_sub(1),
                Imbalance::Load(l) => {
                    let load = self.lx_h_load(thread);
                    if (load >> failed.min(63)) > *l {
                        continue;
                    }
                    *l = l.saturating_sub(load);
                }
            }
            self.lx_dequeue_thread(thread);
            self.lx_enqueue_thread(thread, dst);
            moved += 1;
            if self.cpus[dst as usize].current.is_some() && self.lx_wakeup_preempt(dst, thread) {
                self.linux.cpus[dst as usize].need_resched = true;
            }
            let done = matches!(left, Imbalance::Tasks(0) | Imbalance::Load(0));
            if kind == BalanceKind::NewlyIdle || done {
                break; // a newly idle CPU takes one thread
            }
        }
        moved
    }
}
