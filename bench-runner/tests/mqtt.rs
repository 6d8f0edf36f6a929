//! bench-runner against a real mosquitto on loopback: MQTT 3.1.1 and 5, QoS 0/1/2, with and
//! without a login.
mod support;
use bench_runner::{run, ClientPath, RunOptions};
use runner_api::result::RunnerResult;
use runner_api::target::Credentials;
use std::time::{Duration, Instant};
use support::*;

async fn run_ok(yaml: &str, port: u16) -> RunnerResult {
    run(
        workload(yaml),
        &format!("mqtt://127.0.0.1:{port}"),
        RunOptions {
            runner_id: 5,
            ..Default::default()
        },
    )
    .await
    .expect("run")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_version_and_qos_delivers_exactly_at_a_modest_rate() {
    let s = mosquitto();
    for (version, qos) in [("3.1.1", 0), ("3.1.1", 1), ("5", 1), ("5", 2)] {
        let r = run_ok(
            &format!(
                "protocol: mqtt\npublishers: 2\nsubscribers: 2\ntopics: 2\npayloadBytes: 100\nratePerPublisher: 500\nmessagesPerPublisher: 500\nmqtt: {{version: \"{version}\", qos: {qos}}}\n"
            ),
            s.port,
        )
        .await;
        let m = &r.measured;
        let case = format!("MQTT {version} QoS {qos}");
        assert_eq!(m.published, 1000, "{case}");
        assert_eq!(m.received, 1000, "{case}");
        assert_eq!(m.summary.delivered_ratio, 1.0, "{case}");
        assert_eq!(m.duplicates, 0, "{case}");
        assert_eq!(m.latency.len(), 1000, "{case}");
        assert!(m.errors.is_empty(), "{case}: {:?}", m.errors);
        // PUBACK (QoS 1) / PUBCOMP (QoS 2) latency, apart from end-to-end.
        let acks = m.ack_latency.len();
        assert_eq!(acks, if qos == 0 { 0 } else { 1000 }, "{case}");
        // QoS 0 is not acknowledged: lost-acked and the stall are unavailable, not 0.
        let acked = qos > 0;
        assert_eq!(m.lost_acked, acked.then_some(0), "{case}");
        assert_eq!(m.publish_stall.is_some(), acked, "{case}");
        // Send lag depends on the machine's load (shared CI cores); the schedule itself held:
        assert_eq!(m.scheduled, m.published, "{case}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wildcard_subscribers_receive_every_topic() {
    let s = mosquitto();
    let r = run_ok(
        "protocol: mqtt\npublishers: 3\nsubscribers: 2\ntopics: 3\nratePerPublisher: 300\nmessagesPerPublisher: 300\nmqtt: {qos: 1, wildcard: true}\n",
        s.port,
    )
    .await;
    // 900 published, each to both wildcard subscribers.
    assert_eq!(r.measured.summary.expected, 1800);
    assert_eq!(r.measured.received, 1800);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_workload_opens_and_holds_connections() {
    let s = mosquitto();
    let r = run_ok(
        "protocol: mqtt\nconnections: {count: 200, concurrency: 50, holdSeconds: 1}\n",
        s.port,
    )
    .await;
    let c = r.connections.unwrap();
    assert_eq!((c.connected, c.failed), (200, 0));
    assert_eq!(c.connect_time_summary.unwrap().count, 200);
}

/// The 3.1.1 publisher keeps its connection alive through a pause longer than the keep-alive
/// (the broker drops a client silent for 1.5 × keep-alive): both sessions deliver exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishers_stay_connected_through_a_pause_longer_than_keep_alive() {
    let s = mosquitto();
    let r = run_ok(
        "protocol: mqtt\nratePerPublisher: 1000\nsessions:\n- {messages: 200, pauseAfterSeconds: 9}\n- {messages: 200}\nmqtt: {qos: 1, keepAliveSeconds: 5}\n",
        s.port,
    )
    .await;
    for p in &r.sessions {
        assert_eq!((p.published, p.received), (200, 200), "{}", p.name);
        assert_eq!(p.ack_latency.len(), 200, "{}", p.name);
    }
    assert!(r.measured.errors.is_empty(), "{:?}", r.measured.errors);
}

/// A broker that dies mid-run ends the run (no publisher waits forever for PUBACKs that cannot
/// come) with the failure counted, and the unsent rest shows against the schedule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_dying_mid_run_is_reported_not_waited_for() {
    let mut s = mosquitto();
    let pid = s.pid();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(1000));
        signal(pid, "KILL");
    });
    let r = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        run_ok(
            "protocol: mqtt\nratePerPublisher: 1000\ndurationSeconds: 3\ndrainSeconds: 1\nmqtt: {qos: 1, maxInFlight: 50}\n",
            s.port,
        ),
    )
    .await
    .expect("the run ends on its own");
    killer.join().unwrap();
    let _ = s.child.wait();
    let m = &r.measured;
    assert_eq!(m.scheduled, 3000);
    assert!(
        m.published < 2000,
        "published {} after the broker died at 1 s",
        m.published
    );
    // The lost connection is counted: every publish after it fails at once.
    assert!(
        m.errors.contains_key("connectionClosed") || m.errors.contains_key("write"),
        "{:?}",
        m.errors
    );
    // Which stall shows depends on the instant of the kill. Publishes written and in flight
    // then are never acknowledged: the stall lasts from the last PUBACK (~1 s) until the
    // publisher gives up at the end (~2 s). With none in flight (at 1000/s and local PUBACKs,
    // often so) the reader may see the connection close before the next publish, which then
    // fails at once instead of waiting.
    let stall = m.publish_stall.expect("QoS 1 is acknowledged");
    let acked = m.ack_latency.len();
    if m.published > acked {
        assert!(
            stall.micros >= 1_500_000,
            "{stall:?}, published {} acked {acked}",
            m.published
        );
    }
    assert!(m.lost_acked.is_some());
    assert!(
        r.generator.reasons.iter().any(|x| x.contains("scheduled")),
        "{:?}",
        r.generator.reasons
    );
}

