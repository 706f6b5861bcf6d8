//! [`Registry`]: the pools of a process, its CPU limit and the host-token sets its pools share,
//! as one exposition for a fleet to scrape. Pools are held weakly: a pool dropped by its owner
//! leaves the exposition at the next render. The CPU limit is read again at most once per
//! [`cpu_limit_every`](Registry::cpu_limit_every) (`Limit::refresh`, a few reads of files kept
//! open; a full detection when there is none yet or the refresh failed).

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::exposition::{self, CpuLimitReading, Family, ProcessReading, TokenSetReading};
use super::Metrics;
use crate::cpus::{self, Limit};
use crate::pool::{Pool, WeakPool};
use crate::sync::lock;
use crate::tokens::HostTokens;

/// How often a [`Registry`] reads the CPU limit again, unless told otherwise.
pub const DEFAULT_CPU_LIMIT_EVERY: Duration = Duration::from_secs(5);

/// Any number of pools (each under a `pool` label), the process's CPU limit and the host-token
/// sets the pools share, rendered as one valid Prometheus exposition: each family has one
/// `# HELP` and one `# TYPE` line, then its samples for every pool. Cheap to clone (an `Arc`
/// inside): give a clone to the HTTP handler that serves `/metrics`.
///
/// The families, their types and labels are listed in `docs/metrics.md`.
///
/// ```
/// use cotenant::{metrics::Registry, Policy, Pool};
/// let api = Pool::builder().policy(Policy::fixed(1)).host_tokens_off().build().unwrap();
/// let batch = Pool::builder().policy(Policy::fixed(1)).host_tokens_off().build().unwrap();
/// let registry = Registry::new();
/// registry.register("api", &api).unwrap();
/// registry.register("batch", &batch).unwrap();
/// assert!(registry.register("api", &batch).is_err(), "a name names one pool");
/// api.spawn(|| ()).join().unwrap();
/// let text = registry.render();
/// assert_eq!(text.matches("# TYPE cotenant_pool_completed_total counter").count(), 1);
/// assert!(text.contains("cotenant_pool_completed_total{pool=\"batch\"} 0\n"));
/// drop(batch); // a dropped pool leaves the exposition
/// assert!(!registry.render().contains("pool=\"batch\""));
/// ```
#[derive(Clone)]
pub struct Registry {
    inner: Arc<Inner>,
}

struct Inner {
    pools: Mutex<Vec<Entry>>,
    cpu_limit: Mutex<LimitCache>,
}

/// A registered pool.
struct Entry {
    name: String,
    pool: WeakPool,
}

/// Why a pool could not be registered.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegistryError {
    /// The name was empty (it becomes the `pool` label, and an empty label is no label).
    EmptyName,
    /// Another pool, still alive, is registered under this name.
    NameTaken {
        /// The name.
        name: String,
    },
}

impl fmt::Display for RegistryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegistryError::EmptyName => {
                f.write_str("metrics registry: a pool's name must not be empty (it is the `pool` label)")
            }
            RegistryError::NameTaken { name } => write!(
                f,
                "metrics registry: the name {name:?} is taken by another pool that is still alive \
                 (choose another name, or unregister that pool first)"
            ),
        }
    }
}

impl std::error::Error for RegistryError {}

impl Default for Registry {
    fn default() -> Self {
        Registry::new()
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<String> = lock(&self.inner.pools).iter().map(|entry| entry.name.clone()).collect();
        f.debug_struct("Registry").field("pools", &names).finish_non_exhaustive()
    }
}

impl Registry {
    /// An empty registry that exports the CPU limit, read again at most every
    /// [`DEFAULT_CPU_LIMIT_EVERY`].
    pub fn new() -> Self {
        Registry {
            inner: Arc::new(Inner {
                pools: Mutex::new(Vec::new()),
                cpu_limit: Mutex::new(LimitCache::new(Some(DEFAULT_CPU_LIMIT_EVERY), cpus::detect)),
            }),
        }
    }

    /// Reads the CPU limit again at most once per `every` (a render in between shows the last
    /// reading). For every clone of this registry.
    pub fn cpu_limit_every(self, every: Duration) -> Self {
        lock(&self.inner.cpu_limit).every = Some(every);
        self
    }

