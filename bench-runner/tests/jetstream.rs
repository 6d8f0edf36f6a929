//! bench-runner against a real nats-server with JetStream on loopback.
mod support;
use bench_runner::{run, RunOptions, SharedSetup};
use runner_api::result::RunnerResult;
use support::*;

async fn run_ok(yaml: &str, port: u16) -> RunnerResult {
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
        assert_eq!(m.lost_acked, Some(0), "{case}: nothing acked went missing");
        assert_eq!(m.lost_acked_deliveries, Some(0), "{case}");
        // A healthy server: the longest wait for an ack is there, and short.
        let stall = m.publish_stall.expect("JetStream acknowledges publishes");
        assert!((1..2_000_000).contains(&stall.micros), "{case}: {stall:?}");
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

/// Each publish-ack is timed when its own ack arrives, not when the in-flight window is next
/// settled: at 500 msg/s a window of 200 takes 400 ms to fill, and loopback acks take ~1 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_publish_ack_latency_is_timed_per_ack_not_per_window() {
    let s = nats_server(true);
    let r = run_ok(
        "protocol: jetstream\npublishers: 1\nsubscribers: 1\ntopics: 1\nratePerPublisher: 500\nmessagesPerPublisher: 1000\njetstream: {publish: async, storage: memory, maxInFlight: 200}\n",
        s.port,
    )
    .await;
    let m = &r.measured;
    assert_eq!(m.published, 1000);
    assert_eq!(m.ack_latency.len(), m.published, "every publish acked once");
    assert!(m.errors.is_empty(), "{:?}", m.errors);
    let p50 = m.ack_latency.0.value_at_quantile(0.5);
    assert!(
        p50 < 100_000,
        "publish-ack p50 {p50} us: acks are timed by window settling (window fill time is 400 ms)"
    );
}

/// Ack batches: publish N, then wait for all N acks. Every publish is acked and counted once,
/// and each ack is still timed from its own message's send: at 500 msg/s a batch of 200 takes
/// 400 ms to fill, so timing acks when the batch completes would put p50 near 200 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ack_batches_publish_exactly_and_time_each_ack_from_its_own_send() {
    let s = nats_server(true);
    let r = run_ok(
        "protocol: jetstream\npublishers: 2\nsubscribers: 1\ntopics: 1\nratePerPublisher: 500\nmessagesPerPublisher: 700\njetstream: {publish: async, storage: memory, ackBatch: 200}\n",
        s.port,
    )
    .await;
    let m = &r.measured;
    assert_eq!(
        m.published, 1400,
        "3 full batches and a partial one per publisher"
    );
    assert_eq!(m.ack_latency.len(), 1400, "every publish acked once");
    assert_eq!((m.received, m.summary.delivered_ratio), (1400, 1.0));
    assert!(m.errors.is_empty(), "{:?}", m.errors);
    let p50 = m.ack_latency.0.value_at_quantile(0.5);
    assert!(
        p50 < 100_000,
        "publish-ack p50 {p50} us: timed per batch, not per message"
    );

    // Closed loop with batches of 5000: the publisher waits out each batch and still counts
    // exactly.
    let r = run_ok(
        "protocol: jetstream\npublishers: 1\nsubscribers: 1\nmessagesPerPublisher: 12000\ndrainSeconds: 10\njetstream: {publish: async, storage: memory, ackBatch: 5000}\n",
        s.port,
    )
    .await;
    let m = &r.measured;
    assert_eq!(
        (m.published, m.ack_latency.len(), m.received),
        (12000, 12000, 12000)
    );
    assert!(m.errors.is_empty(), "{:?}", m.errors);
}

/// Stream replicas reach the server: replicas 3 on one server is refused with an error naming
/// the stream and its replicas; on a 3-server cluster the same workload (file storage, ack
/// batches) delivers exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_three_needs_and_works_on_a_three_server_cluster() {
    let yaml = "protocol: jetstream\npublishers: 1\nsubscribers: 2\ntopics: 1\nratePerPublisher: 500\nmessagesPerPublisher: 500\ndrainSeconds: 5\njetstream: {replicas: 3, storage: file, ackBatch: 100}\n";
    let single = nats_server(true);
    let e = run(
        workload(yaml),
        &format!("nats://127.0.0.1:{}", single.port),
        RunOptions::default(),
    )
    .await
    .unwrap_err();
    let e = format!("{e:#}");
    assert!(e.contains("replicas 3"), "{e}");

    let cluster = nats_cluster();
    // Connect to a different server than the stream leader may sit on: any works.
    let r = run_ok(yaml, cluster[1].port).await;
    let m = &r.measured;
    assert_eq!((m.published, m.ack_latency.len()), (500, 500));
    assert_eq!((m.received, m.summary.delivered_ratio), (1000, 1.0));
    assert!(m.errors.is_empty(), "{:?}", m.errors);
}

