//! The status record: what a process's pools publish for `cotenant top` and the doctor, and the
//! one parser every reader uses. Pure: text in, text out; the controller writes the file
//! (`pool/control/status.rs`), `super::status_scan` reads the folder (for `cotenant top`, the
//! doctor and the pools' own sweep).
//!
//! One file per process, `<pid>.status`, in a folder of this user's own ([`dir_from`]), written
//! whole to a temporary file and renamed over the record, so a reader never sees half of one.
//! No daemon keeps it: a process that dies leaves its last record behind, and a reader tells a
//! live writer from a dead one (or from a new process that got the same pid) by the start time
//! in the record, field 22 of `/proc/<pid>/stat` ([`start_time_from_stat`]). A pid means
//! something only in its PID namespace, which the record names too ([`pid_ns_from_link`]): a
//! reader in another one (containers sharing `/dev/shm` but not their processes) cannot tell
//! whether the writer lives, and leaves the record alone.
//!
//! The text: a version line, the process's `key=value` lines, then one `[pool]` block per pool.
//! Values are escaped (`\\`, `\n`, `\r`), so a pool's name cannot break a line. A reader skips
//! keys and sections it does not know (a newer writer may add them); a known key with a bad
//! value, or a line that is neither a key nor a section, is an error naming the file and the
//! line. An incompatible change would bump [`VERSION`]; fields are only ever added.
//!
//! ```text
//! cotenant-status 1
//! pid=4242
//! start_time=1234567
//! pid_ns=4026531836
//! comm=api-server
//! written_ns=98765432100
//! publish_failures=0
//!
//! [pool]
//! name=cpu-work
//! policy=adaptive(tokens)
//! threads=4
//! target=2
//! ...
//! ```

use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The format's version: the number after [`HEADER`] on the first line.
pub const VERSION: u32 = 1;
/// The first word of a record.
pub const HEADER: &str = "cotenant-status";
/// The file name of a record: `<pid>` and this.
pub const SUFFIX: &str = ".status";
/// The file name of a record being written: `.<pid>` and this (hidden, never read as a record).
pub const TEMP_SUFFIX: &str = ".status.tmp";
/// Environment variable: `off` (or `0`, `false`, `no`) turns publishing off for the process.
pub const STATUS_ENV: &str = "COTENANT_STATUS";
/// Environment variable: the folder records go to instead of the default (an absolute path;
/// `cotenant top` reads the same one unless `--dir` says otherwise).
pub const STATUS_DIR_ENV: &str = "COTENANT_STATUS_DIR";
/// How often at most a process writes its record while it has pools.
pub const PUBLISH_EVERY: Duration = Duration::from_millis(500);
/// A file larger than this is not a record (readers refuse it without reading it all).
pub const MAX_RECORD_BYTES: u64 = 1 << 20;
/// Where records go by default: a memory file system every process of the host sees.
pub const DEV_SHM: &str = "/dev/shm";

/// One process's record.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProcessRecord {
    /// The writer's pid.
    pub pid: u32,
    /// Its start time: field 22 of `/proc/<pid>/stat` (clock ticks after boot).
    pub start_time: u64,
    /// Its PID namespace (the inode of `/proc/<pid>/ns/pid`), if it could be read.
    pub pid_ns: Option<u64>,
    /// Its command name (`/proc/<pid>/stat` field 2, as at the first record).
    pub comm: String,
    /// `CLOCK_MONOTONIC` when it was written, in nanoseconds (0: unknown).
    pub written_ns: u64,
    /// Records this process failed to write before this one.
    pub publish_failures: u64,
    /// Its pools, in the order they were built.
    pub pools: Vec<PoolRecord>,
}

/// One pool in a [`ProcessRecord`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PoolRecord {
    /// The pool's name (`Builder::name`).
    pub name: String,
    /// Its policy, as `Policy` displays it (`adaptive`, `adaptive(tokens)`, `fixed(4)`, ...).
    pub policy: String,
    /// Its OS threads (for an elastic pool: the threads alive now).
    pub threads: u64,
    /// Workers allowed to run.
    pub target: u64,
    /// Workers running tasks.
    pub running: u64,
    /// Tasks waiting in its queue.
    pub queued: u64,
    /// Tasks completed so far.
    pub completed: u64,
    /// Its host-token state: `off`, `unavailable`, `alone` or `engaged` (`TokenState::as_str`).
    pub tokens: String,
    /// The token set it shares, if any.
    pub token_set: Option<String>,
    /// That set's tokens.
    pub token_count: Option<u32>,
    /// Its workers holding a token now.
    pub token_holds: u64,
    /// Its workers waiting for a token now (`None`: not known to the writer).
    pub token_waits: Option<u64>,
    /// The 99th percentile of its tasks' queue wait since it started, in nanoseconds (`None`:
    /// its histograms are off; `u64::MAX`: above the histogram's last bound).
    pub p99_queue_wait_ns: Option<u64>,
}

