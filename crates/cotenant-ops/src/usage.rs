//! Usage errors found after clap has parsed the arguments (a combination of flags clap cannot
//! express with a message as useful, a value only a later check can refuse): [`UsageError`].
//! `main` exits with 2 for one, the code clap uses for its own usage errors.

use std::fmt;

/// A usage error found after parsing; its message names the argument at fault. Return it as
/// an `anyhow::Error` ([`bail`], or `?` on a `Result<_, UsageError>`): `main` prints it like
/// any other error, `cotenant: MESSAGE`, and exits with [`crate::exit::USAGE`] (2) instead of
/// [`crate::exit::FAILURE`] (1) when one is anywhere in the error's chain ([`is_usage`]),
/// `.context(...)` above it included.
#[derive(Debug)]
pub struct UsageError(String);

impl UsageError {
    /// A usage error saying `message` (which should name the argument, e.g. `--root DIR: not a
    /// directory`).
    pub fn new(message: impl fmt::Display) -> UsageError {
        UsageError(message.to_string())
    }
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// `Err` of a [`UsageError`] saying `message`: `return usage::bail(...)`, as `anyhow::bail!`
/// for other errors.
pub fn bail<T>(message: impl fmt::Display) -> anyhow::Result<T> {
    Err(UsageError::new(message).into())
}

/// Whether `err`, or any error in its chain, is a [`UsageError`]: the arguments, not the host
/// or the process asked about, are at fault.
pub fn is_usage(err: &anyhow::Error) -> bool {
    err.chain().any(|e| e.is::<UsageError>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context as _;

    #[test]
    fn a_usage_error_is_found_under_context_and_printed_unchanged() {
        let err: anyhow::Error = UsageError::new("--root /x: not a directory").into();
        assert!(is_usage(&err));
        assert_eq!(format!("{err:#}"), "--root /x: not a directory");
        let wrapped = Err::<(), _>(err).context("cotenant env").unwrap_err();
        assert!(is_usage(&wrapped));
        assert_eq!(format!("{wrapped:#}"), "cotenant env: --root /x: not a directory");
        let typed = Err::<(), _>(UsageError::new("--pid 0")).context("size").unwrap_err();
        assert!(is_usage(&typed));
    }

    #[test]
    fn bail_returns_a_usage_error() {
        let err = bail::<()>(format!("--root {}: not a directory", "/x")).unwrap_err();
        assert!(is_usage(&err));
        assert_eq!(err.to_string(), "--root /x: not a directory");
    }

    #[test]
    fn other_errors_are_failures() {
        assert!(!is_usage(&anyhow::anyhow!("cannot read /proc/4194304/stat")));
        let io = std::io::Error::from(std::io::ErrorKind::NotFound);
        assert!(!is_usage(&anyhow::Error::from(io).context("--root /x")));
    }
}
