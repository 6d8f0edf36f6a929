//! What one fault did to delivery, pure: read from its trial's per-second timeline (merged over
//! the runners) around the second the pod was deleted. One-second resolution: a figure is never
//! finer than the timeline it comes from.
use msgbench_crds::benchmark_run::{FaultEffect, FaultRecord, FaultSummary};
use runner_api::agent::RawResultLine;
use runner_api::coarse::CoarseLatency;
use runner_api::result::{merge_timelines, PublishStall, TimelinePoint};

/// Whole seconds before the fault that set the level recovery is measured against.
pub const BEFORE_SECONDS: usize = 10;
/// Recovered: a whole second delivering at least this share of the level before.
pub const RECOVERED_SHARE: f64 = 0.95;
/// Seconds from the fault's second in which the p99 peak is looked for.
pub const PEAK_SECONDS: usize = 10;

/// Only the timeline of a record (the rest stays undecoded).
#[derive(serde::Deserialize)]
struct TimelineOnly {
    #[serde(default)]
    timeline: Vec<TimelinePoint>,
    measured: Option<AckFigures>,
}

/// The measured phase's ack figures of one record.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct AckFigures {
    lost_acked: Option<u64>,
    publish_stall: Option<PublishStall>,
}

/// Fills in what each carried-out fault did, from its trial's records merged over runners.
/// `seconds`: the measured phase's length.
pub fn attach(lines: &[RawResultLine], seconds: u32, faults: &mut [FaultRecord]) {
    let executed: Vec<(i32, f64)> = faults
        .iter()
        .filter(|f| f.executed())
        .filter_map(|f| Some((f.trial, f.offset_seconds?)))
        .collect();
    for f in faults.iter_mut() {
        let Some(offset) = f.offset_seconds.filter(|_| f.executed()) else {
            continue;
        };
        // The window ends where the next fault of the same trial begins.
        let next = executed
            .iter()
            .filter(|(t, o)| *t == f.trial && *o > offset)
            .map(|(_, o)| *o)
            .reduce(f64::min)
            .unwrap_or(f64::from(seconds));
        let (mut timeline, mut lost, mut stall) = (Vec::new(), None::<u64>, None::<PublishStall>);
        for l in lines
            .iter()
            .filter(|l| i64::from(l.trial) == i64::from(f.trial))
        {
            if let Ok(r) = serde_json::from_str::<TimelineOnly>(l.result.0.get()) {
                merge_timelines(&mut timeline, &r.timeline);
                let m = r.measured.as_ref();
                if let Some(n) = m.and_then(|m| m.lost_acked) {
                    lost = Some(lost.unwrap_or(0).saturating_add(n));
                }
                if let Some(s) = m.and_then(|m| m.publish_stall) {
                    stall = Some(stall.map_or(s, |t| t.longest(s)));
                }
            }
        }
        let fault_ms = f.executed_time.as_ref().map(crate::run::timing::millis);
        f.effect = effect(&timeline, seconds, offset).map(|mut e| {
            (e.duplicates, e.out_of_order) = disorder(&timeline, offset, next);
            e.trial_lost_acked = lost;
            e.trial_publish_stall_ms = stall.map(|s| (s.micros as f64 / 100.0).round() / 10.0);
            e.publish_stall_from_fault_seconds = stall
                .filter(|s| s.micros > 0)
                .zip(fault_ms)
                .map(|(s, at)| ((s.started_unix_ms as f64 - at as f64) / 100.0).round() / 10.0);
            e
        });
    }
}

/// The summary of the faults carried out in `variant`'s trials (all trials: `None`).
pub fn summary(faults: &[FaultRecord], variant: Option<&str>) -> Option<FaultSummary> {
    let mine: Vec<&FaultRecord> = faults
        .iter()
        .filter(|f| f.executed() && (variant.is_none() || f.variant.as_deref() == variant))
        .collect();
    if mine.is_empty() {
        return None;
    }
    let times: Vec<f64> = mine
        .iter()
        .filter_map(|f| f.effect.as_ref()?.recovery_seconds)
        .collect();
    Some(FaultSummary {
        executed: mine.len() as u32,
        recovered: times.len() as u32,
        longest_recovery_seconds: times.iter().copied().reduce(f64::max),
        mean_recovery_seconds: (!times.is_empty())
            .then(|| round1(times.iter().sum::<f64>() / times.len() as f64)),
        restart_back_offs: (mine.iter())
            .filter(|f| f.restart.as_ref().is_some_and(|r| r.back_off))
            .count() as u32,
        down_past_drain: (mine.iter())
            .filter(|f| f.restart.as_ref().is_some_and(|r| r.down_past_drain))
            .count() as u32,
        p99_peak_ms: mine
            .iter()
            .filter_map(|f| f.effect.as_ref()?.p99_peak_ms)
            .reduce(f64::max),
    })
}

