//! The Prometheus text format (version 0.0.4) of an exposition's families: for each family one
//! `# HELP` and one `# TYPE` line, then its samples, so that strict parsers (Prometheus's own)
//! accept any number of pools in one text. Numbers are written exactly and the same way on
//! every render: counts as integers, times in seconds as exact decimals of their nanoseconds
//! (`0.000001`, never `1e-06`), the histograms' `le` bounds too.

use std::fmt::Write;

use super::exposition::{Family, Value};
use super::histogram::{Histogram, BOUNDS};

/// The families as one exposition.
pub(crate) fn write(families: &[Family]) -> String {
    let mut out = String::with_capacity(families.iter().map(|f| 160 + 96 * f.samples.len()).sum());
    for family in families {
        // Writing to a String cannot fail: the results are ignored.
        let _ = writeln!(out, "# HELP {} {}", family.name, escape_help(family.help));
        let _ = writeln!(out, "# TYPE {} {}", family.name, family.kind.as_str());
        for sample in &family.samples {
            match &sample.value {
                Value::Histogram(histogram) => {
                    write_histogram(&mut out, family.name, &sample.labels, histogram)
                }
                scalar => line(&mut out, family.name, "", &sample.labels, None, &number(scalar)),
            }
        }
    }
    out
}

/// A histogram's samples: `_bucket` for each bound and `+Inf` (cumulative), `_sum` in seconds
/// and `_count`, which is the `+Inf` bucket's count by construction.
fn write_histogram(out: &mut String, name: &str, labels: &[(&'static str, String)], histogram: &Histogram) {
    let cumulative = histogram.cumulative();
    for (i, count) in cumulative.iter().take(BOUNDS).enumerate() {
        if let Some(bound) = Histogram::upper_bound_ns(i) {
            line(out, name, "_bucket", labels, Some(("le", &seconds(bound))), &count.to_string());
        }
    }
    let total = cumulative[BOUNDS].to_string();
    line(out, name, "_bucket", labels, Some(("le", "+Inf")), &total);
    line(out, name, "_sum", labels, None, &seconds(histogram.sum_ns));
    line(out, name, "_count", labels, None, &total);
}

/// One sample line: `name` + `suffix`, the labels (and `extra` last), the value.
fn line(
    out: &mut String,
    name: &str,
    suffix: &str,
    labels: &[(&'static str, String)],
    extra: Option<(&str, &str)>,
    value: &str,
) {
    out.push_str(name);
    out.push_str(suffix);
    let mut first = true;
    for (key, label) in labels {
        push_label(out, &mut first, key, label);
    }
    if let Some((key, label)) = extra {
        push_label(out, &mut first, key, label);
    }
    if !first {
        out.push('}');
    }
    out.push(' ');
    out.push_str(value);
    out.push('\n');
}

/// One `key="value"` of a sample's labels, opening the braces if it is the `first`.
fn push_label(out: &mut String, first: &mut bool, key: &str, value: &str) {
    out.push_str(if *first { "{" } else { "," });
    *first = false;
    out.push_str(key);
    out.push_str("=\"");
    escape_label_into(out, value);
    out.push('"');
}

/// A scalar's text.
fn number(value: &Value) -> String {
    match *value {
        Value::Count(n) => n.to_string(),
        Value::Seconds(ns) => seconds(ns),
        Value::Float(x) => float(x),
        // Not a scalar: written by `write_histogram`; its count keeps this total.
        Value::Histogram(histogram) => histogram.count().to_string(),
    }
}

/// Nanoseconds as seconds, exactly: `1500000` is `0.0015`, `2000000000` is `2`.
pub(crate) fn seconds(ns: u64) -> String {
    let (whole, fraction) = (ns / 1_000_000_000, ns % 1_000_000_000);
    if fraction == 0 {
        return whole.to_string();
    }
    let digits = format!("{fraction:09}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// A float as the format spells it: `NaN`, `+Inf`, `-Inf`, or Rust's shortest exact decimal
/// (no exponent).
fn float(x: f64) -> String {
    if x.is_nan() {
        "NaN".to_owned()
    } else if x == f64::INFINITY {
        "+Inf".to_owned()
    } else if x == f64::NEG_INFINITY {
        "-Inf".to_owned()
    } else {
        format!("{x}")
    }
}

/// A label value's escapes: backslash, double quote and line feed.
fn escape_label_into(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// A help text's escapes: backslash and line feed.
fn escape_help(help: &str) -> String {
    help.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_exact_decimals_of_their_nanoseconds() {
        assert_eq!(seconds(0), "0");
        assert_eq!(seconds(1_000), "0.000001");
        assert_eq!(seconds(150_000_000), "0.15");
        assert_eq!(seconds(2_500_000), "0.0025");
        assert_eq!(seconds(8_388_608_000), "8.388608");
        assert_eq!(seconds(2_000_000_000), "2");
        assert_eq!(seconds(u64::MAX), "18446744073.709551615");
    }

    #[test]
    fn floats_never_take_an_exponent() {
        assert_eq!(float(1.5), "1.5");
        assert_eq!(float(2.0), "2");
        assert_eq!(float(1e-7), "0.0000001");
        assert_eq!(float(f64::INFINITY), "+Inf");
        assert_eq!(float(f64::NAN), "NaN");
    }

    #[test]
    fn label_values_and_help_are_escaped() {
        let mut out = String::new();
        escape_label_into(&mut out, "a\\b\"c\nd");
        assert_eq!(out, "a\\\\b\\\"c\\nd");
        assert_eq!(escape_help("x\\y\nz"), "x\\\\y\\nz");
    }

    #[test]
    fn a_line_without_labels_has_no_braces() {
        let mut out = String::new();
        line(&mut out, "m", "", &[], None, "1");
        line(&mut out, "m", "_bucket", &[("pool", "p".to_owned())], Some(("le", "+Inf")), "2");
        assert_eq!(out, "m 1\nm_bucket{pool=\"p\",le=\"+Inf\"} 2\n");
    }
}
