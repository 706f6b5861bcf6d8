//! One EEVDF run queue (a `cfs_rq` of kernel/sched/fair.c, Linux 6.6 and later): entities
//! keyed by virtual deadline, the weighted average virtual runtime `V` that decides who is
//! eligible, the pick of the eligible entity with the earliest deadline, placement with the
//! entity's lag kept, and reweighting. Pure: the caller says which entities exist and what
//! happened to them.
//!
//! Two rules follow what was measured on Linux 6.18 (a bpf trace of the group entities,
//! `docs/results/sim-validation-2cpu-exact-cpu/trace-s25/`) rather than Linux 6.6: the lag
//! clamp of `update_entity_lag` is the virtual time of slice + tick, and a reweight of the
//! *running* entity places it with its own weight counted twice ([`RunningReweight`]). (The
//! third, the 0.7-ms base slice, is a constant: `SchedParams::base_slice`.)
//!
//! Virtual times are signed nanoseconds (`i64`); the sums behind `V` are `i128`, so neither
//! needs the kernel's rebasing on `min_vruntime`.

use std::collections::BTreeSet;

/// `NICE_0_LOAD` (scaled down): the weight of a nice-0 thread and a cgroup's default shares.
pub(super) const NICE_0: u64 = 1024;

/// A schedulable entity (`struct sched_entity`): a thread, or a process group's entity on one
/// CPU (with per-process cgroups).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Entity {
    /// `se->vruntime`: CPU time received, scaled by `NICE_0 / weight`.
    pub(super) vruntime: i64,
    /// `se->deadline`: the virtual time by which its current request (one base slice) is due.
    pub(super) deadline: i64,
    /// `se->vlag`: `V - vruntime` when it last left a queue (kept while it sleeps or moves).
    pub(super) vlag: i64,
    /// `se->load.weight`.
    pub(super) weight: u64,
    /// Picked and not yet past the deadline it was picked with: `RUN_TO_PARITY` keeps it
    /// running while it stays eligible (the kernel marks this with `vlag == deadline`, see
    /// `set_next_entity`; `update_deadline` and a reweight end it).
    pub(super) protected: bool,
    /// On a run queue (`se->on_rq`).
    pub(super) on_rq: bool,
}

impl Entity {
    /// A nice-0 thread off any queue, with no lag.
    pub(super) fn nice_0() -> Entity {
        Entity { weight: NICE_0, ..Entity::default() }
    }
}

/// `calc_delta_fair`: `delta` of real time in the virtual time of an entity of `weight`.
pub(super) fn calc_delta_fair(delta: u64, weight: u64) -> u64 {
    if weight == NICE_0 {
        return delta;
    }
    let scaled = u128::from(delta) * u128::from(NICE_0) / u128::from(weight.max(1));
    u64::try_from(scaled).unwrap_or(u64::MAX)
}

/// How `reweight_entity` treats the running entity (`cfs_rq->curr`) of a queue; an entity
/// waiting in the tree keeps its real lag (`weight × (V - vruntime)`) under both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RunningReweight {
    /// As measured on Linux 6.18 (trace-s25: 1100 reweights of a running group entity, the
    /// lag after each predicted to 0.03 % at the median): its lag is clamped and rescaled by
    /// `old / new` (`update_entity_lag`), then `place_entity` places it from a `V` that still
    /// counts it at its old vruntime (with the new weight) and inflates the lag by
    /// `(W + 2w) / (W + w)`, counting its weight twice. Each reweight so *grows* the running
    /// entity's lag, to about 1.2 times what keeping it would give (1.20-1.25 in the trace;
    /// `1 + wW / (w + W)²`, at most 1.25, for a small change), however small the change: a group whose threads wake and sleep on a
    /// CPU while it runs there stays eligible, and the other groups there stay behind it.
    #[default]
    AsMeasured,
    /// Placed as a waiting entity is: its real lag kept, `V` unchanged (what `reweight_entity`
    /// is meant to do). The simulator's rule for the running entity before the 6.18 trace
    /// (which also clamped no lag at a reweight and took 6.6's constants).
    LagConserving,
}

