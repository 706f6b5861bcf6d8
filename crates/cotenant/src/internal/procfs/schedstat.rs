//! `/proc/<pid>/task/<tid>/schedstat`: a thread's time on a CPU and waiting for one.
//!
//! The file is three numbers, `<ns on a CPU> <ns waiting on a run queue> <timeslices>` (the
//! kernel's Documentation/scheduler/sched-stats.rst); `/proc/<pid>/schedstat` has the same
//! format. A kernel that keeps no scheduler statistics prints `0 0 0`.

use super::{parse_u64, ParseError};

const FORMAT: &str = "/proc/<pid>/task/<tid>/schedstat";

// The three fields, in order, as error messages name them.
const ON_CPU: &str = "time on a CPU";
const RUN_DELAY: &str = "run-queue wait";
const TIMESLICES: &str = "timeslice count";

/// One thread's cumulative scheduler statistics since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TaskSchedstat {
    /// Time spent running on a CPU, in ns.
    pub on_cpu_ns: u64,
    /// Time spent runnable but waiting on a run queue for a CPU, in ns.
    pub run_delay_ns: u64,
    /// The number of timeslices run on a CPU (times the thread was switched in).
    pub timeslices: u64,
}

/// Parses the whole file: exactly three non-negative numbers separated by white space.
pub fn parse_task(text: &str) -> Result<TaskSchedstat, ParseError> {
    let mut fields = text.split_ascii_whitespace();
    let (Some(on_cpu), Some(run_delay), Some(timeslices), None) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return Err(ParseError::new(FORMAT, "expected \"<on-cpu ns> <run-delay ns> <timeslices>\"", text));
    };
    Ok(TaskSchedstat {
        on_cpu_ns: number(ON_CPU, on_cpu, text)?,
        run_delay_ns: number(RUN_DELAY, run_delay, text)?,
        timeslices: number(TIMESLICES, timeslices, text)?,
    })
}

/// Parses field `what`; the error repeats the whole text.
fn number(what: &str, field: &str, text: &str) -> Result<u64, ParseError> {
    parse_u64(FORMAT, what, field).map_err(|e| ParseError::new(FORMAT, e.reason, text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_the_three_fields() {
        let s = parse_task("1520334412 48211075 2113\n").unwrap();
        assert_eq!(s, TaskSchedstat { on_cpu_ns: 1520334412, run_delay_ns: 48211075, timeslices: 2113 });
        assert_eq!(parse_task("0 0 0\n").unwrap(), TaskSchedstat::default());
    }

    #[test]
    fn rejects_malformed_text_naming_it() {
        for (bad, what) in [
            ("", "expected"),
            ("1 2", "expected"),
            ("1 2 3 4", "expected"),
            ("x 2 3", ON_CPU),
            ("1 -2 3", RUN_DELAY),
            ("1 2 99999999999999999999", TIMESLICES),
        ] {
            let err = parse_task(bad).unwrap_err();
            assert_eq!(err.format(), FORMAT);
            assert_eq!(err.excerpt(), bad, "{err}");
            assert!(err.to_string().contains(what), "{err}");
        }
    }

    proptest! {
        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = parse_task(&String::from_utf8_lossy(&bytes));
        }

        #[test]
        fn well_formed_text_round_trips(a in any::<u64>(), b in any::<u64>(), c in any::<u64>()) {
            let got = parse_task(&format!("{a} {b} {c}\n")).unwrap();
            prop_assert_eq!(got, TaskSchedstat { on_cpu_ns: a, run_delay_ns: b, timeslices: c });
        }
    }
}
