//! Paired per-round ratios of each variant against the baseline variant, beside the
//! operator's estimate and 95 % interval from `status.variantComparison`.
use msgbench_crds::benchmark_run::{BenchmarkRunStatus, PairedFigure, TrialFigures};

/// One (variant, figure) row of the ratio chart.
#[derive(Clone, Debug)]
pub struct RatioRow<'a> {
    pub figure: &'a PairedFigure,
    /// (round, variant ÷ baseline) for every round both ran with a non-zero baseline.
    pub rounds: Vec<(i32, f64)>,
}

impl RatioRow<'_> {
    pub fn label(&self) -> String {
        format!("{} {}", self.figure.variant, self.figure.figure)
    }
}

/// A per-round figure by its status name; None for a name this version does not know.
pub fn trial_figure(t: &TrialFigures, figure: &str) -> Option<f64> {
    match figure {
        "deliveryRate" => t.delivery_rate,
        "receiveRate" => Some(t.receive_rate),
        "publishRate" => Some(t.publish_rate),
        "p50Ms" => Some(t.p50_ms),
        "p99Ms" => Some(t.p99_ms),
        _ => None,
    }
}

/// Rows in status order; rounds pair by round number, as the operator pairs them.
pub fn ratio_rows(s: &BenchmarkRunStatus) -> Vec<RatioRow<'_>> {
    let Some(vc) = &s.variant_comparison else {
        return vec![];
    };
    let trials = |name: &str| {
        s.variants
            .iter()
            .find(|v| v.name == name)
            .map_or(&[][..], |v| &v.trials[..])
    };
    let base = trials(&vc.baseline);
    vc.figures
        .iter()
        .filter(|f| f.variant != vc.baseline)
        .map(|f| {
            let rounds = trials(&f.variant)
                .iter()
                .filter_map(|t| {
                    let b = base.iter().find(|b| b.trial == t.trial)?;
                    let (v, b) = (trial_figure(t, &f.figure)?, trial_figure(b, &f.figure)?);
                    // A ratio to 0 is undefined: that round is left out, not drawn at infinity.
                    (b != 0.0).then(|| (t.trial, v / b))
                })
                .collect();
            RatioRow { figure: f, rounds }
        })
        .collect()
}
