//! What a sampled run (`audit --sample RATE`) says of the full run, and how sure it is.
//!
//! In: the run's summary (its records audited and left out, its conversations and
//! quarantines). Out: the estimates the terminal and both reports print, each with a 95 %
//! margin, so a reviewer can tell a 0.4 % quarantine share from a 1.4 % one before running
//! the whole archive.
//!
//! The sample is Bernoulli: each conversation is in with probability RATE, by a hash of its
//! key (the same ones every run). So:
//! - the quarantine share is a binomial proportion over the records audited; its interval is
//!   Wilson's score interval at 95 % (z = 1.96), with the finite-population correction for a
//!   sample drawn without replacement from the run's records. Unlike `p ± 1.96·√(p(1−p)/n)`
//!   it does not collapse to ±0 when no record of the sample was quarantined;
//! - the full run's conversations are estimated as converted / RATE (Horvitz–Thompson), whose
//!   variance is converted·(1 − RATE) / RATE².

use serde::Serialize;

use super::Summary;

/// z for a two-sided 95 % interval.
const Z95: f64 = 1.959_964;

/// The estimates of a sampled run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct SampleEstimate {
    /// The share asked for (`--sample`).
    pub rate: f64,
    /// Records audited, and all records read (audited and left out).
    pub records_audited: u64,
    pub records: u64,
    /// Quarantined share of the audited records, and its 95 % interval (shares, 0 to 1).
    pub quarantine_share: f64,
    pub quarantine_low: f64,
    pub quarantine_high: f64,
    /// Conversations the full run would convert, ± the 95 % margin.
    pub conversations: u64,
    pub conversations_margin: u64,
}

impl SampleEstimate {
    /// The estimates of `summary`, or `None` for a run that audited every record.
    pub(crate) fn of(summary: &Summary) -> Option<SampleEstimate> {
        let rate = summary.sample_rate;
        if !(rate > 0.0 && rate < 1.0) {
            return None;
        }
        // A record left out is counted only as such: `totals` are the sample's.
        let audited = summary.totals.records;
        let records = audited + summary.records_not_sampled;
        let quarantined = summary.totals.quarantined.min(audited);
        let (share, low, high) = wilson(quarantined, audited, records);
        let converted = summary.totals.converted as f64;
        Some(SampleEstimate {
            rate,
            records_audited: audited,
            records,
            quarantine_share: share,
            quarantine_low: low,
            quarantine_high: high,
            conversations: (converted / rate).round() as u64,
            conversations_margin: (Z95 * (converted * (1.0 - rate)).sqrt() / rate).round() as u64,
        })
    }

    /// Half the quarantine interval's width, for `± x %`.
    pub(crate) fn quarantine_margin(&self) -> f64 {
        (self.quarantine_high - self.quarantine_low) / 2.0
    }
}

/// The share `k / n` and its 95 % Wilson score interval, narrowed by the finite-population
/// correction √((N − n) / (N − 1)) for a sample of `n` out of `population`.
fn wilson(k: u64, n: u64, population: u64) -> (f64, f64, f64) {
    if n == 0 {
        return (0.0, 0.0, 1.0);
    }
    let (k, n_f) = (k as f64, n as f64);
    let p = k / n_f;
    let fpc = if population > n && population > 1 {
        ((population - n) as f64 / (population - 1) as f64).sqrt()
    } else {
        0.0
    };
    let z = Z95 * fpc;
    let z2 = z * z;
    let centre = (p + z2 / (2.0 * n_f)) / (1.0 + z2 / n_f);
    let half = z / (1.0 + z2 / n_f) * (p * (1.0 - p) / n_f + z2 / (4.0 * n_f * n_f)).sqrt();
    (p, (centre - half).max(0.0), (centre + half).min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_holds_the_share_and_narrows_with_the_sample() {
        let (p, low, high) = wilson(10, 1000, 1_000_000);
        assert!((p - 0.01).abs() < 1e-12);
        assert!(low < p && p < high);
        // The textbook Wilson interval for 10/1000 at 95 %: 0.545 % to 1.83 %.
        assert!((low - 0.00545).abs() < 0.0001, "{low}");
        assert!((high - 0.0183).abs() < 0.0001, "{high}");
        let (_, low_big, high_big) = wilson(100, 10_000, 1_000_000);
        assert!(high_big - low_big < high - low);
    }

    #[test]
    fn no_quarantine_in_the_sample_still_has_a_margin() {
        let (p, low, high) = wilson(0, 200, 4000);
        assert_eq!((p, low), (0.0, 0.0));
        assert!(high > 0.01 && high < 0.03, "{high}");
    }

    #[test]
    fn the_whole_population_is_exact() {
        assert_eq!(wilson(3, 100, 100), (0.03, 0.03, 0.03));
    }
}
