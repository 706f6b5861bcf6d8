//! CPU lists (`"0-3,7"`) as found in `/sys/devices/system/cpu/online`, `cpuset.effective_cpus`,
//! `cpuset.cpus.effective` and `Cpus_allowed_list`, and the `CpuSet` they describe.

use super::ParseError;

/// The highest CPU id cotenant accepts. Linux's `NR_CPUS` tops out at 8192; the margin keeps
/// future hosts working while stopping a corrupt list from allocating gigabytes.
pub const MAX_CPU_ID: u32 = (1 << 16) - 1;

const FORMAT: &str = "CPU list";

/// A set of CPU ids, as a bit mask.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuSet {
    words: Vec<u64>,
}

impl CpuSet {
    /// The empty set.
    pub fn new() -> Self {
        CpuSet::default()
    }

    /// Adds CPU `id`; ids above [`MAX_CPU_ID`] are ignored.
    pub fn insert(&mut self, id: u32) {
        if id > MAX_CPU_ID {
            return;
        }
        let word = (id / 64) as usize;
        if self.words.len() <= word {
            self.words.resize(word + 1, 0);
        }
        self.words[word] |= 1 << (id % 64);
    }

    /// Whether CPU `id` is in the set.
    pub fn contains(&self, id: u32) -> bool {
        self.words.get((id / 64) as usize).is_some_and(|w| w & (1 << (id % 64)) != 0)
    }

    /// The number of CPUs in the set.
    pub fn count(&self) -> u32 {
        self.words.iter().map(|w| w.count_ones()).sum()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// The CPUs in both sets.
    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        let mut words: Vec<u64> = self.words.iter().zip(&other.words).map(|(a, b)| a & b).collect();
        while words.last() == Some(&0) {
            words.pop();
        }
        CpuSet { words }
    }

    /// Builds a set from a bit mask laid out as `sched_getaffinity(2)` fills it (CPU `i` is bit
    /// `i % 64` of word `i / 64`).
    pub fn from_mask_words(words: &[u64]) -> CpuSet {
        let mut words: Vec<u64> = words.iter().take((MAX_CPU_ID as usize + 1) / 64).copied().collect();
        while words.last() == Some(&0) {
            words.pop();
        }
        CpuSet { words }
    }

    /// The CPU ids in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.words
            .iter()
            .enumerate()
            .flat_map(|(i, &w)| (0..64u32).filter(move |b| w & (1 << b) != 0).map(move |b| i as u32 * 64 + b))
    }
}

impl std::fmt::Display for CpuSet {
    /// Formats the set as the kernel does: `0-3,7`; the empty set as an empty string.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut first = true;
        let mut run: Option<(u32, u32)> = None;
        let mut flush = |f: &mut std::fmt::Formatter<'_>, (lo, hi): (u32, u32)| {
            let sep = if first { "" } else { "," };
            first = false;
            if lo == hi {
                write!(f, "{sep}{lo}")
            } else {
                write!(f, "{sep}{lo}-{hi}")
            }
        };
        for id in self.iter() {
            run = match run {
                Some((lo, hi)) if hi + 1 == id => Some((lo, id)),
                Some(r) => {
                    flush(f, r)?;
                    Some((id, id))
                }
                None => Some((id, id)),
            };
        }
        if let Some(r) = run {
            flush(f, r)?;
        }
        Ok(())
    }
}

/// Parses a kernel CPU list as the kernel prints it: comma-separated ids and inclusive ranges
/// (`0-3,7`). Surrounding white space and an empty list (an empty cpuset) are allowed.
pub fn parse(text: &str) -> Result<CpuSet, ParseError> {
    let mut set = CpuSet::new();
    let body = text.trim();
    if body.is_empty() {
        return Ok(set);
    }
    for item in body.split(',') {
        let range = item.trim();
        let (lo, hi) = match range.split_once('-') {
            Some((lo, hi)) => (parse_id(lo, text)?, parse_id(hi, text)?),
            None => {
                let id = parse_id(range, text)?;
                (id, id)
            }
        };
        if lo > hi {
            return Err(ParseError::new(FORMAT, format!("range {lo}-{hi} is reversed"), text));
        }
        for id in lo..=hi {
            set.insert(id);
        }
    }
    Ok(set)
}

fn parse_id(s: &str, text: &str) -> Result<u32, ParseError> {
    let s = s.trim();
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ParseError::new(FORMAT, format!("{s:?} is not a CPU id"), text));
    }
    match s.parse::<u32>() {
        Ok(id) if id <= MAX_CPU_ID => Ok(id),
        _ => Err(ParseError::new(
            FORMAT,
            format!("CPU id {s} exceeds the supported maximum {MAX_CPU_ID}"),
            text,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_ranges_and_singles() {
        let set = parse("0-3,7,10-11\n").unwrap();
        assert_eq!(set.iter().collect::<Vec<_>>(), vec![0, 1, 2, 3, 7, 10, 11]);
        assert_eq!(set.count(), 7);
        assert_eq!(set.to_string(), "0-3,7,10-11");
    }

    #[test]
    fn empty_list_is_an_empty_set() {
        assert!(parse("\n").unwrap().is_empty());
        assert_eq!(parse("").unwrap().to_string(), "");
    }

    #[test]
    fn rejects_malformed_lists_with_the_text() {
        for bad in ["0-", "a", "3-1", "1,,2", "0-99999999", "-1", "0-7:2"] {
            let err = parse(bad).unwrap_err();
            assert_eq!(err.excerpt(), bad, "{err}");
        }
    }

    #[test]
    fn intersection_and_mask_round_trip() {
        let a = parse("0-5").unwrap();
        let b = CpuSet::from_mask_words(&[0b1010_1000, 0]);
        assert_eq!(a.intersection(&b).to_string(), "3,5");
        assert_eq!(b.intersection(&a), a.intersection(&b));
        assert!(parse("64").unwrap().contains(64));
        assert!(!parse("64").unwrap().contains(0));
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,40}") {
            let _ = parse(&s);
        }

        #[test]
        fn display_round_trips(ids in proptest::collection::btree_set(0u32..300, 0..40)) {
            let mut set = CpuSet::new();
            for &id in &ids { set.insert(id); }
            let again = parse(&set.to_string()).unwrap();
            prop_assert_eq!(again.iter().collect::<Vec<_>>(), ids.into_iter().collect::<Vec<_>>());
        }
    }
}
