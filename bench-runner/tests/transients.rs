//! Transients around a run, against a real nats-server on loopback: a server that comes up late
//! is waited for before the load starts; one that never comes up fails with TargetUnreachable
//! (and a termination message); a server lost mid-run is counted as `disconnected`, never
//! hidden by a silent reconnect.
mod support;
use bench_runner::connect::TargetUnreachable;
use bench_runner::{run, RunOptions};
use std::process::Command;
use std::time::{Duration, Instant};
use support::*;

const PUBSUB: &str = "protocol: nats\npublishers: 1\nsubscribers: 1\npayloadBytes: 32\nratePerPublisher: 500\nmessagesPerPublisher: 500\ndrainSeconds: 1\n";

fn opts(connect: Duration) -> RunOptions {
    RunOptions {
        runner_id: 1,
        connect_timeout: connect,
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_comes_up_late_is_waited_for_before_the_load() {
    let port = free_port();
    let starter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        nats_server_at(port, false)
    });
    let t = Instant::now();
    let r = run(
        workload(PUBSUB),
        &format!("nats://127.0.0.1:{port}"),
        opts(Duration::from_secs(20)),
    )
    .await
    .expect("connects once the server is up");
    let _server = starter.join().unwrap();
    assert!(t.elapsed() >= Duration::from_millis(1500));
    let m = &r.measured;
    assert_eq!((m.published, m.received), (500, 500));
    assert!(m.errors.is_empty(), "{:?}", m.errors);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_comes_up_is_target_unreachable_after_the_window() {
    let port = free_port();
    let t = Instant::now();
    let e = run(
        workload(PUBSUB),
        &format!("nats://127.0.0.1:{port}"),
        opts(Duration::from_secs(2)),
    )
    .await
    .expect_err("nothing listens");
    let took = t.elapsed();
    assert!(
        (Duration::from_secs(2)..Duration::from_secs(5)).contains(&took),
        "{took:?}"
    );
    let u = e.downcast_ref::<TargetUnreachable>().expect("structured");
    assert_eq!(u.url, format!("nats://127.0.0.1:{port}"));
    assert!(u.attempts >= 4, "{u:?}");
    assert!(u.last_error.contains("refused"), "{u:?}");
}

/// The standalone command: `--connect-timeout-seconds`, exit 2, and the termination message.
#[test]
fn the_cli_writes_a_target_unreachable_termination_message() {
    let dir = tempfile::tempdir().unwrap();
    let (f, log) = (
        dir.path().join("w.yaml"),
        dir.path().join("termination-log"),
    );
    std::fs::write(&f, PUBSUB).unwrap();
    let port = free_port();
    let out = Command::new(env!("CARGO_BIN_EXE_bench-runner"))
        .args(["run", "-f"])
        .arg(&f)
        .args(["--target", &format!("nats://127.0.0.1:{port}")])
        .args(["--connect-timeout-seconds", "1", "--termination-log"])
        .arg(&log)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unreachable") && err.contains("attempt"),
        "{err}"
    );
    let t: runner_api::termination::Termination =
        serde_json::from_str(&std::fs::read_to_string(&log).unwrap()).unwrap();
    assert_eq!(
        t.reason,
        runner_api::termination::RunnerGaveUp::TargetUnreachable
    );
    assert!(t.message.contains(&format!("127.0.0.1:{port}")), "{t:?}");
}

/// Core NATS (own wire client, no reconnect): the server killed mid-run is counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_lost_mid_run_is_counted_as_disconnected() {
    let s = nats_server(false);
    let port = s.port;
    let killer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        drop(s);
    });
    let r = run(
        workload("protocol: nats\npublishers: 1\nsubscribers: 1\npayloadBytes: 32\nratePerPublisher: 200\ndurationSeconds: 3\ndrainSeconds: 1\n"),
        &format!("nats://127.0.0.1:{port}"),
        opts(Duration::from_secs(5)),
    )
    .await
    .expect("the run ends and reports");
    killer.await.unwrap();
    let m = &r.measured;
    assert!(
        m.errors.get("disconnected").is_some_and(|n| *n >= 1),
        "{:?}",
        m.errors
    );
    assert!(
        m.received < 600,
        "received {} of 600 after the loss",
        m.received
    );
}

/// Request/reply uses async-nats, which reconnects by itself: the reconnect is counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_automatic_reconnect_mid_run_is_counted() {
    let s = nats_server(false);
    let port = s.port;
    let restarter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        drop(s);
        nats_server_at(port, false)
    });
    let r = run(
        workload("protocol: nats\npublishers: 1\nsubscribers: 1\npayloadBytes: 32\nratePerPublisher: 100\ndurationSeconds: 4\ndrainSeconds: 1\nnats: {requestReply: true}\n"),
        &format!("nats://127.0.0.1:{port}"),
        opts(Duration::from_secs(5)),
    )
    .await
    .expect("the run ends and reports");
    let _server = restarter.join().unwrap();
    let m = &r.measured;
    // Publisher and responder connections each lost the server once.
    assert!(
        m.errors.get("disconnected").is_some_and(|n| *n >= 2),
        "{:?}",
        m.errors
    );
}
