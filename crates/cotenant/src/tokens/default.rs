//! Which token set a default pool shares, and whether it shares one at all.
//!
//! `Pool::builder().build()` cooperates by default: it opens this user's set for the CPUs the
//! process may run on (`default-<cpulist>`, one set per user and CPU set, with one token per
//! CPU of the set), so that every cotenant process confined to the same CPUs shares the same
//! tokens and processes on other CPUs do not. `COTENANT_TOKENS=off` (or
//! `Builder::host_tokens_off`) turns it off; `COTENANT_TOKENS_SET=NAME` names another set (a
//! group of services that should cooperate apart from the rest, or the lab's own set).
//!
//! One handle per process and set: every default pool of the process shares it (a `Weak` kept
//! here), so the process counts once among the set's members while any default pool lives, and
//! not at all once the last is gone. Where no set can be had (System V IPC refused by a seccomp
//! filter or the kernel's limits, a foreign set on the key), the pool runs the plain adaptive
//! policy; the reason is logged once per process and kept in the pool's metrics. Outside Linux
//! (`crate::sys`'s fallback) no set can ever be had: a default pool runs without tokens, its
//! metrics say `unavailable`, and nothing is logged (it is what the system offers, not a
//! failure to report).

use std::sync::{Arc, Mutex, Weak};

use super::{HostTokens, MAX_TOKENS};

/// Environment variable: `off` (or `0`, `false`, `no`) turns the default pools' host tokens off;
/// `on` or unset leaves them on.
pub const TOKENS_ENV: &str = "COTENANT_TOKENS";
/// Environment variable: the name of the set default pools share instead of `default-<cpulist>`.
pub const DEFAULT_SET_ENV: &str = "COTENANT_TOKENS_SET";

/// Longest CPU list kept in a default set's name; a longer one is replaced by its hash.
const MAX_CPULIST_IN_NAME: usize = 120;

/// What a default pool does about host tokens.
pub(crate) enum DefaultTokens {
    /// Shares this set.
    On(Arc<HostTokens>),
    /// Turned off by the environment.
    Off,
    /// Wanted, but no set could be had (logged once), or none can be on this system (outside
    /// Linux: not logged).
    Unavailable,
}

static DEFAULT: Mutex<Option<(String, Weak<HostTokens>)>> = Mutex::new(None);
static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether `value` of [`TOKENS_ENV`] turns tokens off; `Err` for a value that means neither.
fn env_says_off(value: &str) -> Result<bool, String> {
    crate::env_switch::parse(TOKENS_ENV, value, true).map(|on| !on)
}

/// The name of the default set for a process that may run on `cpus` (ascending ids), unless
/// [`DEFAULT_SET_ENV`] names another (`env_name`).
pub(crate) fn name_for(cpus: &[u32], env_name: Option<&str>) -> String {
    if let Some(name) = env_name.filter(|n| !n.is_empty()) {
        return name.to_owned();
    }
    let mut set = crate::procfs::cpulist::CpuSet::new();
    cpus.iter().for_each(|&cpu| set.insert(cpu));
    let list = set.to_string();
    if list.len() <= MAX_CPULIST_IN_NAME {
        format!("default-{list}")
    } else {
        format!("default-h{:08x}", super::key(&list, 0) as u32)
    }
}

/// The name of the set this process's default pools share (`COTENANT_TOKENS_SET`, or
/// `default-<cpulist>` for the CPUs the process may run on), and its token count (those CPUs).
/// The process's CPUs, not the calling thread's: a pool built on a pinned thread must still
/// share the set of its process's other pools.
pub fn default_set_name() -> (String, u32) {
    let cpus: Vec<u32> = match crate::cpus::detect_pid(std::process::id()) {
        Ok(budget) => budget.allowed_set().iter().collect(),
        Err(_) => crate::pool::affinity_cpus(),
    };
    let env_name = std::env::var(DEFAULT_SET_ENV).ok();
    let count = u32::try_from(cpus.len()).unwrap_or(MAX_TOKENS).clamp(1, MAX_TOKENS);
    (name_for(&cpus, env_name.as_deref()), count)
}

/// The set a default pool shares now (see the module documentation).
pub(crate) fn for_default_pool() -> DefaultTokens {
    if let Ok(value) = std::env::var(TOKENS_ENV) {
        match env_says_off(&value) {
            Ok(true) => return DefaultTokens::Off,
            Ok(false) => {}
            Err(why) => warn_once(&format!("{why}; host tokens stay on")),
        }
    }
    if crate::sys::FALLBACK {
        return DefaultTokens::Unavailable;
    }
    let (name, count) = default_set_name();
    let mut cached = DEFAULT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    // A set removed under us (`cotenant tokens remove --force`) is opened anew.
    if let Some(set) = cached.as_ref().filter(|(n, _)| *n == name).and_then(|(_, set)| set.upgrade()) {
        if set.usable() {
            return DefaultTokens::On(set);
        }
    }
    match HostTokens::open(&name, count) {
        Ok(set) => {
            let set = Arc::new(set);
            *cached = Some((name, Arc::downgrade(&set)));
            DefaultTokens::On(set)
        }
        Err(e) => {
            let why = e.to_string();
            warn_once(&format!(
                "{why}; default pools run the adaptive policy without host tokens \
                 (set {TOKENS_ENV}=off to silence this)"
            ));
            DefaultTokens::Unavailable
        }
    }
}

fn warn_once(message: &str) {
    if !WARNED.swap(true, std::sync::atomic::Ordering::Relaxed) {
        tracing::warn!("cotenant: {message}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_set_is_named_from_the_cpu_set_unless_the_environment_names_one() {
        assert_eq!(name_for(&[0, 1, 2, 3], None), "default-0-3");
        assert_eq!(name_for(&[0, 2, 3, 7], None), "default-0,2-3,7");
        assert_eq!(name_for(&[0, 1], Some("web")), "web");
        assert_eq!(name_for(&[0, 1], Some("")), "default-0-1", "an empty name is no name");
        // A fragmented set of many CPUs: a hash, short and stable, still one name per set.
        let every_other: Vec<u32> = (0..400).step_by(2).collect();
        let name = name_for(&every_other, None);
        assert!(name.starts_with("default-h") && name.len() < 20, "{name}");
        assert_eq!(name, name_for(&every_other, None));
        assert_ne!(name, name_for(&(1..400).step_by(2).collect::<Vec<u32>>(), None));
    }

    #[test]
    fn the_environment_turns_tokens_off_in_plain_words_and_refuses_others() {
        for off in ["off", "OFF", "0", "false", "no", " off "] {
            assert_eq!(env_says_off(off), Ok(true), "{off:?}");
        }
        for on in ["on", "1", "true", "yes", ""] {
            assert_eq!(env_says_off(on), Ok(false), "{on:?}");
        }
        let e = env_says_off("of").unwrap_err();
        assert!(e.contains("COTENANT_TOKENS") && e.contains("\"of\""), "{e}");
    }
}