    /// Leaves the CPU limit's families out (a process that exports them elsewhere). For every
    /// clone of this registry.
    pub fn without_cpu_limit(self) -> Self {
        lock(&self.inner.cpu_limit).every = None;
        self
    }

    /// Adds `pool` under `name` (its `pool` label). The registry holds it weakly: when the pool
    /// is dropped it leaves the exposition, and its name is free again. Registering the same
    /// pool under the same name again does nothing.
    ///
    /// # Errors
    ///
    /// [`RegistryError::EmptyName`] for an empty name, [`RegistryError::NameTaken`] when
    /// another pool that is still alive has the name.
    pub fn register(&self, name: &str, pool: &Pool) -> Result<(), RegistryError> {
        if name.is_empty() {
            return Err(RegistryError::EmptyName);
        }
        let mut pools = lock(&self.inner.pools);
        pools.retain(|entry| !entry.pool.is_gone());
        if let Some(entry) = pools.iter().find(|entry| entry.name == name) {
            if entry.pool.is(pool) {
                return Ok(());
            }
            return Err(RegistryError::NameTaken { name: name.to_owned() });
        }
        pools.push(Entry { name: name.to_owned(), pool: pool.downgrade() });
        Ok(())
    }

    /// Removes the pool registered under `name`; returns whether there was one.
    pub fn unregister(&self, name: &str) -> bool {
        let mut pools = lock(&self.inner.pools);
        let before = pools.len();
        pools.retain(|entry| entry.name != name);
        pools.len() != before
    }

    /// The names of the pools registered and still alive, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut pools = lock(&self.inner.pools);
        pools.retain(|entry| !entry.pool.is_gone());
        let mut names: Vec<String> = pools.iter().map(|entry| entry.name.clone()).collect();
        names.sort();
        names
    }

    /// One exposition in the Prometheus text format (version 0.0.4: serve it as
    /// `text/plain; version=0.0.4`): the CPU limit, every live pool (sorted by name) and the
    /// host-token sets they share. Each call reads every pool as [`Pool::metrics`] does (a point
    /// of its health alerts' window, like any look at the pool).
    pub fn render(&self) -> String {
        let reading = self.read();
        super::text::write(&reading.families())
    }

    /// The families of one exposition (the `prometheus-client` and `metrics` features).
    #[cfg_attr(not(any(feature = "prometheus-client", feature = "metrics")), allow(dead_code))]
    pub(crate) fn families(&self) -> Vec<Family> {
        self.read().families()
    }

    /// Everything one exposition shows, read now.
    fn read(&self) -> Reading {
        // Read the pools outside the lock: a pool's reading takes its own locks.
        let entries: Vec<(String, WeakPool)> =
            lock(&self.inner.pools).iter().map(|entry| (entry.name.clone(), entry.pool.clone())).collect();
        let mut pools = Vec::with_capacity(entries.len());
        let mut sets: Vec<(i32, TokenSetReading)> = Vec::new();
        let mut gone = false;
        for (name, pool) in entries {
            let Some((metrics, set)) = pool.read() else {
                gone = true;
                continue;
            };
            if let Some(set) = set {
                // Once per set, however many pools share it.
                if !sets.iter().any(|(semid, _)| *semid == set.semid()) {
                    sets.push((set.semid(), read_set(&set)));
                }
            }
            pools.push((name, metrics));
        }
        if gone {
            lock(&self.inner.pools).retain(|entry| !entry.pool.is_gone());
        }
        pools.sort_by(|(a, _), (b, _)| a.cmp(b));
        let mut sets: Vec<TokenSetReading> = sets.into_iter().map(|(_, set)| set).collect();
        sets.sort_by(|a, b| Ord::cmp(&a.name, &b.name));
        let process = lock(&self.inner.cpu_limit).reading(Instant::now());
        Reading { pools, process, sets }
    }
}

/// What one exposition shows.
struct Reading {
    pools: Vec<(String, Metrics)>,
    process: Option<ProcessReading>,
    sets: Vec<TokenSetReading>,
}

impl Reading {
    fn families(&self) -> Vec<Family> {
        let pools: Vec<(&str, &Metrics)> =
            self.pools.iter().map(|(name, metrics)| (name.as_str(), metrics)).collect();
        exposition::families(&pools, self.process.as_ref(), &self.sets)
    }
}

