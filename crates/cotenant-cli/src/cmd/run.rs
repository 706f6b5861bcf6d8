//! `cotenant run` and `cotenant env`: compute the CPU count once and hand it to runtimes that
//! read nothing else, through the environment variables they already honour (seed 000 §3.2:
//! one language-independent answer). `run` then execs the command (same pid, so its exit
//! status and signals are the command's own); `env` prints `export` lines for shells and
//! container entrypoints.
//!
//! A wrapper must not stop what it wraps: when the count cannot be determined (an unreadable
//! or unexpected cgroup file), `run` execs the command unchanged and `env` prints nothing
//! (`eval "$(cotenant env)"` is then a no-op), each after one warning naming the file and the
//! reason. `--strict` refuses instead, with exit status 1.
//!
//! What to set is decided by [`plan`], a pure function of the count and the current
//! environment, so it is unit-tested without exec'ing anything. The variables and what reads
//! them are listed once, in [`VARIABLES`], which `docs/run.md` mirrors.

use std::ffi::{OsStr, OsString};
use std::io::Write as _;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Command, ExitCode};

use anyhow::Context as _;
use cotenant::cpus::{self, Probe};

use super::preload;
use crate::args::{CountArgs, EnvArgs, RunArgs};
use crate::exit;
use crate::usage::{self, UsageError};

const JAVA_OPTIONS: &str = "JAVA_TOOL_OPTIONS";
const JAVA_FLAG: &str = "-XX:ActiveProcessorCount=";

/// Every variable set to the count, and who reads it.
pub const VARIABLES: [(&str, &str); 13] = [
    ("COTENANT_CPUS", "cotenant's preload shim; scripts"),
    ("GOMAXPROCS", "Go runtime"),
    ("RAYON_NUM_THREADS", "Rust rayon (global pool)"),
    ("TOKIO_WORKER_THREADS", "Rust tokio (multi-thread runtime)"),
    ("OMP_NUM_THREADS", "OpenMP (gcc libgomp, LLVM libomp)"),
    ("OPENBLAS_NUM_THREADS", "OpenBLAS"),
    ("MKL_NUM_THREADS", "Intel MKL"),
    ("NUMEXPR_NUM_THREADS", "Python numexpr"),
    ("NUMBA_NUM_THREADS", "Python numba"),
    ("POLARS_MAX_THREADS", "Python/Rust polars"),
    ("JULIA_NUM_THREADS", "Julia"),
    ("DOTNET_PROCESSOR_COUNT", ".NET (6+)"),
    ("PYTHON_CPU_COUNT", "Python 3.13+ os.cpu_count() and os.process_cpu_count()"),
];

/// What happens to one variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Set to this value (it was unset, or `--force`).
    Set(OsString),
    /// Left as the user set it.
    Kept(OsString),
}

/// One line of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// The variable.
    pub name: &'static str,
    /// What to do with it.
    pub action: Action,
}

impl Setting {
    /// The value the command will see.
    pub fn value(&self) -> &OsStr {
        match &self.action {
            Action::Set(v) | Action::Kept(v) => v,
        }
    }
}

/// The settings for `count` given the current environment `get`: each variable of
/// [`VARIABLES`] is set unless the user set it (`force` overrides); `-XX:ActiveProcessorCount`
/// is appended to `JAVA_TOOL_OPTIONS` unless it is there already (`force` replaces it); with
/// `preload`, the shim is added to `LD_PRELOAD` (once).
pub fn plan(
    count: u32,
    get: impl Fn(&str) -> Option<OsString>,
    force: bool,
    preload: Option<&Path>,
) -> Vec<Setting> {
    let value = OsString::from(count.to_string());
    let mut out: Vec<Setting> = VARIABLES
        .iter()
        .map(|&(name, _)| {
            let action = match get(name) {
                Some(existing) if !force => Action::Kept(existing),
                _ => Action::Set(value.clone()),
            };
            Setting { name, action }
        })
        .collect();
    out.push(Setting { name: JAVA_OPTIONS, action: java_options(count, get(JAVA_OPTIONS), force) });
    if let Some(lib) = preload {
        out.push(Setting { name: "LD_PRELOAD", action: ld_preload(lib, get("LD_PRELOAD")) });
    }
    out
}

/// `JAVA_TOOL_OPTIONS` with `-XX:ActiveProcessorCount=N`: appended, kept if the user already
/// gave one, replaced with `force`.
fn java_options(count: u32, existing: Option<OsString>, force: bool) -> Action {
    let flag = format!("{JAVA_FLAG}{count}");
    let Some(existing) = existing.filter(|e| !e.is_empty()) else {
        return Action::Set(flag.into());
    };
    let text = existing.to_string_lossy();
    let has_flag = text.split_ascii_whitespace().any(|word| word.starts_with(JAVA_FLAG));
    match (has_flag, force) {
        (true, false) => Action::Kept(existing),
        (true, true) => {
            let words: Vec<String> = text
                .split_ascii_whitespace()
                .map(|w| if w.starts_with(JAVA_FLAG) { flag.clone() } else { w.to_owned() })
                .collect();
            Action::Set(words.join(" ").into())
        }
        (false, _) => {
            let mut v = existing;
            v.push(" ");
            v.push(&flag);
            Action::Set(v)
        }
    }
}

