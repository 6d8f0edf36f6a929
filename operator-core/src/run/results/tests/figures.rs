//! Status figures of merged results, checked through `collect` (see `runner_api::status_form`).
use crate::run::results::{collect, evaluate, TrialRecord};
use msgbench_crds::benchmark_run::{Metric, Severity, Threshold, ThresholdOp};
use runner_api::agent::{RawResultLine, ResultLine};
use runner_api::histo::Histo;
use runner_api::result::{ConnectionStats, RestLatency, SegmentStats};

fn record(runner: u16, trial: u32, edit: impl Fn(&mut ResultLine)) -> RawResultLine {
    let mut l = runner_api::testing::record(runner, trial, &[1_000], 1, 1_700_000_000_000);
    edit(&mut l);
    l.result.finalize();
    RawResultLine::from_line(&l).unwrap()
}

fn merged(
    lines: &[RawResultLine],
    runners: usize,
    trials: usize,
) -> crate::run::results::Collected {
    let records: Vec<TrialRecord> = lines.iter().map(|l| (l.trial, l)).collect();
    collect(&records, runners, trials).unwrap()
}

fn histo(values_us: impl IntoIterator<Item = u64>) -> Histo {
    let mut h = Histo::default();
    values_us.into_iter().for_each(|v| h.record(v));
    h
}

fn threshold(metric: Metric, op: ThresholdOp, value: f64) -> Threshold {
    Threshold {
        metric,
        op,
        value,
        severity: Severity::Fail,
        variants: vec![],
    }
}

/// 2 runners x 2 trials, each opening 9 of 10 connections in 2 s: failures are errors, and
/// the rate is per second spent opening (trials one after another), not per longest trial.
#[test]
fn connection_figures_reach_status_and_failures_are_errors() {
    let conn = |l: &mut ResultLine| {
        l.result.connections = Some(ConnectionStats {
            attempted: 10,
            connected: 9,
            failed: 1,
            connect_seconds: 2.0,
            connect_time: histo((1..=9).map(|i| i * 1_000)),
            errors: [("refused".to_string(), 1)].into(),
            ..Default::default()
        });
    };
    let lines: Vec<_> = [(1, 1), (2, 1), (1, 2), (2, 2)]
        .into_iter()
        .map(|(r, t)| record(r, t, conn))
        .collect();
    let r = merged(&lines, 2, 2).result;
    let c = r.connections.as_ref().expect("connections in status");
    assert_eq!((c.attempted, c.connected, c.failed), (40, 36, 4));
    assert_eq!(
        c.connect_rate, 9.0,
        "36 connections over 2 x 2 s of opening"
    );
    assert_eq!(c.errors["refused"], 4);
    let t = c.connect_time.as_ref().unwrap();
    assert_eq!((t.count, t.min_ms), (36, 1.0));
    assert!((t.p99_ms - 9.0).abs() < 0.01, "{}", t.p99_ms);
    assert_eq!(r.errors, 4);
    let gate = evaluate(
        &r,
        &[
            threshold(Metric::Errors, ThresholdOp::Le, 0.0),
            threshold(Metric::ConnectRate, ThresholdOp::Ge, 9.0),
            threshold(Metric::ConnectP99Ms, ThresholdOp::Le, 10.0),
        ],
    );
    let passed: Vec<(bool, Option<f64>)> = gate.iter().map(|g| (g.passed, g.observed)).collect();
    assert_eq!(
        passed[0],
        (false, Some(4.0)),
        "errors le 0 must fail on failed connects"
    );
    assert!(passed[1].0 && passed[2].0, "{gate:?}");
}

/// A connections-dimension stage offered its publishers (2, then 6), not the fixed rate.
#[test]
fn connection_stages_offer_their_connection_count() {
    let staged = |l: &mut ResultLine| {
        l.result.workload = serde_json::from_value(serde_json::json!({
            "protocol": "nats", "ratePerPublisher": 10,
            "stages": {"dimension": "connections", "start": 2, "step": 4, "count": 2,
                       "stageSeconds": 1, "stopWhen": {"deliveredRatioBelow": 0.9}}
        }))
        .unwrap();
        l.result.stages = (1..=2)
            .map(|k| {
                let mut p = SegmentStats::new(&format!("stage-{k}"), 1, Default::default());
                p.rate_per_publisher = Some(10);
                p
            })
            .collect();
        l.result.breaking_stage = Some("stage-2".into());
    };
    let r = merged(&[record(1, 1, staged)], 1, 1).result;
    let offered: Vec<_> = r.stages.iter().map(|s| s.offered).collect();
    assert_eq!(offered, [Some(2.0), Some(6.0)]);
    assert_eq!(r.breaking_stage.as_deref(), Some("stage-2"));
}

#[test]
fn rest_paths_and_p95_and_min_reach_status() {
    let with_rest = |l: &mut ResultLine| {
        l.result.measured.latency = histo((1..=100).map(|i| i * 1_000));
        l.result.measured.received = 100;
        l.result.rest = vec![RestLatency {
            path: "/messages".into(),
            requests: 20,
            errors: 1,
            latency: histo([3_000, 4_000]),
            summary: None,
        }];
    };
    let r = merged(&[record(1, 1, with_rest)], 1, 1).result;
    let l = r.latency.as_ref().unwrap();
    assert_eq!(l.min_ms, 1.0);
    assert!((l.p95_ms - 95.0).abs() < 0.1, "{}", l.p95_ms);
    let gate = evaluate(
        &r,
        &[threshold(Metric::LatencyP95Ms, ThresholdOp::Lt, 90.0)],
    );
    assert!(!gate[0].passed && gate[0].observed.is_some());
    let rest = &r.rest[0];
    assert_eq!(
        (rest.path.as_str(), rest.requests, rest.errors),
        ("/messages", 20, 1)
    );
    assert!((rest.latency.as_ref().unwrap().max_ms - 4.0).abs() < 0.01);
}

