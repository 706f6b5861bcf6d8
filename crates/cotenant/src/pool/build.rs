//! [`Builder::build`]: checks the settings, makes the state the workers share, starts the
//! workers (placed as asked), and registers the pool with the controller.

#[cfg(not(loom))]
use std::time::Duration;
use std::time::Instant;

use super::borrow::Borrow;
use super::placement;
use super::queue::Queue;
use super::roster::Roster;
use super::worker::{self, WorkerStats};
#[cfg(not(loom))]
use super::{budget, control, elastic, host_tokens};
use super::{default_period, BuildError, Builder, Placement, Pool, Shared, MAX_PERIOD, MIN_PERIOD};
use crate::metrics::histogram::TaskHistograms;
#[cfg(loom)]
use crate::sync::thread;
use crate::sync::Arc;
#[cfg(not(loom))]
use crate::sync::Ordering;
use crate::sync::{lock, AtomicBool, AtomicU64, AtomicUsize, CachePadded, Condvar, Mutex};

impl Builder {
    /// Starts the threads (and registers with the controller unless the policy is fixed).
    #[cfg_attr(loom, allow(unused_mut))]
    pub fn build(mut self) -> Result<Pool, BuildError> {
        let invalid = |why: String| Err(BuildError::InvalidArgument(why));
        if let Err(why) = self.policy.validate() {
            return invalid(why);
        }
        // The set the pool shares: the one given, or this user's default set, which is engaged
        // only while shared (`PoolTokens::gated`).
        #[cfg(not(loom))]
        let (tokens, tokens_state) = self.tokens_to_share();
        // Neighbours that share the tokens cannot overcommit the host with us: the adaptive
        // policy stops sizing the pool against them (`Policy::sharing_host_tokens`).
        // In a period in which a task runs without a token, or the tokens are not engaged,
        // the controller goes back to the policy as given (`unshared_policy`, `control.rs`).
        #[cfg(not(loom))]
        let unshared_policy = if tokens.is_some() && !self.host_tokens_size_to_neighbours {
            let given = std::mem::take(&mut self.policy);
            self.policy = given.clone().sharing_host_tokens();
            (self.policy != given).then_some(given)
        } else {
            None
        };
        if let Some(config) = &self.elastic {
            if let Err(why) = config.validate() {
                return invalid(why);
            }
            let conflict = if self.threads.is_some() {
                Some("threads (an elastic pool sizes itself between min and max)")
            } else if self.pin_workers {
                Some("pin_workers (an elastic pool's threads come and go)")
            } else if self.cpu_budget.is_some() {
                Some("cpu_budget")
            } else {
                None
            };
            if let Some(conflict) = conflict {
                return invalid(format!("elastic pools do not support {conflict}"));
            }
            #[cfg(not(loom))]
            if self.host_tokens.is_some() {
                return invalid(
                    "elastic pools do not support host_tokens (their tasks block, and would hold CPU tokens while blocked)"
                        .into(),
                );
            }
        }
        #[cfg(not(loom))]
        if self.host_tokens.is_some() {
            if self.cpu_budget.is_some() {
                return invalid(
                    "host_tokens and cpu_budget do not combine (a task parked until the budget's refill would hold its CPU token)"
                        .into(),
                );
            }
            if self.host_tokens_wait < Duration::from_millis(1) {
                return invalid(format!(
                    "host_tokens_wait must be at least 1ms, got {:?}",
                    self.host_tokens_wait
                ));
            }
        }
        let threads = match (self.elastic, self.threads, self.policy.fixed_target()) {
            (Some(config), _, _) => config.max as usize,
            (None, Some(threads), _) => threads,
            (None, None, Some(fixed)) => fixed,
            (None, None, None) => default_threads(),
        };
        if threads == 0 {
            return invalid("threads must be at least 1, got 0".into());
        }
        if let (Some(fixed), None) = (self.policy.fixed_target(), self.elastic) {
            if fixed > threads {
                return invalid(format!(
                    "Policy::fixed({fixed}) asks for more workers than threads({threads})"
                ));
            }
        }
        if self.queue_capacity == 0 {
            return invalid("queue_capacity must be at least 1, got 0".into());
        }
        let period = self.period.unwrap_or_else(default_period);
        if period < MIN_PERIOD || period > MAX_PERIOD {
            return invalid(format!(
                "period must be between {MIN_PERIOD:?} and {MAX_PERIOD:?}, got {period:?}"
            ));
        }
        if self.name.contains('\0') {
            return invalid("name must not contain a NUL byte".into());
        }
        if self.stack_size == Some(0) {
            return invalid(
                "stack_size must be at least 1 byte, got 0 (leave it unset for the default)".into(),
            );
        }
        #[cfg(not(loom))]
        let budget = match self.cpu_budget {
            None => None,
            Some((cpus, _)) if !cpus.is_finite() || cpus <= 0.0 => {
                return invalid(format!("cpu_budget: cpus must be a positive number, got {cpus}"));
            }
            Some((_, budget_period))
                if budget_period < Duration::from_millis(1) || budget_period > Duration::from_secs(1) =>
            {
                return invalid(format!(
                    "cpu_budget: period must be between 1ms and 1s, got {budget_period:?}"
                ));
            }
            Some((cpus, budget_period)) => {
                match budget::Budget::new(cpus, budget_period, threads, self.budget_slush) {
                    Ok(budget) => Some(Arc::new(budget)),
                    Err(why) => return invalid(format!("cpu_budget: {why}")),
                }
            }
        };
        // Dynamic policies start with every worker allowed (all threads are ours until the
        // first sample says otherwise); the controller corrects it within one period. An
        // elastic pool starts at its minimum size.
        let initial_target = match self.elastic {
            Some(config) => config.min as usize,
            None => self.policy.fixed_target().unwrap_or(threads),
        };
        // An elastic pool starts its first `min` threads here, the controller the others.
        let started = initial_target.min(threads);
        let controlled = self.policy.fixed_target().is_none() || self.elastic.is_some();
        // A fixed pool with tokens registers too: the controller takes back its blocked
        // holders' tokens and engages or disengages a default set (`control.rs`).
        #[cfg(not(loom))]
        let controlled = controlled || tokens.is_some();
        // The CPU mask, read once for pinning and CPU leases (workers pinned for good take no
        // leases); unreadable, it turns both off, counted in `Metrics::degradations` and logged.
        #[cfg(not(loom))]
        let wants_mask = self.pin_workers || (tokens.is_some() && self.host_tokens_leases);
        #[cfg(loom)]
        let wants_mask = self.pin_workers;
        let (mask_cpus, mask_lost) = if wants_mask { read_affinity() } else { (Vec::new(), false) };
        let task_histograms = self.task_histograms.unwrap_or_else(super::builder::task_histograms_from_env);
        // The histograms' clock measures its rate now, not on a task (`metrics/clock.rs`).
        #[cfg(not(loom))]
        if task_histograms {
            crate::metrics::clock::calibrate();
        }
        let shared = Arc::new(Shared {
            name: std::sync::Arc::from(self.name.as_str()),
            // Under loom the models check the protocol; the histograms are no part of it.
            task_histograms: task_histograms && cfg!(not(loom)),
            caller_histograms: TaskHistograms::default(),
            queue: Queue::new(self.queue_capacity),
            roster: Roster::new(threads, initial_target),
            gate: CachePadded(AtomicUsize::new(0)),
            stopped: AtomicBool::new(false),
            cancelling: AtomicBool::new(false),
            on_full: self.on_full,
            dynamic: controlled,
            #[cfg(not(loom))]
            idle_coasting: std::sync::atomic::AtomicBool::new(false),
            #[cfg(not(loom))]
            futures: super::future_task::LiveFutures::new(),
            borrow: Borrow::new(self.policy.fixed_target().is_none()),
            borrows: AtomicU64::new(0),
            blocked: AtomicUsize::new(0),
            blocked_lock: Mutex::new(()),
            not_full: Condvar::new(),
            workers: (0..threads).map(|_| CachePadded(WorkerStats::default())).collect(),
            live: Mutex::new(if self.elastic.is_some() { started } else { threads }),
            exited: Condvar::new(),
            rejected: AtomicU64::new(0),
            caller_ran: AtomicU64::new(0),
            #[cfg(not(loom))]
            future_polls: std::sync::Arc::new(CachePadded(std::sync::atomic::AtomicU64::new(0))),
            #[cfg(not(loom))]
            future_wakeups: CachePadded(std::sync::atomic::AtomicU64::new(0)),
            decisions: AtomicU64::new(0),
            sample_errors: AtomicU64::new(0),
            degradations: std::sync::atomic::AtomicU64::new(u64::from(mask_lost)),
            epoch: Instant::now(),
            #[cfg(not(loom))]
            budget,
            #[cfg(not(loom))]
            host_tokens: tokens.map(|(set, gated)| {
                // Workers pinned for good take no CPU leases (`host_tokens.rs`).
                let leases_on =
                    if self.pin_workers || !self.host_tokens_leases { Vec::new() } else { mask_cpus.clone() };
                host_tokens::PoolTokens::new(
                    std::sync::Arc::from(self.name.as_str()),
                    set,
                    self.host_tokens_wait,
                    leases_on,
                    gated,
                )
            }),
            #[cfg(not(loom))]
            tokens_state,
            #[cfg(not(loom))]
            elastic: self
                .elastic
                .map(|config| elastic::Elastic::new(config, self.name.clone(), self.background)),
            #[cfg(loom)]
            elastic: self.elastic.is_some(),
            #[cfg(not(loom))]
            health: std::sync::Mutex::new(crate::health::Health::new(Default::default())),
            #[cfg(not(loom))]
            health_at_ns: AtomicU64::new(0),
            hooks: self.hooks.clone(),
            idle_driver: self.hooks.park.clone().map(super::park_with::IdleDriver::new),
            stack_size: self.stack_size,
            #[cfg(not(loom))]
            accepted: CachePadded(std::sync::atomic::AtomicU64::new(0)),
            #[cfg(not(loom))]
            dropped: std::sync::atomic::AtomicU64::new(0),
            #[cfg(not(loom))]
            idle_waiters: std::sync::atomic::AtomicUsize::new(0),
            #[cfg(not(loom))]
            idle_lock: std::sync::Mutex::new(()),
            #[cfg(not(loom))]
            idle_changed: std::sync::Condvar::new(),
        });
        let started = if self.elastic.is_some() { started } else { threads };
        let allowed = if self.pin_workers { mask_cpus } else { Vec::new() };
        let placing = self.pin_workers || self.background;
        let (placed_tx, placed_rx) = std::sync::mpsc::channel::<placement::Outcome>();
        let mut handles = Vec::with_capacity(started);
        for index in 0..started {
            shared.workers[index].occupied.store(true, std::sync::atomic::Ordering::Release);
            let worker_shared = shared.clone();
            let request =
                placement::Request { cpu: placement::cpu_for(index, &allowed), background: self.background };
            let placed_tx = placed_tx.clone();
            let body = move || {
                // The worker's whole life, placement included, runs in its pool's span (not
                // in loom models, whose threads are not the pool's real ones).
                #[cfg(not(loom))]
                let _span = worker::pool_span(&worker_shared.name).entered();
                if placing {
                    let _ = placed_tx.send(placement::apply(index, &request));
                }
                drop(placed_tx);
                worker::run(worker_shared, index)
            };
            let name = format!("{}-{index}", self.name);
            #[cfg(not(loom))]
            let spawned = worker::spawn_thread(name, self.stack_size, body);
            #[cfg(loom)]
            let spawned = thread::spawn_named(name, body);
            match spawned {
                Ok(handle) => handles.push(handle),
                Err(error) => {
                    *lock(&shared.live) -= started - index;
                    shared.close(true);
                    for handle in handles {
                        let _ = handle.join();
                    }
                    return Err(BuildError::Spawn(error));
                }
            }
        }
        drop(placed_tx);
        #[cfg(not(loom))]
        if let Some(elastic) = &shared.elastic {
            elastic.started.store(started as u64, Ordering::Relaxed);
        }
        let mut placement = Placement::default();
        if placing {
            let mut outcomes: Vec<placement::Outcome> = placed_rx.iter().take(started).collect();
            outcomes.sort_by_key(|o| o.index);
            if self.pin_workers {
                placement.pinned = outcomes.iter().map(|o| o.cpu).collect();
            }
            placement.background = placement::weakest(outcomes.into_iter().filter_map(|o| o.background));
        }
        #[cfg(not(loom))]
        let control = if controlled {
            // An elastic pool's CPU policy decides CPUs, not threads: at most the allowed CPUs
            // (or `n` for `Policy::fixed(n)`).
            let policy_threads = match (self.elastic, self.policy.fixed_target()) {
                (None, _) => threads,
                (Some(_), Some(fixed)) => fixed,
                (Some(_), None) => default_threads(),
            };
            Some(control::register(&shared, self.policy.clone(), unshared_policy, period, policy_threads))
        } else {
            None
        };
        Ok(Pool {
            shared,
            handles: Mutex::new(handles),
            threads,
            policy: self.policy,
            period,
            name: self.name,
            placement,
            #[cfg(not(loom))]
            control,
        })
    }
}

