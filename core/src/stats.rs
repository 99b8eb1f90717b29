//! Small statistics: nearest-rank percentiles, medians, Wilson intervals and the normal
//! quantile they need (history's and the cards' across-run findings, the throughput's usual
//! rate). Pure, and at the bottom floor so every room may use them.

/// Nearest-rank percentile (`p` in 0..=100) of unsorted values; `None` when empty.
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    Some(v[rank.min(v.len()) - 1])
}

/// The median (mean of the middle two for an even count).
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The standard normal quantile (Acklam's rational approximation, relative error < 1.2e-9).
pub fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969683028665376e+01,
        2.209460984245205e+02,
        -2.759285104469687e+02,
        1.383_577_518_672_69e2,
        -3.066479806614716e+01,
        2.506628277459239e+00,
    ];
    const B: [f64; 5] = [
        -5.447609879822406e+01,
        1.615858368580409e+02,
        -1.556989798598866e+02,
        6.680131188771972e+01,
        -1.328068155288572e+01,
    ];
    const C: [f64; 6] = [
        -7.784894002430293e-03,
        -3.223964580411365e-01,
        -2.400758277161838e+00,
        -2.549732539343734e+00,
        4.374664141464968e+00,
        2.938163982698783e+00,
    ];
    const D: [f64; 4] = [
        7.784695709041462e-03,
        3.224671290700398e-01,
        2.445134137142996e+00,
        3.754408661907416e+00,
    ];
    let p = p.clamp(1e-300, 1.0 - 1e-16);
    let low = 0.02425;
    if p < low {
        let q = (-2.0 * p.ln()).sqrt();
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    } else if p <= 1.0 - low {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        let q = (-2.0 * (1.0 - p).ln()).sqrt();
        -(((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    }
}

/// The Wilson score interval for `k` successes of `n` at two-sided level `alpha`
/// (0.05 → 95 %). `(0, 1)` for `n == 0`.
pub fn wilson(k: u64, n: u64, alpha: f64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let z = normal_quantile(1.0 - alpha / 2.0);
    let n = n as f64;
    let p = k as f64 / n;
    let z2 = z * z;
    let denom = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denom;
    let half = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denom;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// The interval of the difference of two rates, `k1/n1 − k2/n2`, at two-sided level `alpha`:
/// Newcombe's hybrid score interval (1998, method 10), built from the two Wilson intervals.
/// Whether one rate is above another is a question about their difference: two intervals
/// that overlap can still have a difference whose interval clears 0 (4 of 6 against 0 of 18
/// at the 4-comparison Bonferroni level overlap, yet the gap is real), so this is the test.
pub fn newcombe_difference(k1: u64, n1: u64, k2: u64, n2: u64, alpha: f64) -> (f64, f64) {
    let (l1, u1) = wilson(k1, n1, alpha);
    let (l2, u2) = wilson(k2, n2, alpha);
    let p1 = if n1 == 0 { 0.5 } else { k1 as f64 / n1 as f64 };
    let p2 = if n2 == 0 { 0.5 } else { k2 as f64 / n2 as f64 };
    let d = p1 - p2;
    let lo = d - ((p1 - l1).powi(2) + (u2 - p2).powi(2)).sqrt();
    let hi = d + ((u1 - p1).powi(2) + (p2 - l2).powi(2)).sqrt();
    (lo.max(-1.0), hi.min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures() {
        assert!((normal_quantile(0.975) - 1.959964).abs() < 1e-5);
        assert!((normal_quantile(0.5)).abs() < 1e-9);
        assert!((normal_quantile(0.001) + 3.090232).abs() < 1e-5);
        // 19 of 36: about 37 % to 68 %.
        let (lo, hi) = wilson(19, 36, 0.05);
        assert!(
            (lo - 0.3700).abs() < 0.002 && (hi - 0.6797).abs() < 0.002,
            "{lo} {hi}"
        );
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0, 5.0], 95.0), Some(5.0));
        assert_eq!(percentile(&[3.0, 1.0, 2.0], 50.0), Some(2.0));
        assert_eq!(median(&[1.0, 4.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn difference_interval() {
        // Newcombe (1998) table II, example (a): 56/70 − 48/80, 95 %: 0.0524 to 0.3339.
        let (lo, hi) = newcombe_difference(56, 70, 48, 80, 0.05);
        assert!(
            (lo - 0.0524).abs() < 0.0005 && (hi - 0.3339).abs() < 0.0005,
            "{lo} {hi}"
        );
        // 4 of 6 against 0 of 18 at 0.05 / 4: the Wilson intervals overlap, the gap clears 0.
        let a = 0.05 / 4.0;
        assert!(wilson(4, 6, a).0 < wilson(0, 18, a).1);
        assert!(newcombe_difference(4, 6, 0, 18, a).0 > 0.0);
        // 2 of 5 against 0 of 18 does not (Fisher's exact p ≈ 0.04, ×4 comparisons).
        assert!(newcombe_difference(2, 5, 0, 18, a).0 < 0.0);
    }
}
