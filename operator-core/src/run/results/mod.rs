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
pub(crate) mod tests;

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
