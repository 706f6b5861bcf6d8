//! One period of one pool: the plain pool's sample → policy → target, the elastic pool's
//! CPUs → threads, and the host tokens' upkeep that both (and fixed pools) get.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::schedstat::read_runq_waits;
use super::{warn_once, Entry, Snapshot};
use crate::policy::elastic_size::ElasticSample;
use crate::policy::{fallback_target, Policy, PolicyState};
use crate::pool::elastic::{spawn_missing, Totals};
use crate::pool::Shared;
use crate::sampler::{clock_ns, HostCounters, HostDelta};

pub(super) fn tick(
    entry: &mut Entry,
    pool: &Shared,
    host: &Result<HostCounters, crate::sampler::SampleError>,
    recorder: Option<&mut std::io::BufWriter<std::fs::File>>,
) {
    // A task that ran without a host token (the set was removed, or none came within the
    // wait) competed for CPUs like a pool without tokens, and so may the neighbours' tasks:
    // for this period the policy sizes the pool against its neighbours again. Read at every
    // tick, decided or not, so that a task of a skipped period is not blamed on a later one.
    let tokens = pool.host_tokens.as_ref();
    // First, a token a blocked task holds goes back to the cooperating pools (counted as a
    // task without one, so it also makes this a period of the plain policy); a default set
    // engages or disengages.
    tokens_upkeep(entry, pool);
    // Not engaged (alone on a default set): the neighbours are sized against as without tokens.
    let engaged = tokens.is_some_and(|t| t.is_engaged());
    // One period to the next sample unless this tick decides that the pool coasts.
    let stride = std::mem::replace(&mut entry.stride, 1);
    let ran_without_token = tokens.map_or(0, |t| t.ran_without.load(Ordering::Relaxed));
    let tokens_failed =
        ran_without_token != std::mem::replace(&mut entry.ran_without_token, ran_without_token);
    let host = match host {
        Ok(host) => host.clone(),
        Err(error) => {
            // Step 3: fall back to every worker.
            pool.sample_errors.fetch_add(1, Ordering::Relaxed);
            warn_once(&format!("sampling failed ({error}); pools fall back to all their workers"));
            let target = fallback_target(entry.threads, entry.last_cap);
            pool.borrow.set(0, 0);
            entry.state = PolicyState::new(target);
            entry.last = None;
            let had_work = pool.has_work();
            entry.idle_periods = if had_work { 0 } else { entry.idle_periods.saturating_add(1) };
            pool.set_target(target as usize);
            return;
        }
    };
    let now = crate::pool::worker::nanos_since(pool.epoch);
    let workers_busy_ns = pool.workers.iter().map(|w| w.busy_ns(now)).sum();
    // From their CPU clocks, not from the schedstat files read below: a running thread's
    // schedstat run time lags by up to a kernel tick, a tenth of a period or more.
    let workers_cpu_ns = pool
        .workers
        .iter()
        .map(|w| match w.cpu_clock.load(std::sync::atomic::Ordering::Acquire) {
            0 => None,
            clock => clock_ns((clock - 1) as u32 as libc::clockid_t),
        })
        .sum::<Option<u64>>();
    let waits = read_runq_waits(entry, pool);
    let workers_runq_wait_ns = waits.as_ref().map(|w| w.all);
    let workers_token_wait_ns = waits.and_then(|w| w.holding);
    let had_work =
        entry.last.as_ref().is_none_or(|last| workers_busy_ns != last.workers_busy_ns) || pool.has_work();
    entry.idle_periods = if had_work { 0 } else { entry.idle_periods.saturating_add(1) };
    let snapshot =
        Snapshot { host, workers_busy_ns, workers_cpu_ns, workers_runq_wait_ns, workers_token_wait_ns };
    let Some(last) = entry.last.replace(snapshot) else { return };
    let current = entry.last.as_ref().expect("just stored");
    let Some(delta) = HostDelta::between(&last.host, &current.host) else { return };
    let grew = |now: Option<u64>, before: Option<u64>| now.zip(before).map(|(b, a)| b.saturating_sub(a));
    // The tokens are trusted this period (`Policy::sharing_host_tokens` applies): only the
    // holders' wait is contention; the rest is workers queued for a token (`host_tokens.rs`).
    let sharing_tokens = entry.unshared_policy.is_some() && !tokens_failed && engaged;
    let runq_wait = if sharing_tokens {
        grew(current.workers_token_wait_ns, last.workers_token_wait_ns)
    } else {
        grew(current.workers_runq_wait_ns, last.workers_runq_wait_ns)
    };
    let sample = delta.sample(
        entry.threads,
        current.workers_busy_ns.saturating_sub(last.workers_busy_ns),
        grew(current.workers_cpu_ns, last.workers_cpu_ns),
        runq_wait,
        u32::try_from(pool.queued()).unwrap_or(u32::MAX),
    );
    let policy = match &entry.unshared_policy {
        Some(unshared) if !sharing_tokens => {
            if let Some(tokens) = tokens.filter(|_| engaged) {
                tokens.fallback_periods.fetch_add(1, Ordering::Relaxed);
            }
            unshared
        }
        _ => &entry.policy,
    };
    let fields = (entry.id, policy, &mut entry.state, &mut entry.last_cap);
    let (before, decision) = decide(fields, pool, &sample, recorder);
    let calm_here = crate::policy::coast::is_calm(&decision, &sample, !tokens_failed);
    // Engaged tokens let the pool coast only while nobody waits for one: two `semctl`s, read
    // only when the period is otherwise calm.
    let waiting = match tokens {
        Some(tokens) if calm_here && engaged => tokens.set().waiting().ok(),
        _ => Some(0),
    };
    let calm = calm_here && crate::policy::coast::tokens_quiet(engaged, tokens_failed, waiting);
    let coasts =
        crate::policy::coast::may_coast(entry.idle_periods, crate::policy::coast::NAP_AFTER_PERIODS, calm);
    // Idle and coasting: a submit asks for a sample at once (`work_arrived`). Stored only when
    // it changes: submitters read it on every push.
    let idle_coasting = coasts && entry.idle_periods >= crate::policy::coast::NAP_AFTER_PERIODS;
    if pool.idle_coasting.load(Ordering::Relaxed) != idle_coasting {
        pool.idle_coasting.store(idle_coasting, Ordering::Relaxed);
    }
    entry.stride = crate::policy::coast::next_stride(stride, coasts);
    pool.borrow
        .set(policy.borrow_limit(&sample, &entry.state, delta.online_cpus) as usize, delta.online_cpus);
    if decision.target != before {
        tracing::debug!(
            pool = %pool.name,
            target = decision.target,
            before,
            reason = decision.reason.as_str(),
            own_cpus = sample.own_cpus(),
            neighbour_cpus = sample.neighbour_cpus(),
            idle_cpus = sample.idle_cpus(),
            waiting = sample.waiting_workers(),
            "cotenant pool target changed"
        );
    }
    if decision.target as usize != pool.roster.target() {
        pool.set_target(decision.target as usize);
    }
}

