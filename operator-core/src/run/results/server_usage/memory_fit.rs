//! Memory per connection as the slope of an ordinary least-squares fit of the servers' memory
//! on their own connection count, over points sampled at several connection levels (a stepped
//! connection workload). One peak-minus-baseline difference is not a per-connection measure:
//! a garbage-collected server's RSS can fall while connections are added. So the slope is
//! reported only when the data support it, and otherwise as unavailable with the reason.
//! Pure functions: no client, no clock.
use crate::run::results::stats::{round3, t975};
use msgbench_crds::server_usage::{MemoryFit, MemoryPoint, MAX_MEMORY_POINTS};

/// Fewest distinct connection counts a slope is fitted over.
pub const MIN_LEVELS: usize = 3;
/// Least share of the memory's variance the connection count must explain.
pub const MIN_R_SQUARED: f64 = 0.8;

const GC_HINT: &str = "a garbage-collected server's RSS is not a per-connection measure at this \
     scale; use more connections or steps";

/// Adds the point of sampling instant `seq` unless the connection count fell since the last
/// point (connections closing at the end, or a server restart: memory freed on close is not
/// returned at once, so such points measure hysteresis, not the cost of a connection). At the
/// bound, every other point is dropped and the stride doubles, so points stay evenly spread
/// over the samples.
pub fn add_point(
    points: &mut Vec<MemoryPoint>,
    stride: &mut Option<u32>,
    seq: u32,
    p: MemoryPoint,
) {
    if points.last().is_some_and(|l| p.connections < l.connections) {
        return;
    }
    let mut every = stride.unwrap_or(1).max(1);
    if !seq.is_multiple_of(every) {
        return;
    }
    if points.len() >= MAX_MEMORY_POINTS {
        let mut i = 0;
        points.retain(|_| {
            i += 1;
            i % 2 == 1
        });
        every *= 2;
        *stride = Some(every);
        if !seq.is_multiple_of(every) {
            return;
        }
    }
    points.push(p);
}

/// Ordinary least squares of memory (y) on connections (x).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ols {
    pub slope: f64,
    pub intercept: f64,
    pub slope_std_error: f64,
    /// None when memory did not vary at all (nothing to explain).
    pub r_squared: Option<f64>,
    pub n: usize,
}

impl Ols {
    /// Half width of the slope's 95 % interval (Student's t with n − 2 degrees of freedom).
    pub fn half_width(&self) -> f64 {
        t975(self.n as f64 - 2.0) * self.slope_std_error
    }
}

