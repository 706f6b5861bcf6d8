//! `report`: the host line, per-peer summaries over rounds, ratios to the best peer, and the
//! markdown tables. Pure formatting, apart from reading the kernel release once.

use std::fs;

/// Which direction of a measurement is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Better {
    /// Times: the smallest median is best.
    Lower,
    /// Rates: the largest median is best.
    Higher,
}

/// The machine the run happened on.
pub struct Host {
    /// `std::thread::available_parallelism()`.
    pub cpus: usize,
    /// The kernel release (`uname -r`).
    pub kernel: String,
}

impl Host {
    /// Reads the kernel release from `/proc/sys/kernel/osrelease` (what `uname -r` prints).
    pub fn detect(cpus: usize) -> Self {
        let kernel = fs::read_to_string("/proc/sys/kernel/osrelease")
            .map_or_else(|_| "unknown".to_owned(), |release| release.trim().to_owned());
        Self { cpus, kernel }
    }

    /// The header printed before any table: the host, then `details` (sizes, rounds...).
    pub fn header(&self, details: &str) -> String {
        format!(
            "# pool-bench\n\nhost: {} CPUs (available_parallelism), Linux {}; {details}\n",
            self.cpus, self.kernel
        )
    }
}

/// One peer's values over the rounds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    /// The median (the mean of the middle two for an even count).
    pub median: f64,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
}

impl Summary {
    /// `None` for no values.
    pub fn of(values: &[f64]) -> Option<Self> {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let (min, max) = (*sorted.first()?, *sorted.last()?);
        let mid = sorted.len() / 2;
        let median = if sorted.len() % 2 == 1 { sorted[mid] } else { (sorted[mid - 1] + sorted[mid]) / 2.0 };
        Some(Self { median, min, max })
    }
}

/// Each median's ratio to the best median, oriented so that 1.00 is the best and larger is worse
/// in both directions: `median / best` for [`Better::Lower`], `best / median` for
/// [`Better::Higher`].
pub fn ratios(medians: &[f64], better: Better) -> Vec<f64> {
    match better {
        Better::Lower => {
            let best = medians.iter().copied().fold(f64::INFINITY, f64::min);
            medians.iter().map(|median| median / best).collect()
        }
        Better::Higher => {
            let best = medians.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            medians.iter().map(|median| best / median).collect()
        }
    }
}

/// A markdown table, best peer first: `peer | median | min | max | ratio to best`.
///
/// `rows` pairs each peer's name with its values over the rounds; `show` formats one value with
/// its unit. Peers with no values are left out.
pub fn table(title: &str, better: Better, show: impl Fn(f64) -> String, rows: &[(&str, Vec<f64>)]) -> String {
    let summaries: Vec<(&str, Summary)> = rows
        .iter()
        .filter_map(|(name, values)| Summary::of(values).map(|summary| (*name, summary)))
        .collect();
    let medians: Vec<f64> = summaries.iter().map(|(_, summary)| summary.median).collect();
    let ratios = ratios(&medians, better);
    let mut order: Vec<usize> = (0..summaries.len()).collect();
    order.sort_by(|&a, &b| ratios[a].total_cmp(&ratios[b]));

    let mut out =
        format!("## {title}\n\n| peer | median | min | max | ratio to best |\n|---|---:|---:|---:|---:|\n");
    for index in order {
        let (name, summary) = summaries[index];
        out.push_str(&format!(
            "| {name} | {} | {} | {} | {:.2} |\n",
            show(summary.median),
            show(summary.min),
            show(summary.max),
            ratios[index]
        ));
    }
    let direction = match better {
        Better::Lower => "peer's median / best median",
        Better::Higher => "best median / peer's median",
    };
    out.push_str(&format!(
        "\nratio to best = {direction}: 1.00 is the best peer of this run, larger is worse.\n"
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn summary_takes_the_middle_value_or_the_mean_of_the_middle_two() {
        let odd = Summary::of(&[3.0, 1.0, 2.0]).unwrap();
        assert!(close(odd.median, 2.0) && close(odd.min, 1.0) && close(odd.max, 3.0));
        let even = Summary::of(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert!(close(even.median, 2.5) && close(even.min, 1.0) && close(even.max, 4.0));
        assert!(Summary::of(&[]).is_none());
    }

    #[test]
    fn ratios_are_one_for_the_best_and_larger_for_worse_in_both_directions() {
        let times = ratios(&[200.0, 100.0, 400.0], Better::Lower);
        assert!(close(times[0], 2.0) && close(times[1], 1.0) && close(times[2], 4.0));
        let rates = ratios(&[2.0, 4.0, 1.0], Better::Higher);
        assert!(close(rates[0], 2.0) && close(rates[1], 1.0) && close(rates[2], 4.0));
    }

    #[test]
    fn table_lists_the_best_peer_first() {
        let rows = [("slow", vec![300.0, 200.0]), ("fast", vec![100.0])];
        let text = table("t", Better::Lower, |v| format!("{v:.0} ns"), &rows);
        let fast = text.find("| fast | 100 ns | 100 ns | 100 ns | 1.00 |").unwrap();
        let slow = text.find("| slow | 250 ns | 200 ns | 300 ns | 2.50 |").unwrap();
        assert!(fast < slow, "{text}");
    }
}
