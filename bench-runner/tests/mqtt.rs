//! bench-runner against a real mosquitto on loopback: MQTT 3.1.1 and 5, QoS 0/1/2.
mod support;
use bench_runner::{run, RunOptions, RunResult};
use support::*;

async fn run_ok(yaml: &str, port: u16) -> RunResult {
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
