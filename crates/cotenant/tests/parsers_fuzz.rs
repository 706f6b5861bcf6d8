//! Structure-aware property tests of the `/proc` and cgroup-fs parsers (`cotenant::internal::procfs`),
//! issue 34: each parser's inputs are generated as valid files of its format, then damaged.
//!
//! For every parser, a generator ([`valid`]) writes files shaped like what the kernel prints
//! (`/proc/stat` with `cpu` and `cpuN` lines of 4 to 11 columns; a `/proc/<pid>/stat` whose
//! command name holds spaces and parentheses; mountinfo lines with optional fields and octal
//! escapes; ...) together with the values they hold, and a mutator ([`damage`]) damages them: a
//! value deleted, repeated, swapped, or replaced by a huge, negative or non-numeric one; a field
//! added; a separator changed; a line dropped or repeated; garbage bytes inserted; the file cut
//! short. Each case checks:
//! 1. the valid file parses to exactly the values it was generated from;
//! 2. the damaged file does not panic the parser, and what it parses to (if it parses) keeps the
//!    parser's documented promises;
//! 3. if the damaged file is rejected, the error names the format, quotes the offending text as
//!    found in the file and, when the damage was one wrong value, the quoted text includes it.
//!
//! The parsers do not know the file's path; `cpus::Probe` adds it. The last test damages the
//! files of two fixture trees and checks, through `Probe::with_root`, that the error names the
//! damaged file.
//!
//! Cases per test: `COTENANT_FUZZ_CASES` (default [`DEFAULT_CASES`], what `make test` runs;
//! `make fuzz` runs 100,000), from the seed `COTENANT_FUZZ_SEED` (default [`DEFAULT_SEED`]) so
//! that a run can be repeated. Each test prints its count. A failure prints the shrunk case and
//! writes nothing into the source tree.

// Every invariant takes the parser's `&T`, and for four parsers `T` is a `Vec`.
#![allow(clippy::ptr_arg)]

use cotenant::cpus::{self, Probe};
use cotenant::internal::procfs::cgroup::{self, Membership};
use cotenant::internal::procfs::cgroupfs::{self, Quota};
use cotenant::internal::procfs::cpulist::{self, CpuSet, MAX_CPU_ID};
use cotenant::internal::procfs::mountinfo::{self, CgroupMount};
use cotenant::internal::procfs::stat::{self, Stat};
use cotenant::internal::procfs::{loadavg, pidstat, schedstat, status, ParseError};
use damage::Mutant;
use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};
use std::fmt::Debug;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Cases per test when `COTENANT_FUZZ_CASES` is not set: a few thousand, as `make test` runs
/// them in a debug build beside every other test.
const DEFAULT_CASES: u32 = 2_000;

/// The seed when `COTENANT_FUZZ_SEED` is not set: fixed, so that every run of `make test` checks
/// the same cases and a failure can be repeated.
const DEFAULT_SEED: u64 = 34;

// The characters between values in each format: the damage acts on the values between them.
const WHITESPACE_SEPARATED: &str = " \n";
const ONE_VALUE: &str = "\n";
const MOUNTINFO_SEPARATORS: &str = " \n,:";
const CPU_LIST_SEPARATORS: &str = ",- \n";
const STATUS_SEPARATORS: &str = ":\t\n,- ";
const CGROUP_SEPARATORS: &str = ":,/\n";
const LOADAVG_SEPARATORS: &str = " /\n";

/// A valid file of some format, and what its parser must return for it.
#[derive(Debug, Clone)]
struct Valid<T> {
    text: String,
    expected: T,
}

/// A parser under test.
struct Parser<T> {
    /// The function's path below `procfs`, for the count line and failures.
    name: &'static str,
    /// What its errors' `ParseError::format()` says.
    format: &'static str,
    /// The characters between values in its format.
    separators: &'static str,
    parse: fn(&str) -> Result<T, ParseError>,
    /// What the parser promises about any value it returns, whatever the input.
    invariant: fn(&T) -> Result<(), String>,
}

fn config() -> Config {
    Config {
        cases: env_or("COTENANT_FUZZ_CASES", DEFAULT_CASES),
        rng_seed: RngSeed::Fixed(env_or("COTENANT_FUZZ_SEED", DEFAULT_SEED)),
        // A failure prints its shrunk input; nothing is written into the source tree.
        failure_persistence: None,
        ..Config::default()
    }
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Err(_) => default,
        Ok(text) => text.trim().parse().unwrap_or_else(|_| panic!("{name}={text:?} is not a number")),
    }
}

/// Runs the configured number of cases of `parser` on files from `valid`, each then damaged,
/// and prints the count. A panic in the parser fails the case, which proptest shrinks and shows.
fn fuzz<T: PartialEq + Debug>(parser: Parser<T>, valid: impl Strategy<Value = Valid<T>>) {
    let cases = AtomicUsize::new(0);
    let rejected = AtomicUsize::new(0);
    let mut runner = TestRunner::new(config());
    let outcome = runner.run(&(valid, damage::mutations()), |(file, mutations)| {
        cases.fetch_add(1, Ordering::Relaxed);
        let parsed = (parser.parse)(&file.text);
        if parsed.as_ref() != Ok(&file.expected) {
            return Err(TestCaseError::fail(format!(
                "the valid file {:?} parsed to {parsed:?}, not to {:?}",
                file.text, file.expected
            )));
        }
        let mutant = damage::apply(&file.text, parser.separators, &mutations);
        match (parser.parse)(&mutant.text) {
            Ok(value) => (parser.invariant)(&value).map_err(|broken| {
                TestCaseError::fail(format!("{broken}: {value:?}, parsed from {:?}", mutant.text))
            }),
            Err(error) => {
                rejected.fetch_add(1, Ordering::Relaxed);
                check_error(parser.format, &error, &mutant)
            }
        }
    });
    if let Err(failure) = outcome {
        panic!("{}: {failure}", parser.name);
    }
    eprintln!(
        "fuzz {}: {} cases, 0 panics ({} damaged files rejected, each error naming its format and quoting the offending text)",
        parser.name,
        cases.into_inner(),
        rejected.into_inner()
    );
}

/// What an error about `mutant` must say: the format; the offending text, quoted from the file
/// (shortened to its start and an ellipsis when long); and, when the damage put one wrong value
/// into the file, text that includes some of it.
fn check_error(format: &str, error: &ParseError, mutant: &Mutant) -> Result<(), TestCaseError> {
    let message = error.to_string();
    let fail = |what: &str| {
        Err(TestCaseError::fail(format!("{what}: the error {message:?} about {:?}", mutant.text)))
    };
    if error.format() != format || !message.contains(format) {
        return fail(&format!("does not name the format {format:?}"));
    }
    let excerpt = error.excerpt();
    if !message.contains(&format!("{excerpt:?}")) {
        return fail("does not quote its excerpt");
    }
    let (quoted, shortened) = match excerpt.strip_suffix('…') {
        Some(start) if !mutant.text.contains(excerpt) => (start, true),
        _ => (excerpt, false),
    };
    if !mutant.text.contains(quoted) {
        return fail("quotes text that is not in the file");
    }
    if let (Some(wrong), false) = (&mutant.wrong_value, shortened) {
        // An empty quote counts as touching the position it was found at; a quote that ends
        // where the wrong value starts, or starts where it ends, touches it too (a separator
        // inserted before a value makes the value after it the one that is wrong: `//0`'s
        // total is `/0`).
        let touches = |(at, q): (usize, &str)| at <= wrong.end && wrong.start <= at + q.len().max(1);
        if !mutant.text.match_indices(quoted).any(touches) {
            return fail(&format!("does not quote the wrong value {:?}", &mutant.text[wrong.clone()]));
        }
    }
    Ok(())
}

