//! The fixture runs moved through the states the operator writes: accepted (running), finished
//! passed or failed, with thresholds. Conditions are set with the crds' own vocabulary and
//! setter, as `operator-core/src/run/conditions.rs` sets them (accept, finish).
#![allow(dead_code)]
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kubectl_msgbench::gate::{Fetched, Observed};
use kubectl_msgbench::run_view::Run;
use kubectl_msgbench::source;
use msgbench_crds::benchmark_run::{
    Metric, Phase, Severity, ThresholdOp, ThresholdResult, Verdict,
};
use msgbench_crds::conditions::{self as c, ConditionStatus::*};

/// A committed fixture (tests/fixtures) as the gate reads it.
pub fn fixture(name: &str) -> Run {
    source::from_file(&crate::common::fixture(name)).unwrap()
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(1_700_000_000).unwrap())
}

/// Generation `g` accepted and running: no verdict, Complete False.
pub fn running(mut run: Run, g: i64) -> Run {
    let s = &mut run.status;
    run.generation = Some(g);
    s.observed_generation = Some(g);
    s.phase = Some(Phase::Running);
    s.verdict = None;
    s.thresholds.clear();
    s.conditions.clear();
    for u in [
        c::target_ready(Unknown, "Pending", "accepted"),
        c::runners_ready(Unknown, "Pending", "accepted"),
        c::succeeded(Unknown, "Pending", "accepted"),
        c::complete(False, "Pending", "accepted"),
        c::reconciling(True, "InProgress", "the run is in progress"),
        c::stalled(False, "Pending", "accepted"),
    ] {
        c::set(&mut s.conditions, u, Some(g), &now());
    }
    run
}

/// The run's current generation ended in `phase` (Succeeded or Failed) with `reason`, as the
/// operator ends it.
pub fn finished(run: Run, phase: Phase, reason: &str, message: &str) -> Run {
    let g = run.generation.unwrap_or(1);
    let mut run = running(run, g);
    let s = &mut run.status;
    let passed = phase == Phase::Succeeded;
    s.phase = Some(phase);
    s.verdict = Some(Verdict {
        reason: reason.into(),
        message: Some(message.into()),
    });
    let (succeeded, stalled) = if passed { (True, False) } else { (False, True) };
    for u in [
        c::complete(True, reason, message),
        c::succeeded(succeeded, reason, message),
        c::stalled(stalled, reason, message),
        c::reconciling(False, reason, "ended"),
    ] {
        c::set(&mut s.conditions, u, Some(g), &now());
    }
    run
}

/// As [`finished`], but with the verdict left out: only the conditions say how it ended.
pub fn finished_conditions_only(run: Run, phase: Phase, reason: &str, message: &str) -> Run {
    let mut run = finished(run, phase, reason, message);
    run.status.verdict = None;
    run
}

/// A threshold outcome as `results::evaluate` writes it.
pub fn threshold(
    metric: Metric,
    op: ThresholdOp,
    value: f64,
    observed: Option<f64>,
    severity: Severity,
) -> ThresholdResult {
    let passed = observed.is_some_and(|o| match op {
        ThresholdOp::Lt => o < value,
        ThresholdOp::Le => o <= value,
        ThresholdOp::Gt => o > value,
        ThresholdOp::Ge => o >= value,
    });
    ThresholdResult {
        metric,
        op,
        value,
        observed,
        passed,
        severity,
        variant: None,
    }
}

/// The plain fixture finished with `thresholds`: Passed when every fail-severity one held,
/// else Failed with ThresholdsNotMet, as the operator decides.
pub fn judged(thresholds: Vec<ThresholdResult>) -> Run {
    let broken = thresholds
        .iter()
        .any(|t| !t.passed && t.severity == Severity::Fail);
    let mut run = if broken {
        finished(
            fixture("plain-run.yaml"),
            Phase::Failed,
            "ThresholdsNotMet",
            "LatencyP99Ms Le 1 (observed 3.4)",
        )
    } else {
        finished(
            fixture("plain-run.yaml"),
            Phase::Succeeded,
            "Succeeded",
            "ok",
        )
    };
    run.status.thresholds = thresholds;
    run
}

pub fn found(run: Run) -> Observed {
    Observed {
        name: run.name.clone(),
        fetched: Fetched::Found(Box::new(run)),
    }
}

pub fn named(name: &str, run: Run) -> Observed {
    Observed {
        name: name.into(),
        fetched: Fetched::Found(Box::new(run)),
    }
}

pub fn missing(name: &str) -> Observed {
    Observed {
        name: name.into(),
        fetched: Fetched::Missing(format!("no BenchmarkRun {name} in namespace ci")),
    }
}
