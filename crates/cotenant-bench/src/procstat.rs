//! `procstat`: the per-thread and per-process CPU-time numbers this benchmark reads from `/proc`,
//! parsed from text (no I/O here).

/// Fields of a `/proc/<pid>/stat` line are numbered from 1; the text after the command name's
/// closing parenthesis starts at field 3 (`state`).
const FIRST_FIELD_AFTER_COMM: usize = 3;
/// `utime`: user-mode CPU time, in clock ticks. `stime` (system-mode) follows it.
const UTIME_FIELD: usize = 14;

/// `utime + stime` (fields 14 and 15), in clock ticks, of a `/proc/<pid>/stat` or
/// `/proc/<pid>/task/<tid>/stat` line; `None` if the line is cut short or not numeric.
///
/// The command name (field 2) is in parentheses and may itself hold spaces and parentheses, so
/// fields are counted from the **last** `)`.
pub fn cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace().skip(UTIME_FIELD - FIRST_FIELD_AFTER_COMM);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    utime.checked_add(stime)
}

/// The first field of `/proc/<pid>/task/<tid>/schedstat`: the nanoseconds the thread has spent on
/// a CPU. Finer than [`cpu_ticks`], but only present on kernels built with `CONFIG_SCHED_INFO`.
pub fn schedstat_run_ns(schedstat: &str) -> Option<u64> {
    schedstat.split_ascii_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_counts_fields_after_the_last_parenthesis() {
        // utime (field 14) = 250, stime (field 15) = 75; the name holds spaces and parentheses.
        let line = "42 (my (odd) name) S 1 42 42 0 -1 4194304 100 0 0 0 250 75 3 4 20 0 1 0 123\n";
        assert_eq!(cpu_ticks(line), Some(325));
    }

    #[test]
    fn cpu_ticks_rejects_short_or_garbled_lines() {
        assert_eq!(cpu_ticks("42 (x) S 1 2 3"), None);
        assert_eq!(cpu_ticks("no parenthesis at all"), None);
        assert_eq!(cpu_ticks("42 (x) S 1 42 42 0 -1 0 0 0 0 0 abc 75"), None);
    }

    #[test]
    fn schedstat_takes_the_run_time() {
        assert_eq!(schedstat_run_ns("123456789 2000 17\n"), Some(123_456_789));
        assert_eq!(schedstat_run_ns(""), None);
    }
}
