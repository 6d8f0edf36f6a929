//! Runner result lines → status: merged exactly with bench-runner's merge (histograms added,
//! never percentiles averaged), per-trial figures, trial statistics and thresholds.
pub mod compare;
mod error;
pub mod paired;
pub mod server_restarts;
pub mod server_usage;
pub mod stats;
#[cfg(any(test, feature = "status-fixtures"))]
#[cfg_attr(not(test), allow(dead_code))]
pub mod status_size;
pub mod variant_results;

#[cfg(test)]
mod figures_tests;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use msgbench_crds::benchmark_run::timeline_points_per_result;
use msgbench_crds::benchmark_run::{
    Headline, Metric, RunResult, ScheduledRound, Threshold, ThresholdOp, ThresholdResult,
    TrialFigures, TrialStatistics,
};
use runner_api::agent::RawResultLine;
use runner_api::result::{ResultMerger, RunnerResult, SegmentStats};
use runner_api::status_form::{delivery_rate, format_ms, to_status_within, us_to_ms};
use std::collections::BTreeMap;

pub use error::ResultsError;

/// Everything the results give the status.
#[derive(Clone, Debug, PartialEq)]
pub struct Collected {
    pub result: RunResult,
    pub trials: Vec<TrialFigures>,
    pub statistics: Option<TrialStatistics>,
    pub headline: Headline,
}

/// A record and the trial it counts as (with variants: its round).
pub type TrialRecord<'a> = (u32, &'a RawResultLine);

/// `lines` of every runner; `runners` and `trials` are what the spec asked for: a missing
/// line is an error (results would be silently partial otherwise). Records are decoded one at
/// a time and merged at once, so memory holds two merged results and one record, whatever the
/// number of runners and trials.
pub fn collect(
    lines: &[TrialRecord],
    runners: usize,
    trials: usize,
) -> Result<Collected, ResultsError> {
    collect_within(lines, runners, trials, timeline_points_per_result(1))
}

/// As [`collect`], with the result's timeline in at most `timeline_points` points.
pub fn collect_within(
    lines: &[TrialRecord],
    runners: usize,
    trials: usize,
    timeline_points: usize,
) -> Result<Collected, ResultsError> {
    let mut total = ResultMerger::default();
    let mut trial_figs = Vec::with_capacity(trials);
    let mut first: Option<FirstTrial> = None;
    let mut windows = TrialWindows::default();
    let mut connect_s = 0.0;
    for t in 1..=trials as u32 {
        let mut merged = merge_trial(lines, t, runners)?;
        let started = lines
            .iter()
            .filter(|(trial, _)| *trial == t)
            .map(|(_, l)| l.started_unix_ms)
            .min();
        trial_figs.push(trial_figures(t as i32, &merged, started));
        windows.add(&mut merged);
        connect_s += merged
            .connections
            .as_ref()
            .map_or(0.0, |c| c.connect_seconds);
        first.get_or_insert_with(|| FirstTrial::of(&merged));
        total.absorb(&format!("trial {t}"), merged)?;
    }
    // All trials together: counts and histograms add; rates are totals over the summed
    // time of the trials (trials run one after another).
    let mut total = total.finish()?;
    first.ok_or(ResultsError::NoTrials)?.restore(&mut total);
    windows.apply(&mut total);
    if let Some(c) = &mut total.connections {
        // Trials open their connections one after another, like their measured phases.
        c.connect_seconds = connect_s;
        c.finalize();
    }
    let result = to_status_within(&total, trials as u32, timeline_points);

    let col = |f: fn(&TrialFigures) -> f64| trial_figs.iter().map(f).collect::<Vec<f64>>();
    let statistics = match (
        stats::estimate(&col(|t| t.receive_rate)),
        stats::estimate(&col(|t| t.p50_ms)),
        stats::estimate(&col(|t| t.p99_ms)),
    ) {
        (Some(r), Some(p50), Some(p99)) => Some(TrialStatistics {
            trials: trial_figs.len() as i32,
            receive_rate: r,
            delivery_rate: every_trial_delivery_rate(&trial_figs).and_then(|d| stats::estimate(&d)),
            p50_ms: p50,
            p99_ms: p99,
        }),
        _ => None,
    };
    let headline = Headline {
        delivery_rate: every_trial_delivery_rate(&trial_figs)
            .map(|d| stats::round3(stats::mean(&d))),
        receive_rate: stats::round3(stats::mean(&col(|t| t.receive_rate))),
        p99: result
            .latency
            .as_ref()
            .map_or_else(|| "-".into(), |l| format_ms(l.p99_ms)),
        comparison: None,
    };
    Ok(Collected {
        result,
        trials: trial_figs,
        statistics,
        headline,
    })
}

