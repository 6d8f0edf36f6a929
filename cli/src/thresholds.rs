//! A threshold outcome (`status.thresholds`) in words: the gate's lines, its JUnit test cases
//! and the thresholds table all say the same thing the same way.
use msgbench_crds::benchmark_run::{Metric, Severity, ThresholdOp, ThresholdResult};

use crate::doc::{Cell, Doc};
use crate::run_view::Run;

/// The metric as the spec spells it (`latencyP99Ms`).
pub fn metric_name(m: Metric) -> String {
    match serde_json::to_value(m) {
        Ok(serde_json::Value::String(s)) => s,
        _ => format!("{m:?}"),
    }
}

pub fn op_symbol(op: ThresholdOp) -> &'static str {
    match op {
        ThresholdOp::Lt => "<",
        ThresholdOp::Le => "<=",
        ThresholdOp::Gt => ">",
        ThresholdOp::Ge => ">=",
    }
}

/// The metric's unit, as a suffix (empty for fractions and counts).
pub fn unit(m: Metric) -> &'static str {
    use Metric::*;
    match m {
        PublishRate | ReceiveRate | DeliveryRate => " msg/s",
        ConnectRate => " conn/s",
        LatencyP50Ms | LatencyP90Ms | LatencyP95Ms | LatencyP99Ms | LatencyP999Ms
        | LatencyMaxMs | PublishAckP99Ms | PublishStallMs | ConnectP99Ms => " ms",
        RecoverySeconds => " s",
        DeliveredRatio | Errors | Duplicates | OutOfOrder | LostAcked | AckedNotKept => "",
    }
}

/// Why the operator found no figure for `m` (it fails the threshold: nothing proves it held).
pub fn why_unavailable(m: Metric) -> &'static str {
    use Metric::*;
    match m {
        LostAcked => {
            "publishes are not acknowledged in this workload, or a crash left its servers down \
             past the drain (faults.downPastDrain)"
        }
        AckedNotKept => {
            "not a JetStream run, or its stream could not be read back after the drain \
             (result.ackedNotKeptUnavailable says why)"
        }
        PublishStallMs | PublishAckP99Ms => {
            "the server does not acknowledge publishes in this workload"
        }
        LatencyP50Ms | LatencyP90Ms | LatencyP95Ms | LatencyP99Ms | LatencyP999Ms
        | LatencyMaxMs => "no deliveries were measured, so there is no latency",
        ConnectRate | ConnectP99Ms => "the result has no connection figures",
        DeliveryRate => {
            "no end-to-end window: nothing was published, or the runners' records predate it"
        }
        RecoverySeconds => "a fault never recovered, or none was carried out",
        _ => "the result lacks this metric",
    }
}

/// `r2: latencyP99Ms <= 5` (the variant only with variants).
pub fn name(t: &ThresholdResult) -> String {
    let variant = t
        .variant
        .as_ref()
        .map_or(String::new(), |v| format!("{v}: "));
    format!(
        "{variant}{} {} {}",
        metric_name(t.metric),
        op_symbol(t.op),
        t.value
    )
}

/// `observed 7.2 ms, limit <= 5 ms`, or why there is no observed figure.
pub fn observed_vs_limit(t: &ThresholdResult) -> String {
    let u = unit(t.metric);
    let limit = format!("limit {} {}{u}", op_symbol(t.op), t.value);
    match t.observed {
        Some(o) => format!("observed {o}{u}, {limit}"),
        None => format!(
            "observed unavailable ({}), {limit}",
            why_unavailable(t.metric)
        ),
    }
}

/// A threshold that fails the run: not held, severity fail.
pub fn breaks_run(t: &ThresholdResult) -> bool {
    !t.passed && t.severity == Severity::Fail
}

/// A threshold that was not held but only warns.
pub fn warns(t: &ThresholdResult) -> bool {
    !t.passed && t.severity == Severity::Warn
}

/// The word for a threshold's outcome.
pub fn outcome(t: &ThresholdResult) -> &'static str {
    match (t.passed, t.severity) {
        (true, _) => "held",
        (false, Severity::Fail) => "NOT HELD",
        (false, Severity::Warn) => "not held (warn only)",
    }
}

/// One row per threshold: what was tested, what was observed, and whether it held.
pub fn table(doc: &mut dyn Doc, run: &Run) {
    let ts = &run.status.thresholds;
    if ts.is_empty() {
        doc.note("No thresholds in status.");
        return;
    }
    let head = ["threshold", "observed", "severity", "outcome"];
    let rows: Vec<Vec<Cell>> = ts
        .iter()
        .map(|t| {
            let observed = match t.observed {
                Some(o) => Cell::text(&format!("{o}{}", unit(t.metric))),
                None => Cell::unavailable(why_unavailable(t.metric)),
            };
            let severity = match t.severity {
                Severity::Fail => "fail",
                Severity::Warn => "warn",
            };
            vec![
                Cell::text(&name(t)),
                observed,
                Cell::text(severity),
                Cell::text(outcome(t)),
            ]
        })
        .collect();
    doc.table("thresholds", &head, &rows);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(metric: Metric, observed: Option<f64>, passed: bool) -> ThresholdResult {
        ThresholdResult {
            metric,
            op: ThresholdOp::Le,
            value: 5.0,
            observed,
            passed,
            severity: Severity::Fail,
            variant: Some("r2".into()),
        }
    }

    #[test]
    fn words_name_the_metric_the_figure_and_the_limit() {
        let held = t(Metric::LatencyP99Ms, Some(3.25), true);
        assert_eq!(name(&held), "r2: latencyP99Ms <= 5");
        assert_eq!(observed_vs_limit(&held), "observed 3.25 ms, limit <= 5 ms");
        let missing = t(Metric::LostAcked, None, false);
        assert_eq!(
            observed_vs_limit(&missing),
            "observed unavailable (publishes are not acknowledged in this workload, or a crash \
             left its servers down past the drain (faults.downPastDrain)), limit <= 5"
        );
        assert!(breaks_run(&missing) && !warns(&missing));
        assert_eq!(metric_name(Metric::LatencyP999Ms), "latencyP999Ms");
    }

    #[test]
    fn a_delivery_rate_is_in_msg_per_s_and_says_why_it_is_unavailable() {
        let held = t(Metric::DeliveryRate, Some(812.5), true);
        assert_eq!(metric_name(held.metric), "deliveryRate");
        assert_eq!(
            observed_vs_limit(&held),
            "observed 812.5 msg/s, limit <= 5 msg/s"
        );
        let none = observed_vs_limit(&t(Metric::DeliveryRate, None, false));
        assert!(
            none.starts_with("observed unavailable (no end-to-end window: nothing was published"),
            "{none}"
        );
    }
}
