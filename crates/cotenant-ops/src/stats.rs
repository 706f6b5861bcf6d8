//! Statistics over measured values, in one place for the doctor, `size --pid` and the lab.

/// The median of `values` (sorted in place; NaN if empty; the mean of the middle two if even).
pub fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// The median of the finite values (NaN if none): a run without a value does not count.
pub fn median_of_finite(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut finite: Vec<f64> = values.into_iter().filter(|v| v.is_finite()).collect();
    median(&mut finite)
}

/// The median of each column of `rows`: one figure per column over the repeats of a
/// configuration (NaN for every column when there are no rows).
pub fn column_medians<const N: usize>(rows: &[[f64; N]]) -> [f64; N] {
    std::array::from_fn(|i| median(&mut rows.iter().map(|r| r[i]).collect::<Vec<_>>()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_odd_even_and_empty_sets() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&mut []).is_nan());
        assert_eq!(median_of_finite([f64::NAN, 5.0, f64::INFINITY, 1.0]), 3.0);
        assert!(median_of_finite([f64::NAN]).is_nan());
        assert_eq!(column_medians(&[[1.0, 10.0], [3.0, 30.0], [2.0, 20.0]]), [2.0, 20.0]);
        assert!(column_medians::<2>(&[]).iter().all(|v| v.is_nan()));
    }
}
