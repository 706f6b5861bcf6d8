//! `/proc/loadavg`: load averages and the runnable-task count (`nr_running/nr_threads`), the
//! cheapest source of `procs_running` (`/proc/stat` also has it, but generating `/proc/stat`
//! costs tens of microseconds on hosts with many interrupts; proc(5)).

use super::{parse_u64, ParseError};

const FORMAT: &str = "/proc/loadavg";
/// Field index of `running/total`.
const FIELD_TASKS: usize = 3;

/// Runnable tasks (including the reader) from the fourth field of `/proc/loadavg`.
pub fn parse_running(text: &str) -> Result<u64, ParseError> {
    let field = text
        .split_ascii_whitespace()
        .nth(FIELD_TASKS)
        .ok_or_else(|| ParseError::new(FORMAT, "fewer than 4 fields", text))?;
    let (running, total) = field
        .split_once('/')
        .ok_or_else(|| ParseError::new(FORMAT, "the tasks field is not running/total", text))?;
    parse_u64(FORMAT, "total", total)?;
    parse_u64(FORMAT, "running", running)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_the_running_tasks() {
        assert_eq!(parse_running("0.00 0.01 0.05 3/123 4567\n").unwrap(), 3);
    }

    #[test]
    fn rejects_malformed_text_saying_why() {
        assert!(parse_running("0.00 0.01\n").unwrap_err().to_string().contains("fewer than 4 fields"));
        assert!(parse_running("0 0 0 3-123 1").unwrap_err().to_string().contains("running/total"));
        assert!(parse_running("0 0 0 x/123 1").unwrap_err().to_string().contains("running is not"));
    }

    proptest! {
        #[test]
        fn arbitrary_text_never_panics(text in ".*") {
            let _ = parse_running(&text);
        }
    }
}