/// None with fewer than 3 points or a single connection count (no slope to estimate).
pub fn ols(points: &[MemoryPoint]) -> Option<Ols> {
    let n = points.len();
    if n < 3 {
        return None;
    }
    let xy: Vec<(f64, f64)> = points
        .iter()
        .map(|p| (p.connections as f64, p.memory_bytes as f64))
        .collect();
    let mx = xy.iter().map(|p| p.0).sum::<f64>() / n as f64;
    let my = xy.iter().map(|p| p.1).sum::<f64>() / n as f64;
    let sxx: f64 = xy.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = xy.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let syy: f64 = xy.iter().map(|p| (p.1 - my).powi(2)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    let intercept = my - slope * mx;
    let ssr: f64 = xy
        .iter()
        .map(|p| (p.1 - intercept - slope * p.0).powi(2))
        .sum();
    Some(Ols {
        slope,
        intercept,
        slope_std_error: (ssr / (n as f64 - 2.0) / sxx).sqrt(),
        r_squared: (syy > 0.0).then(|| (1.0 - ssr / syy).clamp(0.0, 1.0)),
        n,
    })
}

pub fn levels(points: &[MemoryPoint]) -> usize {
    let mut xs: Vec<u64> = points.iter().map(|p| p.connections).collect();
    xs.sort_unstable();
    xs.dedup();
    xs.len()
}

/// The fit of `points` and whether its slope stands as memory per connection: Some(bytes)
/// only when there are 3+ levels, the slope is positive with a 95 % interval above 0, and
/// R² ≥ `MIN_R_SQUARED`. Never 0 and never negative.
pub fn decide(points: &[MemoryPoint]) -> (Option<f64>, MemoryFit) {
    let levels = levels(points);
    let mut fit = MemoryFit {
        points: points.len() as u32,
        levels: levels as u32,
        min_r_squared: MIN_R_SQUARED,
        ..MemoryFit::default()
    };
    if points.is_empty() {
        fit.unavailable = Some(
            "no sample had every server pod's connection count and memory while connections \
             rose or held"
                .into(),
        );
        return (None, fit);
    }
    let Some(o) = ols(points).filter(|_| levels >= MIN_LEVELS) else {
        fit.unavailable = Some(format!(
            "memory sampled at {levels} connection level(s) ({} point(s)); a slope needs \
             {MIN_LEVELS}: set workload.connections.steps (e.g. 5) with stepHoldSeconds of 6 \
             or more",
            points.len()
        ));
        return (None, fit);
    };
    let half = o.half_width();
    let (low, high) = (o.slope - half, o.slope + half);
    fit.slope = Some(round1(o.slope));
    fit.slope_std_error = Some(round1(o.slope_std_error));
    fit.ci95_low = Some(round1(low));
    fit.ci95_high = Some(round1(high));
    fit.r_squared = o.r_squared.map(round3);
    fit.intercept_bytes = Some(o.intercept.round());
    let r2 = o
        .r_squared
        .map_or_else(|| "n/a".to_string(), |r| format!("{r:.2}"));
    let why = if o.slope <= 0.0 {
        Some(format!(
            "memory did not grow with connections (slope {:.0} B/connection, R² {r2}): {GC_HINT}",
            o.slope
        ))
    } else if low <= 0.0 {
        Some(format!(
            "memory growth is within the noise (slope {:.0} B/connection, 95 % interval \
             {low:.0} to {high:.0}, R² {r2}): {GC_HINT}",
            o.slope
        ))
    } else if o.r_squared.unwrap_or(0.0) < MIN_R_SQUARED {
        Some(format!(
            "memory followed connections too loosely (R² {r2} < {MIN_R_SQUARED}, slope {:.0} \
             B/connection): {GC_HINT}",
            o.slope
        ))
    } else {
        None
    };
    let bytes = why.is_none().then(|| round1(o.slope));
    fit.unavailable = why;
    (bytes, fit)
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pts(xy: &[(u64, u64)]) -> Vec<MemoryPoint> {
        xy.iter()
            .map(|&(connections, memory_bytes)| MemoryPoint {
                connections,
                memory_bytes,
            })
            .collect()
    }

    #[test]
    fn a_clean_linear_series_recovers_the_slope() {
        // 10 MB + 8,450 B per connection, ±20 kB of noise, 6 levels × 3 samples.
        let noise = [0i64, 20_000, -20_000];
        let mut xy = Vec::new();
        for level in 0..6u64 {
            for e in noise {
                let c = level * 200;
                xy.push((c, (10_000_000 + 8_450 * c as i64 + e) as u64));
            }
        }
        let (bytes, fit) = decide(&pts(&xy));
        let b = bytes.expect("available");
        assert!((b - 8_450.0).abs() < 50.0, "{fit:?}");
        assert_eq!((fit.points, fit.levels), (18, 6));
        assert!(fit.r_squared.unwrap() > 0.99, "{fit:?}");
        assert!(fit.ci95_low.unwrap() > 8_300.0 && fit.ci95_high.unwrap() < 8_600.0);
        assert_eq!(fit.intercept_bytes, Some(10_000_000.0));
        assert!(fit.unavailable.is_none());
    }

    #[test]
    fn exact_points_give_the_exact_slope_and_standard_error() {
        // y = 1000 + 10x + e, e = (+1, -2, +1) around the fit: slope 10 exactly.
        let o = ols(&pts(&[(0, 1_001), (1, 1_008), (2, 1_021)])).unwrap();
        assert!((o.slope - 10.0).abs() < 1e-9, "{o:?}");
        assert!((o.intercept - 1_000.0).abs() < 1e-9);
        // SSR 6, sxx 2, df 1: se = sqrt(6 / 1 / 2).
        assert!((o.slope_std_error - 3f64.sqrt()).abs() < 1e-9);
        // syy = 200 + 6 → R² = 1 − 6/206.
        assert!((o.r_squared.unwrap() - (1.0 - 6.0 / 206.0)).abs() < 1e-9);
        // df 1: t = 12.706 (to the table's 3 decimals).
        assert!((o.half_width() - 12.706 * 3f64.sqrt()).abs() < 1e-3);
    }

    #[test]
    fn falling_memory_is_unavailable_with_the_reason() {
        // Issue 12: baseline 35.6 MB, 300 connections in 5 steps, memory fell to 33.8 MB.
        let xy = [
            (0, 35_600_000),
            (60, 35_100_000),
            (60, 34_900_000),
            (120, 35_300_000),
            (180, 34_400_000),
            (240, 34_000_000),
            (300, 33_800_000),
            (300, 33_900_000),
        ];
        let (bytes, fit) = decide(&pts(&xy));
        assert_eq!(bytes, None);
        let why = fit.unavailable.clone().unwrap();
        assert!(
            why.starts_with("memory did not grow with connections"),
            "{why}"
        );
        assert!(why.contains("garbage-collected"), "{why}");
        assert!(
            fit.slope.unwrap() < 0.0,
            "the rejected slope is shown: {fit:?}"
        );
        // The old single step: baseline and one level only.
        let (bytes, fit) = decide(&pts(&[
            (0, 35_600_000),
            (300, 33_800_000),
            (300, 34_000_000),
        ]));
        assert_eq!(bytes, None);
        let why = fit.unavailable.unwrap();
        assert!(why.contains("2 connection level(s)"), "{why}");
        assert!(why.contains("connections.steps"), "{why}");
    }

    #[test]
    fn noise_and_loose_fits_are_unavailable() {
        // Positive slope, but the interval includes 0.
        let xy = [
            (0, 30_000_000),
            (100, 36_000_000),
            (200, 29_000_000),
            (300, 35_000_000),
        ];
        let (bytes, fit) = decide(&pts(&xy));
        assert_eq!(bytes, None);
        assert!(
            fit.unavailable
                .unwrap()
                .starts_with("memory growth is within the noise"),
            "{:?}",
            fit.slope
        );
        // Significant (many points) but R² below the threshold.
        let mut xy = Vec::new();
        for i in 0..60u64 {
            let c = (i % 6) * 100;
            let wobble = if i % 2 == 0 { 3_000_000 } else { 0 };
            xy.push((c, 30_000_000 + 10_000 * c + wobble));
        }
        let (bytes, fit) = decide(&pts(&xy));
        assert_eq!(bytes, None, "{fit:?}");
        assert!(fit.ci95_low.unwrap() > 0.0, "{fit:?}");
        assert!(
            fit.unavailable
                .unwrap()
                .starts_with("memory followed connections too loosely"),
            "{:?}",
            fit.r_squared
        );
        // Memory identical everywhere: slope 0, no R².
        let (bytes, fit) = decide(&pts(&[(0, 5), (1, 5), (2, 5)]));
        assert_eq!(bytes, None);
        assert!(fit.unavailable.unwrap().contains("R² n/a"));
        let (_, fit) = decide(&[]);
        assert!(fit.unavailable.unwrap().starts_with("no sample"));
    }

    #[test]
    fn points_stop_when_connections_fall_and_thin_evenly() {
        let p = |c, m| MemoryPoint {
            connections: c,
            memory_bytes: m,
        };
        let (mut points, mut stride) = (Vec::new(), None);
        add_point(&mut points, &mut stride, 0, p(0, 10));
        add_point(&mut points, &mut stride, 1, p(100, 20));
        add_point(&mut points, &mut stride, 2, p(0, 19)); // closing: hysteresis, not cost
        add_point(&mut points, &mut stride, 3, p(100, 21));
        assert_eq!(points, [p(0, 10), p(100, 20), p(100, 21)]);

        let (mut points, mut stride) = (Vec::new(), None);
        for seq in 0..200u32 {
            add_point(&mut points, &mut stride, seq, p(u64::from(seq), 0));
        }
        assert!(points.len() <= MAX_MEMORY_POINTS);
        assert_eq!(stride, Some(4));
        // Evenly spaced from the first sample to the last kept one.
        let xs: Vec<u64> = points.iter().map(|p| p.connections).collect();
        assert_eq!(xs[0], 0);
        assert!(xs.windows(2).all(|w| w[1] - w[0] == 4), "{xs:?}");
        assert_eq!(*xs.last().unwrap(), 196);
    }
}