/// `update_entity_lag`'s limit for an entity of `weight`: the virtual time of one slice plus
/// a tick (measured on 6.18: 5.40 ms of real time for a 1.4 ms slice and a 4 ms tick; Linux
/// 6.6 took `max(2 × slice, tick)`).
fn lag_limit(slice: u64, tick: u64, weight: u64) -> i64 {
    virt(calc_delta_fair(slice.saturating_add(tick), weight))
}

/// A virtual duration as a signed virtual time (saturating: only absurd inputs reach the cap).
fn virt(delta: u64) -> i64 {
    i64::try_from(delta).unwrap_or(i64::MAX / 4)
}

/// One run queue: the waiting entities by (deadline, id), the running one apart (`curr`, as in
/// the kernel, out of the tree), and the weighted sums that give `V`.
#[derive(Debug, Clone, Default)]
pub(super) struct Queue {
    /// Queued entities other than `curr`, by (deadline, id): the ids break ties.
    tree: BTreeSet<(i64, u32)>,
    /// The entity running from this queue (`cfs_rq->curr`), counted in the sums.
    pub(super) curr: Option<u32>,
    /// Σ weight of every queued entity, `curr` included (`cfs_rq->avg_load` + curr's weight).
    sum_w: u64,
    /// Σ weight × vruntime over the same entities.
    sum_wv: i128,
    /// Entities queued, `curr` included (`cfs_rq->nr_running`).
    pub(super) nr: u32,
    /// `V` when the queue last emptied: where an entity placed on the empty queue starts (the
    /// kernel's `min_vruntime` plays this part).
    empty_v: i64,
}

impl Queue {
    /// `avg_vruntime`: `V`, the weighted average vruntime of the queued entities (rounded
    /// down), or where the queue stood when it emptied.
    pub(super) fn avg_vruntime(&self) -> i64 {
        if self.sum_w == 0 {
            return self.empty_v;
        }
        let v = self.sum_wv.div_euclid(i128::from(self.sum_w));
        i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
    }

    /// `entity_eligible`: it has received no more than its share, `vruntime <= V` (compared
    /// without rounding, as `vruntime_eligible` does).
    pub(super) fn eligible(&self, e: &Entity) -> bool {
        i128::from(e.vruntime) * i128::from(self.sum_w) <= self.sum_wv
    }

    /// The queue's load: Σ weight of its entities (`cfs_rq->load.weight`).
    pub(super) fn load(&self) -> u64 {
        self.sum_w
    }

    fn add_sums(&mut self, e: &Entity) {
        self.sum_w += e.weight;
        self.sum_wv += i128::from(e.weight) * i128::from(e.vruntime);
    }

    fn sub_sums(&mut self, e: &Entity) {
        self.sum_w -= e.weight;
        self.sum_wv -= i128::from(e.weight) * i128::from(e.vruntime);
    }

    /// `place_entity` + `enqueue_entity`: entity `id` joins the queue. Its lag is kept, scaled by
    /// `(W + w) / W` so that adding it does not pull `V` and evaporate the lag (`PLACE_LAG`; an
    /// empty queue gives no lag, as in 6.6); its deadline is one base `slice` (virtual) ahead.
    pub(super) fn place(&mut self, ents: &mut [Entity], id: u32, slice: u64) {
        let v = self.avg_vruntime();
        let e = &mut ents[id as usize];
        let mut lag = 0i64;
        if self.nr > 0 {
            let load = i128::from(self.sum_w.max(1));
            let scaled = i128::from(e.vlag) * (load + i128::from(e.weight)) / load;
            lag = i64::try_from(scaled).unwrap_or(e.vlag);
        }
        e.vruntime = v.saturating_sub(lag);
        e.deadline = e.vruntime.saturating_add(virt(calc_delta_fair(slice, e.weight)));
        e.protected = false;
        e.on_rq = true;
        let e = *e;
        self.add_sums(&e);
        self.nr += 1;
        self.tree.insert((e.deadline, id));
    }

