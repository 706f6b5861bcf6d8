//! `/proc/stat`: each CPU's cumulative time by state, and the counts of runnable and blocked threads.
//!
//! A `cpuN` line is `cpuN user nice system idle iowait irq softirq steal guest guest_nice`, in
//! USER_HZ ticks since boot; the `cpu` line (no N) sums them over all CPUs. Kernels before 2.6.33
//! print fewer fields (at least the first four), and `guest` and `guest_nice` are already counted
//! in `user` and `nice`. See the kernel's Documentation/filesystems/proc.rst, "Miscellaneous
//! kernel statistics in /proc/stat".

use super::cpulist::MAX_CPU_ID;
use super::{parse_u64, ParseError};

const FORMAT: &str = "/proc/stat";

/// The key of a per-CPU line is this prefix followed by the CPU id (`cpu0`).
const CPU_PREFIX: &str = "cpu";
const PROCS_RUNNING: &str = "procs_running";
const PROCS_BLOCKED: &str = "procs_blocked";
const CONTEXT_SWITCHES: &str = "ctxt";

/// The fields of a `cpuN` line, in order. [`CpuTimes`] keeps the first eight.
const CPU_FIELDS: [&str; 10] =
    ["user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest", "guest_nice"];

/// How many fields every kernel prints: `user nice system idle`.
const MIN_CPU_FIELDS: usize = 4;

/// One CPU's cumulative time in each state since boot, in USER_HZ ticks (`sysconf(_SC_CLK_TCK)`,
/// almost always 100 per second).
///
/// The counters only grow, except that `iowait` (proc.rst says so) and, on some kernels, `idle`
/// may step back: take differences with `saturating_sub`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTimes {
    /// Running user code at normal priority, guest time included.
    pub user: u64,
    /// Running user code at lowered priority (nice > 0), niced guest time included.
    pub nice: u64,
    /// Running kernel code.
    pub system: u64,
    /// Idle with no I/O outstanding.
    pub idle: u64,
    /// Idle while I/O was outstanding; 0 on kernels that do not print it.
    pub iowait: u64,
    /// Servicing hardware interrupts; 0 on kernels that do not print it.
    pub irq: u64,
    /// Servicing softirqs; 0 on kernels that do not print it.
    pub softirq: u64,
    /// Stolen by the hypervisor to run other guests; 0 on kernels that do not print it.
    pub steal: u64,
}

impl CpuTimes {
    /// The time the CPU was not available to run more work: user + nice + system + irq +
    /// softirq + steal (guest time is already inside user and nice). Saturates at `u64::MAX`.
    pub fn busy(&self) -> u64 {
        [self.nice, self.system, self.irq, self.softirq, self.steal]
            .into_iter()
            .fold(self.user, u64::saturating_add)
    }

    /// The time the CPU was idle: idle + iowait. Saturates at `u64::MAX`.
    pub fn idle_total(&self) -> u64 {
        self.idle.saturating_add(self.iowait)
    }
}

/// What cotenant reads from `/proc/stat`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stat {
    /// Each `cpuN` line's CPU id and times, in file order (the kernel prints increasing ids). Only
    /// online CPUs have a line, so the ids may have gaps (`cpu0`, `cpu2`).
    pub per_cpu: Vec<(u32, CpuTimes)>,
    /// Threads runnable right now (`procs_running`); `None` when the line is absent.
    pub procs_running: Option<u64>,
    /// Threads blocked waiting for I/O right now (`procs_blocked`); `None` when the line is absent.
    pub procs_blocked: Option<u64>,
    /// Context switches on all CPUs since boot (`ctxt`); `None` when the line is absent.
    pub context_switches: Option<u64>,
}