/// A record that could not be read: the file, the line (1-based; 0 for the whole text) and
/// what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordError {
    /// The file (as the caller named it).
    pub file: String,
    /// The offending line, from 1; 0 when no one line is at fault.
    pub line: usize,
    /// What was wrong.
    pub reason: String,
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: not a cotenant status record: {}", self.file, self.reason)
        } else {
            write!(f, "{}: line {}: {}", self.file, self.line, self.reason)
        }
    }
}

impl std::error::Error for RecordError {}

/// The record's file name for `pid`.
pub fn file_name(pid: u32) -> String {
    format!("{pid}{SUFFIX}")
}

/// The temporary file's name for `pid` (renamed over [`file_name`] once written).
pub fn temp_file_name(pid: u32) -> String {
    format!(".{pid}{TEMP_SUFFIX}")
}

/// The pid of a record's file name (`4242.status`), `None` for any other name.
pub fn pid_of_file_name(name: &str) -> Option<u32> {
    parse_pid(name.strip_suffix(SUFFIX)?)
}

/// The pid of a temporary file's name (`.4242.status.tmp`), `None` for any other name.
pub fn pid_of_temp_file_name(name: &str) -> Option<u32> {
    parse_pid(name.strip_prefix('.')?.strip_suffix(TEMP_SUFFIX)?)
}

/// Digits only (no sign, no spaces), and not 0.
fn parse_pid(digits: &str) -> Option<u32> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|&pid| pid != 0)
}

/// Whether a value of [`STATUS_ENV`] turns publishing off; `Err` for a value that says
/// neither (the caller warns and leaves it on).
pub fn env_says_off(value: &str) -> Result<bool, String> {
    crate::env_switch::parse(STATUS_ENV, value, true).map(|on| !on)
}

/// The folder of user `uid`'s records: [`STATUS_DIR_ENV`]'s value (`env_dir`) when set, else
/// `/dev/shm/cotenant-status-<uid>` where `/dev/shm` exists (`dev_shm`), else
/// `$XDG_RUNTIME_DIR/cotenant-status` (`runtime_dir`, the user's own folder on systemd hosts),
/// else none (`Ok(None)`: nothing is published). A relative path in either variable is an
/// error: it would name a different folder for every working directory.
pub fn dir_from(
    uid: u32,
    env_dir: Option<&OsStr>,
    runtime_dir: Option<&OsStr>,
    dev_shm: bool,
) -> Result<Option<PathBuf>, String> {
    if let Some(dir) = env_dir.filter(|d| !d.is_empty()) {
        let dir = Path::new(dir);
        if !dir.is_absolute() {
            return Err(format!("{STATUS_DIR_ENV}={} is not an absolute path", dir.display()));
        }
        return Ok(Some(dir.to_path_buf()));
    }
    if dev_shm {
        return Ok(Some(Path::new(DEV_SHM).join(format!("cotenant-status-{uid}"))));
    }
    match runtime_dir.filter(|d| !d.is_empty()) {
        Some(dir) if Path::new(dir).is_absolute() => Ok(Some(Path::new(dir).join("cotenant-status"))),
        Some(dir) => Err(format!("XDG_RUNTIME_DIR={} is not an absolute path", Path::new(dir).display())),
        None => Ok(None),
    }
}

/// Field 22 of a `/proc/<pid>/stat` line, the process's start time in clock ticks after boot
/// (counted after the last `)`: the command name may hold spaces and parentheses); `None` if
/// the line is too short or the field not a number.
pub fn start_time_from_stat(text: &str) -> Option<u64> {
    // Field 3 is the first after the command name: field 22 is the 20th word after it.
    let rest = &text[text.rfind(')')? + 1..];
    rest.split_ascii_whitespace().nth(22 - 3)?.parse().ok()
}

/// The namespace number of a `/proc/<pid>/ns/pid` link's target (`pid:[4026531836]`).
pub fn pid_ns_from_link(target: &str) -> Option<u64> {
    target.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
}