/// `LD_PRELOAD` with `lib` added in front (kept if it is there already). ld.so splits the list
/// on spaces and colons.
fn ld_preload(lib: &Path, existing: Option<OsString>) -> Action {
    let Some(existing) = existing.filter(|e| !e.is_empty()) else {
        return Action::Set(lib.as_os_str().to_owned());
    };
    let present = existing
        .as_bytes()
        .split(|b| *b == b':' || *b == b' ')
        .any(|entry| entry == lib.as_os_str().as_bytes());
    if present {
        return Action::Kept(existing);
    }
    let mut v = lib.as_os_str().to_owned();
    v.push(":");
    v.push(&existing);
    Action::Set(v)
}

/// The settings for this process, or, when the count cannot be determined and not
/// `--strict`, `None` after one warning on stderr: `what` names the subcommand and `fallback`
/// says what it does instead (e.g. `running sh unchanged`). With `--strict` that is an error.
fn settings(args: &CountArgs, what: &str, fallback: &str) -> anyhow::Result<Option<Vec<Setting>>> {
    let probe = match &args.root {
        Some(root) => {
            if !root.is_dir() {
                return usage::bail(format!("--root {}: not a directory", root.display()));
            }
            Probe::with_root(root)
        }
        None => Probe::system(),
    };
    let n = match probe.detect() {
        Ok(budget) => budget.threads(args.rounding.into()),
        Err(error) if args.strict => {
            return Err(error).context("cannot determine this process's CPU count");
        }
        Err(error) => {
            eprintln!(
                "cotenant {what}: warning: could not determine the CPU count ({}); {fallback}",
                why_undetermined(&error)
            );
            return Ok(None);
        }
    };
    // Where the shim comes from, the copy built into this executable included: `preload`.
    let lib = if args.preload { Some(preload::find_for_this_process()?) } else { None };
    Ok(Some(plan(n, |name| std::env::var_os(name), args.force, lib.as_deref())))
}

/// The file (or system call) and the reason, for the warning: `FILE: REASON`.
fn why_undetermined(undetermined: &cpus::Error) -> String {
    match undetermined {
        // Its own message is "cannot read FILE: ERROR"; the warning puts the file first.
        cpus::Error::Read { path, error } => format!("{}: {error}", path.display()),
        // Parse errors read "FILE: what was wrong, with the text"; the others name their source.
        other => other.to_string(),
    }
}

/// Quotes `value` for a POSIX shell (single quotes; a `'` becomes `'\''`).
pub fn shell_quote(value: &OsStr) -> String {
    let text = value.to_string_lossy();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./:=,+@%".contains(&b)) {
        return text.into_owned();
    }
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// `cotenant run`.
pub fn run(args: &RunArgs) -> anyhow::Result<ExitCode> {
    // clap requires CMD; this only keeps an empty list a usage error should that change.
    let (program, rest) = args
        .command
        .split_first()
        .ok_or_else(|| UsageError::new("no command given (usage: cotenant run -- CMD ARGS...)"))?;
    let shown = Path::new(program).display();
    let fallback = if args.print {
        format!("{shown} would run unchanged")
    } else {
        format!("running {shown} unchanged")
    };
    // No settings: the count could not be determined, and the command runs as it would have
    // without cotenant.
    let settings = settings(&args.count, "run", &fallback)?.unwrap_or_default();
    if args.print {
        let mut out = std::io::stdout().lock();
        for s in &settings {
            let note = if matches!(s.action, Action::Kept(_)) { "  # kept: already set" } else { "" };
            writeln!(out, "{}={}{note}", s.name, shell_quote(s.value()))?;
        }
        let words: Vec<String> = args.command.iter().map(|w| shell_quote(w)).collect();
        writeln!(out, "# would run: {}", words.join(" "))?;
        return Ok(ExitCode::from(exit::OK));
    }
    let mut command = Command::new(program);
    command.args(rest);
    for s in &settings {
        command.env(s.name, s.value());
    }
    // exec only returns on failure; the exit codes follow the shells' convention.
    let error = command.exec();
    let code = match error.kind() {
        std::io::ErrorKind::NotFound => exit::NOT_FOUND,
        _ => exit::CANNOT_EXECUTE,
    };
    eprintln!("cotenant: cannot run {shown}: {error}");
    Ok(ExitCode::from(code))
}