/// A restarted broker holds no session: subscribers subscribe again when they reconnect, so
/// delivery resumes (what was acknowledged while no subscription existed is lost, and counted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribers_resubscribe_after_a_broker_restart() {
    let s = mosquitto();
    let (pid, port) = (s.pid(), s.port);
    let restarter = std::thread::spawn(move || {
        let mut s = s;
        std::thread::sleep(std::time::Duration::from_millis(1000));
        signal(pid, "KILL");
        let _ = s.child.wait();
        mosquitto_at(port)
    });
    let r = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        run_ok(
            "protocol: mqtt\nratePerPublisher: 200\ndurationSeconds: 5\ndrainSeconds: 1\nmqtt: {qos: 1, version: '5'}\n",
            port,
        ),
    )
    .await
    .expect("the run ends on its own");
    let _restarted = restarter.join().unwrap();
    let t = &r.timeline;
    let late: u64 = t.iter().filter(|p| p.second >= 4).map(|p| p.received).sum();
    assert!(
        late > 0,
        "no delivery in the last second after the restart: {t:?}"
    );
    assert!(
        !r.measured.errors.is_empty(),
        "the lost connection is counted"
    );
}

const PASSWORD: &str = "s3cret-mqtt-password";

async fn run_as(
    yaml: &str,
    port: u16,
    client: ClientPath,
    password: Option<&str>,
) -> anyhow::Result<RunnerResult> {
    let credentials = password.map(|p| Credentials::UserPassword {
        username: "bench".into(),
        password: p.into(),
    });
    let opts = RunOptions {
        runner_id: 5,
        client,
        credentials,
        connect_timeout: Duration::from_secs(20),
        ..Default::default()
    };
    run(workload(yaml), &format!("mqtt://127.0.0.1:{port}"), opts).await
}

/// A broker that requires a login: the user name and password go in CONNECT on both client
/// paths (the batched wire publisher and rumqttc) and both MQTT versions, and every message
/// is delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_with_a_login_delivers_everything_on_both_client_paths() {
    let s = mosquitto_with_login("bench", PASSWORD);
    for (client, version) in [
        (ClientPath::Wire, "3.1.1"),
        (ClientPath::Library, "3.1.1"),
        (ClientPath::Library, "5"),
    ] {
        let yaml = format!(
            "protocol: mqtt\npublishers: 2\nsubscribers: 2\ntopics: 2\nratePerPublisher: 500\nmessagesPerPublisher: 300\nmqtt: {{version: \"{version}\", qos: 1}}\n"
        );
        let case = format!("{client:?} MQTT {version}");
        let r = run_as(&yaml, s.port, client, Some(PASSWORD))
            .await
            .unwrap_or_else(|e| panic!("{case}: {e:#}"));
        let m = &r.measured;
        assert_eq!((m.published, m.received), (600, 600), "{case}");
        assert_eq!(m.ack_latency.len(), 600, "{case}");
        assert!(m.errors.is_empty(), "{case}: {:?}", m.errors);
    }
}

/// A wrong or missing password fails at once (not retried until the connect window ends), with
/// an error naming the target and the refused login, never the password. `subscribers: 0`
/// makes the publisher the first connection, so each client path meets the refusal itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_login_fails_fast_and_says_so_on_both_client_paths() {
    let s = mosquitto_with_login("bench", PASSWORD);
    for (client, version, subscribers, password) in [
        (ClientPath::Wire, "3.1.1", 0, Some("wrong-password")),
        (ClientPath::Library, "3.1.1", 0, Some("wrong-password")),
        (ClientPath::Library, "5", 0, Some("wrong-password")),
        (ClientPath::Wire, "3.1.1", 1, None),
    ] {
        let yaml = format!(
            "protocol: mqtt\nsubscribers: {subscribers}\nratePerPublisher: 100\nmessagesPerPublisher: 10\nmqtt: {{version: \"{version}\", qos: 1}}\n"
        );
        let case = format!("{client:?} MQTT {version}, subscribers {subscribers}, {password:?}");
        let t = Instant::now();
        let e = run_as(&yaml, s.port, client, password).await;
        let e = format!("{:#}", e.expect_err(&case));
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{case}: {:?}",
            t.elapsed()
        );
        assert!(e.contains("refused the login"), "{case}: {e}");
        assert!(
            e.contains(&format!("mqtt://127.0.0.1:{}", s.port)),
            "{case}: {e}"
        );
        assert!(
            !e.contains("wrong-password") && !e.contains(PASSWORD),
            "{case}: {e}"
        );
    }
}
