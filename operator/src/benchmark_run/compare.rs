//! This run against `spec.baselineRef`: ratio, difference and Welch significance per headline
//! figure, from both runs' per-trial figures.
use super::stats;
use crate::context::Context;
use crate::error::Result;
use kube::Api;
use msgbench_crds::benchmark_run::{
    BaselineComparison, BenchmarkRun, FigureComparison, Outcome, TrialFigures,
};

pub async fn against(
    ctx: &Context,
    ns: &str,
    baseline: &str,
    current: &[TrialFigures],
) -> Result<BaselineComparison> {
    let b = Api::<BenchmarkRun>::namespaced(ctx.client.clone(), ns)
        .get_opt(baseline)
        .await?;
    let mut out = BaselineComparison {
        baseline: baseline.into(),
        ..BaselineComparison::default()
    };
    let Some(b) = b else {
        out.reason = Some("BaselineNotFound".into());
        return Ok(out);
    };
    let st = b.status.unwrap_or_default();
    let passed = st
        .verdict
        .as_ref()
        .is_some_and(|v| v.outcome == Outcome::Passed);
    if !passed || st.trials.is_empty() {
        out.reason = Some("BaselineNotFinished".into());
        return Ok(out);
    }
    out.baseline_generation = st.observed_generation;
    out.figures = figures(&st.trials, current);
    Ok(out)
}

/// Whether the baseline exists and has not reached a verdict yet.
pub async fn baseline_running(ctx: &Context, ns: &str, baseline: &str) -> Result<bool> {
    let b = Api::<BenchmarkRun>::namespaced(ctx.client.clone(), ns)
        .get_opt(baseline)
        .await?;
    Ok(b.is_some_and(|b| b.status.and_then(|s| s.verdict).is_none()))
}

type Figure = fn(&TrialFigures) -> f64;

/// Pure: one row per headline figure.
pub fn figures(base: &[TrialFigures], cur: &[TrialFigures]) -> Vec<FigureComparison> {
    let rows: [(&str, Figure); 4] = [
        ("receiveRate", |t| t.receive_rate),
        ("publishRate", |t| t.publish_rate),
        ("p50Ms", |t| t.p50_ms),
        ("p99Ms", |t| t.p99_ms),
    ];
    rows.iter()
        .map(|(name, f)| {
            let a: Vec<f64> = base.iter().map(f).collect();
            let b: Vec<f64> = cur.iter().map(f).collect();
            let (ma, mb) = (stats::mean(&a), stats::mean(&b));
            FigureComparison {
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
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(rate: f64, p99: f64) -> TrialFigures {
        TrialFigures {
            receive_rate: rate,
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
        let rate = &f[0];
        assert_eq!(rate.figure, "receiveRate");
        assert_eq!((rate.baseline, rate.current), (47_000.0, 26_000.0));
        assert_eq!(rate.ratio, 0.553);
        assert_eq!(rate.difference, -21_000.0);
        assert!(rate.significant);
        // A single trial on one side can never be called significant.
        assert!(figures(&r1[..1], &r2).iter().all(|x| !x.significant));
    }
}