/// `cotenant env`.
pub fn env(args: &EnvArgs) -> anyhow::Result<ExitCode> {
    // No settings: no line at all, so that `eval "$(cotenant env)"` changes nothing.
    let settings = settings(&args.count, "env", "setting no variables")?.unwrap_or_default();
    let mut out = std::io::stdout().lock();
    for s in &settings {
        writeln!(out, "export {}={}", s.name, shell_quote(s.value()))?;
    }
    out.flush().context("writing to stdout")?;
    Ok(ExitCode::from(exit::OK))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::path::PathBuf;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let map: HashMap<String, OsString> =
            pairs.iter().map(|(k, v)| (k.to_string(), OsString::from(v))).collect();
        move |name| map.get(name).cloned()
    }

    fn value<'a>(plan: &'a [Setting], name: &str) -> &'a Action {
        &plan.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("{name} not in the plan")).action
    }

    #[test]
    fn every_variable_gets_the_count_when_unset() {
        let p = plan(3, env(&[]), false, None);
        for (name, _) in VARIABLES {
            assert_eq!(value(&p, name), &Action::Set("3".into()), "{name}");
        }
        assert_eq!(value(&p, "JAVA_TOOL_OPTIONS"), &Action::Set("-XX:ActiveProcessorCount=3".into()));
        assert!(p.iter().all(|s| s.name != "LD_PRELOAD"), "no LD_PRELOAD without --preload");
    }

    #[test]
    fn what_the_user_set_is_kept_unless_forced() {
        let e = [("GOMAXPROCS", "8"), ("JAVA_TOOL_OPTIONS", "-Xmx1g -XX:ActiveProcessorCount=8")];
        let p = plan(2, env(&e), false, None);
        assert_eq!(value(&p, "GOMAXPROCS"), &Action::Kept("8".into()));
        assert_eq!(value(&p, "JAVA_TOOL_OPTIONS"), &Action::Kept("-Xmx1g -XX:ActiveProcessorCount=8".into()));
        assert_eq!(value(&p, "OMP_NUM_THREADS"), &Action::Set("2".into()));
        let p = plan(2, env(&e), true, None);
        assert_eq!(value(&p, "GOMAXPROCS"), &Action::Set("2".into()));
        assert_eq!(value(&p, "JAVA_TOOL_OPTIONS"), &Action::Set("-Xmx1g -XX:ActiveProcessorCount=2".into()));
    }

    #[test]
    fn java_options_are_appended_to() {
        let p = plan(1, env(&[("JAVA_TOOL_OPTIONS", "-Xss2m")]), false, None);
        assert_eq!(value(&p, "JAVA_TOOL_OPTIONS"), &Action::Set("-Xss2m -XX:ActiveProcessorCount=1".into()));
    }

    #[test]
    fn the_shim_goes_first_in_ld_preload_and_only_once() {
        let lib = Path::new("/opt/cotenant/libcotenant_preload.so");
        let p = plan(1, env(&[]), false, Some(lib));
        assert_eq!(value(&p, "LD_PRELOAD"), &Action::Set(lib.into()));
        let p = plan(1, env(&[("LD_PRELOAD", "/lib/other.so")]), false, Some(lib));
        assert_eq!(
            value(&p, "LD_PRELOAD"),
            &Action::Set("/opt/cotenant/libcotenant_preload.so:/lib/other.so".into())
        );
        let both = "/lib/other.so /opt/cotenant/libcotenant_preload.so";
        let p = plan(1, env(&[("LD_PRELOAD", both)]), true, Some(lib));
        assert_eq!(value(&p, "LD_PRELOAD"), &Action::Kept(both.into()));
    }

    #[test]
    fn shell_quoting_survives_quotes_and_spaces() {
        assert_eq!(shell_quote(OsStr::new("4")), "4");
        assert_eq!(shell_quote(OsStr::new("-Xmx1g -XX:A=1")), "'-Xmx1g -XX:A=1'");
        assert_eq!(shell_quote(OsStr::new("it's")), "'it'\\''s'");
        assert_eq!(shell_quote(OsStr::new("")), "''");
    }

    #[test]
    fn the_warning_names_an_unreadable_file_and_the_reason() {
        let unreadable = cpus::Error::Read {
            path: PathBuf::from("/sys/fs/cgroup/app/cpu.max"),
            error: std::io::Error::from_raw_os_error(libc::EACCES),
        };
        let why = why_undetermined(&unreadable);
        assert!(why.starts_with("/sys/fs/cgroup/app/cpu.max: "), "{why}");
        assert!(why.contains(&std::io::Error::from_raw_os_error(libc::EACCES).to_string()), "{why}");
        let undetermined = cpus::Error::Undetermined { reason: "no CPU is online".into() };
        assert_eq!(why_undetermined(&undetermined), "no CPU is online");
    }
}
