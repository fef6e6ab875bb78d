//! The statistics of `ors eval`'s summary and `ors report`: pass@k, 95% intervals, paired
//! differences. Pure functions over numbers, so each can be checked against a hand-computed
//! case.
//!
//! - [`pass_at_k`]: the unbiased estimator of Chen et al. 2021 ("Evaluating Large Language
//!   Models Trained on Code"): with `n` samples of a task of which `c` passed, the chance that
//!   at least one of `k` drawn without replacement passes, `1 − C(n−c, k) / C(n, k)`.
//! - [`bootstrap_mean`]: a percentile bootstrap interval of a mean, resampling the values (one
//!   per task: tasks are the unit that was sampled, samples of one task are not independent).
//!   Seeded, so a report of the same files always shows the same interval.
//! - [`wilson`]: the Wilson score interval of a rate, which unlike the normal approximation
//!   stays inside 0..=1 and is not empty at 0% or 100%.
//! - [`paired_difference`]: the mean per-task difference between two runs over the tasks both
//!   ran, with a paired bootstrap interval (the same tasks resampled for both runs, so task
//!   difficulty cancels out).

use serde::Serialize;

/// The z value of a two-sided 95% interval.
pub const Z95: f64 = 1.959_963_984_540_054;

/// Bootstrap resamples: enough that the interval's ends move by well under 1% of its width
/// from one seed to another.
pub const RESAMPLES: usize = 2000;

/// The seed of every bootstrap, so the same episodes always give the same interval.
pub const SEED: u64 = 0x0005_EED0_0F0B_5E55;

/// A 95% interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    /// Its lower end.
    pub lo: f64,
    /// Its upper end.
    pub hi: f64,
}

/// pass@k of one task: the unbiased estimator from `n` samples of which `c` passed, `None`
/// when `k` is 0 or above `n` (or `c` above `n`). Computed as the product
/// `1 − Π_{i=n−c+1..=n} (1 − k/i)`, which never forms the large binomial coefficients.
pub fn pass_at_k(n: u64, c: u64, k: u64) -> Option<f64> {
    if k == 0 || k > n || c > n {
        return None;
    }
    if n - c < k {
        return Some(1.0);
    }
    let fail_all: f64 = (n - c + 1..=n).map(|i| 1.0 - k as f64 / i as f64).product();
    Some(1.0 - fail_all)
}

/// The Wilson score interval of a rate `p` observed over `n` trials (`z` = [`Z95`] for 95%);
/// the whole 0..=1 for no trials.
pub fn wilson(p: f64, n: f64, z: f64) -> Interval {
    if n <= 0.0 {
        return Interval { lo: 0.0, hi: 1.0 };
    }
    let z2 = z * z;
    let denom = 1.0 + z2 / n;
    let center = (p + z2 / (2.0 * n)) / denom;
    let half = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denom;
    Interval {
        lo: (center - half).max(0.0),
        hi: (center + half).min(1.0),
    }
}

/// The mean of `values` (0 for none).
pub fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

/// The sample standard deviation of `values` (divided by n − 1); 0 for fewer than two.
pub fn std_dev(values: &[f64]) -> f64 {
    if values.len() < 2 {
        return 0.0;
    }
    let m = mean(values);
    let ss: f64 = values.iter().map(|v| (v - m) * (v - m)).sum();
    (ss / (values.len() - 1) as f64).sqrt()
}

/// The percentile bootstrap 95% interval of the mean of `values`: `resamples` times, draw
/// `values.len()` values with replacement (from a generator seeded with `seed`) and take
/// their mean; the interval runs from the 2.5th to the 97.5th percentile of those means.
/// `None` for no values.
pub fn bootstrap_mean(values: &[f64], resamples: usize, seed: u64) -> Option<Interval> {
    let n = values.len();
    if n == 0 || resamples == 0 {
        return None;
    }
    let mut rng = SplitMix64(seed);
    let mut resample = || (0..n).map(|_| values[rng.below(n)]).sum::<f64>() / n as f64;
    let mut means: Vec<f64> = (0..resamples).map(|_| resample()).collect();
    means.sort_unstable_by(f64::total_cmp);
    Some(Interval {
        lo: percentile(&means, 0.025),
        hi: percentile(&means, 0.975),
    })
}

