//! `/proc/<pid>/status`: only `Cpus_allowed_list`, a process's affinity as another process
//! sees it (`sched_getaffinity(2)` answers for the caller's own threads only).

use super::{cpulist, cpulist::CpuSet, ParseError};

const FIELD: &str = "Cpus_allowed_list:";

/// The `Cpus_allowed_list` of a status file, or `None` when the field is absent.
pub fn parse_cpus_allowed(text: &str) -> Result<Option<CpuSet>, ParseError> {
    match text.lines().find_map(|l| l.strip_prefix(FIELD)) {
        None => Ok(None),
        Some(list) => cpulist::parse(list)
            .map(Some)
            .map_err(|e| ParseError::new("Cpus_allowed_list", e.reason.clone(), list.trim())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn finds_the_field() {
        let text = "Name:\tx\nCpus_allowed:\t3\nCpus_allowed_list:\t0-1\nMems_allowed_list:\t0\n";
        assert_eq!(parse_cpus_allowed(text).unwrap().unwrap().count(), 2);
        assert_eq!(parse_cpus_allowed("Name:\tx\n").unwrap(), None);
        assert!(parse_cpus_allowed("Cpus_allowed_list:\tz\n").is_err());
    }

    proptest! {
        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..100)) {
            let s = String::from_utf8_lossy(&bytes);
            let _ = parse_cpus_allowed(&s);
            let _ = parse_cpus_allowed(&format!("Cpus_allowed_list:{s}"));
        }
    }
}