/// Each trial's delivery rate, or `None` if a trial lacks it (a mean over some trials would
/// not be the run's figure).
fn every_trial_delivery_rate(trials: &[TrialFigures]) -> Option<Vec<f64>> {
    let rates: Option<Vec<f64>> = trials.iter().map(|t| t.delivery_rate).collect();
    rates.filter(|r| !r.is_empty())
}

/// With variants: each variant's lines merged over runners and rounds, like a run of its own
/// (`trial` = round), with each round's place in the order (`position`) from `schedule`, and
/// its share of the status's timeline points.
pub fn collect_variants(
    lines: &[RawResultLine],
    runners: usize,
    schedule: &[ScheduledRound],
    variants: &[String],
) -> Result<Vec<(String, Collected)>, ResultsError> {
    variants
        .iter()
        .map(|name| {
            let mine: Vec<TrialRecord> = lines
                .iter()
                .filter(|l| l.variant.as_deref() == Some(name))
                .map(|l| (l.round.unwrap_or(0), l))
                .collect();
            let points = timeline_points_per_result(variants.len());
            let mut c = collect_within(&mine, runners, schedule.len(), points).map_err(|e| {
                ResultsError::Variant {
                    variant: name.clone(),
                    source: Box::new(e),
                }
            })?;
            for t in &mut c.trials {
                t.position = schedule
                    .iter()
                    .find(|r| r.round == t.trial)
                    .and_then(|r| r.order.iter().position(|n| n == name))
                    .map(|p| p as i32 + 1);
            }
            Ok((name.clone(), c))
        })
        .collect()
}

/// Every phase's windows (publish, receive, end to end), seconds, summed over trials by phase.
/// Trials run one after another, so a phase's rate over all of them is its counts over the sum
/// of its windows; merging trials like runners keeps the longest window instead, which made
/// every warm-up, session and stage rate over N trials N times too high.
#[derive(Default)]
struct TrialWindows(BTreeMap<String, [f64; 3]>);

impl TrialWindows {
    fn add(&mut self, trial: &mut RunnerResult) {
        each_phase(trial, |key, p| {
            let w = self.0.entry(key).or_default();
            w[0] += p.publish_seconds;
            w[1] += p.receive_seconds;
            w[2] += p.delivery_seconds;
        });
    }

    /// Sets the summed windows on the trials' total and recomputes its rates.
    fn apply(&self, total: &mut RunnerResult) {
        each_phase(total, |key, p| {
            if let Some(w) = self.0.get(&key) {
                [p.publish_seconds, p.receive_seconds, p.delivery_seconds] = *w;
                p.finalize();
            }
        });
    }
}

/// Calls `f` with every phase of `r` and a key naming it apart from the others.
fn each_phase(r: &mut RunnerResult, mut f: impl FnMut(String, &mut SegmentStats)) {
    if let Some(w) = &mut r.warmup {
        f("warmup".into(), w);
    }
    f("measured".into(), &mut r.measured);
    for p in r.sessions.iter_mut().chain(r.stages.iter_mut()) {
        f(format!("row {}", p.name), p);
    }
}

/// One trial merged over its runners, decoding each record only as it is merged.
fn merge_trial(
    lines: &[TrialRecord],
    t: u32,
    runners: usize,
) -> Result<RunnerResult, ResultsError> {
    let mut m = ResultMerger::default();
    let mut n = 0;
    for (_, l) in lines.iter().filter(|(trial, _)| *trial == t) {
        let name = format!("runner {} trial {t}", l.runner_id);
        let r = l
            .decode()
            .map_err(|source| ResultsError::RecordDoesNotDecode {
                runner: name.clone(),
                source,
            })?;
        m.absorb(&name, r)?;
        n += 1;
    }
    if n != runners {
        let (trial, got, want) = (t, n, runners);
        return Err(ResultsError::MissingRunnerResults { trial, got, want });
    }
    Ok(m.finish()?)
}

/// What merging trials gets wrong and the first trial has right: merging adds subscribers
/// (right for runners, wrong for trials of the same runners), so expected deliveries =
/// published per topic x subscribers of ONE trial.
struct FirstTrial {
    measured: Vec<u64>,
    warmup: Option<Vec<u64>>,
    phases: Vec<Vec<u64>>,
}