/// The `q` quantile of sorted, non-empty `sorted`, interpolating linearly between the two
/// nearest ranks (the common "type 7" definition).
fn percentile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let (below, frac) = (pos.floor() as usize, pos.fract());
    match sorted.get(below + 1) {
        Some(&next) => sorted[below] + frac * (next - sorted[below]),
        None => sorted[below],
    }
}

/// The mean difference `b − a` over paired values (one pair per task both runs have) and its
/// paired bootstrap 95% interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Difference {
    /// The mean of `b − a`.
    pub mean: f64,
    /// Its 95% interval (`None` without pairs).
    pub interval: Option<Interval>,
}

impl Difference {
    /// Whether the interval lies wholly above or below 0: a difference beyond the noise.
    pub fn significant(&self) -> bool {
        self.interval.is_some_and(|i| i.lo > 0.0 || i.hi < 0.0)
    }
}

/// The paired difference `b − a` of per-task values `pairs` (`(a, b)` of one task each):
/// resampling tasks, never runs apart, so what one task's difficulty adds to both cancels.
pub fn paired_difference(pairs: &[(f64, f64)], resamples: usize, seed: u64) -> Difference {
    let diffs: Vec<f64> = pairs.iter().map(|(a, b)| b - a).collect();
    Difference {
        mean: mean(&diffs),
        interval: bootstrap_mean(&diffs, resamples, seed),
    }
}