struct Barrier(std::sync::Arc<tokio::sync::Barrier>);
impl bench_runner::StartGate for Barrier {
    fn wait(&self) -> futures::future::BoxFuture<'_, anyhow::Result<()>> {
        Box::pin(async move {
            self.0.wait().await;
            Ok(())
        })
    }
}

/// With several runners only the leader recreates the stream: a follower waits for the stream
/// tagged with this trial's token (a stale one from an earlier trial does not count), and
/// neither deletes the stream under the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_recreates_the_stream_and_followers_wait_for_it() {
    let s = nats_server(true);
    let target = format!("nats://127.0.0.1:{}", s.port);
    let w = workload("protocol: jetstream\npublishers: 1\nsubscribers: 1\ntopics: 1\nratePerPublisher: 500\nmessagesPerPublisher: 500\ndrainSeconds: 3\njetstream: {publish: async, storage: memory, maxInFlight: 50}\n");
    let b = std::sync::Arc::new(tokio::sync::Barrier::new(2));
    let o = |id, setup| RunOptions {
        runner_id: id,
        gate: Some(std::sync::Arc::new(Barrier(b.clone()))),
        setup,
        ..Default::default()
    };
    let follower = SharedSetup::Follower {
        token: "trial-1".into(),
        wait: std::time::Duration::from_secs(20),
    };
    // The follower starts first and must wait for the leader's stream.
    let (f, l) = tokio::join!(run(w.clone(), &target, o(2, follower)), async {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        run(
            w.clone(),
            &target,
            o(
                1,
                SharedSetup::Leader {
                    token: "trial-1".into(),
                },
            ),
        )
        .await
    });
    let (f, l) = (f.expect("follower"), l.expect("leader"));
    for (who, r) in [("follower", &f), ("leader", &l)] {
        assert_eq!(r.measured.published, 500, "{who}");
        assert_eq!(r.measured.ack_latency.len(), 500, "{who}");
        assert_eq!(r.measured.received, 1000, "{who}: both runners' messages");
        assert!(
            r.measured.errors.is_empty(),
            "{who}: {:?}",
            r.measured.errors
        );
    }

    // Without a leader for its trial, a follower gives up with a clear error.
    let e = run(
        w.clone(),
        &target,
        RunOptions {
            runner_id: 2,
            setup: SharedSetup::Follower {
                token: "trial-2".into(),
                wait: std::time::Duration::from_millis(500),
            },
            ..Default::default()
        },
    )
    .await
    .unwrap_err();
    assert!(
        format!("{e:#}").contains("runner 1 did not create it for trial-2"),
        "{e:#}"
    );
}

/// The server stops answering for 600 ms in the middle of publishing (SIGSTOP, then SIGCONT):
/// the longest publish stall covers the pause and starts when it did, nothing acknowledged
/// is lost (the server kept every message), and every ack lands in the timeline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_server_shows_as_a_publish_stall_and_loses_no_acknowledged_message() {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};
    let s = nats_server(true);
    let pid = s.pid();
    // Publishing spans ~0.1–5.1 s (setup on loopback is far below a second); the pause lies
    // well inside it.
    let staller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        let at = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        signal(pid, "STOP");
        std::thread::sleep(Duration::from_millis(600));
        signal(pid, "CONT");
        at.as_millis() as u64
    });
    let r = run_ok(
        "protocol: jetstream\npublishers: 1\nsubscribers: 2\ntopics: 1\nratePerPublisher: 500\nmessagesPerPublisher: 2500\njetstream: {publish: async, storage: memory, maxInFlight: 1000}\n",
        s.port,
    )
    .await;
    let stopped_ms = staller.join().unwrap();
    let m = &r.measured;
    assert_eq!(m.published, 2500);
    assert!(m.errors.is_empty(), "{:?}", m.errors);
    assert_eq!(m.ack_latency.len(), 2500, "every publish acked");
    assert_eq!((m.lost_acked, m.lost_acked_deliveries), (Some(0), Some(0)));
    let stall = m.publish_stall.expect("JetStream acknowledges publishes");
    assert!(
        (500_000..3_000_000).contains(&stall.micros),
        "a 600 ms pause: stall {} µs",
        stall.micros
    );
    let lead = stopped_ms as i64 - stall.started_unix_ms as i64;
    assert!(
        (-50..300).contains(&lead),
        "the stall starts with the pause: {lead} ms before it"
    );
    let acked: u64 = r.timeline.iter().map(|p| p.acked).sum();
    assert_eq!(acked, 2500);
}