/// `timeline`: the trial's measured phase, 1-second points, `seconds` long; `offset`: seconds
/// into it at which the fault was carried out.
pub fn effect(timeline: &[TimelinePoint], seconds: u32, offset: f64) -> Option<FaultEffect> {
    let received = dense(timeline, seconds, |p| p.received as f64);
    let f = offset.max(0.0);
    let fault_second = f.floor() as usize;
    if fault_second >= received.len() {
        return None;
    }
    let before = &received[fault_second.saturating_sub(BEFORE_SECONDS)..fault_second];
    let after_start = f.ceil() as usize; // first whole second after the fault
    let after = received.get(after_start..).unwrap_or(&[]);
    let level = mean(before);
    let lowest = after.iter().copied().fold(f64::INFINITY, f64::min);
    let back = after
        .iter()
        .position(|r| level > 0.0 && *r >= RECOVERED_SHARE * level);
    let (recovery_seconds, recovery) = describe(level, back, after_start, f, after.len());
    Some(FaultEffect {
        before_receive_rate: round1(level),
        lowest_receive_rate: if lowest.is_finite() { lowest } else { 0.0 },
        recovery_seconds,
        recovery,
        p99_peak_ms: p99_max(timeline, fault_second, fault_second + PEAK_SECONDS),
        p99_before_ms: p99_max(
            timeline,
            fault_second.saturating_sub(BEFORE_SECONDS),
            fault_second,
        ),
        // Filled in by `attach`, which reads the trial's records.
        ..FaultEffect::default()
    })
}

fn describe(
    level: f64,
    back: Option<usize>,
    after_start: usize,
    f: f64,
    left: usize,
) -> (Option<f64>, String) {
    if level <= 0.0 {
        return (
            None,
            "nothing was delivered in the seconds before the fault: no level to recover to".into(),
        );
    }
    match back {
        Some(i) => {
            let s = round1((after_start + i) as f64 - f);
            (
                Some(s),
                format!(
                    "back to ≥ {:.0} % of {level:.1} msg/s {s:.1} s after the fault",
                    RECOVERED_SHARE * 100.0
                ),
            )
        }
        None => (
            None,
            format!(
                "not back to {:.0} % of {level:.1} msg/s in the {left} s of the measured phase \
                 after the fault",
                RECOVERED_SHARE * 100.0
            ),
        ),
    }
}

/// Duplicate and out-of-order deliveries from the fault's second up to (not including) the
/// second `until` falls in (at least the fault's own second).
fn disorder(timeline: &[TimelinePoint], from: f64, until: f64) -> (u64, u64) {
    let (from, until) = (from.max(0.0).floor() as u32, until.max(0.0).floor() as u32);
    let end = if until > from { until } else { from + 1 };
    timeline
        .iter()
        .filter(|p| (from..end).contains(&p.second))
        // Counters from another process: saturate rather than overflow.
        .fold((0u64, 0u64), |(d, o), p| {
            (
                d.saturating_add(p.duplicates),
                o.saturating_add(p.out_of_order),
            )
        })
}

/// Values per whole second `0..seconds` (absent seconds delivered nothing).
fn dense(timeline: &[TimelinePoint], seconds: u32, v: impl Fn(&TimelinePoint) -> f64) -> Vec<f64> {
    let mut out = vec![0.0; seconds as usize];
    for p in timeline {
        if let Some(x) = out.get_mut(p.second as usize) {
            *x += v(p);
        }
    }
    out
}

/// Highest per-second p99 in `[from, to)`.
fn p99_max(timeline: &[TimelinePoint], from: usize, to: usize) -> Option<f64> {
    timeline
        .iter()
        .filter(|p| (from..to).contains(&(p.second as usize)))
        .filter_map(|p| quantile_ms(&p.latency, 0.99))
        .reduce(f64::max)
}

fn quantile_ms(l: &CoarseLatency, q: f64) -> Option<f64> {
    l.quantile_us(q).map(|us| (us / 100.0).round() / 10.0)
}

fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use runner_api::testing::timeline_point;

    fn flat(rates: &[u64]) -> Vec<TimelinePoint> {
        rates
            .iter()
            .enumerate()
            .map(|(s, r)| at(s as u32, *r))
            .collect()
    }

    fn at(second: u32, received: u64) -> TimelinePoint {
        TimelinePoint {
            received,
            ..timeline_point(second, &[])
        }
    }

    #[test]
    fn recovery_is_counted_from_the_fault_to_the_first_second_back_at_level() {
        // 100/s, the fault at 10.4 s, nothing in seconds 11 and 12, 90 in 13, 97 from 14.
        let mut r = vec![100; 10];
        r.extend([60, 0, 0, 90, 97, 100, 100]);
        let e = effect(&flat(&r), r.len() as u32, 10.4).unwrap();
        assert_eq!(e.before_receive_rate, 100.0);
        assert_eq!(e.lowest_receive_rate, 0.0);
        assert_eq!(e.recovery_seconds, Some(3.6)); // 14.0 − 10.4
        assert!(e.recovery.contains("3.6 s after"), "{}", e.recovery);
    }

    #[test]
    fn a_run_that_never_gets_back_says_so_and_has_no_recovery_time() {
        let mut r = vec![50; 5];
        r.extend([0, 0, 10, 20]);
        let e = effect(&flat(&r), r.len() as u32, 5.0).unwrap();
        assert_eq!(e.recovery_seconds, None);
        assert!(e.recovery.contains("not back"), "{}", e.recovery);
        assert!(e.recovery.contains("in the 4 s"), "{}", e.recovery);
    }

    #[test]
    fn seconds_missing_from_the_timeline_count_as_nothing_delivered() {
        // Points for seconds 0–4 and 8–9 only: 5–7 delivered nothing.
        let mut t = flat(&[10, 10, 10, 10, 10]);
        t.extend([at(8, 10), at(9, 10)]);
        let e = effect(&t, 10, 5.0).unwrap();
        assert_eq!(e.lowest_receive_rate, 0.0);
        assert_eq!(e.recovery_seconds, Some(3.0));
    }

    #[test]
    fn nothing_before_the_fault_gives_no_level_and_a_fault_past_the_end_no_effect() {
        let e = effect(&flat(&[0, 0, 5, 5]), 4, 1.0).unwrap();
        assert_eq!(e.recovery_seconds, None);
        assert!(e.recovery.contains("no level"), "{}", e.recovery);
        assert!(effect(&flat(&[5, 5]), 2, 7.0).is_none());
    }

    fn executed(variant: &str, recovery: Option<f64>, peak: f64) -> FaultRecord {
        FaultRecord {
            variant: Some(variant.into()),
            executed_time: crate::run::decide::time_at(1),
            effect: Some(FaultEffect {
                recovery_seconds: recovery,
                p99_peak_ms: Some(peak),
                ..FaultEffect::default()
            }),
            ..FaultRecord::default()
        }
    }

    #[test]
    fn a_summary_counts_recoveries_per_variant_and_the_threshold_needs_every_one() {
        use crate::run::results;
        use msgbench_crds::benchmark_run::{Metric, RunResult, Threshold, ThresholdOp};
        let recs = vec![
            executed("r1", None, 900.0),
            executed("r3", Some(2.0), 40.0),
            executed("r3", Some(4.5), 55.0),
            FaultRecord {
                variant: Some("r3".into()),
                message: Some("not done: x".into()),
                ..FaultRecord::default()
            },
        ];
        let r3 = summary(&recs, Some("r3")).unwrap();
        assert_eq!((r3.executed, r3.recovered), (2, 2));
        assert_eq!(r3.longest_recovery_seconds, Some(4.5));
        assert_eq!(r3.mean_recovery_seconds, Some(3.3));
        assert_eq!(r3.p99_peak_ms, Some(55.0));
        let r1 = summary(&recs, Some("r1")).unwrap();
        assert_eq!(
            (r1.executed, r1.recovered, r1.longest_recovery_seconds),
            (1, 0, None)
        );
        assert_eq!(summary(&recs, Some("r2")), None);
        assert_eq!(summary(&recs, None).unwrap().executed, 3);

        let within_5s = Threshold {
            metric: Metric::RecoverySeconds,
            op: ThresholdOp::Le,
            value: 5.0,
            severity: Default::default(),
            variants: vec![],
        };
        let judged = |s| {
            let r = RunResult {
                faults: s,
                ..RunResult::default()
            };
            results::evaluate(&r, std::slice::from_ref(&within_5s))[0].clone()
        };
        let ok = judged(Some(r3));
        assert!(ok.passed && ok.observed == Some(4.5), "{ok:?}");
        let never = judged(Some(r1));
        assert!(!never.passed && never.observed.is_none(), "{never:?}");
        assert!(!judged(None).passed, "no fault: nothing proves it held");
    }

    /// Two runners' records of trial 1, faults at 2.5 s and 5.2 s: each fault's window runs to
    /// the next one's second (or the phase's end), over both runners; trial 2 is not counted.
    #[test]
    fn duplicates_and_reordering_are_counted_per_fault_window_over_runners() {
        let line = |runner: u16, trial: u32, dups: [u64; 8]| {
            let mut l = runner_api::testing::record(runner, trial, &[1_000], 1, 1_700_000_000_000);
            l.result.measured.lost_acked = Some(u64::from(runner) + 2);
            l.result.measured.publish_stall = Some(PublishStall {
                micros: 500_000 + u64::from(runner) * 1_500_000,
                started_unix_ms: 3_000 + u64::from(runner) * 600,
            });
            l.result.timeline = (0..8)
                .map(|s| TimelinePoint {
                    received: 10,
                    duplicates: dups[s],
                    out_of_order: u64::from(s == 6),
                    ..timeline_point(s as u32, &[])
                })
                .collect();
            l.result.finalize();
            RawResultLine::from_line(&l).unwrap()
        };
        let lines = [
            line(0, 1, [9, 0, 1, 2, 0, 4, 0, 0]),
            line(1, 1, [0, 0, 0, 3, 0, 0, 1, 0]),
            line(0, 2, [100; 8]),
        ];
        let fault = |offset: f64| FaultRecord {
            trial: 1,
            executed_time: crate::run::decide::time_at(1),
            offset_seconds: Some(offset),
            ..FaultRecord::default()
        };
        let mut faults = [fault(5.2), fault(2.5), FaultRecord::default()];
        attach(&lines, 8, &mut faults);
        let window = |f: &FaultRecord| {
            let e = f.effect.as_ref().unwrap();
            (e.duplicates, e.out_of_order)
        };
        assert_eq!(window(&faults[1]), (1 + 2 + 3, 0), "seconds 2–4");
        assert_eq!(window(&faults[0]), (4 + 1, 2), "seconds 5–7");
        assert!(faults[2].effect.is_none(), "not executed: no effect");
        // The trial's ack figures over both runners: lost summed, the longest stall, placed
        // against the fault's execution (1 ms after the epoch here).
        let e = faults[0].effect.as_ref().unwrap();
        assert_eq!(
            (
                e.trial_lost_acked,
                e.trial_publish_stall_ms,
                e.publish_stall_from_fault_seconds
            ),
            (Some(2 + 3), Some(2000.0), Some(3.6))
        );
    }

    /// A variants run shares the status timeline's 600 points out (six variants: 100 each,
    /// 6-second windows), but a fault's effect is read from its trial's own records, second by
    /// second: the two seconds with nothing delivered, which the 6-second window averages away,
    /// still give the 1.6 s recovery.
    #[test]
    fn a_variants_widened_status_timeline_leaves_fault_effects_per_second() {
        use msgbench_crds::benchmark_run::ScheduledRound;
        let names: Vec<String> = (1..=6).map(|i| format!("r{i}")).collect();
        let lines: Vec<RawResultLine> = (names.iter().enumerate())
            .map(|(i, name)| {
                let trial = i as u32 + 1;
                let mut l = runner_api::testing::record(0, trial, &[1_000], 1, 1_700_000_000_000);
                l.variant = Some(name.clone());
                l.round = Some(1);
                let gap = |s: u32| trial == 1 && (300..302).contains(&s);
                l.result.timeline = (0..600)
                    .map(|s| at(s, if gap(s) { 0 } else { 100 }))
                    .collect();
                l.result.finalize();
                RawResultLine::from_line(&l).unwrap()
            })
            .collect();
        let mut faults = [FaultRecord {
            trial: 1,
            variant: Some("r1".into()),
            executed_time: crate::run::decide::time_at(1),
            offset_seconds: Some(300.4),
            ..FaultRecord::default()
        }];
        attach(&lines, 600, &mut faults);
        let e = faults[0].effect.as_ref().unwrap();
        assert_eq!((e.before_receive_rate, e.lowest_receive_rate), (100.0, 0.0));
        assert_eq!(e.recovery_seconds, Some(1.6), "302.0 − 300.4");

        let schedule = [ScheduledRound {
            round: 1,
            order: names.clone(),
        }];
        let merged = crate::run::results::collect_variants(&lines, 1, &schedule, &names).unwrap();
        let r1 = &merged[0].1.result.timeline;
        assert_eq!(merged[0].0, "r1");
        assert_eq!(r1.len(), 100);
        assert!(r1.iter().all(|p| p.seconds == 6));
        let window = r1.iter().find(|p| p.second == 300).unwrap();
        assert_eq!(window.receive_rate, 66.7, "4 of its 6 seconds at 100/s");
    }

    #[test]
    fn the_p99_peak_is_the_highest_second_after_the_fault_and_before_is_kept_apart() {
        let t = vec![
            timeline_point(0, &[1_000, 1_000, 2_000]),
            timeline_point(1, &[1_000, 1_000, 2_000]),
            timeline_point(2, &[400_000, 900_000]),
            timeline_point(3, &[5_000, 5_000]),
        ];
        let e = effect(&t, 4, 2.2).unwrap();
        let peak = e.p99_peak_ms.unwrap();
        assert!((peak / 900.0 - 1.0).abs() < 0.06, "{peak}");
        let before = e.p99_before_ms.unwrap();
        assert!((before / 2.0 - 1.0).abs() < 0.06, "{before}");
    }
}
