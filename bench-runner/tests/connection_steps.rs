//! A stepped connection workload against a real nats-server: the server's own connection count
//! (its `/varz`, as the operator reads it) passes through every level and holds each one.
mod support;
use bench_runner::{run, RunOptions};
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::*;

/// The server's client connection count from its monitoring port.
fn varz_connections(monitor: u16) -> Option<u64> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", monitor)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(b"GET /varz HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let body = text.split_once("\r\n\r\n")?.1;
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    v["connections"].as_u64()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steps_open_count_over_steps_and_hold_each_level() {
    let (port, monitor) = (free_port(), free_port());
    let mut child = Command::new(tool("nats-server"))
        .args(["-a", "127.0.0.1", "-p", &port.to_string()])
        .args(["-m", &monitor.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_listening(monitor, Duration::from_secs(15), &mut child);
    let server = Server {
        child,
        port,
        _dir: tempfile::tempdir().unwrap(),
    };

    let w = workload(
        "protocol: nats\nconnections: {count: 30, steps: 3, stepHoldSeconds: 2, holdSeconds: 2, concurrency: 10}\n",
    );
    let target = format!("nats://127.0.0.1:{}", server.port);
    let t0 = Instant::now();
    let job = tokio::spawn(async move { run(w, &target, RunOptions::default()).await });
    // Sample like the operator does, only more often: (seconds since start, connections).
    let mut seen: Vec<(f64, u64)> = Vec::new();
    while !job.is_finished() {
        if let Some(c) = tokio::task::spawn_blocking(move || varz_connections(monitor))
            .await
            .unwrap()
        {
            seen.push((t0.elapsed().as_secs_f64(), c));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let r = job.await.unwrap().expect("run");
    let cs = r.connections.expect("connection section");
    assert_eq!((cs.attempted, cs.connected, cs.failed), (30, 30, 0));
    assert!(cs.held_seconds >= 2.0, "the last level holds holdSeconds");
    // Opening time leaves the holds out: 30 loopback connects take far less than a hold.
    assert!(cs.connect_seconds < 1.5, "{}", cs.connect_seconds);
    assert!(
        r.generator.wall_seconds >= 6.0,
        "{}",
        r.generator.wall_seconds
    );

    // Each level is held: seen for well over a second before the next one.
    for level in [10, 20, 30] {
        let at: Vec<f64> = seen
            .iter()
            .filter(|(_, c)| *c == level)
            .map(|(t, _)| *t)
            .collect();
        let held = at.last().unwrap_or(&0.0) - at.first().unwrap_or(&0.0);
        assert!(held >= 1.2, "level {level} held {held:.1}s: {seen:?}");
    }
    // The count only rises while the steps run.
    let peak = seen.iter().position(|(_, c)| *c == 30).unwrap();
    assert!(
        seen[..=peak].windows(2).all(|w| w[1].1 >= w[0].1),
        "{seen:?}"
    );
}
