//! Summaries of repeated benchmark runs.

/// The median of `values`, sorting them in place (callers read the fastest and slowest, or
/// quartiles, from the sorted slice afterwards): the middle value, the mean of the two middle
/// ones for an even count, NaN for none.
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn middle_value_mean_of_two_and_sorted_in_place() {
        let mut odd = [3.0, 1.0, 2.0];
        assert_eq!(median(&mut odd), 2.0);
        assert_eq!(odd, [1.0, 2.0, 3.0]);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&mut []).is_nan());
    }
}
