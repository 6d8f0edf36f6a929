//! Trial statistics: mean and 95 % confidence interval (Student t) over trials, and Welch's
//! t-test for "is this run different from its baseline".
use msgbench_crds::benchmark_run::Estimate;
use statrs::distribution::{ContinuousCDF, StudentsT};

/// t quantile for a 95 % two-sided interval: the 97.5 % quantile of Student's t, exact also
/// for fractional df (Welch) and large df (a table snapping to the normal 1.96 beyond df 30
/// would make intervals too narrow). Below 1 degree of freedom there is no interval: infinite.
pub fn t975(df: f64) -> f64 {
    if df.is_nan() || df < 1.0 {
        return f64::INFINITY;
    }
    StudentsT::new(0.0, 1.0, df).map_or(f64::INFINITY, |t| t.inverse_cdf(0.975))
}

pub fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Sample variance (n − 1).
pub fn variance(xs: &[f64]) -> f64 {
    let m = mean(xs);
    xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() as f64 - 1.0)
}

/// Half width of the 95 % Student-t interval of the mean of `xs` (2 or more samples).
pub fn half_width95(xs: &[f64]) -> f64 {
    t975(xs.len() as f64 - 1.0) * (variance(xs) / xs.len() as f64).sqrt()
}

/// Mean and 95 % interval; `None` with fewer than 2 samples (no spread to estimate).
pub fn estimate(xs: &[f64]) -> Option<Estimate> {
    if xs.len() < 2 {
        return None;
    }
    let m = mean(xs);
    let half = half_width95(xs);
    Some(Estimate {
        mean: round3(m),
        ci95_low: round3(m - half),
        ci95_high: round3(m + half),
    })
}

/// Welch's t-test at 95 %: whether the means of `a` and `b` differ. False when either side
/// has fewer than 2 trials (nothing to judge the noise by).
pub fn significantly_different(a: &[f64], b: &[f64]) -> bool {
    if a.len() < 2 || b.len() < 2 {
        return false;
    }
    let (va, vb) = (variance(a) / a.len() as f64, variance(b) / b.len() as f64);
    let se = (va + vb).sqrt();
    let diff = (mean(a) - mean(b)).abs();
    if se == 0.0 {
        return diff > 0.0;
    }
    let df = (va + vb).powi(2)
        / (va.powi(2) / (a.len() as f64 - 1.0) + vb.powi(2) / (b.len() as f64 - 1.0));
    diff / se > t975(df)
}

pub fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_matches_a_hand_computed_one() {
        // mean 10, s = 1, n = 3: half width = 4.303 / sqrt(3) = 2.484
        let e = estimate(&[9.0, 10.0, 11.0]).unwrap();
        assert_eq!(e.mean, 10.0);
        assert_eq!(e.ci95_low, 7.516);
        assert_eq!(e.ci95_high, 12.484);
        assert!(estimate(&[1.0]).is_none());
    }

    #[test]
    fn welch_separates_clear_effects_from_noise() {
        let r1 = [47_000.0, 46_500.0, 47_400.0];
        let r2 = [26_000.0, 26_800.0, 25_900.0];
        assert!(significantly_different(&r1, &r2));
        let noisy = [30_000.0, 50_000.0, 40_000.0];
        assert!(!significantly_different(
            &[40_500.0, 39_000.0, 41_000.0],
            &noisy
        ));
        // One trial on a side: never significant.
        assert!(!significantly_different(&[1.0], &[100.0, 101.0]));
    }

    fn near(got: f64, want: f64) -> bool {
        (got - want).abs() <= 0.001
    }

    #[test]
    fn t_quantiles_match_the_table_and_fall_towards_the_normal_one() {
        for (df, want) in [(1.0, 12.706), (2.0, 4.303), (30.0, 2.042), (38.0, 2.024)] {
            assert!(near(t975(df), want), "df {df}: {}", t975(df));
        }
        // Beyond the old table: never below the normal quantile (1.96 was anti-conservative).
        assert!(near(t975(100.0), 1.984), "{}", t975(100.0));
        assert!(t975(1e6) > 1.959 && t975(1e6) < t975(100.0));
        // Fractional df (Welch) lie between their neighbours.
        assert!(t975(2.7) < t975(2.0) && t975(2.7) > t975(3.0));
        assert!(t975(0.5).is_infinite());
        assert!(t975(f64::NAN).is_infinite());
    }
}
