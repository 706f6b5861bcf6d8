//! The pools: each CPU's local pool and thread state, the global pool and the slush fund, a
//! local pool's refill from them, and the unthrottling that pays throttled CPUs.

use super::config::Variant;
use super::timeline::{Event, Kind};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    NotStarted,
    Running,
    Throttled,
    /// Blocked (the duty cycle's sleep): the CPU is idle until `wake_at`.
    Sleeping,
}

pub(super) struct Cpu {
    pub(super) remaining: i64,
    pub(super) state: State,
    pub(super) last_charge: u64,
    pub(super) next_tick: u64,
    /// The period number of this local pool's last refill (the slush rule applies to the first).
    pub(super) refilled_in: Option<u64>,
    /// With a duty cycle: CPU time left before the thread blocks.
    pub(super) burst_left: u64,
    /// When a sleeping thread wakes.
    pub(super) wake_at: u64,
}

/// The global pool and the slush fund, and the refill of a local pool from them.
pub(super) struct Pools {
    pub(super) global: i64,
    pub(super) slush: i64,
    pub(super) slice: i64,
    pub(super) variant: Variant,
}

impl Pools {
    /// A local pool at or below zero asks for a whole slice [Listing 4]; under `slush` and
    /// `all`, its first refill in a period first pays its debt from the slush fund [Listing 3].
    /// Returns (asked, got, slush paid).
    pub(super) fn refill(&mut self, cpu: &mut Cpu, period_nr: u64) -> (u64, u64, u64) {
        if cpu.remaining > 0 {
            return (0, 0, 0);
        }
        let mut slush_paid = 0;
        if self.variant.has_slush() && cpu.refilled_in != Some(period_nr) {
            let pay = self.slush.min(-cpu.remaining).max(0);
            self.slush -= pay;
            cpu.remaining += pay;
            slush_paid = pay as u64;
        }
        cpu.refilled_in = Some(period_nr);
        let want = self.slice - cpu.remaining;
        let grant = want.min(self.global).max(0);
        self.global -= grant;
        cpu.remaining += grant;
        (want as u64, grant as u64, slush_paid)
    }
}

/// Unthrottles the throttled CPUs, in the order they were throttled, while the global pool
/// pays each `1 ns - remaining` (the kernel's `distribute_cfs_runtime`).
pub(super) fn distribute(
    pools: &mut Pools,
    cpus: &mut [Cpu],
    order: &mut Vec<usize>,
    now: u64,
    events: &mut Vec<Event>,
) {
    let mut still = Vec::new();
    for &i in order.iter() {
        let cpu = &mut cpus[i];
        let need = 1 - cpu.remaining; // the kernel's -remaining + 1 ns
        if pools.global >= need {
            pools.global -= need;
            cpu.remaining += need;
            cpu.state = State::Running;
            cpu.last_charge = now;
            events.push(Event {
                at: now,
                cpu: Some(i),
                kind: Kind::Unthrottle { granted: need as u64 },
                local: cpu.remaining,
                global: pools.global,
                slush: pools.slush,
            });
        } else {
            still.push(i);
        }
    }
    *order = still;
}