impl FirstTrial {
    fn of(r: &RunnerResult) -> Self {
        FirstTrial {
            measured: r.measured.subscribers_by_topic.clone(),
            warmup: r.warmup.as_ref().map(|w| w.subscribers_by_topic.clone()),
            phases: r
                .sessions
                .iter()
                .chain(&r.stages)
                .map(|p| p.subscribers_by_topic.clone())
                .collect(),
        }
    }

    fn restore(self, total: &mut RunnerResult) {
        total.measured.subscribers_by_topic = self.measured;
        if let (Some(w), Some(subs)) = (&mut total.warmup, self.warmup) {
            w.subscribers_by_topic = subs;
            w.finalize();
        }
        let phases = total.sessions.iter_mut().chain(total.stages.iter_mut());
        for (p, subs) in phases.zip(self.phases) {
            p.subscribers_by_topic = subs;
            p.finalize();
        }
    }
}

fn trial_figures(trial: i32, r: &RunnerResult, started_ms: Option<u64>) -> TrialFigures {
    let s = &r.measured.summary;
    let lat = s.latency.as_ref();
    TrialFigures {
        trial,
        position: None,
        start_time: started_ms.and_then(|ms| {
            k8s_openapi::jiff::Timestamp::from_millisecond(ms as i64)
                .ok()
                .map(Time)
        }),
        receive_rate: s.receive_rate,
        delivery_rate: delivery_rate(&r.measured),
        publish_rate: s.publish_rate,
        p50_ms: lat.map_or(0.0, |l| us_to_ms(l.p50_us as f64)),
        p99_ms: lat.map_or(0.0, |l| us_to_ms(l.p99_us as f64)),
        delivered_ratio: s.delivered_ratio,
        generator_saturated: r.generator.saturated,
    }
}

/// The observed value of a metric; `None` when the result lacks it (no latency samples, no
/// publish acks for `lostAcked` and `publishStallMs`, no end-to-end window for `deliveryRate`,
/// no completed JetStream read-back for `ackedNotKept`).
pub fn observed(r: &RunResult, m: Metric) -> Option<f64> {
    let lat = r.latency.as_ref();
    Some(match m {
        Metric::PublishRate => r.publish_rate,
        Metric::ReceiveRate => r.receive_rate,
        Metric::DeliveryRate => r.delivery_rate?,
        Metric::DeliveredRatio => r.delivered_ratio,
        Metric::LatencyP50Ms => lat?.p50_ms,
        Metric::LatencyP90Ms => lat?.p90_ms,
        Metric::LatencyP95Ms => lat?.p95_ms,
        Metric::LatencyP99Ms => lat?.p99_ms,
        Metric::LatencyP999Ms => lat?.p999_ms,
        Metric::LatencyMaxMs => lat?.max_ms,
        Metric::PublishAckP99Ms => r.publish_ack_latency.as_ref()?.p99_ms,
        Metric::Errors => r.errors as f64,
        Metric::Duplicates => r.duplicates as f64,
        Metric::OutOfOrder => r.out_of_order as f64,
        // Not when a crash left its servers down past the drain: then it may count messages
        // still in the stream, only undelivered (`faults.downPastDrain`).
        Metric::LostAcked => {
            let undecidable = r.faults.as_ref().is_some_and(|f| f.down_past_drain > 0);
            r.lost_acked.filter(|_| !undecidable)? as f64
        }
        // Absent for other protocols and when a read-back did not complete: fails, as above.
        Metric::AckedNotKept => r.acked_not_kept? as f64,
        Metric::PublishStallMs => r.publish_stall_ms?,
        Metric::ConnectRate => r.connections.as_ref()?.connect_rate,
        Metric::ConnectP99Ms => r.connections.as_ref()?.connect_time.as_ref()?.p99_ms,
        Metric::RecoverySeconds => {
            r.faults
                .as_ref()
                .filter(|f| f.executed > 0 && f.recovered == f.executed)?
                .longest_recovery_seconds?
        }
    })
}

/// Every threshold evaluated; a missing metric fails its threshold (nothing proves it held).
pub fn evaluate(r: &RunResult, thresholds: &[Threshold]) -> Vec<ThresholdResult> {
    thresholds
        .iter()
        .map(|t| {
            let obs = observed(r, t.metric);
            let passed = obs.is_some_and(|o| match t.op {
                ThresholdOp::Lt => o < t.value,
                ThresholdOp::Le => o <= t.value,
                ThresholdOp::Gt => o > t.value,
                ThresholdOp::Ge => o >= t.value,
            });
            ThresholdResult {
                metric: t.metric,
                op: t.op,
                value: t.value,
                observed: obs,
                passed,
                severity: t.severity,
                variant: None,
            }
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
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
}
