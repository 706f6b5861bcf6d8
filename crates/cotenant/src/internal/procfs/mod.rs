//! Pure parsers for the `/proc` and cgroup-fs formats cotenant reads: one file per format, no I/O.
//!
//! Every parser has the shape `&str -> Result<T, ParseError>`. They never panic, whatever the
//! input (each has a proptest that feeds it arbitrary text), and their errors carry the offending
//! text so that the caller, which knows the file, can say what was wrong and where.

pub mod cgroup;
pub mod cgroupfs;
pub mod cpulist;
pub mod loadavg;
pub mod mountinfo;
pub mod pidstat;
pub mod schedstat;
pub mod stat;
pub mod status;

use std::fmt;

/// The longest excerpt of offending input an error message repeats.
const MAX_EXCERPT_CHARS: usize = 80;

/// A file's text did not have the expected format.
///
/// It says which format was expected, what was wrong, and repeats (a bounded excerpt of) the
/// offending text. It does not know the file's path: `cpus::Error` adds that.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    format: &'static str,
    reason: String,
    excerpt: String,
}

impl ParseError {
    /// An error in a text of format `format` (e.g. `"cpu.max"`): `reason` says what was wrong,
    /// `offending` is the text it was found in.
    pub fn new(format: &'static str, reason: impl Into<String>, offending: &str) -> Self {
        let offending = offending.trim_end();
        let mut excerpt: String = offending.chars().take(MAX_EXCERPT_CHARS).collect();
        if offending.chars().nth(MAX_EXCERPT_CHARS).is_some() {
            excerpt.push('…');
        }
        ParseError { format, reason: reason.into(), excerpt }
    }

    /// The format that was expected, e.g. `"cpu.max"`.
    pub fn format(&self) -> &'static str {
        self.format
    }

    /// The (possibly shortened) offending text.
    pub fn excerpt(&self) -> &str {
        &self.excerpt
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "not a valid {}: {} in {:?}", self.format, self.reason, self.excerpt)
    }
}

impl std::error::Error for ParseError {}

/// Parses a decimal unsigned integer with nothing around it but ASCII white space.
pub(crate) fn parse_u64(format: &'static str, what: &str, text: &str) -> Result<u64, ParseError> {
    let t = text.trim();
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ParseError::new(format, format!("{what} is not a non-negative integer"), text));
    }
    t.parse::<u64>().map_err(|_| ParseError::new(format, format!("{what} is too large"), text))
}
