//! This run against `spec.baselineRef`: ratio, difference and Welch significance per headline
//! figure, from both runs' per-trial figures.
use crate::run::conditions::BASELINE_NOT_FINISHED;
use crate::run::model::BaselineSeen;
use crate::run::results::stats;
use msgbench_crds::benchmark_run::{BaselineComparison, FigureComparison, Phase, TrialFigures};

/// Pure: the comparison against the baseline as observed (`None`: it does not exist).
pub fn with_baseline(
    name: &str,
    seen: Option<&BaselineSeen>,
    current: &[TrialFigures],
) -> BaselineComparison {
    let mut out = BaselineComparison {
        baseline: name.into(),
        ..BaselineComparison::default()
    };
    let Some(state) = seen.and_then(|s| s.state.as_ref()) else {
        out.reason = Some("BaselineNotFound".into());
        return out;
    };
    out.reason = match state.ended {
        Some(Phase::Succeeded) if state.trials.is_empty() => Some("BaselineHasNoTrials".into()),
        Some(Phase::Succeeded) => None,
        Some(_) => Some("BaselineFailed".into()),
        None => Some(BASELINE_NOT_FINISHED.into()),
    };
    if out.reason.is_none() {
        out.baseline_generation = state.observed_generation;
        out.figures = figures(&state.trials, current);
    }
    out
}

/// A trial's figure, `None` where the trial lacks it.
type Figure = fn(&TrialFigures) -> Option<f64>;

/// Pure: one row per headline figure both runs have (a baseline recorded before
/// `deliveryRate` existed, or a run without deliveries, has no `deliveryRate` row).
pub fn figures(base: &[TrialFigures], cur: &[TrialFigures]) -> Vec<FigureComparison> {
    let rows: [(&str, Figure); 5] = [
        ("deliveryRate", |t| t.delivery_rate),
        ("receiveRate", |t| Some(t.receive_rate)),
        ("publishRate", |t| Some(t.publish_rate)),
        ("p50Ms", |t| Some(t.p50_ms)),
        ("p99Ms", |t| Some(t.p99_ms)),
    ];
    rows.iter()
        .filter_map(|(name, f)| {
            let a: Vec<f64> = base.iter().filter_map(f).collect();
            let b: Vec<f64> = cur.iter().filter_map(f).collect();
            if a.is_empty() || b.is_empty() {
                return None;
            }
            let (ma, mb) = (stats::mean(&a), stats::mean(&b));
            Some(FigureComparison {
                figure: (*name).into(),
                baseline: stats::round3(ma),
                current: stats::round3(mb),
                ratio: if ma != 0.0 {
                    stats::round3(mb / ma)
                } else {
                    0.0
                },
                difference: stats::round3(mb - ma),
                significant: stats::significantly_different(&a, &b),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(rate: f64, p99: f64) -> TrialFigures {
        TrialFigures {
            receive_rate: rate,
            delivery_rate: Some(rate * 0.9),
            publish_rate: rate,
            p50_ms: p99 / 2.0,
            p99_ms: p99,
            ..TrialFigures::default()
        }
    }

    #[test]
    fn r2_against_r1_reports_ratio_difference_and_significance() {
        let r1 = [t(47_000.0, 3.6), t(46_000.0, 3.7), t(48_000.0, 3.5)];
        let r2 = [t(26_000.0, 6.6), t(27_000.0, 6.4), t(25_000.0, 6.8)];
        let f = figures(&r1, &r2);
        let rate = &f[1];
        assert_eq!(rate.figure, "receiveRate");
        assert_eq!((rate.baseline, rate.current), (47_000.0, 26_000.0));
        assert_eq!(rate.ratio, 0.553);
        assert_eq!(rate.difference, -21_000.0);
        assert!(rate.significant);
        assert_eq!((f[0].figure.as_str(), f[0].ratio), ("deliveryRate", 0.553));
        // A single trial on one side can never be called significant.
        assert!(figures(&r1[..1], &r2).iter().all(|x| !x.significant));
    }

    #[test]
    fn a_baseline_without_delivery_rate_gets_no_delivery_rate_row() {
        let old = [t(47_000.0, 3.6), t(46_000.0, 3.7)].map(|mut x| {
            x.delivery_rate = None;
            x
        });
        let f = figures(&old, &[t(26_000.0, 6.6), t(27_000.0, 6.4)]);
        let names: Vec<&str> = f.iter().map(|x| x.figure.as_str()).collect();
        assert_eq!(names, ["receiveRate", "publishRate", "p50Ms", "p99Ms"]);
    }
}
