//! bench-runner against a real nats-server with JetStream on loopback.
mod support;
use bench_runner::{run, RunOptions, RunResult};
use support::*;

async fn run_ok(yaml: &str, port: u16) -> RunResult {
    run(
        workload(yaml),
        &format!("nats://127.0.0.1:{port}"),
        RunOptions {
            runner_id: 3,
            ..Default::default()
        },
    )
    .await
    .expect("run")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_modes_and_consumers_deliver_exactly_with_ack_latency_apart() {
    let s = nats_server(true);
    for (publish, consumer, storage) in [
        ("async", "push", "file"),
        ("sync", "pull", "memory"),
        ("async", "ordered", "memory"),
    ] {
        let r = run_ok(
            &format!(
                "protocol: jetstream\npublishers: 2\nsubscribers: 2\ntopics: 2\nratePerPublisher: 500\nmessagesPerPublisher: 500\njetstream: {{publish: {publish}, consumer: {consumer}, storage: {storage}, maxInFlight: 50, pullBatch: 100}}\n"
            ),
            s.port,
        )
        .await;
        let m = &r.measured;
        let case = format!("{publish}/{consumer}/{storage}");
        assert_eq!(m.published, 1000, "{case}");
        assert_eq!(m.received, 1000, "{case}");
        assert_eq!(m.summary.delivered_ratio, 1.0, "{case}");
        assert_eq!(m.ack_latency.len(), 1000, "{case}: every publish acked");
        assert_eq!(m.latency.len(), 1000, "{case}");
        assert!(m.errors.is_empty(), "{case}: {:?}", m.errors);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_stream_is_a_clear_error_when_told_to_use_one() {
    let s = nats_server(true);
    let e = run(
        workload("protocol: jetstream\ndurationSeconds: 1\njetstream: {stream: NOPE, createStream: false}\n"),
        &format!("nats://127.0.0.1:{}", s.port),
        RunOptions::default(),
    )
    .await
    .unwrap_err();
    assert!(format!("{e:#}").contains("\"NOPE\""), "{e:#}");
}