fn no_invariant<T>(_: &T) -> Result<(), String> {
    Ok(())
}

// ---- One test per parser ----

#[test]
fn proc_stat() {
    let parser = Parser {
        name: "stat::parse",
        format: "/proc/stat",
        separators: WHITESPACE_SEPARATED,
        parse: stat::parse,
        invariant: stat_invariant,
    };
    fuzz(parser, valid::proc_stat());
}

fn stat_invariant(stat: &Stat) -> Result<(), String> {
    if stat.per_cpu.is_empty() {
        return Err("no cpuN line, yet no error".into());
    }
    for (id, times) in &stat.per_cpu {
        if *id > MAX_CPU_ID {
            return Err(format!("CPU id {id} is above MAX_CPU_ID"));
        }
        let _ = (times.busy(), times.idle_total()); // documented to saturate, not overflow
    }
    Ok(())
}

#[test]
fn pid_stat() {
    let parser = Parser {
        name: "pidstat::parse",
        format: "/proc/<pid>/stat",
        separators: WHITESPACE_SEPARATED,
        parse: pidstat::parse,
        invariant: no_invariant,
    };
    fuzz(parser, valid::pid_stat());
}

#[test]
fn mountinfo() {
    let parser = Parser {
        name: "mountinfo::parse_cgroup_mounts",
        format: "/proc/<pid>/mountinfo",
        separators: MOUNTINFO_SEPARATORS,
        parse: mountinfo::parse_cgroup_mounts,
        invariant: mounts_invariant,
    };
    fuzz(parser, valid::mountinfo());
}

fn mounts_invariant(mounts: &Vec<CgroupMount>) -> Result<(), String> {
    for m in mounts {
        if m.dir_of(&m.root).as_deref() != Some(m.mount_point.trim_end_matches('/')) {
            return Err(format!("{m:?}: its own root is not at its mount point"));
        }
        if m.dir_of(&format!("{}/..", m.root)).is_some() {
            return Err(format!("{m:?}: a cgroup above its root is visible through it"));
        }
        // No path holds a NUL, and one with a NUL cannot be opened: `cpus::Probe` would fail
        // with an I/O error about a path built from it instead of an error naming mountinfo.
        if m.root.contains('\0') || m.mount_point.contains('\0') {
            return Err(format!("{m:?}: a path with a NUL byte must be a parse error"));
        }
    }
    Ok(())
}

#[test]
fn cpu_list() {
    let parser = Parser {
        name: "cpulist::parse",
        format: "CPU list",
        separators: CPU_LIST_SEPARATORS,
        parse: parse_cpu_list,
        invariant: cpu_ids_invariant,
    };
    fuzz(parser, valid::cpu_list());
}

fn parse_cpu_list(text: &str) -> Result<Vec<u32>, ParseError> {
    cpulist::parse(text).map(|set| set.iter().collect())
}

/// A parsed CPU list: increasing ids within the limit, which print and parse back to themselves.
fn cpu_ids_invariant(ids: &Vec<u32>) -> Result<(), String> {
    if ids.windows(2).any(|pair| pair[0] >= pair[1]) || ids.last().is_some_and(|&id| id > MAX_CPU_ID) {
        return Err("ids not increasing, or above MAX_CPU_ID".into());
    }
    let mut set = CpuSet::new();
    for &id in ids {
        set.insert(id);
    }
    let printed = set.to_string();
    match parse_cpu_list(&printed) {
        Ok(again) if again == *ids => Ok(()),
        other => Err(format!("printed as {printed:?}, parsed back as {other:?}")),
    }
}

#[test]
fn status_cpus_allowed() {
    let parser = Parser {
        name: "status::parse_cpus_allowed",
        format: "Cpus_allowed_list",
        separators: STATUS_SEPARATORS,
        parse: parse_cpus_allowed,
        invariant: |allowed: &Option<Vec<u32>>| allowed.as_ref().map_or(Ok(()), cpu_ids_invariant),
    };
    fuzz(parser, valid::status());
}

fn parse_cpus_allowed(text: &str) -> Result<Option<Vec<u32>>, ParseError> {
    status::parse_cpus_allowed(text).map(|allowed| allowed.map(|set| set.iter().collect()))
}

#[test]
fn cpu_max() {
    let parser = Parser {
        name: "cgroupfs::parse_cpu_max",
        format: "cpu.max",
        separators: WHITESPACE_SEPARATED,
        parse: cgroupfs::parse_cpu_max,
        invariant: |quota: &Option<Quota>| match quota {
            Some(q) if q.period_us == 0 => Err("a period of 0".into()),
            _ => Ok(()),
        },
    };
    fuzz(parser, valid::cpu_max());
}

#[test]
fn cfs_quota() {
    let parser = Parser {
        name: "cgroupfs::parse_cfs_quota",
        format: "cpu.cfs_quota_us",
        separators: ONE_VALUE,
        parse: cgroupfs::parse_cfs_quota,
        invariant: no_invariant,
    };
    fuzz(parser, valid::cfs_quota());
}

#[test]
fn cfs_period() {
    let parser = Parser {
        name: "cgroupfs::parse_cfs_period",
        format: "cpu.cfs_period_us",
        separators: ONE_VALUE,
        parse: cgroupfs::parse_cfs_period,
        invariant: |&period: &u64| if period == 0 { Err("a period of 0".into()) } else { Ok(()) },
    };
    fuzz(parser, valid::cfs_period());
}

#[test]
fn cgroup_number() {
    let parser = Parser {
        name: "cgroupfs::parse_number",
        format: "cpu.weight",
        separators: ONE_VALUE,
        parse: parse_cpu_weight,
        invariant: no_invariant,
    };
    fuzz(parser, valid::cgroup_number());
}

fn parse_cpu_weight(text: &str) -> Result<u64, ParseError> {
    cgroupfs::parse_number("cpu.weight", text)
}

#[test]
fn usage_percpu() {
    let parser = Parser {
        name: "cgroupfs::parse_usage_percpu",
        format: "cpuacct.usage_percpu",
        separators: WHITESPACE_SEPARATED,
        parse: cgroupfs::parse_usage_percpu,
        invariant: |usage: &Vec<u64>| if usage.is_empty() { Err("no CPU".into()) } else { Ok(()) },
    };
    fuzz(parser, valid::usage_percpu());
}

#[test]
fn cpu_stat() {
    let parser = Parser {
        name: "cgroupfs::parse_cpu_stat",
        format: "cpu.stat",
        separators: WHITESPACE_SEPARATED,
        parse: cgroupfs::parse_cpu_stat,
        invariant: no_invariant,
    };
    fuzz(parser, valid::cpu_stat());
}

