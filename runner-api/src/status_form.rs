//! A merged runner result in BenchmarkRun status form: latency summaries (from merged
//! histograms), the warm-up/session/stage rows with the load each stage offered, connections,
//! REST paths and the timeline. The operator writes it to status; `kubectl msgbench` builds the
//! same figures from a standalone `bench-runner run` result file.
use crate::histo::LatencyPercentiles;
use crate::result::{
    ConnectionStats, PublishStall, RestLatency, RunnerResult, SegmentStats, TimelinePoint,
    MAX_TIMELINE_POINTS, SATURATION_LAG_P99_US,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use msgbench_crds::benchmark_run::{
    ConnectionsResult, LatencySummary, RestResult, RunResult, SegmentResult, TimelineSample,
    MAX_STATUS_HISTOGRAM_CHARS,
};
use msgbench_crds::workload::{Stages, MAX_STAGES};

pub fn us_to_ms(us: f64) -> f64 {
    (us / 1000.0 * 1000.0).round() / 1000.0
}

pub fn latency(l: Option<&LatencyPercentiles>) -> Option<LatencySummary> {
    l.map(|l| LatencySummary {
        count: l.count,
        min_ms: us_to_ms(l.min_us as f64),
        p50_ms: us_to_ms(l.p50_us as f64),
        p90_ms: us_to_ms(l.p90_us as f64),
        p95_ms: us_to_ms(l.p95_us as f64),
        p99_ms: us_to_ms(l.p99_us as f64),
        p999_ms: us_to_ms(l.p999_us as f64),
        max_ms: us_to_ms(l.max_us as f64),
        mean_ms: us_to_ms(l.mean_us),
        stddev_ms: us_to_ms(l.stddev_us),
    })
}

/// A warm-up or session row: its offered load is the rate per publisher (none when closed loop).
pub fn segment(p: &SegmentStats) -> SegmentResult {
    segment_offering(p, p.rate_per_publisher.map(f64::from))
}

/// Stage `index` (0-based) of `stages`: it offered `start + index x step` of its dimension —
/// messages/s per publisher, or connections (publishers) per runner.
pub fn stage(p: &SegmentStats, stages: Option<&Stages>, index: usize) -> SegmentResult {
    let offered = match stages {
        Some(st) => {
            let v = u64::from(st.start) + index as u64 * u64::from(st.step);
            Some(v as f64)
        }
        None => p.rate_per_publisher.map(f64::from),
    };
    segment_offering(p, offered)
}

/// Unique deliveries per second over the end-to-end window (first send → last delivery),
/// where that window exists. Nothing delivered after sends is a rate of 0 (there was a first
/// send, and 0 over any window is 0); nothing published, or a window missing from a record
/// that has deliveries (written before the field), leaves the rate undefined: `None`, not 0.
pub fn delivery_rate(p: &SegmentStats) -> Option<f64> {
    if p.delivery_seconds > 0.0 {
        Some(p.summary.delivery_rate)
    } else if p.published > 0 && p.summary.delivered_unique == 0 {
        Some(0.0)
    } else {
        None
    }
}

fn segment_offering(p: &SegmentStats, offered: Option<f64>) -> SegmentResult {
    SegmentResult {
        name: p.name.clone(),
        offered,
        published: p.published,
        received: p.received,
        publish_rate: p.summary.publish_rate,
        receive_rate: p.summary.receive_rate,
        delivery_rate: delivery_rate(p),
        latency: latency(p.summary.latency.as_ref()),
        publish_ack_latency: latency(p.summary.ack_latency.as_ref()),
        generator_saturated: p
            .summary
            .send_lag
            .as_ref()
            .is_some_and(|l| l.p99_us > SATURATION_LAG_P99_US),
    }
}

pub fn connections(c: &ConnectionStats) -> ConnectionsResult {
    ConnectionsResult {
        attempted: c.attempted,
        connected: c.connected,
        failed: c.failed,
        connect_rate: c.connections_per_second,
        connect_seconds: (c.connect_seconds * 1000.0).round() / 1000.0,
        connect_time: latency(c.connect_time.summary().as_ref()),
        errors: c.errors.clone(),
    }
}

pub fn rest(r: &RestLatency) -> RestResult {
    RestResult {
        path: r.path.clone(),
        requests: r.requests,
        errors: r.errors,
        latency: latency(r.latency.summary().as_ref()),
    }
}

pub fn format_ms(ms: f64) -> String {
    if ms >= 100.0 {
        format!("{ms:.0}ms")
    } else if ms >= 1.0 {
        format!("{ms:.2}ms")
    } else {
        format!("{:.0}us", ms * 1000.0)
    }
}

/// The status form of a merged runner result, with the encoded merged histogram; `trials` is
/// how many trials (or rounds) were merged into it, for the timeline's per-trial rates.
pub fn to_status(r: &RunnerResult, trials: u32) -> RunResult {
    to_status_within(r, trials, MAX_TIMELINE_POINTS)
}

/// As [`to_status`], with the timeline widened to at most `timeline_points` points (a run with
/// variants shares the status's points out among them).
pub fn to_status_within(r: &RunnerResult, trials: u32, timeline_points: usize) -> RunResult {
    let m = &r.measured;
    let s = &m.summary;
    RunResult {
        published: m.published,
        received: m.received,
        expected: s.expected,
        publish_rate: s.publish_rate,
        receive_rate: s.receive_rate,
        delivery_rate: delivery_rate(m),
        delivered_ratio: s.delivered_ratio,
        duplicates: m.duplicates,
        out_of_order: m.out_of_order,
        foreign: m.foreign,
        // A connection that failed is an error, so `errors le 0` gates connection workloads.
        errors: s
            .errors
            .saturating_add(r.connections.as_ref().map_or(0, |c| c.failed)),
        duration_seconds: (m.receive_seconds.max(m.publish_seconds) * 1000.0).round() / 1000.0,
        latency: latency(s.latency.as_ref()),
        publish_ack_latency: latency(s.ack_latency.as_ref()),
        lost_acked: m.lost_acked,
        lost_acked_deliveries: m.lost_acked_deliveries,
        acked_not_kept: m.acked_not_kept,
        acked_not_kept_from: m.acked_not_kept_from,
        acked_not_kept_unavailable: (m.acked_not_kept_unavailable.as_deref())
            .map(crate::kept::status_reason),
        publish_stall_ms: m.publish_stall.map(|p| us_to_ms(p.micros as f64)),
        publish_stall_started_at: m.publish_stall.and_then(stall_start),
        warmup: r.warmup.as_ref().map(segment),
        sessions: r.sessions.iter().take(32).map(segment).collect(),
        stages: (r.stages.iter().take(MAX_STAGES as usize).enumerate())
            .map(|(i, p)| stage(p, r.workload.stages.as_ref(), i))
            .collect(),
        generator_saturated: r.generator.saturated,
        max_generator_lag_ms: s.send_lag.as_ref().map(|l| us_to_ms(l.max_us as f64)),
        closed_loop: r.generator.closed_loop,
        connections: r.connections.as_ref().map(connections),
        breaking_stage: r.breaking_stage.clone(),
        rest: r.rest.iter().take(8).map(rest).collect(),
        server_usage: None,
        timeline: timeline_within(&r.timeline, trials, timeline_points),
        // Filled in by the operator from status.faults.
        faults: None,
        histogram: serde_json::to_value(&m.latency)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .filter(|h| h.len() <= MAX_STATUS_HISTOGRAM_CHARS),
    }
}

/// When a stall began, as a status timestamp (none for the zero stall of a phase where
/// nothing was outstanding).
fn stall_start(p: PublishStall) -> Option<MicroTime> {
    if p.started_unix_ms == 0 {
        return None;
    }
    k8s_openapi::jiff::Timestamp::from_millisecond(i64::try_from(p.started_unix_ms).ok()?)
        .ok()
        .map(MicroTime)
}

/// The timeline in status form: rates per second of each window, mean over the `trials` merged
/// into it (second `s` of every trial adds up), percentiles from the merged coarse histograms.
pub fn timeline(points: &[TimelinePoint], trials: u32) -> Vec<TimelineSample> {
    timeline_within(points, trials, MAX_TIMELINE_POINTS)
}

/// As [`timeline`], in at most `max_points` windows of equal width (whole points), so counts
/// add up exactly and percentiles come from the windows' merged coarse histograms.
pub fn timeline_within(
    points: &[TimelinePoint],
    trials: u32,
    max_points: usize,
) -> Vec<TimelineSample> {
    let per = f64::from(trials.max(1));
    // Records from other processes may carry more points than one record holds, and a run
    // with variants shares the status's points out: wider windows.
    let width = points.len().div_ceil(max_points.max(1)).max(1);
    points
        .chunks(width)
        .map(|c| {
            let mut p = c[0].clone();
            c[1..].iter().for_each(|q| p.add(q));
            let last = &c[c.len() - 1];
            p.seconds = (last.second.saturating_add(last.seconds)).saturating_sub(p.second);
            let secs = f64::from(p.seconds.max(1)) * per;
            let rate = |n: u64| (n as f64 / secs * 10.0).round() / 10.0;
            TimelineSample {
                second: p.second,
                seconds: p.seconds,
                publish_rate: rate(p.published),
                receive_rate: rate(p.received),
                ack_rate: rate(p.acked),
                p50_ms: p.latency.quantile_us(0.5).map(us_to_ms),
                p99_ms: p.latency.quantile_us(0.99).map(us_to_ms),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(second: u32, received: u64, us: u64) -> TimelinePoint {
        crate::testing::timeline_point(second, &vec![us; received as usize])
    }

    #[test]
    fn timeline_rates_are_per_trial_and_percentiles_come_from_the_merged_buckets() {
        // Two trials merged: 200 deliveries in second 0 are 100/s per trial.
        let t = timeline(&[point(0, 200, 2_000), point(1, 0, 0)], 2);
        assert_eq!(t.len(), 2);
        assert_eq!((t[0].receive_rate, t[0].publish_rate), (100.0, 100.0));
        let p99 = t[0].p99_ms.unwrap();
        assert!((p99 / 2.0 - 1.0).abs() < 0.06, "{p99}");
        // A second with no deliveries has no latency, not a latency of 0.
        assert_eq!((t[1].p50_ms, t[1].p99_ms), (None, None));
    }

    #[test]
    fn lost_acked_and_the_stall_reach_status_and_unavailable_stays_absent() {
        let line = crate::testing::record(1, 1, &[1_000], 1, 1_700_000_000_000);
        let mut r = line.result;
        let none = to_status(&r, 1);
        assert_eq!((none.lost_acked, none.lost_acked_deliveries), (None, None));
        assert_eq!(none.publish_stall_ms, None);
        assert_eq!(none.publish_stall_started_at, None);
        let json = serde_json::to_value(&none).unwrap();
        assert!(json.get("lostAcked").is_none() && json.get("publishStallMs").is_none());
        r.measured.lost_acked = Some(0);
        r.measured.lost_acked_deliveries = Some(0);
        r.measured.publish_stall = Some(PublishStall {
            micros: 1_234_567,
            started_unix_ms: 1_700_000_000_250,
        });
        r.measured.acked_not_kept = Some(4);
        r.measured.acked_not_kept_from = Some(crate::result::AckedNotKeptFrom::StreamGone);
        let st = to_status(&r, 1);
        assert_eq!(
            (st.lost_acked, st.lost_acked_deliveries),
            (Some(0), Some(0))
        );
        assert_eq!(st.acked_not_kept, Some(4));
        let json = serde_json::to_value(&st).unwrap();
        assert_eq!(json["ackedNotKeptFrom"], "streamGone");
        assert!(json.get("ackedNotKeptUnavailable").is_none());
        assert_eq!(st.publish_stall_ms, Some(1_234.567));
        let at = serde_json::to_value(&st.publish_stall_started_at).unwrap();
        assert_eq!(at, "2023-11-14T22:13:20.250000Z");
    }

    /// Runner 1: 900 unique deliveries over a 1.5 s end-to-end window (600/s), runner 2: 300
    /// over 3 s (100/s). Merged: 1200 over the longest window, 400/s (not 350, their mean,
    /// nor 700, their sum).
    #[test]
    fn the_delivery_rate_of_merged_runners_is_their_deliveries_over_the_longest_window() {
        let part = |id: u16, unique: u64, window: f64| {
            let mut r = crate::testing::record(id, 1, &[1_000], unique, 1_700_000_000_000).result;
            r.measured.received = unique;
            r.measured.delivery_seconds = window;
            r.finalize();
            (format!("runner {id}"), r)
        };
        let merged = RunnerResult::merge(&[part(1, 900, 1.5), part(2, 300, 3.0)]).unwrap();
        assert_eq!(to_status(&merged, 1).delivery_rate, Some(400.0));
        // Nothing published: no window, no figure. A record without the window: none either.
        let idle = part(1, 0, 0.0).1;
        assert_eq!(to_status(&idle, 1).delivery_rate, None);
        let old = part(1, 900, 0.0).1;
        assert_eq!(to_status(&old, 1).delivery_rate, None);
    }

    #[test]
    fn a_session_row_carries_its_publish_rate_and_ack_latency() {
        let mut p = SegmentStats::new("session-2", 1, crate::result::Delivery::FanOut);
        p.summary.publish_rate = 4_800.0;
        let mut acks = crate::histo::Histo::default();
        acks.record(2_000);
        p.summary.ack_latency = acks.summary();
        let row = segment(&p);
        assert_eq!(row.publish_rate, 4_800.0);
        assert_eq!(row.publish_ack_latency.map(|l| l.p99_ms), Some(2.0));
        // No acks (core NATS): no ack latency, not a zero one.
        p.summary.ack_latency = None;
        assert_eq!(segment(&p).publish_ack_latency, None);
    }

    #[test]
    fn the_timeline_carries_the_ack_rate_per_trial() {
        let mut p = point(0, 10, 1_000);
        p.acked = 40;
        let t = timeline(&[p, point(1, 10, 1_000)], 2);
        assert_eq!((t[0].ack_rate, t[1].ack_rate), (20.0, 0.0));
    }

    #[test]
    fn an_overlong_merged_timeline_is_widened_to_600_points_losing_nothing() {
        let points: Vec<TimelinePoint> = (0..1_500).map(|s| point(s, 3, 1_000)).collect();
        let t = timeline(&points, 1);
        assert!(t.len() <= MAX_TIMELINE_POINTS, "{}", t.len());
        assert_eq!((t[1].second, t[1].seconds), (3, 3));
        let total: f64 = t
            .iter()
            .map(|p| p.receive_rate * f64::from(p.seconds))
            .sum();
        assert_eq!(total, 4_500.0);
    }

    #[test]
    fn a_variant_share_of_the_timeline_widens_its_windows_losing_nothing() {
        let points: Vec<TimelinePoint> = (0..600).map(|s| point(s, 3, 1_000)).collect();
        let t = timeline_within(&points, 1, 100);
        assert_eq!(t.len(), 100);
        assert_eq!((t[1].second, t[1].seconds), (6, 6));
        let total: f64 = t
            .iter()
            .map(|p| p.receive_rate * f64::from(p.seconds))
            .sum();
        assert_eq!(total, 1_800.0);
        assert_eq!(t[0].p50_ms, timeline(&points, 1)[0].p50_ms);
        assert_eq!(
            timeline_within(&points[..5], 1, 100).len(),
            5,
            "short: untouched"
        );
    }
}