/// Escapes a value so that it fits on one line.
fn escape(value: &str, out: &mut String) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
}

/// The inverse of [`escape`]; `Err` names a bad escape.
fn unescape(value: &str) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('\\') => out.push('\\'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some(other) => return Err(format!("unknown escape \\{other}")),
            None => return Err("a value ends in a lone \\".into()),
        }
    }
    Ok(out)
}

/// The record as text (the format of the module documentation).
pub fn render(record: &ProcessRecord) -> String {
    let mut out = String::with_capacity(256 + 320 * record.pools.len());
    let line = |out: &mut String, key: &str, value: &str| {
        out.push_str(key);
        out.push('=');
        escape(value, out);
        out.push('\n');
    };
    out.push_str(&format!("{HEADER} {VERSION}\n"));
    line(&mut out, "pid", &record.pid.to_string());
    line(&mut out, "start_time", &record.start_time.to_string());
    if let Some(ns) = record.pid_ns {
        line(&mut out, "pid_ns", &ns.to_string());
    }
    line(&mut out, "comm", &record.comm);
    line(&mut out, "written_ns", &record.written_ns.to_string());
    line(&mut out, "publish_failures", &record.publish_failures.to_string());
    for pool in &record.pools {
        out.push_str("\n[pool]\n");
        line(&mut out, "name", &pool.name);
        line(&mut out, "policy", &pool.policy);
        line(&mut out, "threads", &pool.threads.to_string());
        line(&mut out, "target", &pool.target.to_string());
        line(&mut out, "running", &pool.running.to_string());
        line(&mut out, "queued", &pool.queued.to_string());
        line(&mut out, "completed", &pool.completed.to_string());
        line(&mut out, "tokens", &pool.tokens);
        if let Some(set) = &pool.token_set {
            line(&mut out, "token_set", set);
        }
        if let Some(count) = pool.token_count {
            line(&mut out, "token_count", &count.to_string());
        }
        line(&mut out, "token_holds", &pool.token_holds.to_string());
        if let Some(waits) = pool.token_waits {
            line(&mut out, "token_waits", &waits.to_string());
        }
        if let Some(p99) = pool.p99_queue_wait_ns {
            line(&mut out, "p99_queue_wait_ns", &p99.to_string());
        }
    }
    out
}

/// Which part of the record a line belongs to.
enum Section {
    Process,
    Pool,
    /// A section a newer writer added: its keys are skipped.
    Unknown,
}

/// Parses a record read from `file` (named in errors). Unknown keys and sections are skipped;
/// `pid` and `start_time` are required (a reader cannot tell a live writer without them).
pub fn parse(file: &str, text: &str) -> Result<ProcessRecord, RecordError> {
    let error = |line: usize, reason: String| RecordError { file: file.to_owned(), line, reason };
    let mut lines = text.lines().enumerate().map(|(index, line)| (index + 1, line));
    let (_, first) = lines.next().ok_or_else(|| error(0, "the file is empty".into()))?;
    let version = first
        .strip_prefix(HEADER)
        .and_then(|rest| rest.strip_prefix(' '))
        .ok_or_else(|| error(1, format!("expected \"{HEADER} {VERSION}\", found {first:?}")))?;
    match version.trim().parse::<u32>() {
        Ok(VERSION) => {}
        Ok(other) => return Err(error(1, format!("version {other}; this cotenant reads version {VERSION}"))),
        Err(_) => return Err(error(1, format!("{version:?} is not a version number"))),
    }
    let mut record = ProcessRecord::default();
    let (mut pid, mut start_time) = (None, None);
    let mut section = Section::Process;
    for (number, raw) in lines {
        let line = raw.trim_end_matches('\r');
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|rest| rest.strip_suffix(']')) {
            section = if name == "pool" {
                record.pools.push(PoolRecord::default());
                Section::Pool
            } else {
                Section::Unknown
            };
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            return Err(error(number, format!("expected key=value or [section], found {line:?}")));
        };
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(error(number, format!("{key:?} is not a key")));
        }
        let value = unescape(value).map_err(|why| error(number, format!("{key}: {why}")))?;
        let number_of = |value: &str| -> Result<u64, RecordError> {
            value.parse::<u64>().map_err(|_| error(number, format!("{key}={value:?} is not a whole number")))
        };
        match section {
            Section::Unknown => {}
            Section::Process => match key {
                "pid" => {
                    let value = u32::try_from(number_of(&value)?)
                        .ok()
                        .filter(|&p| p != 0)
                        .ok_or_else(|| error(number, format!("pid={value} is not a process id")))?;
                    pid = Some(value);
                }
                "start_time" => start_time = Some(number_of(&value)?),
                "pid_ns" => record.pid_ns = Some(number_of(&value)?),
                "comm" => record.comm = value,
                "written_ns" => record.written_ns = number_of(&value)?,
                "publish_failures" => record.publish_failures = number_of(&value)?,
                _ => {}
            },
            Section::Pool => {
                let pool = record.pools.last_mut().expect("a [pool] line pushed it");
                match key {
                    "name" => pool.name = value,
                    "policy" => pool.policy = value,
                    "threads" => pool.threads = number_of(&value)?,
                    "target" => pool.target = number_of(&value)?,
                    "running" => pool.running = number_of(&value)?,
                    "queued" => pool.queued = number_of(&value)?,
                    "completed" => pool.completed = number_of(&value)?,
                    "tokens" => pool.tokens = value,
                    "token_set" => pool.token_set = Some(value),
                    "token_count" => {
                        let count = u32::try_from(number_of(&value)?)
                            .map_err(|_| error(number, format!("token_count={value} is too large")))?;
                        pool.token_count = Some(count);
                    }
                    "token_holds" => pool.token_holds = number_of(&value)?,
                    "token_waits" => pool.token_waits = Some(number_of(&value)?),
                    "p99_queue_wait_ns" => pool.p99_queue_wait_ns = Some(number_of(&value)?),
                    _ => {}
                }
            }
        }
    }
    record.pid = pid.ok_or_else(|| error(0, "no pid= line".into()))?;
    record.start_time = start_time.ok_or_else(|| error(0, "no start_time= line".into()))?;
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record as a process with two pools writes it (recorded from `render`).
    const RECORDED: &str = "cotenant-status 1