#[test]
fn proc_cgroup() {
    let parser = Parser {
        name: "cgroup::parse",
        format: "/proc/<pid>/cgroup",
        separators: CGROUP_SEPARATORS,
        parse: cgroup::parse,
        invariant: memberships_invariant,
    };
    fuzz(parser, valid::proc_cgroup());
}

fn memberships_invariant(memberships: &Vec<Membership>) -> Result<(), String> {
    for m in memberships {
        if !m.path.starts_with('/') || m.controllers.iter().any(|c| c.is_empty() || c.contains(',')) {
            return Err(format!("{m:?}: a relative path or an empty or compound controller"));
        }
        // As in mountinfo: a cgroup name has no NUL, and a path with one cannot be opened.
        if m.path.contains('\0') {
            return Err(format!("{m:?}: a path with a NUL byte must be a parse error"));
        }
    }
    Ok(())
}

#[test]
fn task_schedstat() {
    let parser = Parser {
        name: "schedstat::parse_task",
        format: "/proc/<pid>/task/<tid>/schedstat",
        separators: WHITESPACE_SEPARATED,
        parse: schedstat::parse_task,
        invariant: no_invariant,
    };
    fuzz(parser, valid::task_schedstat());
}

#[test]
fn loadavg() {
    let parser = Parser {
        name: "loadavg::parse_running",
        format: "/proc/loadavg",
        separators: LOADAVG_SEPARATORS,
        parse: loadavg::parse_running,
        invariant: no_invariant,
    };
    fuzz(parser, valid::loadavg());
}

// ---- The file's name, added by cpus::Probe ----

const V1_CASE: &str = "v1-quota-1.5";
const V2_CASE: &str = "v2-quota";

/// A fixture file the probe test damages.
#[derive(Debug)]
struct DamagedFile {
    /// The case directory under `testdata/cpus/`.
    case: &'static str,
    /// The file, relative to the case directory.
    file: &'static str,
    /// What its parser's `ParseError::format()` says.
    format: &'static str,
    /// The characters between its values.
    separators: &'static str,
}

/// Every file the probe reads in the two cases, so that each parser is reached through it.
const DAMAGED_FILES: &[DamagedFile] = &[
    DamagedFile {
        case: V2_CASE,
        file: "proc/self/cgroup",
        format: "/proc/<pid>/cgroup",
        separators: CGROUP_SEPARATORS,
    },
    DamagedFile {
        case: V2_CASE,
        file: "proc/self/mountinfo",
        format: "/proc/<pid>/mountinfo",
        separators: MOUNTINFO_SEPARATORS,
    },
    DamagedFile {
        case: V2_CASE,
        file: "proc/self/status",
        format: "Cpus_allowed_list",
        separators: STATUS_SEPARATORS,
    },
    DamagedFile {
        case: V2_CASE,
        file: "sys/devices/system/cpu/online",
        format: "CPU list",
        separators: CPU_LIST_SEPARATORS,
    },
    DamagedFile {
        case: V2_CASE,
        file: "sys/fs/cgroup/system.slice/app.service/cpu.max",
        format: "cpu.max",
        separators: WHITESPACE_SEPARATED,
    },
    DamagedFile {
        case: V2_CASE,
        file: "sys/fs/cgroup/system.slice/cpu.max",
        format: "cpu.max",
        separators: WHITESPACE_SEPARATED,
    },
    DamagedFile {
        case: V2_CASE,
        file: "sys/fs/cgroup/system.slice/app.service/cpu.weight",
        format: "cpu.weight",
        separators: ONE_VALUE,
    },
    DamagedFile {
        case: V2_CASE,
        file: "sys/fs/cgroup/system.slice/app.service/cpu.max.burst",
        format: "cpu.max.burst",
        separators: ONE_VALUE,
    },
    DamagedFile {
        case: V2_CASE,
        file: "sys/fs/cgroup/system.slice/app.service/cpuset.cpus.effective",
        format: "CPU list",
        separators: CPU_LIST_SEPARATORS,
    },
    DamagedFile {
        case: V1_CASE,
        file: "proc/self/cgroup",
        format: "/proc/<pid>/cgroup",
        separators: CGROUP_SEPARATORS,
    },
    DamagedFile {
        case: V1_CASE,
        file: "proc/self/mountinfo",
        format: "/proc/<pid>/mountinfo",
        separators: MOUNTINFO_SEPARATORS,
    },
    DamagedFile {
        case: V1_CASE,
        file: "sys/fs/cgroup/cpu/app/cpu.cfs_quota_us",
        format: "cpu.cfs_quota_us",
        separators: ONE_VALUE,
    },
    DamagedFile {
        case: V1_CASE,
        file: "sys/fs/cgroup/cpu/app/cpu.cfs_period_us",
        format: "cpu.cfs_period_us",
        separators: ONE_VALUE,
    },
    DamagedFile {
        case: V1_CASE,
        file: "sys/fs/cgroup/cpu/app/cpu.shares",
        format: "cpu.shares",
        separators: ONE_VALUE,
    },
    DamagedFile {
        case: V1_CASE,
        file: "sys/fs/cgroup/cpu/app/cpu.cfs_burst_us",
        format: "cpu.cfs_burst_us",
        separators: ONE_VALUE,
    },
    DamagedFile {
        case: V1_CASE,
        file: "sys/fs/cgroup/cpuset/cpuset.effective_cpus",
        format: "CPU list",
        separators: CPU_LIST_SEPARATORS,
    },
];

/// A damaged file makes detection either succeed (the damage left it valid, or moved a source
/// out of reach, which makes the source absent), fail with a parse error naming the damaged file
/// and quoting its wrong text, or find no CPU (a valid but empty or disjoint CPU list: that
/// message gives the CPU sets' values, not their files).
#[test]
fn a_damaged_file_is_named_by_the_probe() {
    let originals: Vec<String> = DAMAGED_FILES
        .iter()
        .map(|d| {
            let path = vectors_dir().join(d.case).join(d.file);
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        })
        .collect();
    let copy = FixtureCopy::new(&[V1_CASE, V2_CASE]).expect("copying the fixtures");
    let (cases, named, undetermined) = (AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0));
    let mut runner = TestRunner::new(config());
    let outcome = runner.run(&(0..DAMAGED_FILES.len(), damage::mutations()), |(which, mutations)| {
        cases.fetch_add(1, Ordering::Relaxed);
        let damaged = &DAMAGED_FILES[which];
        let root = copy.root.join(damaged.case);
        let path = root.join(damaged.file);
        let write = |text: &str| {
            std::fs::write(path.as_path(), text)
                .map_err(|e| TestCaseError::fail(format!("writing {}: {e}", path.display())))
        };
        let mutant = damage::apply(&originals[which], damaged.separators, &mutations);
        write(&mutant.text)?;
        let detected = Probe::with_root(root).detect();
        write(&originals[which])?; // restored before judging: every case starts from the fixture
        let Err(error) = detected else { return Ok(()) };
        let message = error.to_string();
        match &error {
            cpus::Error::Parse { path: named_path, error: parse_error } => {
                if *named_path != path || !message.contains(&path.display().to_string()) {
                    return Err(TestCaseError::fail(format!(
                        "damaging {} to {:?} gave an error that does not name it: {message}",
                        damaged.file, mutant.text
                    )));
                }
                named.fetch_add(1, Ordering::Relaxed);
                check_error(damaged.format, parse_error, &mutant)
            }
            cpus::Error::Undetermined { .. } => {
                undetermined.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            _ => Err(TestCaseError::fail(format!(
                "damaging {} to {:?} gave an error other than a parse error: {message}",
                damaged.file, mutant.text
            ))),
        }
    });
    if let Err(failure) = outcome {
        panic!("cpus::Probe: {failure}");
    }
    eprintln!(
        "fuzz cpus::Probe: {} cases, 0 panics ({} damaged files named in a parse error, {} left no CPU)",
        cases.into_inner(),
        named.into_inner(),
        undetermined.into_inner()
    );
}

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/cpus")
}