/// The host tokens' part of a tick: blocked holders' tokens taken back, a default set engaged
/// or not. All a fixed pool with tokens, or a draining pool, gets.
pub(super) fn tokens_upkeep(entry: &mut Entry, pool: &Shared) {
    let Some(tokens) = pool.host_tokens.as_ref() else { return };
    tokens.take_back_blocked(pool.workers.iter().map(|w| &**w), &mut entry.token_holds_seen);
    tokens.refresh_engaged();
    if entry.upkeep_only() {
        let had_work = pool.has_work();
        entry.idle_periods = if had_work { 0 } else { entry.idle_periods.saturating_add(1) };
    }
}

/// Asks the pool's policy for the next target from `sample`, counts the decision, and appends
/// it to the `COTENANT_RECORD_SAMPLES` file if one is open. Returns the target before it and
/// the decision.
/// (Takes the entry's fields rather than the entry: an elastic tick holds its sizer meanwhile.)
fn decide(
    (id, policy, state, last_cap): (u64, &Policy, &mut PolicyState, &mut Option<u32>),
    pool: &Shared,
    sample: &crate::policy::Sample,
    recorder: Option<&mut std::io::BufWriter<std::fs::File>>,
) -> (u32, crate::policy::Decision) {
    *last_cap = Some(sample.cap());
    let before = state.target;
    let decision = policy.decide(sample, state);
    pool.decisions.fetch_add(1, Ordering::Relaxed);
    if let Some(out) = recorder {
        use std::io::Write as _;
        let _ = writeln!(
            out,
            "{{\"pid\": {}, \"pool\": {}, \"policy\": \"{}\", \"before\": {before}, \"sample\": {}, \"target\": {}, \"reason\": \"{}\"}}",
            std::process::id(),
            id,
            policy,
            sample.to_json(),
            decision.target,
            decision.reason.as_str()
        );
        let _ = out.flush();
    }
    (before, decision)
}

/// The neighbours' CPU use (in CPUs) below which an elastic pool treats its tasks' run-queue
/// wait as its own (see `tick_elastic`); the adaptive policy's own "alone" threshold.
const ELASTIC_NEIGHBOUR_FLOOR: f64 = 0.5;