pid=4242
start_time=123456
pid_ns=4026531836
comm=api server
written_ns=987654321
publish_failures=2

[pool]
name=cpu
policy=adaptive(tokens)
threads=4
target=2
running=1
queued=7
completed=1000
tokens=engaged
token_set=web
token_count=4
token_holds=1
token_waits=3
p99_queue_wait_ns=250000

[pool]
name=line\\nbreak \\\\ back
policy=fixed(1)
threads=1
target=1
running=0
queued=0
completed=5
tokens=off
token_holds=0
";

    fn two_pools() -> ProcessRecord {
        ProcessRecord {
            pid: 4242,
            start_time: 123456,
            pid_ns: Some(4_026_531_836),
            comm: "api server".into(),
            written_ns: 987_654_321,
            publish_failures: 2,
            pools: vec![
                PoolRecord {
                    name: "cpu".into(),
                    policy: "adaptive(tokens)".into(),
                    threads: 4,
                    target: 2,
                    running: 1,
                    queued: 7,
                    completed: 1000,
                    tokens: "engaged".into(),
                    token_set: Some("web".into()),
                    token_count: Some(4),
                    token_holds: 1,
                    token_waits: Some(3),
                    p99_queue_wait_ns: Some(250_000),
                },
                PoolRecord {
                    name: "line\nbreak \\ back".into(),
                    policy: "fixed(1)".into(),
                    threads: 1,
                    target: 1,
                    completed: 5,
                    tokens: "off".into(),
                    ..PoolRecord::default()
                },
            ],
        }
    }

    #[test]
    fn a_recorded_record_parses_and_renders_back_to_the_same_text() {
        assert_eq!(parse("4242.status", RECORDED).unwrap(), two_pools());
        assert_eq!(render(&two_pools()), RECORDED);
    }

    #[test]
    fn unknown_keys_and_sections_are_skipped() {
        let text = "cotenant-status 1\npid=7\nstart_time=9\nnew_key=whatever\n\n[pool]\nname=a\nfancy=1\n\
                    [host]\nname=not a pool\n# a comment\n";
        let record = parse("7.status", text).unwrap();
        assert_eq!((record.pid, record.start_time), (7, 9));
        assert_eq!(record.pools.len(), 1);
        assert_eq!(record.pools[0].name, "a", "the [host] section's name is not the pool's");
        assert_eq!(record.pools[0].token_waits, None);
    }

    #[test]
    fn a_malformed_record_is_an_error_naming_the_file_and_the_line() {
        let cases = [
            ("", 0, "empty"),
            ("cotenant-status 2\npid=1\nstart_time=1\n", 1, "version 2"),
            ("something else\n", 1, "expected"),
            ("cotenant-status 1\npid=1\nstart_time=1\nthis line has no equals sign\n", 4, "key=value"),
            ("cotenant-status 1\npid=-3\nstart_time=1\n", 2, "whole number"),
            ("cotenant-status 1\npid=0\nstart_time=1\n", 2, "not a process id"),
            ("cotenant-status 1\npid=1\nstart_time=1\n[pool]\nthreads=many\n", 5, "threads=\"many\""),
            ("cotenant-status 1\npid=1\nstart_time=1\n[pool]\nname=a\\x\n", 5, "unknown escape"),
            ("cotenant-status 1\npid=1\n", 0, "no start_time"),
        ];
        for (text, line, words) in cases {
            let error = parse("/dev/shm/x/1.status", text).unwrap_err();
            assert_eq!(error.line, line, "{text:?}: {error}");
            let message = error.to_string();
            assert!(message.starts_with("/dev/shm/x/1.status"), "{message}");
            assert!(message.contains(words), "{text:?}: {message}");
        }
    }

    #[test]
    fn a_record_cut_anywhere_never_panics_the_parser() {
        for end in 0..RECORDED.len() {
            if RECORDED.is_char_boundary(end) {
                let _ = parse("cut", &RECORDED[..end]);
            }
        }
    }

    #[test]
    fn the_start_time_is_field_22_counted_after_the_last_parenthesis() {
        let stat = "4242 (my (odd) app) S 1 4242 4242 0 -1 4194560 100 0 0 0 150 50 0 0 20 0 3 0 \
                    7654321 1000000 100 18446744073709551615 1 1 0 0\n";
        assert_eq!(start_time_from_stat(stat), Some(7_654_321));
        assert_eq!(start_time_from_stat("4242 (short) S 1 2 3\n"), None);
        assert_eq!(start_time_from_stat("no parenthesis at all"), None);
    }

    #[test]
    fn the_pid_namespace_is_read_from_the_link_s_target() {
        assert_eq!(pid_ns_from_link("pid:[4026531836]"), Some(4_026_531_836));
        for other in ["net:[4026531836]", "pid:[x]", "pid:4026531836", ""] {
            assert_eq!(pid_ns_from_link(other), None, "{other}");
        }
    }

    #[test]
    fn file_names_carry_the_pid_and_nothing_else_is_taken_for_a_record() {
        assert_eq!(file_name(42), "42.status");
        assert_eq!(pid_of_file_name("42.status"), Some(42));
        assert_eq!(temp_file_name(42), ".42.status.tmp");
        assert_eq!(pid_of_temp_file_name(".42.status.tmp"), Some(42));
        for other in
            ["+42.status", "42.status.tmp", ".42.status.tmp", "0.status", "x.status", ".status", "42"]
        {
            assert_eq!(pid_of_file_name(other), None, "{other}");
        }
        assert_eq!(pid_of_temp_file_name("42.status.tmp"), None);
    }

    #[test]
    fn the_folder_is_the_environment_s_then_dev_shm_then_the_runtime_dir() {
        let os = |s: &'static str| Some(OsStr::new(s));
        assert_eq!(dir_from(7, os("/srv/st"), os("/run/user/7"), true), Ok(Some(PathBuf::from("/srv/st"))));
        assert_eq!(
            dir_from(7, None, os("/run/user/7"), true),
            Ok(Some(PathBuf::from("/dev/shm/cotenant-status-7")))
        );
        assert_eq!(
            dir_from(7, os(""), os("/run/user/7"), false),
            Ok(Some(PathBuf::from("/run/user/7/cotenant-status")))
        );
        assert_eq!(dir_from(7, None, None, false), Ok(None));
        assert!(dir_from(7, os("relative"), None, true).unwrap_err().contains("COTENANT_STATUS_DIR"));
        assert!(dir_from(7, None, os("run"), false).unwrap_err().contains("XDG_RUNTIME_DIR"));
    }

    #[test]
    fn the_switch_reads_the_usual_words() {
        assert_eq!(env_says_off("off"), Ok(true));
        assert_eq!(env_says_off(" No "), Ok(true));
        assert_eq!(env_says_off("on"), Ok(false));
        assert_eq!(env_says_off(""), Ok(false));
        assert!(env_says_off("maybe").unwrap_err().contains("COTENANT_STATUS"));
    }
}
