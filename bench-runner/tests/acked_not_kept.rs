//! `ackedNotKept` against a real nats-server: the stream read back after the drain holds every
//! acked message of a normal run; messages deleted from it after they were acked and
//! delivered count (while `lostAcked`, delivery, stays 0); a stream deleted mid-run is found
//! gone and every acked message counts.
mod support;
use async_nats::jetstream;
use bench_runner::{run, RunOptions};
use runner_api::result::{AckedNotKeptFrom, RunnerResult};
use std::time::{Duration, Instant};
use support::*;

const STREAM: &str = "KEPT";

/// 2 publishers on 2 topics (the read-back filters on both subjects), 300 messages each.
async fn bench(port: u16, extra: &'static str) -> (RunnerResult, Duration) {
    let yaml = format!(
        "protocol: jetstream\npublishers: 2\nsubscribers: 2\ntopics: 2\nratePerPublisher: 100\n\
         messagesPerPublisher: 300\n{extra}jetstream: {{stream: {STREAM}, storage: file}}\n"
    );
    let t0 = Instant::now();
    let target = format!("nats://127.0.0.1:{port}");
    let opts = RunOptions {
        runner_id: 1,
        ..Default::default()
    };
    let r = run(workload(&yaml), &target, opts).await;
    (r.expect("run"), t0.elapsed())
}

async fn context(port: u16) -> jetstream::Context {
    let c = async_nats::connect(format!("127.0.0.1:{port}"))
        .await
        .unwrap();
    jetstream::new(c)
}

/// Waits until the run's stream holds at least `n` messages.
async fn stream_holds(js: &jetstream::Context, n: u64) -> jetstream::stream::Stream {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(mut s) = js.get_stream(STREAM).await {
            if s.info().await.is_ok_and(|i| i.state.messages >= n) {
                return s;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the stream never held {n} messages"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_normal_run_keeps_every_acked_message() {
    let s = nats_server(true);
    let (r, took) = bench(s.port, "").await;
    let m = &r.measured;
    eprintln!("trial took {took:?}");
    assert_eq!(m.ack_latency.len(), 600, "every publish acked");
    assert_eq!(
        m.acked_not_kept,
        Some(0),
        "{:?}",
        m.acked_not_kept_unavailable
    );
    assert_eq!(m.acked_not_kept_from, Some(AckedNotKeptFrom::ReadBack));
    assert_eq!(m.acked_not_kept_unavailable, None);
    assert_eq!(m.lost_acked, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_deleted_after_delivery_are_acked_but_not_kept() {
    let s = nats_server(true);
    let running = tokio::spawn(bench(s.port, ""));
    let js = context(s.port).await;
    // At 200/s, 300 stored means the first ones were acked and delivered long ago (loopback).
    let stream = stream_holds(&js, 300).await;
    let removed: Vec<u64> = (50..60).chain([100, 101, 250]).collect();
    for &seq in &removed {
        stream.delete_message(seq).await.expect("delete");
    }
    let (r, _) = running.await.unwrap();
    let m = &r.measured;
    assert_eq!(m.ack_latency.len(), 600, "every publish acked");
    assert_eq!(m.lost_acked, Some(0), "all were delivered live");
    let n = removed.len() as u64;
    assert_eq!(
        m.acked_not_kept,
        Some(n),
        "{:?}",
        m.acked_not_kept_unavailable
    );
    assert_eq!(m.acked_not_kept_from, Some(AckedNotKeptFrom::ReadBack));
}

/// The stream deleted mid-run: later publishes fail, the read-back gets 404 until its 30 s
/// bound and calls the stream gone; every publish that was acked counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_deleted_mid_run_is_gone_and_every_acked_message_counts() {
    let s = nats_server(true);
    let running = tokio::spawn(bench(s.port, "drainSeconds: 1\n"));
    let js = context(s.port).await;
    stream_holds(&js, 200).await;
    js.delete_stream(STREAM).await.expect("delete stream");
    let (r, took) = running.await.unwrap();
    let m = &r.measured;
    let acked = m.ack_latency.len();
    assert!((200..600).contains(&acked), "{acked} acked");
    assert_eq!(
        m.acked_not_kept,
        Some(acked),
        "{:?}",
        m.acked_not_kept_unavailable
    );
    assert_eq!(m.acked_not_kept_from, Some(AckedNotKeptFrom::StreamGone));
    assert!(
        took >= Duration::from_secs(30),
        "gone only at the bound: {took:?}"
    );
}
