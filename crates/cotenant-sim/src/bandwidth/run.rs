//! The event loop: at each instant, the period timer, a configuration write, the threads that
//! start or wake, the ticks and the threads that block, in that order.

use super::config::{Config, Variant};
use super::pools::{distribute, Cpu, Pools, State};
use super::timeline::{Event, Kind, Period, Run};

/// The kernel's `min_cfs_rq_runtime`: what an idle CPU keeps of its local pool (`mainline`).
const MIN_CFS_RQ_RUNTIME: i64 = 1_000_000;

/// Runs the simulation.
pub fn simulate(config: &Config) -> Result<Run, String> {
    config.validate()?;
    let n = config.phases.len();
    let end = config.period * u64::from(config.periods);
    let quota = i64::try_from(config.quota).map_err(|_| "quota too large")?;
    let slice = i64::try_from(config.slice).map_err(|_| "slice too large")?;
    let mut pools = Pools { global: 0, slush: 0, slice, variant: config.variant };
    let burst = config.duty.map_or(u64::MAX, |d| d.run);
    let mut cpus: Vec<Cpu> = (0..n)
        .map(|i| Cpu {
            remaining: 0,
            state: State::NotStarted,
            last_charge: 0,
            next_tick: config.phases[i],
            refilled_in: None,
            burst_left: burst,
            wake_at: u64::MAX,
        })
        .collect();
    let mut throttled_order: Vec<usize> = Vec::new();
    let mut events = Vec::new();
    let mut periods: Vec<Period> =
        (1..=config.periods).map(|index| Period { index, ran: 0, throttled: 0 }).collect();
    let mut now = 0u64;
    let mut next_period = 0u64; // the first refill is at t = 0
    let mut next_update = config.update_every.unwrap_or(u64::MAX);
    macro_rules! event {
        ($cpu:expr, $kind:expr, $local:expr) => {
            events.push(Event {
                at: now,
                cpu: $cpu,
                kind: $kind,
                local: $local,
                global: pools.global,
                slush: pools.slush,
            })
        };
    }
    loop {
        // The next instant anything happens.
        let mut at = next_period.min(next_update).min(end);
        for (i, cpu) in cpus.iter().enumerate() {
            at = at.min(cpu.next_tick);
            match cpu.state {
                State::NotStarted => at = at.min(config.starts[i]),
                State::Sleeping => at = at.min(cpu.wake_at),
                State::Running => at = at.min(now.saturating_add(cpu.burst_left)),
                State::Throttled => {}
            }
        }
        // Account [now, at) to the period that holds it (events include every boundary).
        if at > now {
            let index = (now / config.period) as usize;
            for cpu in &mut cpus {
                match cpu.state {
                    State::Running => {
                        periods[index].ran += at - now;
                        if config.duty.is_some() {
                            cpu.burst_left -= at - now;
                        }
                    }
                    State::Throttled => periods[index].throttled += at - now,
                    State::NotStarted | State::Sleeping => {}
                }
            }
            now = at;
        }
        if now >= end {
            break;
        }
        let period_nr = now / config.period;
        // 1. The period timer: refill, then unthrottle.
        if now == next_period {
            let leftover = pools.global;
            if config.variant.has_slush() {
                pools.slush = leftover.max(0);
            }
            pools.global = quota;
            event!(None, Kind::Refill { leftover }, 0);
            distribute(&mut pools, &mut cpus, &mut throttled_order, now, &mut events);
            next_period += config.period;
        }
        // 2. A configuration write with the same quota and period (seed 001 §III-A2): the
        //    kernel refills the global pool, empties every local pool and unthrottles; under
        //    `all` it is a no-op (§IV-A2).
        if now == next_update {
            let noop = config.variant == Variant::All;
            if !noop {
                pools.global = quota;
                for cpu in &mut cpus {
                    cpu.remaining = 0;
                    if cpu.state == State::Throttled {
                        cpu.state = State::Running;
                        cpu.last_charge = now;
                    }
                }
                throttled_order.clear();
            }
            event!(None, Kind::Update { noop }, 0);
            next_update = next_update.saturating_add(config.update_every.unwrap_or(u64::MAX));
        }
        // 3. Threads that start or wake now (an empty local pool asks for runtime first, and
        //    is throttled if it gets none: the kernel's check at enqueue).
        for (i, cpu) in cpus.iter_mut().enumerate() {
            let starts = cpu.state == State::NotStarted && config.starts[i] == now;
            let wakes = cpu.state == State::Sleeping && cpu.wake_at == now;
            if !(starts || wakes) {
                continue;
            }
            cpu.state = State::Running;
            cpu.last_charge = now;
            cpu.burst_left = burst;
            let (asked, got, _) = if wakes { pools.refill(cpu, period_nr) } else { (0, 0, 0) };
            let kind = if starts { Kind::Start } else { Kind::Wake { asked, got } };
            event!(Some(i), kind, cpu.remaining);
            if wakes && cpu.remaining <= 0 {
                cpu.state = State::Throttled;
                throttled_order.push(i);
                event!(Some(i), Kind::Throttle, cpu.remaining);
            }
        }
        // 4. Ticks now, in CPU order.
        for (i, cpu) in cpus.iter_mut().enumerate() {
            if cpu.next_tick != now {
                continue;
            }
            cpu.next_tick += config.tick;
            if cpu.state != State::Running {
                continue;
            }
            let charged = now - cpu.last_charge;
            cpu.last_charge = now;
            cpu.remaining -= charged as i64;
            let (asked, got, slush_paid) = pools.refill(cpu, period_nr);
            event!(Some(i), Kind::Tick { charged, asked, got, slush_paid }, cpu.remaining);
            if cpu.remaining <= 0 {
                cpu.state = State::Throttled;
                throttled_order.push(i);
                event!(Some(i), Kind::Throttle, cpu.remaining);
            }
        }
        // 5. Threads whose burst ends now block: charged at the context switch; under
        //    `mainline` the CPU, now idle, returns all but 1 ms of its local pool.
        if let Some(duty) = config.duty {
            let mut any_returned = false;
            for (i, cpu) in cpus.iter_mut().enumerate() {
                if cpu.state != State::Running || cpu.burst_left != 0 {
                    continue;
                }
                let charged = now - cpu.last_charge;
                cpu.last_charge = now;
                cpu.remaining -= charged as i64;
                let (asked, got, _) = pools.refill(cpu, period_nr);
                let mut returned = 0;
                if config.variant == Variant::Mainline && cpu.remaining > MIN_CFS_RQ_RUNTIME {
                    returned = cpu.remaining - MIN_CFS_RQ_RUNTIME;
                    cpu.remaining -= returned;
                    pools.global += returned;
                }
                cpu.state = State::Sleeping;
                cpu.wake_at = now + duty.sleep;
                event!(
                    Some(i),
                    Kind::Block { charged, asked, got, returned: returned as u64 },
                    cpu.remaining
                );
                any_returned |= returned > 0;
            }
            if any_returned {
                // The slack timer hands returned runtime to throttled CPUs (at once here; the
                // kernel waits up to 5 ms to batch returns).
                distribute(&mut pools, &mut cpus, &mut throttled_order, now, &mut events);
            }
        }
    }
    Ok(Run { periods, events })
}