/// Parses the whole file: the `cpuN` lines, `ctxt`, `procs_running` and `procs_blocked`. Every
/// other line (the all-CPU `cpu` line, `intr`, `btime`, `processes`, `softirq`, ...) is ignored
/// unread. A text with no `cpuN` line is an error.
pub fn parse(text: &str) -> Result<Stat, ParseError> {
    let mut stat = Stat::default();
    for line in text.lines() {
        let trimmed = line.trim();
        let (key, rest) = trimmed.split_once(|c: char| c.is_ascii_whitespace()).unwrap_or((trimmed, ""));
        match key {
            PROCS_RUNNING => stat.procs_running = Some(number(key, rest, line)?),
            PROCS_BLOCKED => stat.procs_blocked = Some(number(key, rest, line)?),
            CONTEXT_SWITCHES => stat.context_switches = Some(number(key, rest, line)?),
            _ => {
                if let Some(id) = cpu_id(key, line)? {
                    stat.per_cpu.push((id, parse_times(rest, line)?));
                }
            }
        }
    }
    if stat.per_cpu.is_empty() {
        return Err(ParseError::new(FORMAT, "no per-CPU (cpuN) line", text));
    }
    Ok(stat)
}

/// The N of a `cpuN` key; `None` for any other key, the all-CPU `cpu` included.
fn cpu_id(key: &str, line: &str) -> Result<Option<u32>, ParseError> {
    let Some(digits) = key.strip_prefix(CPU_PREFIX) else {
        return Ok(None);
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(None);
    }
    match digits.parse::<u32>() {
        Ok(id) if id <= MAX_CPU_ID => Ok(Some(id)),
        _ => Err(ParseError::new(
            FORMAT,
            format!("CPU id {digits} exceeds the supported maximum {MAX_CPU_ID}"),
            line,
        )),
    }
}

/// Parses the numbers after `cpuN`. Fields after `guest_nice`, which a future kernel might add,
/// must be numbers but are otherwise ignored.
fn parse_times(fields: &str, line: &str) -> Result<CpuTimes, ParseError> {
    let mut times = [0u64; 8];
    let mut count = 0;
    for (i, field) in fields.split_ascii_whitespace().enumerate() {
        let value = number(CPU_FIELDS.get(i).copied().unwrap_or("extra field"), field, line)?;
        if let Some(slot) = times.get_mut(i) {
            *slot = value;
        }
        count = i + 1;
    }
    if count < MIN_CPU_FIELDS {
        let required = CPU_FIELDS[..MIN_CPU_FIELDS].join(" ");
        return Err(ParseError::new(
            FORMAT,
            format!("expected at least {MIN_CPU_FIELDS} times ({required}), found {count}"),
            line,
        ));
    }
    let [user, nice, system, idle, iowait, irq, softirq, steal] = times;
    Ok(CpuTimes { user, nice, system, idle, iowait, irq, softirq, steal })
}

