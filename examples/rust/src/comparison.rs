//! The arithmetic and the report of `async_service --bench`, which loads two servers of the
//! same service in turns (the cotenant executor, index 0, and a plain tokio runtime, index 1):
//! pure functions of what the client recorded, so that they are tested on fixed numbers.

/// What the client measured on one server over the rounds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    /// Requests answered per second, one value per round.
    pub rates: Vec<f64>,
    /// Every request's latency over all the rounds, in microseconds.
    pub latencies_us: Vec<u32>,
}

/// One row of the table: a server's requests/s over the rounds and its p99 latency.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// What the row is about (the executor and its thread counts).
    pub server: String,
    /// The median of the rounds' requests/s.
    pub median: f64,
    /// The slowest round's requests/s.
    pub min: f64,
    /// The fastest round's requests/s.
    pub max: f64,
    /// The 99th percentile of every request's latency (over all the rounds, not a median of
    /// the rounds' percentiles), in microseconds; `None` without requests.
    pub p99_us: Option<u32>,
}

/// The two servers in round `round`'s order: alternating, so that neither always goes first
/// (on a host that the other one has warmed up, or not).
pub fn round_order(round: usize) -> [usize; 2] {
    match round % 2 {
        0 => [0, 1],
        _ => [1, 0],
    }
}

/// The row of `series`, named `server`.
pub fn summarize(server: String, mut series: Series) -> Summary {
    series.latencies_us.sort_unstable();
    let min = series.rates.iter().copied().fold(f64::INFINITY, f64::min);
    let max = series.rates.iter().copied().fold(0.0, f64::max);
    Summary {
        server,
        median: median(&series.rates),
        min: if min.is_finite() { min } else { 0.0 },
        max,
        p99_us: percentile(&series.latencies_us, 99),
    }
}

/// The median of `values` (the mean of the middle two for an even count; 0 for none).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match (n, n % 2) {
        (0, _) => 0.0,
        (_, 1) => sorted[n / 2],
        _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// The nearest-rank `percent`th percentile of `sorted` (ascending): the smallest value that
/// at least `percent` % of the values do not exceed. `None` for no values.
pub fn percentile(sorted: &[u32], percent: usize) -> Option<u32> {
    let rank = (sorted.len() * percent).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
}

/// Microseconds as the table shows them: `850 µs`, `1.50 ms`, `-` for none.
pub fn format_latency(us: Option<u32>) -> String {
    match us {
        None => "-".to_owned(),
        Some(us) if us < 1000 => format!("{us} µs"),
        Some(us) => format!("{:.2} ms", f64::from(us) / 1000.0),
    }
}

/// The markdown table, a row per server in the order given, each with the ratio of its
/// median to the other row's.
pub fn render_table(rows: &[Summary; 2]) -> String {
    let mut table = String::from(
        "| server | median req/s | min | max | ratio to the other | p99 latency |\n\
         |---|---:|---:|---:|---:|---:|\n",
    );
    for (index, row) in rows.iter().enumerate() {
        let other = &rows[1 - index];
        let ratio =
            if other.median > 0.0 { format!("{:.2}", row.median / other.median) } else { "-".to_owned() };
        table.push_str(&format!(
            "| {} | {:.0} | {:.0} | {:.0} | {ratio} | {} |\n",
            row.server,
            row.median,
            row.min,
            row.max,
            format_latency(row.p99_us)
        ));
    }
    table
}

/// One line: the ratio of the median requests/s, cotenant's over tokio's, and whether it is
/// within 10 %.
pub fn verdict(cotenant: f64, tokio: f64) -> String {
    if tokio <= 0.0 {
        return "cotenant / tokio: no ratio (the tokio runtime answered nothing)".to_owned();
    }
    let ratio = cotenant / tokio;
    let how = if ratio < 0.9 {
        "more than 10 % below the tokio runtime's"
    } else if ratio > 1.1 {
        "more than 10 % above the tokio runtime's"
    } else {
        "within 10 % of the tokio runtime's"
    };
    format!("cotenant / tokio requests/s (medians): {ratio:.2}, {how}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_alternate_the_servers() {
        assert_eq!(round_order(0), [0, 1]);
        assert_eq!(round_order(1), [1, 0]);
        assert_eq!(round_order(2), [0, 1]);
    }

    #[test]
    fn medians_and_percentiles() {
        assert_eq!(median(&[]), 0.0);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        let latencies: Vec<u32> = (1..=200).collect();
        assert_eq!(percentile(&latencies, 99), Some(198));
        assert_eq!(percentile(&latencies, 100), Some(200));
        assert_eq!(percentile(&[7], 99), Some(7));
        assert_eq!(percentile(&[], 99), None);
    }

    #[test]
    fn latencies_read_in_the_unit_that_suits_them() {
        assert_eq!(format_latency(None), "-");
        assert_eq!(format_latency(Some(999)), "999 µs");
        assert_eq!(format_latency(Some(1500)), "1.50 ms");
    }

    #[test]
    fn the_table_has_a_row_per_server_with_its_ratio() {
        let cotenant = Series { rates: vec![900.0, 1000.0, 950.0], latencies_us: vec![1500; 100] };
        let tokio = Series { rates: vec![1000.0, 1000.0, 1000.0], latencies_us: vec![800; 100] };
        let rows = [summarize("cotenant".to_owned(), cotenant), summarize("tokio".to_owned(), tokio)];
        assert_eq!(rows[0].min, 900.0);
        assert_eq!(rows[0].max, 1000.0);
        let table = render_table(&rows);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 4, "{table}");
        assert_eq!(lines[1], "|---|---:|---:|---:|---:|---:|");
        assert_eq!(lines[2], "| cotenant | 950 | 900 | 1000 | 0.95 | 1.50 ms |");
        assert_eq!(lines[3], "| tokio | 1000 | 1000 | 1000 | 1.05 | 800 µs |");
    }

    #[test]
    fn a_server_without_rounds_has_no_ratio_and_no_latency() {
        let rows = [
            summarize("cotenant".to_owned(), Series { rates: vec![10.0], latencies_us: vec![5] }),
            summarize("tokio".to_owned(), Series::default()),
        ];
        let table = render_table(&rows);
        assert!(table.contains("| cotenant | 10 | 10 | 10 | - | 5 µs |"), "{table}");
        assert!(table.contains("| tokio | 0 | 0 | 0 | 0.00 | - |"), "{table}");
    }

    #[test]
    fn the_verdict_says_where_the_ratio_falls() {
        assert!(verdict(950.0, 1000.0).contains("0.95, within 10 %"));
        assert!(verdict(850.0, 1000.0).contains("more than 10 % below"));
        assert!(verdict(1200.0, 1000.0).contains("more than 10 % above"));
        assert!(verdict(1.0, 0.0).contains("no ratio"));
    }
}
