//! Wake-up placement in the Linux model: the CPU a woken thread is queued on
//! (`select_task_rq_fair`), simplified to one last-level-cache domain that spans the host.
//!
//! 1. `wake_affine`, when the waker runs on another CPU than the thread's previous one: the
//!    waker's CPU if it is idle (or the previous one, if that is idle too), else the previous
//!    CPU if idle, else whichever is less loaded, counting runnable threads, with the previous
//!    CPU favoured by half the domain's imbalance margin (`wake_affine_weight`, `WA_BIAS`).
//! 2. `select_idle_sibling` from that target: the target if idle, else the previous CPU if
//!    idle, else the thread's `recent_used_cpu` if idle, else the first idle CPU after the
//!    target within `nr_idle_scan` CPUs (`select_idle_cpu` with `SIS_UTIL`), else the target
//!    itself, busy though it is. The scan's length falls as the host gets busier
//!    (`update_idle_cpu_scan`) and is zero from about 85 % utilisation (60 % on 2 CPUs, where
//!    the floor rounds it down): then a thread woken where its waker and its previous CPU are
//!    busy queues there while another CPU idles, until a balance moves it.
//!
//! Not modelled: `wake_wide` (a waker that wakes many threads still wakes affine here: each
//! worker is woken by few), SMT cores, asymmetric capacities, synchronous wake-ups.
//!
//! The wakers: a token hand-over wakes from the CPU of the thread that handed it, and so does
//! a simulated submitting thread (`HostConfig::submit_ns`), which itself wakes from its timer
//! on its previous CPU. The process's control thread, and its submitting thread when that is
//! not simulated, are not simulated threads; the CPU they wake from is placed as a thread
//! waking from a timer on its previous CPU would be (that CPU or an idle one within the scan),
//! and counts as idle when no simulated thread runs there (the waker sleeps again at once).

use std::collections::BTreeSet;

use super::balance::IMBALANCE_PCT;
use crate::host::run::Sim;

/// PELT's half-life: utilisation halves every 32 ms (32 periods of 1 ms).
const PELT_HALF_LIFE_NS: f64 = 32e6;

/// `SCHED_CAPACITY_SCALE`.
const CAPACITY: u64 = 1024;

/// `update_idle_cpu_scan`: how many CPUs a wake-up's idle scan may look at, for a domain of
/// `cpus` CPUs whose summed utilisation is `util` busy CPUs. With `x` the utilisation per CPU
/// (of 1024), `nr = cpus × (1 - min(1, x² × pct² / (10000 × 1024²)))`, rounded down: the whole
/// domain when idle, nothing once `x` reaches `100 / pct` (85 % for the LLC's 117).
pub(super) fn idle_scan(util: f64, cpus: u32) -> u32 {
    let cpus = u64::from(cpus.max(1));
    let x = (util / cpus as f64 * CAPACITY as f64).clamp(0.0, CAPACITY as f64) as u64;
    let tmp = (x * x * IMBALANCE_PCT * IMBALANCE_PCT / (10_000 * CAPACITY)).min(CAPACITY);
    ((CAPACITY - tmp) * cpus / CAPACITY) as u32
}

/// `select_idle_cpu`'s scan: the first CPU of `idle` after `target`, wrapping around the
/// `cpus` CPUs, if it lies within `nr` CPUs of the target (`for_each_cpu_wrap` from
/// `target + 1`, giving up when `nr` runs out).
pub(super) fn scan_idle(idle: &BTreeSet<u32>, cpus: u32, target: u32, nr: u32) -> Option<u32> {
    if nr == 0 {
        return None;
    }
    let found = idle.range(target + 1..).next().or_else(|| idle.range(..target).next()).copied()?;
    let distance = (found + cpus - target) % cpus;
    (distance <= nr).then_some(found)
}

/// `wake_affine_weight`, loads counted in runnable threads: does the waker's CPU (`this_nr`
/// threads, plus the woken one) win over the previous CPU (`prev_nr`, without it), which the
/// kernel favours by half the imbalance margin?
pub(super) fn affine_wins(this_nr: u32, prev_nr: u32) -> bool {
    let this_eff = (u64::from(this_nr) + 1) * 100;
    let prev_eff = u64::from(prev_nr) * (100 + (IMBALANCE_PCT - 100) / 2);
    this_eff < prev_eff
}

impl Sim {
    fn lx_idle(&self, cpu: u32) -> bool {
        self.linux.idle.contains(&cpu)
    }

    /// `select_task_rq_fair` for `thread`, woken from CPU `waker`.
    pub(super) fn lx_select_cpu(&mut self, thread: u32, waker: u32) -> u32 {
        let prev = self.linux.tasks[thread as usize].cpu;
        let target = if waker != prev { self.lx_wake_affine(waker, prev) } else { prev };
        self.lx_select_idle_sibling(Some(thread), prev, target)
    }

    /// `wake_affine`: `wake_affine_idle`, then `wake_affine_weight` (see the module doc).
    fn lx_wake_affine(&self, this: u32, prev: u32) -> u32 {
        if self.lx_idle(this) {
            return if self.lx_idle(prev) { prev } else { this };
        }
        if self.lx_idle(prev) {
            return prev;
        }
        let nr = |cpu: u32| self.linux.cpus[cpu as usize].nr;
        if affine_wins(nr(this), nr(prev)) {
            this
        } else {
            prev
        }
    }

    /// `select_idle_sibling` from `target` for `thread` (or, with `None`, for an unsimulated
    /// waker, which has no recently used CPU).
    pub(super) fn lx_select_idle_sibling(&mut self, thread: Option<u32>, prev: u32, target: u32) -> u32 {
        if self.lx_idle(target) {
            return target;
        }
        if prev != target && self.lx_idle(prev) {
            return prev;
        }
        if let Some(thread) = thread {
            let task = &mut self.linux.tasks[thread as usize];
            let recent = task.recent;
            task.recent = prev;
            if recent != prev && recent != target && self.lx_idle(recent) {
                return recent;
            }
        }
        let lx = &self.linux;
        scan_idle(&lx.idle, lx.ncpus, target, lx.nr_idle_scan).unwrap_or(target)
    }

    /// The CPU process `process`'s control thread (or its submitting thread, when that is not
    /// simulated) wakes a worker from: where it lands as it wakes from its timer on its
    /// previous CPU.
    pub(super) fn lx_submitter_cpu(&mut self, process: u32) -> u32 {
        let prev = self.linux.submitter[process as usize];
        let cpu = self.lx_select_idle_sibling(None, prev, prev);
        self.linux.submitter[process as usize] = cpu;
        cpu
    }

    /// `update_idle_cpu_scan`, run by a periodic balance: the host's utilisation, decayed as
    /// PELT decays it, sets `nr_idle_scan`.
    pub(super) fn lx_update_idle_scan(&mut self) {
        let now = self.now;
        let busy = self.busy.at(now);
        let lx = &mut self.linux;
        let elapsed = now.saturating_sub(lx.util_at);
        if elapsed == 0 {
            return;
        }
        let busy_cpus = busy.saturating_sub(lx.busy_at) as f64 / elapsed as f64;
        let decay = 0.5f64.powf(elapsed as f64 / PELT_HALF_LIFE_NS);
        lx.util = lx.util * decay + busy_cpus * (1.0 - decay);
        lx.util_at = now;
        lx.busy_at = busy;
        lx.nr_idle_scan = idle_scan(lx.util, lx.ncpus);
    }
}
