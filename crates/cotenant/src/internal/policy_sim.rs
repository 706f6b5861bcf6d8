//! A period-by-period simulation of pools sharing a host, to study policies without a host:
//! each tenant is a process with one pool, the host is `cpus` CPUs shared by the kernel's
//! fair scheduler. Deterministic (no clock, no randomness), so tests can assert on it and
//! `docs/policy.md` can print its tables.
//!
//! The scheduler model is CFS's, simplified: every runnable worker thread gets an equal slice
//! ([`Grouping::Threads`], all processes in one cgroup), or every tenant with runnable threads
//! gets an equal slice that its threads share ([`Grouping::Tenants`], one cgroup per tenant of
//! equal weight, as containers are). A tenant's runnable threads are `min(target, demand)`;
//! those that do not get a CPU wait on the run queue, which is what the tenant's sample reports
//! as waiting workers.

use crate::policy::{Policy, PolicyState, Sample};

/// How the simulated kernel shares the CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grouping {
    /// All tenants in one cgroup: every runnable thread gets an equal share.
    Threads,
    /// One cgroup per tenant with equal weights: every busy tenant gets an equal share
    /// (max-min fair), split among its threads.
    Tenants,
}

/// One simulated process.
#[derive(Debug, Clone)]
pub struct Tenant {
    /// Its pool's policy.
    pub policy: Policy,
    /// Its pool's OS threads.
    pub threads: u32,
    /// The policy's state; `state.target()` is the target in force.
    pub state: PolicyState,
    /// Workers it could keep busy now (0 = idle, `u32::MAX` = unbounded backlog).
    pub demand: u32,
    /// Its CPU quota in CPUs, if any.
    pub quota: Option<f64>,
}

impl Tenant {
    /// A saturated tenant (unbounded backlog) with `threads` threads, starting at `target`.
    pub fn saturated(policy: Policy, threads: u32, target: u32) -> Self {
        Tenant { policy, threads, state: PolicyState::new(target), demand: u32::MAX, quota: None }
    }
}

/// What happened to one tenant in one period.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TenantPeriod {
    /// The target in force during the period.
    pub target: u32,
    /// CPUs it got.
    pub cpus: f64,
    /// Its workers waiting for a CPU, on average.
    pub waiting: f64,
}

/// A simulated host.
#[derive(Debug, Clone)]
pub struct Host {
    /// CPUs shared by the tenants.
    pub cpus: u32,
    /// How the kernel shares them.
    pub grouping: Grouping,
    /// Period length (only scales the nanosecond fields of the samples).
    pub period_ns: u64,
    /// The processes.
    pub tenants: Vec<Tenant>,
}

impl Host {
    /// A host of `cpus` CPUs with no tenants yet and a 10 ms period.
    pub fn new(cpus: u32, grouping: Grouping) -> Self {
        Host { cpus, grouping, period_ns: 10_000_000, tenants: Vec::new() }
    }

    /// Runs one period with the current targets, then lets every tenant's policy decide from
    /// its own sample. Returns what each tenant got during the period.
    pub fn step(&mut self) -> Vec<TenantPeriod> {
        let runnable: Vec<f64> =
            self.tenants.iter().map(|t| f64::from(t.state.target.min(t.demand).min(t.threads))).collect();
        let got = self.share(&runnable);
        let total: f64 = got.iter().sum();
        let cpus = f64::from(self.cpus);
        let period = self.period_ns as f64;
        let mut outcomes = Vec::with_capacity(self.tenants.len());
        for (i, tenant) in self.tenants.iter_mut().enumerate() {
            let waiting = (runnable[i] - got[i]).max(0.0);
            outcomes.push(TenantPeriod { target: tenant.state.target, cpus: got[i], waiting });
            let queued = if tenant.demand > tenant.state.target { 1 } else { 0 };
            let sample = Sample {
                elapsed_ns: self.period_ns,
                threads: tenant.threads,
                cpus: self.cpus,
                quota_cpus: tenant.quota,
                self_ns: (got[i] * period) as u64,
                busy_ns: (total * period) as u64,
                idle_ns: ((cpus - total).max(0.0) * period) as u64,
                procs_running: None,
                throttled_ns: 0,
                workers_busy_ns: (runnable[i] * period) as u64,
                workers_cpu_ns: Some((got[i] * period) as u64),
                workers_runq_wait_ns: None,
                queued,
            };
            tenant.policy.decide(&sample, &mut tenant.state);
        }
        outcomes
    }

    /// CPUs each tenant gets for `runnable` threads each, capped by its quota.
    fn share(&self, runnable: &[f64]) -> Vec<f64> {
        let cpus = f64::from(self.cpus);
        // What each tenant could use at most: its runnable threads, limited by its quota.
        let want: Vec<f64> =
            runnable.iter().zip(&self.tenants).map(|(&r, t)| t.quota.map_or(r, |q| r.min(q))).collect();
        match self.grouping {
            Grouping::Threads => {
                // Water-filling over threads: each runnable thread gets the same slice, except
                // that a quota-limited tenant cannot exceed its quota.
                water_fill(cpus, &want, runnable)
            }
            Grouping::Tenants => water_fill(cpus, &want, &vec![1.0; want.len()]),
        }
    }
}

/// Max-min fair division of `capacity` among claimants with demands `want` and weights
/// `weight` (each gets `weight · level`, at most its demand).
fn water_fill(capacity: f64, want: &[f64], weight: &[f64]) -> Vec<f64> {
    let mut got = vec![0.0; want.len()];
    let mut open: Vec<usize> = (0..want.len()).filter(|&i| want[i] > 0.0 && weight[i] > 0.0).collect();
    let mut left = capacity;
    while !open.is_empty() && left > 1e-12 {
        let total_weight: f64 = open.iter().map(|&i| weight[i]).sum();
        let level = left / total_weight;
        let (full, partial): (Vec<usize>, Vec<usize>) =
            open.iter().partition(|&&i| want[i] - got[i] <= weight[i] * level + 1e-12);
        if full.is_empty() {
            for &i in &partial {
                got[i] += weight[i] * level;
            }
            break;
        }
        for &i in &full {
            left -= want[i] - got[i];
            got[i] = want[i];
        }
        open = partial;
    }
    got
}

/// Jain's fairness index of `shares`: 1 when all are equal, `1/n` when one has everything.
pub fn jain(shares: &[f64]) -> f64 {
    let sum: f64 = shares.iter().sum();
    let squares: f64 = shares.iter().map(|s| s * s).sum();
    if squares == 0.0 {
        1.0
    } else {
        sum * sum / (shares.len() as f64 * squares)
    }
}
