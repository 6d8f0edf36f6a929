//! Fixtures for result lines (shared with the decide tests), and the merge's tests.
use super::*;
use msgbench_crds::benchmark_run::Severity;
use runner_api::agent::ResultLine;

pub(crate) fn runner(id: u16, trial: u32, latencies_us: &[u64], published: u64) -> ResultLine {
    let started = 1_700_000_000_000 + u64::from(trial) * 10_000;
    runner_api::testing::record(id, trial, latencies_us, published, started)
}

/// Records as the operator holds them: JSON text until merged.
pub(crate) fn raw(lines: &[ResultLine]) -> Vec<RawResultLine> {
    lines
        .iter()
        .map(|l| RawResultLine::from_line(l).unwrap())
        .collect()
}

fn collect_lines(
    lines: &[ResultLine],
    runners: usize,
    trials: usize,
) -> Result<Collected, ResultsError> {
    let raw = raw(lines);
    let records: Vec<TrialRecord> = raw.iter().map(|l| (l.trial, l)).collect();
    collect(&records, runners, trials)
}

#[test]
fn merges_runners_exactly_and_reports_trials() {
    // Runner 1 fast, runner 2 slow: the merged p99 must come from the merged histogram
    // (the slow tail), not an average of the two p99s.
    let fast: Vec<u64> = vec![1000; 99];
    let slow: Vec<u64> = vec![50_000; 99];
    let lines = vec![
        runner(1, 1, &fast, 99),
        runner(2, 1, &slow, 99),
        runner(1, 2, &fast, 99),
        runner(2, 2, &fast, 99),
    ];
    let c = collect_lines(&lines, 2, 2).unwrap();
    assert_eq!(c.trials.len(), 2);
    assert_eq!(c.trials[0].receive_rate, 198.0);
    assert!(
        (c.trials[0].p99_ms - 50.0).abs() < 0.1,
        "{}",
        c.trials[0].p99_ms
    );
    assert!((c.trials[1].p99_ms - 1.0).abs() < 0.01);
    // Totals over both trials: 396 messages over 2 s. Expected deliveries count the
    // subscribers of one trial (2), not of both (4): 2 x 198 published x 2.
    assert_eq!(c.result.received, 396);
    assert_eq!(c.result.expected, 792);
    assert_eq!(c.result.receive_rate, 198.0);
    assert_eq!(c.result.latency.as_ref().unwrap().count, 396);
    assert!(c.result.histogram.is_some());
    let s = c.statistics.unwrap();
    assert_eq!(s.receive_rate.mean, 198.0);
    assert!(s.p99_ms.ci95_low < 1.0 && s.p99_ms.ci95_high > 50.0);
    assert_eq!(c.headline.receive_rate, 198.0);
}

#[test]
fn variants_are_merged_apart_by_round_with_their_place_in_each_order() {
    let tag = |mut l: ResultLine, v: &str, round: u32| {
        l.variant = Some(v.into());
        l.round = Some(round);
        l
    };
    // Round 1 ran a then b, round 2 b then a; two runners each.
    let schedule = vec![
        ScheduledRound {
            round: 1,
            order: vec!["a".into(), "b".into()],
        },
        ScheduledRound {
            round: 2,
            order: vec!["b".into(), "a".into()],
        },
    ];
    let mut lines = Vec::new();
    for (trial, v, round) in [(1, "a", 1), (2, "b", 1), (3, "b", 2), (4, "a", 2)] {
        let (lat, n) = if v == "a" { (1_000, 10) } else { (8_000, 30) };
        for id in [1, 2] {
            lines.push(tag(runner(id, trial, &vec![lat; n as usize], n), v, round));
        }
    }
    let names = vec!["a".to_string(), "b".to_string()];
    let lines = raw(&lines);
    let out = collect_variants(&lines, 2, &schedule, &names).unwrap();
    let (a, b) = (&out[0].1, &out[1].1);
    assert_eq!((out[0].0.as_str(), out[1].0.as_str()), ("a", "b"));
    assert_eq!((a.result.published, b.result.published), (40, 120));
    assert!((a.result.latency.as_ref().unwrap().p99_ms - 1.0).abs() < 0.01);
    assert!((b.result.latency.as_ref().unwrap().p99_ms - 8.0).abs() < 0.01);
    let pos = |c: &Collected| {
        c.trials
            .iter()
            .map(|t| (t.trial, t.position))
            .collect::<Vec<_>>()
    };
    assert_eq!(pos(a), [(1, Some(1)), (2, Some(2))]);
    assert_eq!(pos(b), [(1, Some(2)), (2, Some(1))]);
    // A variant missing a runner's line in some round is an error naming it.
    let e = collect_variants(&lines[1..], 2, &schedule, &names).unwrap_err();
    assert!(e.to_string().starts_with("variant a: trial "), "{e}");
}