    /// `dequeue_entity` with `update_entity_lag`: entity `id` leaves the queue (to sleep or to
    /// move), keeping `vlag = V - vruntime`, clamped by [`lag_limit`].
    pub(super) fn dequeue(&mut self, ents: &mut [Entity], id: u32, slice: u64, tick: u64) {
        let v = self.avg_vruntime();
        let e = &mut ents[id as usize];
        let limit = lag_limit(slice, tick, e.weight);
        e.vlag = v.saturating_sub(e.vruntime).clamp(-limit, limit);
        e.on_rq = false;
        e.protected = false;
        let e = *e;
        if self.curr == Some(id) {
            self.curr = None;
        } else {
            self.tree.remove(&(e.deadline, id));
        }
        self.sub_sums(&e);
        self.nr -= 1;
        if self.nr == 0 {
            self.empty_v = v;
        }
    }

    /// `update_curr` + `update_deadline` for the running entity `id`: it ran `ran` ns. When its
    /// vruntime reaches its deadline it gets a new one a slice ahead (and loses the
    /// `RUN_TO_PARITY` protection); `true` then if another entity is queued, i.e. the kernel's
    /// `resched_curr`.
    pub(super) fn charge(&mut self, ents: &mut [Entity], id: u32, ran: u64, slice: u64) -> bool {
        let e = &mut ents[id as usize];
        let dv = virt(calc_delta_fair(ran, e.weight));
        e.vruntime = e.vruntime.saturating_add(dv);
        self.sum_wv += i128::from(e.weight) * i128::from(dv);
        if e.vruntime < e.deadline {
            return false;
        }
        e.deadline = e.vruntime.saturating_add(virt(calc_delta_fair(slice, e.weight)));
        e.protected = false;
        self.nr > 1
    }

    /// `pick_eevdf`: the eligible entity with the earliest deadline, `curr` included; with
    /// `RUN_TO_PARITY`, `curr` itself while it is eligible and still within the request it was
    /// picked for. Ties between `curr` and a queued entity go to the queued one, as in the
    /// kernel. `None` only for an empty queue.
    pub(super) fn pick(&self, ents: &[Entity]) -> Option<u32> {
        let curr = self.curr.filter(|&c| self.eligible(&ents[c as usize]));
        if let Some(c) = curr.filter(|&c| ents[c as usize].protected) {
            return Some(c);
        }
        // The tree is in deadline order: the first eligible entry is the best queued one (the
        // kernel finds it in O(log n) with an augmented tree; a per-CPU queue is short, and the
        // entries skipped here are only those ahead in deadline yet not eligible).
        let best = self.tree.iter().map(|&(_, e)| e).find(|&e| self.eligible(&ents[e as usize]));
        match (best, curr) {
            (Some(b), Some(c)) => {
                Some(if ents[c as usize].deadline < ents[b as usize].deadline { c } else { b })
            }
            (Some(b), None) => Some(b),
            (None, Some(c)) => Some(c),
            // Some entity is always eligible (the least vruntime is at most the average); the
            // kernel's fallback is the leftmost, the earliest deadline, and so is this.
            (None, None) => self.tree.iter().next().map(|&(_, e)| e).or(self.curr),
        }
    }

    /// `put_prev_entity`: the running entity goes back among the waiting ones.
    pub(super) fn put_prev(&mut self, ents: &[Entity]) {
        if let Some(c) = self.curr.take() {
            self.tree.insert((ents[c as usize].deadline, c));
        }
    }

    /// `set_next_entity`: queued entity `id` runs (the previous `curr`, if another, goes back to
    /// the tree), protected for the rest of its request (`RUN_TO_PARITY`).
    pub(super) fn set_next(&mut self, ents: &mut [Entity], id: u32) {
        if self.curr == Some(id) {
            return;
        }
        self.put_prev(ents);
        let e = &mut ents[id as usize];
        self.tree.remove(&(e.deadline, id));
        e.protected = true;
        self.curr = Some(id);
    }

