//! The hierarchy of the Linux model: a thread's entity on its CPU's queue, or (with
//! per-process cgroups) on its process's group queue there, whose group entity sits on the
//! CPU's root queue with the process's weight split across CPUs by `calc_group_shares`
//! (by counts of runnable threads, or from load averages: `shares.rs`).
//! Enqueue, dequeue, charge and pick go through every level, as `enqueue_task_fair`,
//! `dequeue_task_fair`, `entity_tick` and `pick_next_task_fair` do.

use super::eevdf::NICE_0;
use crate::host::run::Sim;
use crate::host::sched::ThreadState;

impl Sim {
    /// `enqueue_task_fair`: `thread` becomes runnable on `cpu` (woken or moved there), placed
    /// with its lag; with per-process cgroups its group entity joins the root queue if it was
    /// not there, after `update_cfs_group` gave it its share (the order of `enqueue_entity`).
    pub(super) fn lx_enqueue_thread(&mut self, thread: u32, cpu: u32) {
        let now = self.now;
        let lx = &mut self.linux;
        let slice = lx.slice;
        lx.order += 1;
        let order = lx.order;
        let task = &mut lx.tasks[thread as usize];
        task.cpu = cpu;
        task.order = order;
        let process = task.process;
        lx.proc_runnable[process as usize] += 1;
        let c = &mut lx.cpus[cpu as usize];
        c.nr += 1;
        c.tasks.insert((order, thread));
        let q = lx.thread_queue(thread);
        if lx.groups {
            lx.update_group_load(process, cpu, now);
        }
        lx.queues[q].place(&mut lx.ents, thread, slice);
        if lx.groups {
            lx.update_cfs_group(process, cpu);
            let ge = lx.group_entity(process, cpu);
            if !lx.ents[ge as usize].on_rq {
                lx.queues[cpu as usize].place(&mut lx.ents, ge, slice);
            }
        }
        lx.refresh_cpu(cpu);
        self.threads[thread as usize].state = ThreadState::Waiting;
        self.note_waiting(thread, true);
    }

    /// `dequeue_task_fair`: `thread` leaves its CPU's queues (to sleep, or to move), keeping
    /// its lag; its group entity leaves the root queue when no thread of the group is left
    /// there, and is reweighted otherwise. A waiting thread stops counting as waiting; the
    /// caller gives it its next state.
    pub(super) fn lx_dequeue_thread(&mut self, thread: u32) {
        let now = self.now;
        let lx = &mut self.linux;
        let (slice, tick) = (lx.slice, lx.tick);
        let task = lx.tasks[thread as usize];
        let (cpu, process) = (task.cpu, task.process);
        lx.proc_runnable[process as usize] -= 1;
        let c = &mut lx.cpus[cpu as usize];
        c.nr -= 1;
        c.tasks.remove(&(task.order, thread));
        let q = lx.thread_queue(thread);
        if lx.groups {
            lx.update_group_load(process, cpu, now);
        }
        lx.queues[q].dequeue(&mut lx.ents, thread, slice, tick);
        if lx.groups {
            if lx.queues[q].nr == 0 {
                let ge = lx.group_entity(process, cpu);
                lx.queues[cpu as usize].dequeue(&mut lx.ents, ge, slice, tick);
            } else {
                lx.update_cfs_group(process, cpu);
            }
        }
        lx.refresh_cpu(cpu);
        if self.threads[thread as usize].state == ThreadState::Waiting {
            self.note_waiting(thread, false);
        }
    }

    /// `update_curr` at every level for `thread`, running on `cpu`, that ran `ran` ns: the
    /// thread on its queue, and its group entity (the root queue's running one) on the root.
    pub(super) fn lx_charge_levels(&mut self, cpu: u32, thread: u32, ran: u64) {
        let lx = &mut self.linux;
        let slice = lx.slice;
        let q = lx.thread_queue(thread);
        let mut resched = lx.queues[q].charge(&mut lx.ents, thread, ran, slice);
        if lx.groups {
            let ge = lx.group_entity(lx.tasks[thread as usize].process, cpu);
            resched |= lx.queues[cpu as usize].charge(&mut lx.ents, ge, ran, slice);
        }
        if resched {
            lx.cpus[cpu as usize].need_resched = true;
        }
    }