#[test]
fn a_missing_runner_result_is_an_error_not_a_partial_result() {
    let lines = vec![runner(1, 1, &[1000], 1)];
    let e = collect_lines(&lines, 2, 1).unwrap_err().to_string();
    assert_eq!(e, "trial 1: 1 of 2 runner results");
}

/// The message ends a run as its `ResultsLost` condition: it names the runner and trial.
#[test]
fn a_record_that_does_not_decode_is_named() {
    let mut lines = raw(&[runner(1, 1, &[1000], 1)]);
    lines[0].result.0 = serde_json::value::RawValue::from_string("1".into()).unwrap();
    let records: Vec<TrialRecord> = lines.iter().map(|l| (l.trial, l)).collect();
    let e = collect(&records, 1, 1).unwrap_err();
    assert!(
        matches!(e, ResultsError::RecordDoesNotDecode { .. }),
        "{e:?}"
    );
    let e = e.to_string();
    assert!(
        e.starts_with("runner 1 trial 1: record does not decode: "),
        "{e}"
    );
}

#[test]
fn thresholds_report_each_rule_and_a_missing_metric_fails() {
    let c = collect_lines(&[runner(1, 1, &[2000; 10], 10)], 1, 1).unwrap();
    let t = |metric, op, value| Threshold {
        metric,
        op,
        value,
        severity: Severity::Fail,
        variants: vec![],
    };
    let out = evaluate(
        &c.result,
        &[
            t(Metric::DeliveredRatio, ThresholdOp::Ge, 0.999),
            t(Metric::LatencyP99Ms, ThresholdOp::Lt, 1.0),
            t(Metric::PublishAckP99Ms, ThresholdOp::Lt, 1.0),
        ],
    );
    assert_eq!(
        out.iter().map(|r| r.passed).collect::<Vec<_>>(),
        [true, false, false]
    );
    assert_eq!(out[0].observed, Some(1.0));
    assert!(out[2].observed.is_none());
}

/// `lostAcked` and `publishStallMs` exist only where publishes are acknowledged: without
/// them the threshold fails as unavailable (observed absent), with them it is evaluated.
#[test]
fn lost_acked_and_stall_thresholds_fail_when_unavailable_and_hold_when_measured() {
    let t = |metric, value| Threshold {
        metric,
        op: ThresholdOp::Le,
        value,
        severity: Severity::Fail,
        variants: vec![],
    };
    let rules = [t(Metric::LostAcked, 0.0), t(Metric::PublishStallMs, 500.0)];
    let c = collect_lines(&[runner(1, 1, &[2000; 10], 10)], 1, 1).unwrap();
    let out = evaluate(&c.result, &rules);
    assert!(
        out.iter().all(|r| !r.passed && r.observed.is_none()),
        "{out:?}"
    );
    let mut r = c.result.clone();
    r.lost_acked = Some(0);
    r.publish_stall_ms = Some(812.5);
    let out = evaluate(&r, &rules);
    assert_eq!(out[0].observed, Some(0.0));
    assert!(out[0].passed);
    assert_eq!((out[1].observed, out[1].passed), (Some(812.5), false));
    // A crash whose servers were still down when the drain ended: lostAcked stays in the
    // result, but a threshold on it cannot be decided.
    r.faults = Some(msgbench_crds::benchmark_run::FaultSummary {
        executed: 3,
        down_past_drain: 1,
        ..Default::default()
    });
    let out = evaluate(&r, &rules);
    assert_eq!((out[0].observed, out[0].passed), (None, false));
    assert_eq!(r.lost_acked, Some(0));
}

/// `ackedNotKept` is evaluated like `lostAcked`: absent (another protocol, or a read-back
/// that did not complete) it fails, present it is compared; a crash's servers down past
/// the drain do not make it undecidable (the read-back waited for them, or is absent).
#[test]
fn acked_not_kept_threshold_fails_when_unavailable_and_holds_when_measured() {
    let rule = [Threshold {
        metric: Metric::AckedNotKept,
        op: ThresholdOp::Le,
        value: 0.0,
        severity: Severity::Fail,
        variants: vec![],
    }];
    let c = collect_lines(&[runner(1, 1, &[2000; 10], 10)], 1, 1).unwrap();
    let mut r = c.result.clone();
    let out = evaluate(&r, &rule);
    assert_eq!((out[0].observed, out[0].passed), (None, false));
    r.acked_not_kept_unavailable = Some("runner 1: read-back timed out".into());
    assert!(!evaluate(&r, &rule)[0].passed);
    r.acked_not_kept_unavailable = None;
    r.acked_not_kept = Some(0);
    r.faults = Some(msgbench_crds::benchmark_run::FaultSummary {
        executed: 3,
        down_past_drain: 1,
        ..Default::default()
    });
    let out = evaluate(&r, &rule);
    assert_eq!((out[0].observed, out[0].passed), (Some(0.0), true));
    r.acked_not_kept = Some(1_170);
    let out = evaluate(&r, &rule);
    assert_eq!((out[0].observed, out[0].passed), (Some(1_170.0), false));
}

mod figures;