/// Copies of fixture cases in Cargo's scratch directory for integration tests (under `target/`,
/// not a shared temporary directory), removed when dropped.
struct FixtureCopy {
    root: PathBuf,
}

impl FixtureCopy {
    fn new(cases: &[&str]) -> io::Result<FixtureCopy> {
        let root =
            Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("parsers-fuzz-{}", std::process::id()));
        // A copy left by an earlier run that had the same pid.
        if let Err(e) = std::fs::remove_dir_all(&root) {
            if e.kind() != io::ErrorKind::NotFound {
                return Err(e);
            }
        }
        let copy = FixtureCopy { root };
        for case in cases {
            copy_dir(&vectors_dir().join(case), &copy.root.join(case))?;
        }
        Ok(copy)
    }
}

impl Drop for FixtureCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn copy_dir(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

/// Generators of valid files, each with the values it holds, shaped like what the kernel prints.
mod valid {
    use super::Valid;
    use cotenant::internal::procfs::cgroup::Membership;
    use cotenant::internal::procfs::cgroupfs::{CpuStat, Quota};
    use cotenant::internal::procfs::cpulist::MAX_CPU_ID;
    use cotenant::internal::procfs::mountinfo::CgroupMount;
    use cotenant::internal::procfs::pidstat::PidStat;
    use cotenant::internal::procfs::schedstat::TaskSchedstat;
    use cotenant::internal::procfs::stat::{CpuTimes, Stat};
    use proptest::collection::{btree_set, vec};
    use proptest::option;
    use proptest::prelude::*;
    use proptest::sample::{select, subsequence};
    use std::collections::BTreeSet;

    /// A kernel counter: usually of an everyday size, sometimes anywhere in `u64`.
    fn counter() -> impl Strategy<Value = u64> {
        prop_oneof![3 => 0u64..100_000_000, 1 => any::<u64>()]
    }

    fn words(values: &[u64]) -> String {
        values.iter().map(u64::to_string).collect::<Vec<_>>().join(" ")
    }

    /// The fields of a `cpuN` line: at least 4 (old kernels print fewer than today's 10), and
    /// one more that a future kernel may add.
    const MIN_CPU_FIELDS: usize = 4;
    const MAX_CPU_FIELDS: usize = 11;
    const NS_PER_US: u64 = 1000;

    /// `/proc/stat`: the all-CPU line, up to 8 `cpuN` lines (ids with gaps, as offline CPUs
    /// leave, some near the highest id accepted), `intr`, and the optional counters.
    pub fn proc_stat() -> impl Strategy<Value = Valid<Stat>> {
        let first_id = prop_oneof![0u32..4, 60u32..70, (MAX_CPU_ID - 40)..=(MAX_CPU_ID - 30)];
        let cpu = (0u32..3, vec(counter(), MIN_CPU_FIELDS..=MAX_CPU_FIELDS));
        (
            first_id,
            vec(cpu, 1..=8),
            vec(counter(), 10),
            vec(0u64..1000, 0..30),
            option::of(counter()),
            (any::<u32>(), counter()),
            (option::of(0u64..5000), option::of(0u64..5000)),
            vec(counter(), 11),
        )
            .prop_map(
                |(first_id, cpus, all, intr, ctxt, (btime, processes), (running, blocked), softirq)| {
                    let mut lines = vec![format!("cpu  {}", words(&all))];
                    let mut per_cpu = Vec::new();
                    let mut id = first_id;
                    for (gap, fields) in cpus {
                        id += gap;
                        lines.push(format!("cpu{id} {}", words(&fields)));
                        let field = |i: usize| fields.get(i).copied().unwrap_or(0);
                        let times = CpuTimes {
                            user: field(0),
                            nice: field(1),
                            system: field(2),
                            idle: field(3),
                            iowait: field(4),
                            irq: field(5),
                            softirq: field(6),
                            steal: field(7),
                        };
                        per_cpu.push((id, times));
                        id += 1;
                    }
                    lines.push(format!("intr {} {}", intr.iter().sum::<u64>(), words(&intr)));
                    lines.extend(ctxt.map(|n| format!("ctxt {n}")));
                    lines.push(format!("btime {btime}"));
                    lines.push(format!("processes {processes}"));
                    lines.extend(running.map(|n| format!("procs_running {n}")));
                    lines.extend(blocked.map(|n| format!("procs_blocked {n}")));
                    lines.push(format!("softirq {}", words(&softirq)));
                    let expected = Stat {
                        per_cpu,
                        procs_running: running,
                        procs_blocked: blocked,
                        context_switches: ctxt,
                    };
                    Valid { text: lines.join("\n") + "\n", expected }
                },
            )
    }

    // The fields of `/proc/<pid>/stat` the parser reads (numbered from 1, as in proc(5)).
    const UTIME: usize = 14;
    const STIME: usize = 15;
    const NUM_THREADS: usize = 20;
    const PROCESSOR: usize = 39;
    /// proc(5) lists 52 fields; older kernels print fewer, at least up to `num_threads`.
    const LAST_FIELD: usize = 52;

    /// Command names: spaces and parentheses included, as `prctl(PR_SET_NAME)` allows.
    const COMM_CHARS: &[char] = &['a', 'k', 'z', 'A', '0', '9', ' ', '(', ')', '-', '_', '.', ':', '/', 'é'];
    const STATES: &[char] = &['R', 'S', 'D', 'Z', 'T', 't', 'X', 'I', 'P', 'W', 'K'];

    /// `/proc/<pid>/stat`: 20 to 52 fields; the ones not read hold any number, negative ones too
    /// (`tpgid` is -1 without a terminal, `nice` can be negative).
    pub fn pid_stat() -> impl Strategy<Value = Valid<PidStat>> {
        (
            1u32..=4_194_304,
            vec(select(COMM_CHARS), 0..=15),
            select(STATES),
            (any::<u64>(), any::<u64>()),
            1u64..=100_000,
            0u32..4096,
            vec(prop_oneof![-1i64..=1, 0i64..1_000_000, any::<i64>()], LAST_FIELD),
            NUM_THREADS..=LAST_FIELD,
        )
            .prop_map(|(pid, comm, state, (utime, stime), num_threads, processor, others, last)| {
                let comm: String = comm.into_iter().collect();
                let field = |n: usize| match n {
                    1 => pid.to_string(),
                    2 => format!("({comm})"),
                    3 => state.to_string(),
                    UTIME => utime.to_string(),
                    STIME => stime.to_string(),
                    NUM_THREADS => num_threads.to_string(),
                    PROCESSOR => processor.to_string(),
                    _ => others[n - 1].to_string(),
                };
                let text = (1..=last).map(field).collect::<Vec<_>>().join(" ") + "\n";
                let expected = PidStat {
                    comm,
                    state,
                    cpu_ticks: utime.saturating_add(stime),
                    num_threads,
                    processor: (last >= PROCESSOR).then_some(processor),
                };
                Valid { text, expected }
            })
    }

    /// Path names in mountinfo: the four characters the kernel escapes, and a non-ASCII one.
    const MOUNT_PATH_CHARS: &[char] =
        &['a', 'k', 'z', '0', '7', '.', '-', '_', ':', ',', ' ', '\t', '\n', '\\', 'é'];
    /// Cgroup names in `/proc/<pid>/cgroup`, which prints them unescaped.
    const CGROUP_NAME_CHARS: &[char] = &['a', 's', 'z', '0', '9', '.', '-', '_', '@', ':', ' ', '\\', 'é'];
    const ACCESS_MODES: &[&str] = &["rw", "ro"];
    const MOUNT_OPTIONS: &[&str] = &["nosuid", "nodev", "noexec", "relatime"];
    const OPTIONAL_FIELDS: &[&str] = &["shared:5", "master:12", "propagate_from:3", "unbindable"];
    const V1_CONTROLLERS: &[&str] = &[
        "cpu",
        "cpuacct",
        "cpuset",
        "memory",
        "blkio",
        "pids",
        "devices",
        "freezer",
        "net_cls",
        "net_prio",
        "perf_event",
        "hugetlb",
        "rdma",
        "misc",
    ];
    const V2_OPTIONS: &[&str] = &["nsdelegate", "memory_recursiveprot"];
    /// File systems that are not cgroups: fstype, source, super options (`cgroup2fs` is not
    /// `cgroup2`).
    const OTHER_FILESYSTEMS: &[(&str, &str, &str)] = &[
        ("tmpfs", "tmpfs", "rw,size=65536k,mode=755"),
        ("proc", "proc", "rw"),
        ("sysfs", "sysfs", "rw"),
        ("ext4", "/dev/sda1", "rw,errors=remount-ro"),
        ("overlay", "overlay", "rw,lowerdir=/l,upperdir=/u,workdir=/w"),
        ("cgroup2fs", "none", "rw"),
    ];

    /// `/`, or `/` and one to three names of `chars`.
    fn path_of(chars: &'static [char]) -> impl Strategy<Value = String> {
        vec(vec(select(chars), 1..8), 0..4).prop_map(|names| {
            let names: Vec<String> = names.into_iter().map(|name| name.into_iter().collect()).collect();
            format!("/{}", names.join("/"))
        })
    }

    /// A path as mountinfo prints it: space, tab, newline and backslash as octal escapes.
    fn escape_path(path: &str) -> String {
        path.chars()
            .map(|c| match c {
                ' ' | '\t' | '\n' | '\\' => format!("\\{:03o}", u32::from(c)),
                _ => c.to_string(),
            })
            .collect()
    }

    /// `rw` and then `rest`, as the kernel lists super options.
    fn read_write(rest: Vec<&'static str>) -> Vec<String> {
        std::iter::once("rw").chain(rest).map(str::to_owned).collect()
    }

    /// The part of a mountinfo line after ` - `.
    #[derive(Debug, Clone)]
    struct Filesystem {
        fstype: &'static str,
        source: &'static str,
        super_options: Vec<String>,
        /// For a cgroup file system, whether it is v2; `None` for any other.
        cgroup_v2: Option<bool>,
    }

    fn filesystem() -> impl Strategy<Value = Filesystem> {
        prop_oneof![
            3 => subsequence(V1_CONTROLLERS, 1..=3).prop_map(|controllers| Filesystem {
                fstype: "cgroup",
                source: "cgroup",
                super_options: read_write(controllers),
                cgroup_v2: Some(false),
            }),
            1 => Just(Filesystem {
                fstype: "cgroup",
                source: "cgroup",
                super_options: read_write(vec!["xattr", "name=systemd"]),
                cgroup_v2: Some(false),
            }),
            2 => subsequence(V2_OPTIONS, 0..=2).prop_map(|options| Filesystem {
                fstype: "cgroup2",
                source: "cgroup2",
                super_options: read_write(options),
                cgroup_v2: Some(true),
            }),
            3 => select(OTHER_FILESYSTEMS).prop_map(|(fstype, source, options)| Filesystem {
                fstype,
                source,
                super_options: options.split(',').map(str::to_owned).collect(),
                cgroup_v2: None,
            }),
        ]
    }

    /// One mountinfo line (without its newline), and the cgroup mount it describes if it is one.
    fn mount_line() -> impl Strategy<Value = (String, Option<CgroupMount>)> {
        (
            (1u32..10_000, 1u32..10_000, 0u32..300, 0u32..300),
            path_of(MOUNT_PATH_CHARS),
            path_of(MOUNT_PATH_CHARS),
            select(ACCESS_MODES),
            subsequence(MOUNT_OPTIONS, 0..=MOUNT_OPTIONS.len()),
            subsequence(OPTIONAL_FIELDS, 0..=2),
            filesystem(),
        )
            .prop_map(
                |((id, parent, major, minor), root, mount_point, access, options, optional, fs)| {
                    let mut fields = vec![
                        id.to_string(),
                        parent.to_string(),
                        format!("{major}:{minor}"),
                        escape_path(&root),
                        escape_path(&mount_point),
                        std::iter::once(access).chain(options).collect::<Vec<_>>().join(","),
                    ];
                    fields.extend(optional.into_iter().map(str::to_owned));
                    fields.extend([
                        "-".to_owned(),
                        fs.fstype.to_owned(),
                        fs.source.to_owned(),
                        fs.super_options.join(","),
                    ]);
                    let mount = fs.cgroup_v2.map(|is_v2| CgroupMount {
                        root,
                        mount_point,
                        is_v2,
                        super_options: fs.super_options,
                    });
                    (fields.join(" "), mount)
                },
            )
    }

    /// `/proc/<pid>/mountinfo`: up to 10 lines of cgroup v1, cgroup2 and other mounts.
    pub fn mountinfo() -> impl Strategy<Value = Valid<Vec<CgroupMount>>> {
        vec(mount_line(), 0..=10).prop_map(|lines| {
            let text = lines.iter().map(|(line, _)| format!("{line}\n")).collect();
            Valid { text, expected: lines.into_iter().filter_map(|(_, mount)| mount).collect() }
        })
    }

    /// A CPU id: mostly small, sometimes up to the highest accepted.
    fn cpu_id() -> impl Strategy<Value = u32> {
        prop_oneof![4 => 0u32..64, 2 => 0u32..4096, 1 => (MAX_CPU_ID - 300)..=MAX_CPU_ID]
    }

    fn cpu_ids() -> impl Strategy<Value = BTreeSet<u32>> {
        btree_set(cpu_id(), 0..40)
    }

    /// `ids` as the kernel prints a CPU list: increasing runs, `0-3,7`.
    fn kernel_cpu_list(ids: &BTreeSet<u32>) -> String {
        let mut runs: Vec<(u32, u32)> = Vec::new();
        for &id in ids {
            let n = runs.len();
            if n > 0 && runs[n - 1].1 + 1 == id {
                runs[n - 1].1 = id;
            } else {
                runs.push((id, id));
            }
        }
        let items: Vec<String> = runs
            .iter()
            .map(|&(lo, hi)| if lo == hi { lo.to_string() } else { format!("{lo}-{hi}") })
            .collect();
        items.join(",")
    }

    const LIST_SEPARATORS: &[&str] = &[",", ", ", " , "];
    const LIST_ENDINGS: &[&str] = &["", "\n", " \n"];

    /// A CPU list as the kernel prints it (an empty one included), or as a person may write it:
    /// items in any order, overlapping, with spaces.
    pub fn cpu_list() -> impl Strategy<Value = Valid<Vec<u32>>> {
        let item = (cpu_id(), prop_oneof![3 => Just(0u32), 1 => 1u32..200]);
        prop_oneof![
            cpu_ids().prop_map(|ids| Valid {
                text: kernel_cpu_list(&ids) + "\n",
                expected: ids.into_iter().collect()
            }),
            (vec(item, 1..8), select(LIST_SEPARATORS), select(LIST_ENDINGS)).prop_map(
                |(items, separator, ending)| {
                    let mut ids = BTreeSet::new();
                    let mut texts = Vec::new();
                    for (lo, extra) in items {
                        let hi = lo.saturating_add(extra).min(MAX_CPU_ID);
                        ids.extend(lo..=hi);
                        texts.push(if lo == hi { lo.to_string() } else { format!("{lo}-{hi}") });
                    }
                    Valid { text: texts.join(separator) + ending, expected: ids.into_iter().collect() }
                }
            ),
        ]
    }

    const PROCESS_NAMES: &[&str] = &["bash", "my app", "kworker/0:1", "(sd-pam)"];

    /// `/proc/<pid>/status`, with or without `Cpus_allowed_list`.
    pub fn status() -> impl Strategy<Value = Valid<Option<Vec<u32>>>> {
        (select(PROCESS_NAMES), 1u32..=4_194_304, 1u64..=1000, option::of(cpu_ids()), (counter(), counter()))
            .prop_map(|(name, pid, threads, allowed, (voluntary, involuntary))| {
                let mut lines: Vec<String> = vec![
                    format!("Name:\t{name}"),
                    "Umask:\t0022".into(),
                    "State:\tS (sleeping)".into(),
                    format!("Tgid:\t{pid}"),
                    format!("Pid:\t{pid}"),
                    "PPid:\t1".into(),
                    "Uid:\t0\t0\t0\t0".into(),
                    "Groups:\t".into(),
                    "VmRSS:\t    5120 kB".into(),
                    format!("Threads:\t{threads}"),
                    "SigQ:\t0/31409".into(),
                ];
                if let Some(ids) = &allowed {
                    // The mask of the first 64 CPUs only: the parser does not read this line.
                    let mask = ids.iter().filter(|&&id| id < 64).fold(0u64, |mask, &id| mask | (1u64 << id));
                    lines.push(format!("Cpus_allowed:\t{:08x},{:08x}", mask >> 32, mask & 0xffff_ffff));
                    lines.push(format!("Cpus_allowed_list:\t{}", kernel_cpu_list(ids)));
                }
                lines.push("Mems_allowed:\t00000000,00000001".into());
                lines.push("Mems_allowed_list:\t0".into());
                lines.push(format!("voluntary_ctxt_switches:\t{voluntary}"));
                lines.push(format!("nonvoluntary_ctxt_switches:\t{involuntary}"));
                Valid {
                    text: lines.join("\n") + "\n",
                    expected: allowed.map(|ids| ids.into_iter().collect()),
                }
            })
    }

    /// A period in µs: the kernel accepts 1 ms to 1 s; any positive number parses.
    fn period_us() -> impl Strategy<Value = u64> {
        prop_oneof![3 => 1000u64..=1_000_000, 1 => 1u64..=u64::MAX]
    }

    /// v2 `cpu.max`: `max <period>` or `<quota> <period>`.
    pub fn cpu_max() -> impl Strategy<Value = Valid<Option<Quota>>> {
        (option::of(counter()), period_us()).prop_map(|(quota, period_us)| {
            let text = match quota {
                None => format!("max {period_us}\n"),
                Some(q) => format!("{q} {period_us}\n"),
            };
            Valid { text, expected: quota.map(|quota_us| Quota { quota_us, period_us }) }
        })
    }

    /// v1 `cpu.cfs_quota_us`: `-1` or a quota.
    pub fn cfs_quota() -> impl Strategy<Value = Valid<Option<u64>>> {
        option::of(counter()).prop_map(|quota| {
            let text = match quota {
                None => "-1\n".to_owned(),
                Some(q) => format!("{q}\n"),
            };
            Valid { text, expected: quota }
        })
    }

    /// v1 `cpu.cfs_period_us`.
    pub fn cfs_period() -> impl Strategy<Value = Valid<u64>> {
        period_us().prop_map(|period| Valid { text: format!("{period}\n"), expected: period })
    }

    /// `cpu.weight`, `cpu.shares`, `cpu.max.burst`, `cpu.cfs_burst_us`: one number.
    pub fn cgroup_number() -> impl Strategy<Value = Valid<u64>> {
        prop_oneof![1u64..=10_000, 2u64..=262_144, any::<u64>()]
            .prop_map(|n| Valid { text: format!("{n}\n"), expected: n })
    }

    /// v1 `cpuacct.usage_percpu`: a number and a space per CPU.
    pub fn usage_percpu() -> impl Strategy<Value = Valid<Vec<u64>>> {
        vec(counter(), 1..=64).prop_map(|usage| Valid {
            text: usage.iter().map(|u| format!("{u} ")).collect::<String>() + "\n",
            expected: usage,
        })
    }

    /// `cpu.stat` of either version: v2's usage keys, the bandwidth keys (always in v1, in v2
    /// with the cpu controller enabled), the burst keys of newer kernels, v1's `wait_sum`.
    pub fn cpu_stat() -> impl Strategy<Value = Valid<CpuStat>> {
        (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>(), vec(counter(), 8)).prop_map(
            |(v2, bandwidth, burst, schedstats, n)| {
                let mut lines = Vec::new();
                let mut expected = CpuStat::default();
                if v2 {
                    lines.push(format!("usage_usec {}", n[0]));
                    lines.push(format!("user_usec {}", n[1]));
                    lines.push(format!("system_usec {}", n[2]));
                    lines.push("core_sched.force_idle_usec 0".to_owned());
                    expected.usage_ns = Some(n[0].saturating_mul(NS_PER_US));
                }
                if bandwidth || !v2 {
                    lines.push(format!("nr_periods {}", n[3]));
                    lines.push(format!("nr_throttled {}", n[4]));
                    let (key, throttled_ns) = if v2 {
                        ("throttled_usec", n[5].saturating_mul(NS_PER_US))
                    } else {
                        ("throttled_time", n[5])
                    };
                    lines.push(format!("{key} {}", n[5]));
                    expected = CpuStat { nr_periods: n[3], nr_throttled: n[4], throttled_ns, ..expected };
                    if burst {
                        lines.push(format!("nr_bursts {}", n[6]));
                        lines.push(format!("{} {}", if v2 { "burst_usec" } else { "burst_time" }, n[7]));
                    }
                }
                if schedstats && !v2 {
                    lines.push(format!("wait_sum {}", n[6]));
                }
                Valid { text: lines.join("\n") + "\n", expected }
            },
        )
    }

    /// `/proc/<pid>/cgroup`: v1 lines (ids from the highest down, as the kernel lists them),
    /// the v2 line, or both.
    pub fn proc_cgroup() -> impl Strategy<Value = Valid<Vec<Membership>>> {
        let controllers = prop_oneof![
            3 => subsequence(V1_CONTROLLERS, 1..=3),
            1 => Just(vec!["name=systemd"]),
        ];
        (vec((controllers, path_of(CGROUP_NAME_CHARS)), 0..=6), option::of(path_of(CGROUP_NAME_CHARS)))
            .prop_map(|(v1, v2)| {
                let count = v1.len();
                let mut memberships: Vec<Membership> = v1
                    .into_iter()
                    .enumerate()
                    .map(|(i, (controllers, path))| Membership {
                        hierarchy_id: (count - i) as u32,
                        controllers: controllers.into_iter().map(str::to_owned).collect(),
                        path,
                    })
                    .collect();
                memberships.extend(v2.map(|path| Membership {
                    hierarchy_id: 0,
                    controllers: Vec::new(),
                    path,
                }));
                let text = memberships
                    .iter()
                    .map(|m| format!("{}:{}:{}\n", m.hierarchy_id, m.controllers.join(","), m.path))
                    .collect();
                Valid { text, expected: memberships }
            })
    }

    /// `/proc/<pid>/task/<tid>/schedstat`: three numbers.
    pub fn task_schedstat() -> impl Strategy<Value = Valid<TaskSchedstat>> {
        (counter(), counter(), counter()).prop_map(|(on_cpu_ns, run_delay_ns, timeslices)| Valid {
            text: format!("{on_cpu_ns} {run_delay_ns} {timeslices}\n"),
            expected: TaskSchedstat { on_cpu_ns, run_delay_ns, timeslices },
        })
    }

    /// `/proc/loadavg`: three load averages, `running/total`, the last pid.
    pub fn loadavg() -> impl Strategy<Value = Valid<u64>> {
        (vec((0u32..200, 0u32..100), 3), 0u64..2000, 0u64..100_000, 1u32..=4_194_304).prop_map(
            |(loads, running, others, last_pid)| {
                let loads: Vec<String> =
                    loads.iter().map(|(whole, hundredths)| format!("{whole}.{hundredths:02}")).collect();
                let text = format!("{} {running}/{} {last_pid}\n", loads.join(" "), running + others);
                Valid { text, expected: running }
            },
        )
    }
}

/// Damage done to a valid file: to its values (the text between the format's separators), its
/// separators, its lines, or its characters.
mod damage {
    use proptest::collection::vec;
    use proptest::prelude::*;
    use proptest::sample::{select, Index};
    use std::ops::Range;

    /// At most this many mutations per file: one, so that the error can be checked for the
    /// wrong value, or a few, to reach what one does not.
    const MAX_MUTATIONS: usize = 3;

    /// Values that do not belong where they are put: past `u64`, `u32` or the highest CPU id;
    /// negative, signed, hexadecimal, fractional, non-ASCII digits; words, keys, the formats'
    /// separators, escapes, NUL. None holds white space, so an error's quote can be searched for
    /// it.
    const WRONG_VALUES: &[&str] = &[
        "18446744073709551616",
        "18446744073709551615",
        "4294967296",
        "65536",
        "99999999999999999999999999999999",
        "-1",
        "-0",
        "+5",
        "0",
        "00",
        "0x1f",
        "1e3",
        "1.5",
        "١٢",
        "NaN",
        "max",
        "banana",
        "cpu",
        "cpu0",
        "cpu99999999",
        "-",
        "--",
        "(",
        ")",
        ":",
        "::",
        ",",
        "/",
        "/..",
        "=",
        "\\040",
        "\\000",
        "\\",
        "é",
        "\0",
        "\u{feff}",
        "\u{fffd}",
    ];

    const DIGITS: &[char] = &['0', '1', '2', '3', '4', '5', '6', '7', '8', '9'];

    /// What a separator is changed into.
    const SEPARATORS: &[&str] =
        &["", " ", "  ", "\t", "\n", "\r\n", "\n\n", ",", ":", "-", "/", "\u{a0}", "\0"];

    /// Short strings of garbage worth inserting anywhere: line ends, Unicode white space,
    /// escapes, NUL, a replacement character.
    const NASTY: &[&str] = &[
        "\n", "\r\n", "\t", " ", "\0", "\u{a0}", "\u{85}", "\u{2028}", "\u{feff}", "\\", "\\04", "\\777",
        "(", ")", "-", ":", ",", "é", "\u{fffd}",
    ];

    /// One way of damaging a file. An index picks among what the file has (values, separators,
    /// lines, character positions); a mutation with nothing to act on leaves the file as it is.
    #[derive(Debug, Clone)]
    pub enum Mutation {
        /// Drops a value, and the separator after it unless it ends the line.
        DeleteValue(Index),
        /// Repeats a value after it (a field too many).
        DuplicateValue(Index),
        SwapValues(Index, Index),
        /// Puts a wrong value in place of one.
        ReplaceValue(Index, String),
        /// Adds a wrong value after one (a field too many).
        InsertValue(Index, String),
        ChangeSeparator(Index, &'static str),
        DeleteLine(Index),
        DuplicateLine(Index),
        /// Inserts bytes (made UTF-8 lossily) at a character boundary.
        InsertGarbage(Index, String),
        /// Cuts the file at a character boundary.
        Truncate(Index),
    }

    /// A damaged file, and where the wrong value is in it when the damage was one wrong value.
    pub struct Mutant {
        pub text: String,
        pub wrong_value: Option<Range<usize>>,
    }

    fn wrong_value() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => select(WRONG_VALUES).prop_map(|v: &'static str| v.to_owned()),
            1 => any::<u64>().prop_map(|n| n.to_string()),
            1 => any::<i64>().prop_map(|n| n.to_string()),
            1 => vec(select(DIGITS), 20..40).prop_map(|digits: Vec<char>| digits.into_iter().collect::<String>()),
        ]
    }

    fn garbage() -> impl Strategy<Value = String> {
        prop_oneof![
            vec(any::<u8>(), 1..12).prop_map(|bytes| String::from_utf8_lossy(&bytes).into_owned()),
            select(NASTY).prop_map(|g: &'static str| g.to_owned()),
        ]
    }

    fn mutation() -> impl Strategy<Value = Mutation> {
        prop_oneof![
            2 => any::<Index>().prop_map(Mutation::DeleteValue),
            1 => any::<Index>().prop_map(Mutation::DuplicateValue),
            1 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Mutation::SwapValues(a, b)),
            4 => (any::<Index>(), wrong_value()).prop_map(|(i, v)| Mutation::ReplaceValue(i, v)),
            2 => (any::<Index>(), wrong_value()).prop_map(|(i, v)| Mutation::InsertValue(i, v)),
            2 => (any::<Index>(), select(SEPARATORS)).prop_map(|(i, s)| Mutation::ChangeSeparator(i, s)),
            1 => any::<Index>().prop_map(Mutation::DeleteLine),
            1 => any::<Index>().prop_map(Mutation::DuplicateLine),
            2 => (any::<Index>(), garbage()).prop_map(|(i, g)| Mutation::InsertGarbage(i, g)),
            1 => any::<Index>().prop_map(Mutation::Truncate),
        ]
    }

    /// One to [`MAX_MUTATIONS`] mutations, applied in order.
    pub fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
        vec(mutation(), 1..=MAX_MUTATIONS)
    }

    /// `text` (whose values are separated by `separators`) after `mutations`. The wrong value's
    /// place is kept only after a single mutation: a later one may have moved or cut it.
    pub fn apply(text: &str, separators: &str, mutations: &[Mutation]) -> Mutant {
        let mut mutant = Mutant { text: text.to_owned(), wrong_value: None };
        for m in mutations {
            mutant = m.apply(&mutant.text, separators);
        }
        if mutations.len() > 1 {
            mutant.wrong_value = None;
        }
        mutant
    }

    /// A run of value characters or of separator characters.
    #[derive(Debug, Clone)]
    struct Token {
        text: String,
        is_separator: bool,
    }

    fn tokenize(text: &str, separators: &str) -> Vec<Token> {
        let mut tokens: Vec<Token> = Vec::new();
        for c in text.chars() {
            let is_separator = separators.contains(c);
            let n = tokens.len();
            if n > 0 && tokens[n - 1].is_separator == is_separator {
                tokens[n - 1].text.push(c);
            } else {
                tokens.push(Token { text: c.to_string(), is_separator });
            }
        }
        tokens
    }

    /// Joins `tokens`, noting where token `wrong` (the wrong value put in) ends up.
    fn join(tokens: &[Token], wrong: Option<usize>) -> Mutant {
        let mut text = String::new();
        let mut wrong_value = None;
        for (k, token) in tokens.iter().enumerate() {
            if Some(k) == wrong {
                wrong_value = Some(text.len()..text.len() + token.text.len());
            }
            text.push_str(&token.text);
        }
        Mutant { text, wrong_value }
    }

    /// The separator to put between value `k` and a value added after it: the one after it, else
    /// the one before it, unless that one ends a line; else a space.
    fn field_separator(tokens: &[Token], k: usize) -> Token {
        let within_line = |t: &&Token| t.is_separator && !t.text.contains('\n');
        let after = tokens.get(k + 1).filter(within_line);
        let before = k.checked_sub(1).and_then(|j| tokens.get(j)).filter(within_line);
        let text = match after.or(before) {
            Some(t) => t.text.clone(),
            None => " ".to_owned(),
        };
        Token { text, is_separator: true }
    }

    fn lines_of(text: &str) -> Vec<String> {
        text.split_inclusive('\n').map(str::to_owned).collect()
    }

    /// The byte offset of a character boundary of `text` (its end included).
    fn char_boundary(text: &str, at: Index) -> usize {
        let boundaries = text.chars().count() + 1;
        text.char_indices().map(|(offset, _)| offset).nth(at.index(boundaries)).unwrap_or(text.len())
    }

    /// The item of `among` that `i` picks; `None` when there is none to pick.
    fn pick(i: &Index, among: &[usize]) -> Option<usize> {
        if among.is_empty() {
            None
        } else {
            Some(among[i.index(among.len())])
        }
    }

    impl Mutation {
        fn apply(&self, text: &str, separators: &str) -> Mutant {
            let changed = |text: String| Mutant { text, wrong_value: None };
            match self {
                Mutation::DeleteLine(i) => {
                    let mut lines = lines_of(text);
                    if !lines.is_empty() {
                        lines.remove(i.index(lines.len()));
                    }
                    changed(lines.concat())
                }
                Mutation::DuplicateLine(i) => {
                    let mut lines = lines_of(text);
                    if !lines.is_empty() {
                        let k = i.index(lines.len());
                        let copy = lines[k].clone();
                        if !lines[k].ends_with('\n') {
                            lines[k].push('\n');
                        }
                        lines.insert(k + 1, copy);
                    }
                    changed(lines.concat())
                }
                Mutation::InsertGarbage(at, garbage) => {
                    let at = char_boundary(text, *at);
                    changed(format!("{}{garbage}{}", &text[..at], &text[at..]))
                }
                Mutation::Truncate(at) => changed(text[..char_boundary(text, *at)].to_owned()),
                Mutation::DeleteValue(_)
                | Mutation::DuplicateValue(_)
                | Mutation::SwapValues(..)
                | Mutation::ReplaceValue(..)
                | Mutation::InsertValue(..)
                | Mutation::ChangeSeparator(..) => {
                    let mut tokens = tokenize(text, separators);
                    let wrong = self.edit_tokens(&mut tokens);
                    join(&tokens, wrong)
                }
            }
        }

        /// Applies a value or separator mutation; returns the index of the token holding the
        /// wrong value it put in, if it put one in.
        fn edit_tokens(&self, tokens: &mut Vec<Token>) -> Option<usize> {
            let values: Vec<usize> = (0..tokens.len()).filter(|&k| !tokens[k].is_separator).collect();
            let separators: Vec<usize> = (0..tokens.len()).filter(|&k| tokens[k].is_separator).collect();
            match self {
                Mutation::DeleteValue(i) => {
                    let k = pick(i, &values)?;
                    tokens.remove(k);
                    if tokens.get(k).is_some_and(|t| t.is_separator && !t.text.contains('\n')) {
                        tokens.remove(k);
                    }
                    None
                }
                Mutation::DuplicateValue(i) => {
                    let k = pick(i, &values)?;
                    let (separator, copy) = (field_separator(tokens, k), tokens[k].clone());
                    tokens.insert(k + 1, separator);
                    tokens.insert(k + 2, copy);
                    None
                }
                Mutation::SwapValues(a, b) => {
                    let (ka, kb) = (pick(a, &values)?, pick(b, &values)?);
                    tokens.swap(ka, kb);
                    None
                }
                Mutation::ReplaceValue(i, wrong) => {
                    let k = pick(i, &values)?;
                    tokens[k].text.clone_from(wrong);
                    Some(k)
                }
                Mutation::InsertValue(i, wrong) => {
                    let k = pick(i, &values)?;
                    let separator = field_separator(tokens, k);
                    tokens.insert(k + 1, separator);
                    tokens.insert(k + 2, Token { text: wrong.clone(), is_separator: false });
                    Some(k + 2)
                }
                Mutation::ChangeSeparator(i, separator) => {
                    let k = pick(i, &separators)?;
                    tokens[k].text = String::from(*separator);
                    None
                }
                // Line and character mutations work on the text: see `apply`.
                Mutation::DeleteLine(_)
                | Mutation::DuplicateLine(_)
                | Mutation::InsertGarbage(..)
                | Mutation::Truncate(_) => None,
            }
        }
    }
}
