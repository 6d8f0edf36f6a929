//! Paired comparison of variants that ran interleaved: every round ran every variant, so a
//! round's drift (a noisy neighbour, a GC, a slower disk) hits them alike and cancels in the
//! per-round ratio or difference. Throughput: geometric mean of the per-round ratios with a
//! Student-t interval on their logarithms. Latency: mean of the per-round differences with a
//! Student-t interval.
use crate::run::results::stats::{half_width95, mean, round3};
use msgbench_crds::benchmark_run::{
    ComparisonVerdict, PairedEstimate, PairedFigure, TrialFigures, VariantComparison,
};

/// Which way is good for a figure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Better {
    Higher,
    Lower,
}

/// A round's figure, `None` where the round lacks it.
pub type Figure = fn(&TrialFigures) -> Option<f64>;
const FIGURES: [(&str, Figure, Better); 5] = [
    ("deliveryRate", |t| t.delivery_rate, Better::Higher),
    ("receiveRate", |t| Some(t.receive_rate), Better::Higher),
    ("publishRate", |t| Some(t.publish_rate), Better::Higher),
    ("p50Ms", |t| Some(t.p50_ms), Better::Lower),
    ("p99Ms", |t| Some(t.p99_ms), Better::Lower),
];

pub const METHOD: &str = "paired by round: throughput as the geometric mean of per-round ratios, \
latency as the mean of per-round differences, 95 % Student-t intervals over rounds";

/// Mean of `xs` with its 95 % interval, or no interval below 2 values.
fn interval(xs: &[f64]) -> (f64, Option<(f64, f64)>) {
    let m = mean(xs);
    if xs.len() < 2 {
        return (m, None);
    }
    let half = half_width95(xs);
    (m, Some((m - half, m + half)))
}

/// variant ÷ baseline of each round where both are above 0 (elsewhere no ratio exists).
fn round_ratios(base: &[f64], var: &[f64]) -> Vec<f64> {
    base.iter()
        .zip(var)
        .filter(|(b, v)| **b > 0.0 && **v > 0.0)
        .map(|(b, v)| v / b)
        .collect()
}

/// ln of each round's ratio: the scale the interval is taken on.
fn log_ratios(base: &[f64], var: &[f64]) -> Vec<f64> {
    round_ratios(base, var).iter().map(|r| r.ln()).collect()
}

/// A paired estimate at full precision, before `ratio`/`difference` round it to 3 decimals
/// for the status: `kubectl msgbench stats` prints it whole, as the bench tables show small
/// values to two significant digits (0.0021). `min`, `max`: of the per-round values.
#[derive(Clone, Debug, PartialEq)]
pub struct Unrounded {
    /// Rounds that gave a value.
    pub n: usize,
    pub estimate: f64,
    /// None below 2 rounds.
    pub ci95: Option<(f64, f64)>,
    pub min: f64,
    pub max: f64,
}

fn min_max(xs: &[f64]) -> (f64, f64) {
    let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
    (min, xs.iter().copied().fold(f64::NEG_INFINITY, f64::max))
}

/// variant ÷ baseline per round, on the log scale (rounds where either side is 0 are skipped:
/// no ratio exists). None without a round.
pub fn ratio_unrounded(base: &[f64], var: &[f64]) -> Option<Unrounded> {
    let ratios = round_ratios(base, var);
    if ratios.is_empty() {
        return None;
    }
    let logs: Vec<f64> = ratios.iter().map(|r| r.ln()).collect();
    let (m, ci) = interval(&logs);
    let (min, max) = min_max(&ratios);
    Some(Unrounded {
        n: ratios.len(),
        estimate: m.exp(),
        ci95: ci.map(|c| (c.0.exp(), c.1.exp())),
        min,
        max,
    })
}

/// variant − baseline per round. None without a round.
pub fn difference_unrounded(base: &[f64], var: &[f64]) -> Option<Unrounded> {
    let d: Vec<f64> = base.iter().zip(var).map(|(b, v)| v - b).collect();
    if d.is_empty() {
        return None;
    }
    let (m, ci) = interval(&d);
    let (min, max) = min_max(&d);
    Some(Unrounded {
        n: d.len(),
        estimate: m,
        ci95: ci,
        min,
        max,
    })
}

