//! `gate::decide`, transition by transition: the committed fixtures moved through the states
//! the operator writes, and what the gate answers for each (exit code, or "keep waiting", and
//! one line per run saying why).
mod common;
#[path = "common/states.rs"]
mod states;

use kubectl_msgbench::gate::{decide, Fetched, Observed, FAILED, PASSED, UNDECIDED};
use msgbench_crds::benchmark_run::{Metric, Phase, Severity, ThresholdOp};
use states::*;

fn p99_le(limit: f64, observed: Option<f64>) -> msgbench_crds::benchmark_run::ThresholdResult {
    threshold(
        Metric::LatencyP99Ms,
        ThresholdOp::Le,
        limit,
        observed,
        Severity::Fail,
    )
}

#[test]
fn every_run_passed_is_0_with_one_line_each() {
    let variants = found(fixture("variants-run.yaml")); // phase Succeeded with a verdict, as committed
    let plain = found(judged(vec![p99_le(5.0, Some(3.4))]));
    for deadline_passed in [false, true] {
        let out = decide(&[variants.clone(), plain.clone()], deadline_passed);
        assert_eq!(out.code, Some(PASSED), "{out:?}");
        assert_eq!(out.lines, ["js-r1-vs-r2: Passed", "nats-plain: Passed: ok"]);
    }
}

#[test]
fn a_status_without_conditions_is_judged_by_its_phase() {
    // plain-run.yaml as committed: phase Succeeded, no verdict, no conditions.
    let out = decide(&[found(fixture("plain-run.yaml"))], false);
    assert_eq!(out.code, Some(PASSED));
    assert_eq!(out.lines, ["nats-plain: Passed"]);
}

#[test]
fn one_failed_verdict_is_1_and_names_the_threshold_its_figure_and_limit() {
    let failed = found(judged(vec![
        p99_le(1.0, Some(3.4)),
        threshold(
            Metric::LostAcked,
            ThresholdOp::Le,
            0.0,
            None,
            Severity::Fail,
        ),
        threshold(
            Metric::ReceiveRate,
            ThresholdOp::Ge,
            900.0,
            Some(999.9),
            Severity::Fail,
        ),
    ]));
    let out = decide(&[found(fixture("variants-run.yaml")), failed], false);
    assert_eq!(out.code, Some(FAILED));
    assert_eq!(
        out.lines[1],
        "nats-plain: Failed (ThresholdsNotMet): latencyP99Ms <= 1: observed 3.4 ms, limit <= 1 ms; \
         lostAcked <= 0: observed unavailable (publishes are not acknowledged in this workload, or \
         a crash left its servers down past the drain (faults.downPastDrain)), limit <= 0"
    );
}

#[test]
fn a_run_failed_by_its_conditions_is_1_with_their_reason_and_message() {
    let msg = "JetStreamCluster js missing; still missing after 5s";
    let run = finished_conditions_only(
        fixture("plain-run.yaml"),
        Phase::Failed,
        "TargetNotFound",
        msg,
    );
    let out = decide(&[found(run)], false);
    assert_eq!(out.code, Some(FAILED));
    assert_eq!(
        out.lines,
        [format!("nats-plain: Failed (TargetNotFound): {msg}")]
    );
    // Another reason with thresholds not held: the message first, then the thresholds.
    let mut run = finished(
        fixture("plain-run.yaml"),
        Phase::Failed,
        "FaultsNotInjected",
        "no pod",
    );
    run.status.thresholds = vec![p99_le(1.0, Some(3.4))];
    let out = decide(&[found(run)], false);
    assert_eq!(
        out.lines[0],
        "nats-plain: Failed (FaultsNotInjected): no pod; thresholds not held: latencyP99Ms <= 1: \
         observed 3.4 ms, limit <= 1 ms"
    );
}

#[test]
fn a_run_not_finished_is_waited_for_then_2_at_the_deadline() {
    let run = found(running(fixture("plain-run.yaml"), 1));
    let waiting = decide(std::slice::from_ref(&run), false);
    assert_eq!(waiting.code, None, "keep waiting: {waiting:?}");
    assert_eq!(
        waiting.lines,
        ["nats-plain: not finished (phase Running, Complete False (Pending: accepted))"]
    );
    let out = decide(&[run], true);
    assert_eq!(out.code, Some(UNDECIDED));
    assert!(out.lines[0]
        .starts_with("nats-plain: timed out: not finished at the deadline (phase Running"));
}

#[test]
fn a_failed_run_does_not_stop_the_wait_for_the_others() {
    let failed = found(judged(vec![p99_le(1.0, Some(3.4))]));
    let still = named("second", running(fixture("variants-run.yaml"), 1));
    assert_eq!(decide(&[failed.clone(), still.clone()], false).code, None);
    // ...and at the deadline the unfinished one makes it undecided, not merely failed.
    assert_eq!(decide(&[failed, still], true).code, Some(UNDECIDED));
}

#[test]
fn a_missing_run_is_2_at_once() {
    let still = found(running(fixture("plain-run.yaml"), 1));
    let out = decide(&[still, missing("typo")], false);
    assert_eq!(out.code, Some(UNDECIDED), "no point waiting: {out:?}");
    assert_eq!(
        out.lines[1],
        "typo: missing: no BenchmarkRun typo in namespace ci"
    );
    assert!(
        out.lines[0].starts_with("nats-plain: not finished ("),
        "{}",
        out.lines[0]
    );
}

#[test]
fn api_errors_are_waited_out_only_when_they_may_pass() {
    let error = |retry| Observed {
        name: "r".into(),
        fetched: Fetched::Error {
            message: "reading BenchmarkRun r: connection refused".into(),
            retry,
        },
    };
    assert_eq!(decide(&[error(true)], false).code, None);
    let out = decide(&[error(true)], true);
    assert_eq!(out.code, Some(UNDECIDED));
    assert_eq!(
        out.lines,
        ["r: error: reading BenchmarkRun r: connection refused"]
    );
    assert_eq!(decide(&[error(false)], false).code, Some(UNDECIDED));
}

#[test]
fn a_finished_status_of_an_earlier_generation_is_not_finished() {
    // Generation 1 passed, then the spec changed (generation 2) before the operator saw it.
    let mut run = finished(
        fixture("plain-run.yaml"),
        Phase::Succeeded,
        "Succeeded",
        "ok",
    );
    run.generation = Some(2);
    let out = decide(&[found(run.clone())], false);
    assert_eq!(out.code, None);
    assert_eq!(
        out.lines,
        ["nats-plain: not finished (phase Succeeded of generation 1; the spec is at generation 2)"]
    );
    // The operator accepts generation 2, then it fails.
    let run = finished(
        running(run, 2),
        Phase::Failed,
        "BarrierTimeout",
        "1 of 2 runners",
    );
    assert_eq!(decide(&[found(run)], false).code, Some(FAILED));
}

#[test]
fn a_warn_threshold_not_held_passes_with_a_warning() {
    let warn = threshold(
        Metric::LatencyP999Ms,
        ThresholdOp::Lt,
        2.0,
        Some(8.2),
        Severity::Warn,
    );
    let out = decide(&[found(judged(vec![p99_le(5.0, Some(3.4)), warn]))], false);
    assert_eq!(out.code, Some(PASSED));
    assert_eq!(
        out.lines,
        ["nats-plain: Passed: ok (warnings: latencyP999Ms < 2: observed 8.2 ms, limit < 2 ms)"]
    );
}
