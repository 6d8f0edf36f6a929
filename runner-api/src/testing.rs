//! Result records for tests on either side of the contract (feature `testing`): one runner's
//! trial with the given latencies, as an agent would report it.
use crate::agent::{ResultLine, LINE_FORMAT};
use crate::coarse::CoarseLatency;
use crate::histo::Histo;
use crate::result::{Generator, RunnerResult, SegmentStats, TimelinePoint, FORMAT};

/// Runner `runner`'s record of `trial`: `published` messages over 1 s, one received per
/// latency (µs) within that second (so the end-to-end window is 1 s too), started at
/// `started_unix_ms`.
pub fn record(
    runner: u16,
    trial: u32,
    latencies_us: &[u64],
    published: u64,
    started_unix_ms: u64,
) -> ResultLine {
    let mut m = SegmentStats::new("measured", 1, Default::default());
    m.published = published;
    m.published_by_topic = vec![published];
    m.subscribers_by_topic = vec![1];
    m.received = latencies_us.len() as u64;
    m.publish_seconds = 1.0;
    m.receive_seconds = 1.0;
    m.delivery_seconds = 1.0;
    let mut h = Histo::default();
    for &v in latencies_us {
        h.record(v);
    }
    m.latency = h;
    let workload = serde_json::json!({"protocol": "nats", "durationSeconds": 1});
    let mut r = RunnerResult {
        format: FORMAT.into(),
        target: "nats://x:4222".into(),
        runner_ids: vec![runner],
        workload: serde_json::from_value(workload).expect("a valid workload"),
        generator: Generator::default(),
        warmup: None,
        measured: m,
        sessions: vec![],
        stages: vec![],
        breaking_stage: None,
        connections: None,
        timeline: vec![],
        rest: vec![],
    };
    r.finalize();
    ResultLine {
        format: LINE_FORMAT.into(),
        runner_id: runner,
        trial,
        variant: None,
        round: None,
        started_unix_ms,
        result: r,
    }
}

/// One second of a timeline: one message published and delivered per latency (µs).
pub fn timeline_point(second: u32, latencies_us: &[u64]) -> TimelinePoint {
    let mut latency = CoarseLatency::default();
    latencies_us.iter().for_each(|&us| latency.record(us));
    TimelinePoint {
        second,
        seconds: 1,
        published: latencies_us.len() as u64,
        received: latencies_us.len() as u64,
        latency,
        ..TimelinePoint::default()
    }
}
