//! WebSocket echo (an in-test tokio-tungstenite server) and Socket.IO (the Node socket.io
//! harness speaking the msgbench wire protocol).
mod support;
use bench_runner::{run, RunOptions};
use runner_api::result::RunnerResult;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::*;

async fn run_ok(yaml: &str, target: String) -> RunnerResult {
    run(
        workload(yaml),
        &target,
        RunOptions {
            runner_id: 9,
            ..Default::default()
        },
    )
    .await
    .expect("run")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_echo_round_trips_on_every_connection() {
    let port = ws_echo_server().await;
    let r = run_ok(
        "protocol: websocket\npublishers: 4\nsubscribers: 0\nratePerPublisher: 250\nmessagesPerPublisher: 250\nwebsocket: {mode: echo, path: /}\n",
        format!("ws://127.0.0.1:{port}"),
    )
    .await;
    assert_eq!(r.measured.published, 1000);
    assert!(r.measured.errors.is_empty(), "{:?}", r.measured.errors);
    assert_eq!(
        r.measured.received,
        1000,
        "{}",
        bench_runner::report::render(&r)
    );
    assert_eq!(r.measured.summary.delivered_ratio, 1.0);
    assert_eq!(r.measured.latency.len(), 1000);

    let c = run_ok(
        "protocol: websocket\nconnections: {count: 100, holdSeconds: 0}\nwebsocket: {path: /}\n",
        format!("ws://127.0.0.1:{port}"),
    )
    .await;
    assert_eq!(c.connections.unwrap().connected, 100);
}

/// A WebSocket server that echoes and keeps each frame's arrival instant.
async fn ws_arrivals_server() -> (
    u16,
    std::sync::Arc<std::sync::Mutex<Vec<std::time::Instant>>>,
) {
    use futures::{SinkExt, StreamExt};
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let s2 = seen.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            let seen = s2.clone();
            tokio::spawn(async move {
                let Ok(mut ws) = tokio_tungstenite::accept_async(s).await else {
                    return;
                };
                while let Some(Ok(m)) = ws.next().await {
                    if m.is_binary() {
                        seen.lock().unwrap().push(std::time::Instant::now());
                        if ws.send(m).await.is_err() {
                            break;
                        }
                    }
                }
            });
        }
    });
    (port, seen)
}

/// Groups of frames separated by more than `gap`.
fn clusters(t: &[std::time::Instant], gap: Duration) -> usize {
    1 + t.windows(2).filter(|w| w[1] - w[0] > gap).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_batch_releases_bursts_at_the_same_rate() {
    // 50 msg/s for 2 s: one frame every 20 ms, or with publishBatch 25 two bursts a second.
    let yaml = |batch: &str| {
        format!("protocol: websocket\npublishers: 1\nsubscribers: 0\nratePerPublisher: 50\nmessagesPerPublisher: 100\n{batch}websocket: {{mode: echo, path: /}}\n")
    };
    let (port, seen) = ws_arrivals_server().await;
    let r = run_ok(
        &yaml("publishBatch: 25\n"),
        format!("ws://127.0.0.1:{port}"),
    )
    .await;
    assert_eq!((r.measured.published, r.measured.received), (100, 100));
    let bursts = clusters(&seen.lock().unwrap(), Duration::from_millis(200));
    assert_eq!(bursts, 4, "100 messages in bursts of 25 arrive as 4 groups");

    let (port, seen) = ws_arrivals_server().await;
    let r = run_ok(&yaml(""), format!("ws://127.0.0.1:{port}")).await;
    assert_eq!((r.measured.published, r.measured.received), (100, 100));
    let t = seen.lock().unwrap();
    assert_eq!(
        clusters(&t, Duration::from_millis(200)),
        1,
        "unbatched: a steady stream"
    );
    // Same rate either way: the last frame is due at 1.98 s (1.5 s when batched).
    assert!(t[t.len() - 1] - t[0] >= Duration::from_millis(1900));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_broadcast_fans_out_to_every_subscriber() {
    let port = ws_broadcast_server().await;
    let r = run_ok(
        "protocol: websocket\npublishers: 2\nsubscribers: 3\nratePerPublisher: 200\nmessagesPerPublisher: 200\nwebsocket: {mode: broadcast, path: /}\n",
        format!("ws://127.0.0.1:{port}"),
    )
    .await;
    let m = &r.measured;
    assert_eq!(m.published, 400);
    assert_eq!(
        m.summary.expected, 1200,
        "every subscriber gets every frame"
    );
    assert_eq!(m.received, 1200, "{}", bench_runner::report::render(&r));
    assert_eq!(m.summary.delivered_ratio, 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socketio_http_publish_fans_out_to_rooms_and_the_all_room() {
    let start =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/pubsub/node-server/start");
    assert!(
        start.exists(),
        "Socket.IO harness missing at {}",
        start.display()
    );
    let port = free_port();
    let child = Command::new(&start)
        .arg(port.to_string())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut server = Server {
        child,
        port,
        _dir: tempfile::tempdir().unwrap(),
    };
    // First start installs node_modules once (cached).
    wait_listening(port, Duration::from_secs(240), &mut server.child);

    let target = format!("http://127.0.0.1:{port}");
    let r = run_ok(
        "protocol: socketio\npublishers: 2\nsubscribers: 4\ntopics: 2\npayloadBytes: 64\nratePerPublisher: 100\nmessagesPerPublisher: 200\n",
        target.clone(),
    )
    .await;
    let m = &r.measured;
    assert_eq!(m.published, 400);
    assert_eq!(m.summary.expected, 800, "two subscribers per room");
    assert_eq!(m.received, 800);
    assert_eq!(m.summary.delivered_ratio, 1.0);
    assert_eq!(
        m.ack_latency.len(),
        400,
        "HTTP publish latency recorded apart"
    );
    assert_eq!(m.latency.len(), 800);

    let all = run_ok(
        "protocol: socketio\npublishers: 2\nsubscribers: 3\ntopics: 2\nratePerPublisher: 100\nmessagesPerPublisher: 100\nsocketio: {allRoom: true}\n",
        target,
    )
    .await;
    assert_eq!(
        all.measured.summary.expected, 600,
        "__all__ receives every publish"
    );
    assert_eq!(all.measured.received, 600);
}