/// The status's form: 3 decimals, no interval below 2 rounds, all 0 without a round.
fn rounded(u: Option<Unrounded>) -> PairedEstimate {
    let Some(u) = u else {
        return PairedEstimate::default();
    };
    PairedEstimate {
        estimate: round3(u.estimate),
        ci95_low: u.ci95.map(|c| round3(c.0)),
        ci95_high: u.ci95.map(|c| round3(c.1)),
    }
}

/// variant ÷ baseline per round, rounded for the status (see `ratio_unrounded`).
pub fn ratio(base: &[f64], var: &[f64]) -> PairedEstimate {
    rounded(ratio_unrounded(base, var))
}

/// How far the ratio's 95 % interval reaches from its estimate, in percent of it (the larger
/// side: the interval is symmetric on the log scale, so `e^h − 1`). `None` below 2 rounds with
/// both figures above 0.
pub fn ratio_spread_percent(base: &[f64], var: &[f64]) -> Option<f64> {
    let (m, ci) = interval(&log_ratios(base, var));
    ci.map(|(lo, _)| ((m - lo).exp() - 1.0) * 100.0)
}

/// variant − baseline per round, rounded for the status.
pub fn difference(base: &[f64], var: &[f64]) -> PairedEstimate {
    rounded(difference_unrounded(base, var))
}

/// Better/Worse when the interval excludes `none` (no change), else no significant difference.
fn verdict(e: &PairedEstimate, none: f64, better: Better) -> ComparisonVerdict {
    let (Some(lo), Some(hi)) = (e.ci95_low, e.ci95_high) else {
        return ComparisonVerdict::InsufficientRounds;
    };
    let above = lo > none;
    let below = hi < none;
    match (above, below, better) {
        (true, _, Better::Higher) | (_, true, Better::Lower) => ComparisonVerdict::Better,
        (true, _, Better::Lower) | (_, true, Better::Higher) => ComparisonVerdict::Worse,
        _ => ComparisonVerdict::NoSignificantDifference,
    }
}

/// Figures of the rounds both sides completed and have the figure for, in round order.
pub fn paired(base: &[TrialFigures], var: &[TrialFigures], f: Figure) -> (Vec<f64>, Vec<f64>) {
    base.iter()
        .filter_map(|b| {
            let v = var.iter().find(|v| v.trial == b.trial)?;
            Some((f(b)?, f(v)?))
        })
        .unzip()
}

/// Every variant other than `baseline` against it. `variants`: (name, per-round figures with
/// `trial` = round).
pub fn compare(baseline: &str, variants: &[(String, Vec<TrialFigures>)]) -> VariantComparison {
    let empty = Vec::new();
    let base = variants
        .iter()
        .find(|(n, _)| n == baseline)
        .map_or(&empty, |(_, t)| t);
    let mut out = VariantComparison {
        baseline: baseline.into(),
        rounds: base.len() as i32,
        method: METHOD.into(),
        figures: Vec::new(),
    };
    for (name, trials) in variants.iter().filter(|(n, _)| n != baseline) {
        for (figure, f, better) in FIGURES {
            if base.iter().chain(trials).all(|t| f(t).is_none()) {
                continue; // no round has it (nothing published): no row, not a row of 0s
            }
            let (b, v) = paired(base, trials, f);
            let r = ratio(&b, &v);
            let d = difference(&b, &v);
            let verdict = match better {
                Better::Higher => verdict(&r, 1.0, better),
                Better::Lower => verdict(&d, 0.0, better),
            };
            out.figures.push(PairedFigure {
                variant: name.clone(),
                figure: figure.into(),
                baseline: round3(mean(&b)),
                current: round3(mean(&v)),
                ratio: r,
                difference: d,
                verdict,
            });
        }
    }
    out
}