/// SplitMix64 (Steele, Lea and Flood 2014): a tiny, well-mixed seeded generator; a bootstrap
/// needs reproducible draws, not cryptographic ones, so no crate is pulled in for it.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0), by Lemire's multiply-shift: no modulo bias worth the
    /// name for any `n` a run has.
    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn pass_at_k_matches_the_binomial_formula() {
        // One sample: pass@1 is whether it passed.
        assert_eq!(pass_at_k(1, 1, 1), Some(1.0));
        assert_eq!(pass_at_k(1, 0, 1), Some(0.0));
        // pass@1 is c/n.
        assert!(close(pass_at_k(3, 1, 1).unwrap(), 1.0 / 3.0, 1e-12));
        // 1 − C(3,2)/C(5,2) = 1 − 3/10.
        assert!(close(pass_at_k(5, 2, 2).unwrap(), 0.7, 1e-12));
        // 1 − C(7,5)/C(10,5) = 1 − 21/252.
        assert!(close(
            pass_at_k(10, 3, 5).unwrap(),
            1.0 - 21.0 / 252.0,
            1e-12
        ));
        // Fewer failures than k: some drawn sample always passed.
        assert_eq!(pass_at_k(3, 1, 3), Some(1.0));
        assert_eq!(pass_at_k(3, 0, 3), Some(0.0));
        // Large n stays finite: 1 − C(150,100)/C(200,100) without the coefficients.
        let p = pass_at_k(200, 50, 100).unwrap();
        assert!(p > 0.999_999 && p <= 1.0, "{p}");
        assert_eq!(pass_at_k(3, 1, 4), None, "k above n");
        assert_eq!(pass_at_k(3, 1, 0), None);
        assert_eq!(pass_at_k(3, 4, 1), None);
    }

    #[test]
    fn wilson_intervals_match_hand_computed_ones() {
        // 5 of 10: center (0.5 + z²/20) / (1 + z²/10) = 0.5, half-width
        // z·√(0.025 + z²/400) / (1 + z²/10) = 0.26340.
        let i = wilson(0.5, 10.0, Z95);
        assert!(
            close(i.lo, 0.236_593, 1e-5) && close(i.hi, 0.763_407, 1e-5),
            "{i:?}"
        );
        // 0 of 10 is not the empty interval [0, 0]: z²/(n + z²) = 0.27753.
        let i = wilson(0.0, 10.0, Z95);
        assert!(
            close(i.lo, 0.0, 1e-12) && close(i.hi, 0.277_535, 1e-5),
            "{i:?}"
        );
        // 10 of 10 mirrors it.
        let i = wilson(1.0, 10.0, Z95);
        assert!(
            close(i.lo, 0.722_465, 1e-5) && close(i.hi, 1.0, 1e-12),
            "{i:?}"
        );
        // 81 of 263 (a textbook case): 0.2553 to 0.3662.
        let i = wilson(81.0 / 263.0, 263.0, Z95);
        assert!(
            close(i.lo, 0.2553, 1e-4) && close(i.hi, 0.3662, 1e-4),
            "{i:?}"
        );
        assert_eq!(wilson(0.3, 0.0, Z95), Interval { lo: 0.0, hi: 1.0 });
    }

    #[test]
    fn means_and_standard_deviations() {
        assert_eq!(mean(&[]), 0.0);
        assert_eq!(mean(&[1.0, 0.0, 0.5]), 0.5);
        // Rewards 1, 0, 0: mean 1/3, squares 4/9 + 1/9 + 1/9 = 2/3, over n − 1 = 2: 1/3.
        assert!(close(
            std_dev(&[1.0, 0.0, 0.0]),
            (1.0f64 / 3.0).sqrt(),
            1e-12
        ));
        assert_eq!(std_dev(&[0.7]), 0.0);
        assert_eq!(std_dev(&[0.5, 0.5, 0.5]), 0.0);
    }

    #[test]
    fn bootstrap_intervals_are_seeded_and_cover_what_theory_says() {
        // Every task scored the same: every resample has that mean.
        let i = bootstrap_mean(&[0.25; 7], RESAMPLES, SEED).unwrap();
        assert_eq!((i.lo, i.hi), (0.25, 0.25));
        // Two tasks, 0 and 1: a resample's mean is 0, 0.5 or 1 with chances ¼, ½, ¼, so the
        // 2.5th percentile is 0 and the 97.5th is 1.
        let i = bootstrap_mean(&[0.0, 1.0], RESAMPLES, SEED).unwrap();
        assert_eq!((i.lo, i.hi), (0.0, 1.0));
        // 400 tasks, half passed: the mean's standard error is √(0.25/400) = 0.025, so the
        // interval is close to 0.5 ± 1.96 · 0.025 = [0.451, 0.549].
        let half: Vec<f64> = (0..400).map(|i| f64::from(i % 2)).collect();
        let i = bootstrap_mean(&half, RESAMPLES, SEED).unwrap();
        assert!(
            close(i.lo, 0.451, 0.008) && close(i.hi, 0.549, 0.008),
            "{i:?}"
        );
        // The same seed gives the same interval; another seed a slightly different one.
        assert_eq!(bootstrap_mean(&half, RESAMPLES, SEED), Some(i));
        let other = bootstrap_mean(&half, RESAMPLES, SEED + 1).unwrap();
        assert!(
            other != i && close(other.lo, i.lo, 0.01),
            "{other:?} vs {i:?}"
        );
        assert_eq!(bootstrap_mean(&[], RESAMPLES, SEED), None);
    }

    #[test]
    fn the_generator_is_splitmix64() {
        // The first outputs for seed 0 from the reference implementation.
        let mut r = SplitMix64(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        let mut r = SplitMix64(SEED);
        assert!((0..10_000).all(|_| r.below(3) < 3));
    }

    #[test]
    fn paired_differences_cancel_what_tasks_share() {
        // B is A plus 0.1 on every task: the difference is exactly 0.1 whatever is resampled,
        // although the tasks' own scores range from 0 to 0.9.
        let pairs: Vec<(f64, f64)> = (0..10)
            .map(|i| (f64::from(i) / 10.0, f64::from(i) / 10.0 + 0.1))
            .collect();
        let d = paired_difference(&pairs, RESAMPLES, SEED);
        let i = d.interval.unwrap();
        assert!(close(d.mean, 0.1, 1e-12));
        assert!(close(i.lo, 0.1, 1e-12) && close(i.hi, 0.1, 1e-12), "{i:?}");
        assert!(d.significant());
        // Unpaired, the same scores would overlap almost entirely.
        let a: Vec<f64> = pairs.iter().map(|p| p.0).collect();
        let b: Vec<f64> = pairs.iter().map(|p| p.1).collect();
        let (ia, ib) = (
            bootstrap_mean(&a, RESAMPLES, SEED).unwrap(),
            bootstrap_mean(&b, RESAMPLES, SEED).unwrap(),
        );
        assert!(ib.lo < ia.hi, "{ia:?} {ib:?}");
        // One task flipped up, one down, the rest equal: mean 0, and the interval straddles it.
        let mut pairs = vec![(0.5, 0.5); 8];
        pairs.extend([(0.0, 1.0), (1.0, 0.0)]);
        let d = paired_difference(&pairs, RESAMPLES, SEED);
        assert_eq!(d.mean, 0.0);
        assert!(!d.significant(), "{d:?}");
        let none = paired_difference(&[], RESAMPLES, SEED);
        assert_eq!((none.mean, none.interval), (0.0, None));
    }
}