/// An elastic pool's period (`pool/elastic.rs`, `policy/elastic_size.rs`): the CPU policy decides
/// the CPUs the pool may use from a sample in which the pool's tasks stand in for workers
/// (their CPU time plus run-queue wait is the demand, the part of that wait the neighbours'
/// CPU use explains the contention);
/// then the sizer turns CPUs into threads and the pool starts or retires threads.
pub(super) fn tick_elastic(
    entry: &mut Entry,
    pool: &Arc<Shared>,
    host: &Result<HostCounters, crate::sampler::SampleError>,
    recorder: Option<&mut std::io::BufWriter<std::fs::File>>,
) {
    let Some(elastic) = pool.elastic.as_ref() else { return };
    let Some((sizer, last_totals)) = entry.elastic.as_mut() else { return };
    let totals = Totals::read(pool, elastic);
    let at = Instant::now();
    let queued = u32::try_from(pool.queued()).unwrap_or(u32::MAX);
    let previous = last_totals.replace((totals, at));
    // An elastic pool above its minimum keeps the controller awake until it has shrunk.
    let had_work = previous.is_none_or(|(before, _)| before != totals)
        || pool.has_work()
        || sizer.size > elastic.config.min;
    entry.idle_periods = if had_work { 0 } else { entry.idle_periods.saturating_add(1) };

    // 1. The CPUs the pool may use.
    let mut idle_ns = 0;
    let cpus = match host {
        Err(error) => {
            pool.sample_errors.fetch_add(1, Ordering::Relaxed);
            warn_once(&format!("sampling failed ({error}); pools fall back to all their workers"));
            entry.last = None;
            fallback_target(entry.threads, entry.last_cap)
        }
        Ok(host) => {
            // The tasks' counters are kept in `entry.elastic`; only the host part is used here.
            let snapshot = Snapshot {
                host: host.clone(),
                workers_busy_ns: 0,
                workers_cpu_ns: None,
                workers_runq_wait_ns: None,
                workers_token_wait_ns: None,
            };
            match entry
                .last
                .replace(snapshot)
                .and_then(|last| HostDelta::between(&last.host, host).map(|delta| (delta, last)))
            {
                None => entry.state.target,
                Some((delta, _)) => {
                    idle_ns = delta.idle_ns;
                    let (cpu, runq) = previous.map_or((0, 0), |(before, _)| {
                        totals.all_tasks_since(&before, sizer.compute_ns.unwrap_or(0.0), sizer.runq_ns)
                    });
                    // An elastic pool runs more threads than CPUs on purpose, so its tasks
                    // wait for CPUs behind each other: that wait is not contention to give way
                    // to. What the neighbours take is: their CPU time, when they use at least
                    // half a CPU (below that, the counters' noise), counts as our tasks' wait,
                    // up to the wait measured.
                    let neighbours = delta.busy_ns.saturating_sub(delta.self_ns);
                    let contention = if neighbours as f64 >= ELASTIC_NEIGHBOUR_FLOOR * delta.elapsed_ns as f64
                    {
                        runq.min(neighbours)
                    } else {
                        0
                    };
                    let sample = delta.sample(
                        entry.threads,
                        cpu.saturating_add(runq),
                        Some(cpu),
                        Some(contention),
                        queued,
                    );
                    let fields = (entry.id, &entry.policy, &mut entry.state, &mut entry.last_cap);
                    decide(fields, pool, &sample, recorder).1.target
                }
            }
        }
    };

    // 2. Threads for those CPUs.
    let Some((before_totals, before_at)) = previous else { return };
    let sample = ElasticSample {
        elapsed_ns: u64::try_from(at.duration_since(before_at).as_nanos()).unwrap_or(u64::MAX),
        cpus,
        tasks: totals.tasks.saturating_sub(before_totals.tasks),
        sampled: totals.sampled.saturating_sub(before_totals.sampled),
        wall_ns: totals.wall_ns.saturating_sub(before_totals.wall_ns),
        cpu_ns: totals.cpu_ns.saturating_sub(before_totals.cpu_ns),
        runq_ns: totals.runq_ns.saturating_sub(before_totals.runq_ns),
        arrivals: totals.arrivals.saturating_sub(before_totals.arrivals),
        queued,
        idle_ns,
    };
    let decision = crate::policy::elastic_size::decide(&elastic.config, &sample, sizer);
    elastic.cpus.store(u64::from(cpus), Ordering::Relaxed);
    elastic.compute_ns.store(sizer.compute_ns.unwrap_or(0.0) as u64, Ordering::Relaxed);
    elastic.wait_ns.store(sizer.wait_ns as u64, Ordering::Relaxed);

    // 3. Apply: raise the target before starting threads (a new thread must see itself
    // below it); after lowering it, wake the sleepers above it so that they retire.
    let size = decision.size as usize;
    let current = pool.roster.target();
    if size != current {
        tracing::debug!(
            pool = %pool.name,
            size,
            before = current,
            wanted = decision.wanted,
            reason = decision.reason.as_str(),
            cpus,
            wait_compute = sizer.wait_compute_ratio().unwrap_or(f64::NAN),
            "cotenant elastic pool size changed"
        );
        pool.set_target(size);
        if size < current {
            pool.roster.wake_above_target();
        }
    }
    let _ = spawn_missing(pool, pool.roster.target());
}