/// Printer-column summary, one entry per variant. Closed loop (throughput is the outcome):
/// the delivery-rate ratio (the headline's throughput) with the interval's larger half width,
/// e.g. `r2/r1 0.62× ±0.08`.
/// Open loop (throughput is the offered rate): the p99 difference, e.g. `r2-r1 p99 +3.1ms ±0.9`.
/// `±?` with a single round.
pub fn summary(c: &VariantComparison, closed_loop: bool) -> String {
    let has_delivery = c.figures.iter().any(|f| f.figure == "deliveryRate");
    let figure = match (closed_loop, has_delivery) {
        (true, true) => "deliveryRate",
        (true, false) => "receiveRate",
        (false, _) => "p99Ms",
    };
    let half = |e: &PairedEstimate, fmt: &dyn Fn(f64) -> String| match (e.ci95_low, e.ci95_high) {
        (Some(lo), Some(hi)) => format!("±{}", fmt((hi - e.estimate).max(e.estimate - lo))),
        _ => "±?".into(),
    };
    c.figures
        .iter()
        .filter(|f| f.figure == figure)
        .map(|f| {
            if closed_loop {
                let r = &f.ratio;
                let h = half(r, &|x| format!("{x:.2}"));
                format!("{}/{} {:.2}× {h}", f.variant, c.baseline, r.estimate)
            } else {
                let d = &f.difference;
                let h = half(d, &|x| format!("{x:.1}"));
                format!("{}-{} p99 {:+.1}ms {h}", f.variant, c.baseline, d.estimate)
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::results::stats::significantly_different;

    fn fig(round: i32, rate: f64, p99: f64) -> TrialFigures {
        TrialFigures {
            trial: round,
            receive_rate: rate,
            delivery_rate: Some(rate),
            publish_rate: rate,
            p50_ms: p99 / 3.0,
            p99_ms: p99,
            ..TrialFigures::default()
        }
    }

    /// The motivating case: the machine's speed drifts between rounds by more than the effect
    /// (77k then 40k msg/s for R1). R2 costs 10 % throughput and adds 2 ms of p99 in every
    /// round, plus ±1 % noise. Comparing pooled means cannot see it; pairing by round does.
    #[test]
    fn paired_rounds_recover_an_effect_that_drift_hides_from_pooled_means() {
        let drift = [77_000.0, 40_000.0, 63_000.0, 45_000.0, 70_000.0, 52_000.0];
        let noise = [1.004, 0.993, 1.009, 0.996, 1.002, 0.991];
        let p99_base = [6.0, 11.0, 7.5, 10.0, 6.5, 9.0];
        let r1: Vec<_> = (0..6)
            .map(|i| fig(i as i32 + 1, drift[i], p99_base[i]))
            .collect();
        let r2: Vec<_> = (0..6)
            .map(|i| {
                fig(
                    i as i32 + 1,
                    drift[i] * 0.9 * noise[i],
                    p99_base[i] + 2.0 * noise[i],
                )
            })
            .collect();

        // Pooled (Welch on the two sets of trials): no significant difference in either figure.
        let rates = |v: &[TrialFigures]| v.iter().map(|t| t.receive_rate).collect::<Vec<_>>();
        let p99s = |v: &[TrialFigures]| v.iter().map(|t| t.p99_ms).collect::<Vec<_>>();
        assert!(!significantly_different(&rates(&r1), &rates(&r2)));
        assert!(!significantly_different(&p99s(&r1), &p99s(&r2)));

        let c = compare("r1", &[("r1".into(), r1), ("r2".into(), r2)]);
        assert_eq!((c.baseline.as_str(), c.rounds), ("r1", 6));
        let rate = c
            .figures
            .iter()
            .find(|f| f.figure == "receiveRate")
            .unwrap();
        let (lo, hi) = (rate.ratio.ci95_low.unwrap(), rate.ratio.ci95_high.unwrap());
        assert!(
            lo < 0.9 && 0.9 < hi,
            "interval {lo}..{hi} misses the true 0.9"
        );
        assert!(hi < 1.0, "interval {lo}..{hi} should exclude 1");
        assert!(hi - lo < 0.03, "paired interval {lo}..{hi} should be tight");
        assert_eq!(rate.verdict, ComparisonVerdict::Worse);
        let p99 = c.figures.iter().find(|f| f.figure == "p99Ms").unwrap();
        let (lo, hi) = (
            p99.difference.ci95_low.unwrap(),
            p99.difference.ci95_high.unwrap(),
        );
        assert!(
            lo < 2.0 && 2.0 < hi && lo > 0.0,
            "p99 difference {lo}..{hi}"
        );
        assert_eq!(p99.verdict, ComparisonVerdict::Worse);
        let (closed, open) = (summary(&c, true), summary(&c, false));
        assert!(closed.starts_with("r2/r1 0.90× ±0.0"), "{closed}");
        assert!(open.starts_with("r2-r1 p99 +2.0ms ±0."), "{open}");
    }

    #[test]
    fn no_effect_is_no_significant_difference_and_one_round_has_no_interval() {
        let a: Vec<_> = (1..=4).map(|r| fig(r, 1000.0 * r as f64, 5.0)).collect();
        let b: Vec<_> = [1.01, 0.99, 1.005, 0.995]
            .iter()
            .zip(1..)
            .map(|(n, r)| fig(r, 1000.0 * r as f64 * n, 5.0 * n))
            .collect();
        let c = compare("a", &[("a".into(), a.clone()), ("b".into(), b.clone())]);
        assert!(c
            .figures
            .iter()
            .all(|f| f.verdict == ComparisonVerdict::NoSignificantDifference));
        let one = compare(
            "a",
            &[("a".into(), a[..1].to_vec()), ("b".into(), b[..1].to_vec())],
        );
        assert!(one
            .figures
            .iter()
            .all(|f| f.verdict == ComparisonVerdict::InsufficientRounds
                && f.ratio.ci95_low.is_none()));
        assert_eq!(summary(&one, true), "b/a 1.01× ±?");
        assert_eq!(summary(&one, false), "b-a p99 +0.1ms ±?");
    }

    #[test]
    fn unrounded_keeps_the_digits_the_status_rounds_away() {
        // Ratios 0.0021 and 0.0023: geometric mean sqrt(0.0021 × 0.0023) = 0.0021977…
        let u = ratio_unrounded(&[1.0, 1.0], &[0.0021, 0.0023]).unwrap();
        assert_eq!(u.n, 2);
        assert!((u.estimate - (0.0021f64 * 0.0023).sqrt()).abs() < 1e-15);
        assert_eq!((u.min, u.max), (0.0021, 0.0023));
        assert_eq!(ratio(&[1.0, 1.0], &[0.0021, 0.0023]).estimate, 0.002);
        // Differences 1, 2, 3: mean 2, half width t(0.975, 2) / sqrt(3) = 4.303 / sqrt(3).
        let d = difference_unrounded(&[1.0, 2.0, 3.0], &[2.0, 4.0, 6.0]).unwrap();
        let (lo, hi) = d.ci95.unwrap();
        assert!(
            (hi - 2.0 - 4.302_653 / 3f64.sqrt()).abs() < 1e-6
                && (2.0 - lo - (hi - 2.0)).abs() < 1e-12
        );
        assert_eq!((d.n, d.estimate, d.min, d.max), (3, 2.0, 1.0, 3.0));
        // One round: no interval; no round (or only zeros for a ratio): nothing.
        assert_eq!(ratio_unrounded(&[2.0], &[1.0]).unwrap().ci95, None);
        assert_eq!(ratio_unrounded(&[0.0, 1.0], &[1.0, 0.0]), None);
        assert_eq!(difference_unrounded(&[], &[]), None);
    }

    #[test]
    fn lower_latency_and_higher_throughput_are_better() {
        let a: Vec<_> = (1..=3)
            .map(|r| fig(r, 100.0 * r as f64, 10.0 + r as f64))
            .collect();
        let b: Vec<_> = (1..=3)
            .map(|r| fig(r, 150.0 * r as f64 + r as f64, 5.0 + r as f64 * 1.1))
            .collect();
        let c = compare("a", &[("a".into(), a), ("b".into(), b)]);
        assert!(c
            .figures
            .iter()
            .all(|f| f.verdict == ComparisonVerdict::Better));
    }
}
