//! Order statistics of timing samples (statrs; quantiles use its R-8 estimator).

use serde::{Deserialize, Serialize};
use statrs::statistics::{Data, Max, Min, OrderStatistics};

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Stats {
    pub median: f64,
    pub p10: f64,
    pub p90: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

impl Stats {
    /// None for an empty sample.
    pub fn of(samples: &[f64]) -> Option<Stats> {
        if samples.is_empty() {
            return None;
        }
        let mut d = Data::new(samples.to_vec());
        Some(Stats {
            median: d.median(),
            p10: d.percentile(10),
            p90: d.percentile(90),
            min: d.min(),
            max: d.max(),
            n: samples.len(),
        })
    }

    /// Stats of the values that are present; None if any is missing (a partial sample would lie).
    pub fn of_all(samples: impl IntoIterator<Item = Option<f64>>) -> Option<Stats> {
        let v: Option<Vec<f64>> = samples.into_iter().collect();
        v.and_then(|v| Stats::of(&v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_extremes() {
        let s = Stats::of(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!(s.median, 3.0);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 5.0);
        assert!(s.p10 >= 1.0 && s.p10 <= s.median && s.p90 >= s.median && s.p90 <= 5.0);
        assert!(Stats::of(&[]).is_none());
        assert!(Stats::of_all([Some(1.0), None]).is_none());
    }
}