#[cfg(not(loom))]
impl Builder {
    /// The set this pool shares and whether it is gated (engaged only while shared), or why
    /// it shares none (`Metrics::host_tokens`).
    fn tokens_to_share(
        &self,
    ) -> (Option<(Arc<crate::tokens::HostTokens>, bool)>, crate::metrics::TokenState) {
        use crate::metrics::TokenState;
        use crate::tokens::DefaultTokens;
        if let Some(set) = &self.host_tokens {
            return (Some((set.clone(), false)), TokenState::Engaged);
        }
        // Pools whose tasks block or park would hold tokens without using a CPU; a background
        // pool runs only on CPUs nobody else wants, so it has no business taking their tokens.
        if self.host_tokens_off || self.elastic.is_some() || self.cpu_budget.is_some() || self.background {
            return (None, TokenState::Off);
        }
        match crate::tokens::for_default_pool() {
            DefaultTokens::On(set) => (Some((set, true)), TokenState::Alone),
            DefaultTokens::Off => (None, TokenState::Off),
            DefaultTokens::Unavailable => (None, TokenState::Unavailable),
        }
    }
}

/// The CPUs this process may run on: `cpus::detect()`'s allowed CPUs, or what the standard
/// library reports when detection fails (it reads the affinity mask too).
fn default_threads() -> usize {
    #[cfg(not(loom))]
    if let Ok(budget) = crate::cpus::detect() {
        return budget.allowed_cpus().max(1) as usize;
    }
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The CPUs in the calling thread's affinity mask (which the kernel keeps within the cgroup's
/// cpuset), ascending, read in a buffer sized from the kernel (`crate::affinity`); empty when
/// it cannot be read (the caller decides what that turns off).
#[cfg(not(loom))]
pub(crate) fn affinity_cpus() -> Vec<u32> {
    crate::affinity::current_thread_cpus().unwrap_or_default()
}

/// The CPU mask for `build`, and whether it could not be read: pinning and CPU leases are then
/// off for the pool, which counts it (`Shared::degradations`), and the first such failure in
/// the process is logged with its reason.
fn read_affinity() -> (Vec<u32>, bool) {
    #[cfg(not(loom))]
    {
        match crate::affinity::current_thread_cpus() {
            Ok(cpus) => (cpus, false),
            Err(error) => {
                crate::metrics::Degradation::AffinityUnreadable.log_once(&error);
                (Vec::new(), true)
            }
        }
    }
    // Under loom the workers are model threads: nothing to pin.
    #[cfg(loom)]
    {
        (Vec::new(), false)
    }
}
