//! Property test: the standalone workload parser takes any text without panicking, and a
//! workload it accepts always plans.
use bench_runner::engine::parse_workload;
use bench_runner::plan;
use proptest::prelude::*;

/// Lines of valid workloads, to recombine into near-valid ones.
const LINES: &[&str] = &[
    "protocol: nats",
    "protocol: mqtt",
    "protocol: jetstream",
    "publishers: 0",
    "publishers: 3",
    "subscribers: 2",
    "topics: 0",
    "topics: 4",
    "payloadBytes: 16",
    "payloadBytes: 99999999",
    "ratePerPublisher: 0",
    "ratePerPublisher: 1000",
    "durationSeconds: 1",
    "durationSeconds: 0",
    "messagesPerPublisher: 10",
    "warmupSeconds: 2",
    "sessions: [{messages: 5, pauseAfterSeconds: 1}, {messages: 0}]",
    "stages: {dimension: rate, start: 1, step: 4000000000, count: 100, stageSeconds: 1}",
    "stages: {dimension: connections, shape: ramp, start: 1, step: 2, count: 3, stageSeconds: 1, stopWhen: {deliveredRatioBelow: .nan}}",
    "connections: {count: 10, maxPerSecond: 0}",
    "connections: {count: 4294967295, steps: 20, maxPerSecond: 1}",
    "mqtt: {qos: 7}",
];

fn near_valid() -> impl Strategy<Value = String> {
    proptest::collection::vec(prop::sample::select(LINES), 0..8).prop_map(|l| l.join("\n"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_text_parses_or_errs(text in "\\PC{0,200}") {
        if let Ok(w) = parse_workload(&text) {
            prop_assert!(plan::max_publishers(&plan::phases(&w)) <= 10_000);
        }
    }

    #[test]
    fn near_valid_workloads_parse_or_err(text in near_valid()) {
        if let Ok(w) = parse_workload(&text) {
            let phases = plan::phases(&w);
            prop_assert!(!phases.is_empty());
            prop_assert!(plan::max_publishers(&phases) <= 10_000);
        }
    }
}