/// A record whose measured part delivered `unique` messages (plus `dups` duplicates) over an
/// end-to-end window of `window` seconds.
fn delivering(runner: u16, trial: u32, unique: u64, dups: u64, window: f64) -> RawResultLine {
    record(runner, trial, |l| {
        let m = &mut l.result.measured;
        (m.published, m.published_by_topic) = (unique, vec![unique]);
        (m.received, m.duplicates) = (unique + dups, dups);
        m.delivery_seconds = window;
    })
}

/// Two runners with different windows: the trial's rate is all unique deliveries over the
/// longest runner window (runners start together), never a mean or sum of per-runner rates;
/// trials run one after another, so the run's window is the sum of theirs.
#[test]
fn delivery_rate_merges_counts_over_the_longest_runner_window_and_trials_add_up() {
    let lines = [
        delivering(1, 1, 1_000, 0, 2.0), // 500/s on its own
        delivering(2, 1, 600, 100, 3.0), // 200/s on its own; duplicates do not count
        delivering(1, 2, 1_000, 0, 1.0),
        delivering(2, 2, 1_000, 0, 1.5),
    ];
    let c = merged(&lines, 2, 2);
    let per_trial: Vec<_> = c.trials.iter().map(|t| t.delivery_rate).collect();
    assert_eq!(
        per_trial,
        [Some(533.3), Some(1_333.3)],
        "1600 / 3 s, 2000 / 1.5 s"
    );
    assert_eq!(c.result.delivery_rate, Some(800.0), "3600 / (3 + 1.5) s");
    assert_eq!(c.headline.delivery_rate, Some(933.3), "mean over trials");
    let s = c.statistics.expect("2 trials");
    assert_eq!(s.delivery_rate.map(|e| e.mean), Some(933.3));
    // The receive window is separate: received (duplicates included) over 1 s here.
    assert_eq!(c.trials[0].receive_rate, 1_700.0);
}

#[test]
fn a_delivery_rate_threshold_is_met_not_met_or_unavailable() {
    let r = merged(&[delivering(1, 1, 800, 0, 2.0)], 1, 1).result;
    assert_eq!(r.delivery_rate, Some(400.0));
    let gate = evaluate(
        &r,
        &[
            threshold(Metric::DeliveryRate, ThresholdOp::Ge, 400.0),
            threshold(Metric::DeliveryRate, ThresholdOp::Gt, 400.0),
        ],
    );
    let got: Vec<_> = gate.iter().map(|g| (g.passed, g.observed)).collect();
    assert_eq!(got, [(true, Some(400.0)), (false, Some(400.0))]);

    // Sent, nothing delivered: a rate of 0, measured, not unavailable.
    let sent_only = record(1, 1, |l| {
        let m = &mut l.result.measured;
        (m.received, m.delivery_seconds) = (0, 0.0);
        m.latency = Histo::default();
    });
    let silent = merged(&[sent_only], 1, 1).result;
    assert_eq!((silent.published, silent.received), (1, 0));
    let gate = evaluate(
        &silent,
        &[threshold(Metric::DeliveryRate, ThresholdOp::Ge, 1.0)],
    );
    assert_eq!((gate[0].passed, gate[0].observed), (false, Some(0.0)));

    // Nothing published (a connection workload): no end-to-end window, so no figure; the
    // threshold fails as unavailable, whatever its bound.
    let none = merged(&[delivering(1, 1, 0, 0, 0.0)], 1, 1).result;
    assert_eq!((none.published, none.delivery_rate), (0, None));
    let gate = evaluate(
        &none,
        &[threshold(Metric::DeliveryRate, ThresholdOp::Ge, 0.0)],
    );
    assert_eq!((gate[0].passed, gate[0].observed), (false, None));
    let json = serde_json::to_value(&none).unwrap();
    assert!(json.get("deliveryRate").is_none(), "absent, not 0: {json}");
}

/// Two trials, each with a warm-up and two sessions that published and delivered 1 message in
/// 1 s: every row's rates over both trials are 2 messages over 2 s, not over the longest
/// trial's 1 s.
#[test]
fn warmup_and_session_rates_over_trials_use_the_sum_of_their_windows() {
    let sessions = |l: &mut ResultLine| {
        let m = &mut l.result.measured;
        m.delivery_seconds = 1.0;
        let row = |name: &str| SegmentStats {
            name: name.into(),
            ..m.clone()
        };
        l.result.warmup = Some(row("warmup"));
        l.result.sessions = vec![row("session-1"), row("session-2")];
    };
    let r = merged(&[record(1, 1, sessions), record(1, 2, sessions)], 1, 2).result;
    let rows = r.warmup.iter().chain(&r.sessions);
    let rates: Vec<_> = rows
        .map(|g| (g.publish_rate, g.receive_rate, g.delivery_rate))
        .collect();
    assert_eq!(rates, [(1.0, 1.0, Some(1.0)); 3]);
    assert_eq!((r.receive_rate, r.delivery_rate), (1.0, Some(1.0)));
}