/// Parses field `what` of `line`; the error repeats the whole line.
fn number(what: &str, field: &str, line: &str) -> Result<u64, ParseError> {
    parse_u64(FORMAT, what, field).map_err(|e| ParseError::new(FORMAT, e.reason, line))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const EXCERPT: &str = "\
cpu  46129 0 27725 712857 1683 0 129 52 0 0
cpu0 21656 0 11139 361125 301 0 21 23 0 0
cpu1 24472 0 16585 351732 1381 0 107 29 0 0
intr 123 4 5
ctxt 26180429
btime 1700000000
processes 12345
procs_running 1
procs_blocked 0
softirq 3307 0 1019 2 135 0 0 1 1263 0 887
";

    #[test]
    fn parses_a_real_excerpt() {
        let stat = parse(EXCERPT).unwrap();
        assert_eq!(stat.per_cpu.iter().map(|(id, _)| *id).collect::<Vec<_>>(), vec![0, 1]);
        let cpu0 = stat.per_cpu[0].1;
        let expected = CpuTimes {
            user: 21656,
            nice: 0,
            system: 11139,
            idle: 361125,
            iowait: 301,
            irq: 0,
            softirq: 21,
            steal: 23,
        };
        assert_eq!(cpu0, expected);
        assert_eq!(cpu0.busy(), 21656 + 11139 + 21 + 23);
        assert_eq!(cpu0.idle_total(), 361125 + 301);
        let cpu1 = stat.per_cpu[1].1;
        assert_eq!((cpu1.busy(), cpu1.idle_total()), (24472 + 16585 + 107 + 29, 351732 + 1381));
        assert_eq!((stat.procs_running, stat.procs_blocked), (Some(1), Some(0)));
        assert_eq!(stat.context_switches, Some(26180429));
    }

    #[test]
    fn keeps_gaps_in_cpu_ids() {
        let stat = parse("cpu  2 0 2 8\ncpu0 1 0 1 4\ncpu2 1 0 1 4\n").unwrap();
        assert_eq!(stat.per_cpu.iter().map(|(id, _)| *id).collect::<Vec<_>>(), vec![0, 2]);
        assert_eq!((stat.procs_running, stat.procs_blocked, stat.context_switches), (None, None, None));
    }

    #[test]
    fn old_kernels_print_fewer_fields() {
        let stat = parse("cpu0 1 2 3 4\ncpu1 1 2 3 4 5 6 7\n").unwrap();
        let cpu0 = CpuTimes { user: 1, nice: 2, system: 3, idle: 4, ..CpuTimes::default() };
        assert_eq!(stat.per_cpu[0].1, cpu0);
        let cpu1 = stat.per_cpu[1].1;
        assert_eq!((cpu1.iowait, cpu1.irq, cpu1.softirq, cpu1.steal), (5, 6, 7, 0));
    }

    #[test]
    fn ignores_other_lines_unread() {
        let text = "cpu  not numbers\ncpu0 1 2 3 4 5 6 7 8 9 10 11\nintr x y\nsoftirq z\ncpufreq q\n\n";
        let stat = parse(text).unwrap();
        assert_eq!(stat.per_cpu.len(), 1);
        assert_eq!(stat.per_cpu[0].1.steal, 8);
    }

    #[test]
    fn rejects_malformed_lines_naming_them() {
        for (bad, what) in [
            ("cpu0 1 2 3", "at least 4"),
            ("cpu1 1 x 3 4", "nice"),
            ("cpu2 1 2 3 4 5 6 7 8 -9", "guest is not"),
            ("cpu3 1 2 3 4 5 6 7 8 9 10 1.5", "extra field"),
            ("cpu99999999 1 2 3 4", "maximum"),
            ("procs_running many", "procs_running"),
            ("procs_blocked", "procs_blocked"),
            ("procs_running 1 2", "procs_running"),
            ("ctxt -1", "ctxt"),
        ] {
            let err = parse(&format!("cpu0 1 2 3 4\n{bad}\nintr 1\n")).unwrap_err();
            assert_eq!(err.excerpt(), bad, "{err}");
            assert!(err.to_string().contains(what), "{err}");
        }
        assert!(parse("cpu  1 2 3 4\nintr 1\n").unwrap_err().to_string().contains("no per-CPU"));
        assert!(parse("").is_err());
    }

    #[test]
    fn sums_saturate() {
        let t = CpuTimes { user: u64::MAX, system: 1, idle: u64::MAX, iowait: 1, ..CpuTimes::default() };
        assert_eq!((t.busy(), t.idle_total()), (u64::MAX, u64::MAX));
    }

    proptest! {
        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(stat) = parse(&String::from_utf8_lossy(&bytes)) {
                for (_, t) in stat.per_cpu { let _ = (t.busy(), t.idle_total()); }
            }
        }

        #[test]
        fn never_panics_on_line_shaped_input(
            key in "cpu[0-9]{0,12}|procs_running|procs_blocked|intr",
            rest in "[0-9 \\-a-z]{0,60}",
        ) {
            let _ = parse(&format!("cpu0 1 2 3 4\n{key} {rest}\n"));
        }

        #[test]
        fn well_formed_lines_round_trip(
            id in 0..=MAX_CPU_ID,
            values in proptest::collection::vec(any::<u64>(), MIN_CPU_FIELDS..=CPU_FIELDS.len()),
        ) {
            let line = values.iter().map(u64::to_string).collect::<Vec<_>>().join(" ");
            let stat = parse(&format!("cpu  1 2 3 4\ncpu{id} {line}\nprocs_running 3\n")).unwrap();
            prop_assert_eq!(stat.per_cpu.len(), 1);
            let (got_id, t) = stat.per_cpu[0];
            prop_assert_eq!(got_id, id);
            let got = [t.user, t.nice, t.system, t.idle, t.iowait, t.irq, t.softirq, t.steal];
            for (i, g) in got.into_iter().enumerate() {
                prop_assert_eq!(g, values.get(i).copied().unwrap_or(0));
            }
            prop_assert_eq!(stat.procs_running, Some(3));
        }
    }
}