    /// `pick_next_task_fair`: `pick_eevdf` at the root of `cpu`, then (with per-process cgroups)
    /// within the picked group; the levels whose running entity changes put the old one back
    /// (`put_prev_entity`) and set the new one (`set_next_entity`). `None`: nothing runnable.
    pub(super) fn lx_pick(&mut self, cpu: u32) -> Option<u32> {
        let now = self.now;
        let lx = &mut self.linux;
        let root = cpu as usize;
        let first = lx.queues[root].pick(&lx.ents)?;
        let (q, thread) = if lx.groups {
            let old = lx.queues[root].curr;
            if old != Some(first) {
                // The old group's running thread goes back among its group's waiting ones.
                if let Some(old) = old {
                    let old_queue = lx.queue_of_group_entity(old);
                    lx.queues[old_queue].put_prev(&lx.ents);
                }
                lx.queues[root].set_next(&mut lx.ents, first);
            }
            let q = lx.queue_of_group_entity(first);
            (q, lx.queues[q].pick(&lx.ents)?)
        } else {
            (root, first)
        };
        if lx.queues[q].curr != Some(thread) {
            lx.queues[q].set_next(&mut lx.ents, thread);
            // set_next_entity restarts `exec_start`; the pick moves the thread to the head of
            // `cfs_tasks`.
            lx.order += 1;
            let order = lx.order;
            let task = &mut lx.tasks[thread as usize];
            task.last_ran = now;
            let c = &mut lx.cpus[cpu as usize];
            c.tasks.remove(&(task.order, thread));
            task.order = order;
            c.tasks.insert((order, thread));
        }
        Some(thread)
    }

    /// `check_preempt_wakeup_fair` (`wakeup_preempt`): should `woken`, just queued on busy
    /// `cpu`, preempt its thread? At the level where the two meet (`find_matching_se`: the
    /// threads if they share a group, else their group entities), yes if `pick_eevdf` there
    /// now picks the woken side; `RUN_TO_PARITY` keeps the running side otherwise.
    pub(super) fn lx_wakeup_preempt(&self, cpu: u32, woken: u32) -> bool {
        let lx = &self.linux;
        if lx.cpus[cpu as usize].need_resched {
            return true;
        }
        let Some(current) = self.cpus[cpu as usize].current else { return true };
        let root = &lx.queues[cpu as usize];
        if !lx.groups {
            return root.pick(&lx.ents) == Some(woken);
        }
        let (mine, theirs) = (lx.tasks[woken as usize].process, lx.tasks[current as usize].process);
        if mine == theirs {
            lx.queues[lx.group_queue(mine, cpu)].pick(&lx.ents) == Some(woken)
        } else {
            root.pick(&lx.ents) == Some(lx.group_entity(mine, cpu))
        }
    }

    /// `entity_tick`'s `update_load_avg` and `update_cfs_group`: process `process`'s group
    /// queue on `cpu` brings its load up to date, and its group entity gets its share of the
    /// group's weight (`calc_group_shares`).
    pub(super) fn lx_update_shares(&mut self, process: u32, cpu: u32) {
        let now = self.now;
        let lx = &mut self.linux;
        if lx.queues[lx.group_queue(process, cpu)].nr == 0 {
            return;
        }
        lx.update_group_load(process, cpu, now);
        lx.update_cfs_group(process, cpu);
        lx.refresh_cpu(cpu);
    }

    /// `task_h_load`: `thread`'s share of its CPU's load, through its group (a thread alone in
    /// its group there carries the group entity's whole weight).
    pub(super) fn lx_h_load(&self, thread: u32) -> u64 {
        let lx = &self.linux;
        if !lx.groups {
            return NICE_0;
        }
        let t = &lx.tasks[thread as usize];
        let group_weight = lx.ents[lx.group_entity(t.process, t.cpu) as usize].weight;
        let load = lx.queues[lx.group_queue(t.process, t.cpu)].load().max(1);
        (NICE_0 * group_weight / load).max(1)
    }
}