/// A set's state now; a value that cannot be read (the set was removed) is left out. A private
/// set (named `(private)`, of which a process may have several) is labelled with its System V
/// id as well, so that each keeps a series of its own.
fn read_set(set: &HostTokens) -> TokenSetReading {
    let name =
        if set.name() == "(private)" { format!("(private {})", set.semid()) } else { set.name().to_owned() };
    let mut reading = TokenSetReading::new(name, set.count());
    reading.available = set.available().ok();
    reading.waiting = set.waiting().ok();
    reading.members = set.members().ok();
    reading
}

/// The CPU limit, read at most once per `every`.
struct LimitCache {
    /// `None`: the registry does not export the CPU limit.
    every: Option<Duration>,
    /// How a limit is detected from nothing (`cpus::detect`; a failing one in tests).
    detect: fn() -> Result<Limit, cpus::Error>,
    limit: Option<Limit>,
    read_at: Option<Instant>,
    reading: Option<CpuLimitReading>,
    errors: u64,
}

impl LimitCache {
    fn new(every: Option<Duration>, detect: fn() -> Result<Limit, cpus::Error>) -> Self {
        LimitCache { every, detect, limit: None, read_at: None, reading: None, errors: 0 }
    }

    /// The process's part of an exposition at `now`, reading the limit again if it is due.
    fn reading(&mut self, now: Instant) -> Option<ProcessReading> {
        let every = self.every?;
        let due = self.read_at.is_none_or(|at| now.saturating_duration_since(at) >= every);
        if due {
            self.read_at = Some(now);
            self.read_again();
        }
        Some(ProcessReading::new(self.reading, self.errors))
    }

    /// A refresh of the limit already detected (paths resolved once), or a detection when there
    /// is none or the refresh failed (the process may have moved to another cgroup). A failure
    /// leaves the families out until a later reading succeeds; the first is logged.
    fn read_again(&mut self) {
        let result = match self.limit.take() {
            Some(mut limit) => match limit.refresh() {
                Ok(()) => Ok(limit),
                Err(_) => (self.detect)(),
            },
            None => (self.detect)(),
        };
        match result {
            Ok(limit) => {
                self.reading = Some(CpuLimitReading::from(&limit));
                self.limit = Some(limit);
            }
            Err(error) => {
                if self.errors == 0 {
                    tracing::warn!(
                        "cotenant: the metrics registry could not read the CPU limit ({error}); \
                         the cotenant_cpu_limit families are left out until a reading succeeds \
                         (failures counted in cotenant_cpu_limit_errors_total; logged once)"
                    );
                }
                self.errors += 1;
                self.reading = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failing() -> Result<Limit, cpus::Error> {
        Err(cpus::Error::Undetermined { reason: "recorded failure".to_owned() })
    }

    #[test]
    fn a_failed_cpu_limit_is_counted_once_per_period_and_its_families_left_out() {
        let every = Duration::from_secs(5);
        let mut cache = LimitCache::new(Some(every), failing);
        let start = Instant::now();
        let first = cache.reading(start).expect("the process part is there");
        assert_eq!((first.cpu_limit, first.cpu_limit_errors), (None, 1));
        let again = cache.reading(start + Duration::from_secs(1)).unwrap();
        assert_eq!(again.cpu_limit_errors, 1, "not read again within the period");
        let later = cache.reading(start + every).unwrap();
        assert_eq!(later.cpu_limit_errors, 2, "read again once the period is over");
        let text = exposition::render(&[], Some(&later), &[]);
        assert!(!text.contains("cotenant_cpu_limit "), "{text}");
        assert!(!text.contains("cotenant_cpu_limit_binding"), "{text}");
        assert!(text.contains("cotenant_cpu_limit_errors_total 2\n"), "{text}");
    }

    #[test]
    fn a_registry_without_the_cpu_limit_has_no_process_part() {
        let mut cache = LimitCache::new(None, failing);
        assert_eq!(cache.reading(Instant::now()), None);
        assert_eq!(cache.errors, 0, "nothing was read");
    }

    #[test]
    fn registration_errors_name_the_problem() {
        assert!(RegistryError::EmptyName.to_string().contains("must not be empty"));
        let taken = RegistryError::NameTaken { name: "api".to_owned() };
        assert!(taken.to_string().contains("\"api\" is taken"), "{taken}");
    }
}
