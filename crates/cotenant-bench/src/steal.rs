//! `steal`: how much CPU time the hypervisor gave other guests during a run, from the `steal`
//! column of `/proc/stat`. On a virtual machine whose host is busy, a run's medians move by
//! tens of per cent from one run to the next; printing the steal beside the tables says whether
//! a run was taken on a quiet host or not.

use cotenant::internal::procfs::stat;

/// Steal and total time over every CPU of the host, in clock ticks since boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticks {
    steal: u64,
    total: u64,
}

/// Reads `/proc/stat`; `None` where it cannot be read or parsed (the report then says nothing).
pub fn read() -> Option<Ticks> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    Some(of(&stat::parse(&text).ok()?))
}

/// The sums of a parsed `/proc/stat` (pure).
pub fn of(stat: &stat::Stat) -> Ticks {
    stat.per_cpu.iter().fold(Ticks { steal: 0, total: 0 }, |sum, (_, t)| Ticks {
        steal: sum.steal.saturating_add(t.steal),
        total: sum.total.saturating_add(t.busy()).saturating_add(t.idle_total()),
    })
}

/// The sentence printed after the tables: the steal between two readings as a share of the
/// CPUs' time (`None` if no time passed).
pub fn sentence(before: Ticks, after: Ticks) -> Option<String> {
    let total = after.total.checked_sub(before.total).filter(|&t| t > 0)?;
    let steal = after.steal.saturating_sub(before.steal);
    let percent = 100.0 * steal as f64 / total as f64;
    Some(format!(
        "Hypervisor steal during the run: {percent:.1} % of the CPUs' time ({steal} of {total} ticks, \
         /proc/stat). Above a few per cent, other guests of the host took CPU time from this run, \
         and its medians move by tens of per cent between runs."
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_is_a_share_of_every_cpus_time_between_two_readings() {
        let text = |steal: u64| {
            format!("cpu  0 0 0 0 0 0 0 0 0 0\ncpu0 100 0 0 800 0 0 0 {steal} 0 0\ncpu1 100 0 0 800 0 0 0 {steal} 0 0\n")
        };
        let before = of(&stat::parse(&text(0)).unwrap());
        let after = of(&stat::parse(&text(50)).unwrap());
        assert_eq!(after.steal, 100);
        // Busy includes steal: 2 x (100 + 50) busy + 2 x 800 idle.
        assert_eq!(after.total, 1900);
        let line = sentence(Ticks { steal: 0, total: 900 }, after).unwrap();
        assert!(
            line.starts_with("Hypervisor steal during the run: 10.0 % of the CPUs' time (100 of 1000 ticks"),
            "{line}"
        );
        assert!(sentence(before, before).is_none(), "no time passed");
    }
}
