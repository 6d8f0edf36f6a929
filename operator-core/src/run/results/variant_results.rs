//! Result lines of a variants run → status: each variant merged on its own, thresholds per
//! variant, and the paired comparison against the baseline variant. Pure.
use crate::run::faults::effect as fault_effect;
use crate::run::results::{paired, ResultsError};
use crate::run::{results, variants};
use msgbench_crds::benchmark_run::{BenchmarkRun, BenchmarkRunStatus, Threshold, VariantResult};
use runner_api::agent::RawResultLine;

/// Fills `st.variants`, `st.variantComparison`, `st.thresholds` and `st.headline` (the baseline
/// variant's figures plus the comparison summary). `targets(name)`: a variant's target as shown.
pub fn apply(
    br: &BenchmarkRun,
    st: &mut BenchmarkRunStatus,
    lines: &[RawResultLine],
    runners: usize,
    targets: impl Fn(&str) -> String,
) -> Result<(), ResultsError> {
    let names: Vec<String> = br.spec.variants.iter().map(|v| v.name.clone()).collect();
    let baseline = variants::baseline(&br.spec).unwrap_or_default();
    if st.schedule.is_empty() {
        return Err(ResultsError::ScheduleMissing);
    }
    let mut merged = results::collect_variants(lines, runners, &st.schedule, &names)?;
    for (name, c) in merged.iter_mut() {
        c.result.faults = fault_effect::summary(&st.faults, Some(name));
    }
    st.thresholds = merged
        .iter()
        .flat_map(|(name, c)| {
            results::evaluate(&c.result, &thresholds_of(&br.spec.thresholds, name))
                .into_iter()
                .map(move |mut t| {
                    t.variant = Some(name.clone());
                    t
                })
        })
        .collect();
    let per_round: Vec<(String, Vec<_>)> = merged
        .iter()
        .map(|(n, c)| (n.clone(), c.trials.clone()))
        .collect();
    let comparison = paired::compare(&baseline, &per_round);
    let mut headline = merged
        .iter()
        .find(|(n, _)| *n == baseline)
        .map(|(_, c)| c.headline.clone())
        .unwrap_or_default();
    let closed_loop = merged.iter().any(|(_, c)| c.result.closed_loop);
    headline.comparison = Some(paired::summary(&comparison, closed_loop));
    st.headline = Some(headline);
    st.variant_comparison = Some(comparison);
    st.variants = merged
        .into_iter()
        .map(|(name, c)| VariantResult {
            target: targets(&name),
            name,
            headline: c.headline,
            result: Some(c.result),
            trials: c.trials,
            statistics: c.statistics,
        })
        .collect();
    Ok(())
}

/// The thresholds that test `variant`: those naming it, and those naming no variant.
fn thresholds_of(all: &[Threshold], variant: &str) -> Vec<Threshold> {
    (all.iter())
        .filter(|t| t.variants.is_empty() || t.variants.iter().any(|v| v == variant))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use msgbench_crds::benchmark_run::{Metric, Severity, ThresholdOp};

    #[test]
    fn a_threshold_naming_variants_tests_only_those() {
        let t = |variants: &[&str]| Threshold {
            metric: Metric::LostAcked,
            op: ThresholdOp::Le,
            value: 0.0,
            severity: Severity::Fail,
            variants: variants.iter().map(|v| v.to_string()).collect(),
        };
        let all = [t(&["always"]), t(&[]), t(&["default", "always"])];
        assert_eq!(thresholds_of(&all, "always").len(), 3);
        let default = thresholds_of(&all, "default");
        assert_eq!(default.len(), 2);
        assert!(default.iter().all(|t| t.variants != ["always"]));
    }
}
