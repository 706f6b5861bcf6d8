//! `/proc/<pid>/stat` and `/proc/<pid>/task/<tid>/stat`: one line of space-separated fields
//! (proc(5)). Field 2, the command name, is in parentheses and may itself hold spaces and
//! parentheses, so the fields after it are counted from the **last** `)`.

use super::{parse_u64, ParseError};

const FORMAT: &str = "/proc/<pid>/stat";

/// Fields are numbered from 1 (proc(5)); the text after the command name starts at field 3.
const FIRST_FIELD_AFTER_COMM: usize = 3;

/// The fields cotenant uses.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PidStat {
    /// The command name (field 2, without the parentheses).
    pub comm: String,
    /// The state (field 3): `R` running or runnable, `S` sleeping, `D` in uninterruptible
    /// wait (usually I/O), ...
    pub state: char,
    /// utime + stime (fields 14, 15), in clock ticks.
    pub cpu_ticks: u64,
    /// Field 20.
    pub num_threads: u64,
    /// Field 39: the CPU it last ran on (`None` when the line is too short to have it).
    pub processor: Option<u32>,
}

impl PidStat {
    /// Whether the thread is blocked: sleeping (`S`) or in an uninterruptible wait (`D`),
    /// neither running nor waiting for a CPU.
    pub fn is_blocked(&self) -> bool {
        matches!(self.state, 'S' | 'D')
    }
}

/// Parses the line; fields 3 to 20 must be there, 39 may be missing.
pub fn parse(text: &str) -> Result<PidStat, ParseError> {
    let bad = |reason: String| ParseError::new(FORMAT, reason, text);
    let open = text.find('(').ok_or_else(|| bad("no '(' before the command name".into()))?;
    let close = text.rfind(')').ok_or_else(|| bad("no ')' after the command name".into()))?;
    if close < open {
        return Err(bad("')' before '('".into()));
    }
    let comm = text[open + 1..close].to_owned();
    // rest[0] is field 3: field n is rest[n - 3].
    let rest: Vec<&str> = text[close + 1..].split_ascii_whitespace().collect();
    let field = |n: usize| -> Result<u64, ParseError> {
        let what = format!("field {n}");
        let value = rest.get(n - FIRST_FIELD_AFTER_COMM).ok_or_else(|| bad(format!("no {what}")))?;
        parse_u64(FORMAT, &what, value).map_err(|e| bad(e.reason))
    };
    let state =
        rest.first().and_then(|s| s.chars().next()).ok_or_else(|| bad("no field 3 (state)".into()))?;
    let cpu_ticks = field(14)?.saturating_add(field(15)?);
    let num_threads = field(20)?;
    let processor = field(39).ok().and_then(|p| u32::try_from(p).ok());
    Ok(PidStat { comm, state, cpu_ticks, num_threads, processor })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const STAT: &str = "4242 (my (odd) app) R 1 4242 4242 0 -1 4194560 100 0 0 0 150 50 0 0 20 0 3 0 \
                        1000 1000000 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";

    #[test]
    fn counts_fields_after_the_last_parenthesis() {
        let s = parse(STAT).unwrap();
        assert_eq!(
            s,
            PidStat {
                comm: "my (odd) app".into(),
                state: 'R',
                cpu_ticks: 200,
                num_threads: 3,
                processor: Some(1)
            }
        );
        assert!(!s.is_blocked());
        assert!(parse(&STAT.replace(") R ", ") S ")).unwrap().is_blocked());
        assert!(parse(&STAT.replace(") R ", ") D ")).unwrap().is_blocked());
    }

    #[test]
    fn rejects_malformed_text_naming_it() {
        for (bad, what) in [
            ("", "no '('"),
            ("1 (x) R 1 2", "no field 14"),
            (") x (", "')' before '('"),
            ("1 (x)", "no field 3"),
            ("1 (x) R 1 1 1 0 -1 4 1 0 0 0 x 50 0 0 20 0 3", "field 14 is not"),
        ] {
            let err = parse(bad).unwrap_err();
            assert_eq!(err.format(), FORMAT);
            assert!(err.to_string().contains(what), "{bad:?}: {err}");
        }
    }

    proptest! {
        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse(&String::from_utf8_lossy(&bytes));
        }
    }
}