    /// `reweight_entity`: entity `id` gets weight `weight`. Off a queue, its lag is scaled so
    /// that `weight × vlag` (the real lag) stays. On one, as the kernel does it: its lag
    /// (`V - vruntime`, clamped by [`lag_limit`]) is rescaled by `old / new`, and so is the
    /// rest of its request (`deadline - vruntime`); then `place_entity` puts it back that far
    /// behind the queue's `V`. A waiting entity is placed from the `V` of the others with the
    /// lag inflated by `(W + w) / W`, which keeps `V` (when the clamp does not bite); a running
    /// one as `rule` says ([`RunningReweight`]). A changed weight ends the `RUN_TO_PARITY`
    /// protection (the kernel's mark no longer matches). `true` if it reweighted the queue's
    /// running entity.
    pub(super) fn reweight(&mut self, ents: &mut [Entity], id: u32, weight: u64, rule: LagRule) -> bool {
        let weight = weight.max(1);
        let e = ents[id as usize];
        if e.weight == weight {
            return false;
        }
        let (old, new) = (i128::from(e.weight), i128::from(weight));
        let scale = |x: i64| i64::try_from(i128::from(x) * old / new).unwrap_or(x);
        if !e.on_rq {
            let e = &mut ents[id as usize];
            e.vlag = scale(e.vlag);
            e.weight = weight;
            return false;
        }
        let limit = lag_limit(rule.slice, rule.tick, e.weight);
        let vlag = scale(self.avg_vruntime().saturating_sub(e.vruntime).clamp(-limit, limit));
        let request = scale(e.deadline.saturating_sub(e.vruntime));
        let running = self.curr == Some(id);
        if !running {
            self.tree.remove(&(e.deadline, id));
        }
        self.sub_sums(&e);
        // The queue without the entity: where it is placed from, and the load its lag is
        // inflated against. Running under the traced rule, `avg_vruntime` still counts it (at
        // its old vruntime with its new weight) and the inflation counts its weight twice.
        let (from, load) = if running && rule.running == RunningReweight::AsMeasured {
            let load = self.sum_w + weight;
            let sum = self.sum_wv + i128::from(weight) * i128::from(e.vruntime);
            (i64::try_from(sum.div_euclid(i128::from(load))).unwrap_or(e.vruntime), load)
        } else {
            (self.avg_vruntime(), self.sum_w)
        };
        let e = &mut ents[id as usize];
        // Alone on the queue (the kernel's `nr_queued` is 0 once it is taken off), it keeps its
        // place: no lag to keep.
        if self.nr > 1 && load > 0 {
            let load = i128::from(load);
            let lag = i64::try_from(i128::from(vlag) * (load + i128::from(weight)) / load).unwrap_or(vlag);
            e.vruntime = from.saturating_sub(lag);
        }
        e.deadline = e.vruntime.saturating_add(request);
        e.weight = weight;
        e.protected = false;
        let e = *e;
        self.add_sums(&e);
        if !running {
            self.tree.insert((e.deadline, id));
        }
        running
    }

    /// The queued entities other than `curr`, in deadline order.
    #[cfg(test)]
    pub(super) fn waiting(&self) -> Vec<u32> {
        self.tree.iter().map(|&(_, e)| e).collect()
    }

    /// Puts entity `id` on the queue exactly as recorded (its vruntime and deadline as given),
    /// as `curr` when `running`: for tests of the pick on a recorded queue.
    #[cfg(test)]
    pub(super) fn push_recorded(&mut self, ents: &mut [Entity], id: u32, running: bool) {
        let e = &mut ents[id as usize];
        e.on_rq = true;
        let e = *e;
        self.add_sums(&e);
        self.nr += 1;
        if running {
            self.put_prev(ents);
            self.curr = Some(id);
        } else {
            self.tree.insert((e.deadline, id));
        }
    }
}

/// What a reweight of an entity on a queue needs beyond the weights: the lag clamp's slice and
/// tick, and the rule for the running entity.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct LagRule {
    pub(super) slice: u64,
    pub(super) tick: u64,
    pub(super) running: RunningReweight,
}
