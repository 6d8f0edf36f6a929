//! The same workload through both client paths (`--client wire|library`) counts the same:
//! every publish, every delivery, one latency sample each, no errors. bench/run compares
//! their speed; this checks that the library path measures what the wire path measures.
mod support;
use bench_runner::{run, ClientPath, RunOptions};
use runner_api::result::RunnerResult;
use support::*;

async fn run_with(client: ClientPath, yaml: &str, target: &str) -> RunnerResult {
    let o = RunOptions {
        runner_id: 9,
        client,
        ..Default::default()
    };
    run(workload(yaml), target, o).await.expect("run")
}

fn assert_exact(r: &RunnerResult, published: u64, acked: bool, case: &str) {
    let m = &r.measured;
    assert_eq!(m.published, published, "{case}");
    assert_eq!(m.received, published, "{case}");
    assert_eq!(m.summary.delivered_ratio, 1.0, "{case}");
    assert_eq!((m.duplicates, m.out_of_order), (0, 0), "{case}");
    assert_eq!(
        m.latency.len(),
        published,
        "{case}: one sample per delivery"
    );
    assert_eq!(
        m.ack_latency.len(),
        if acked { published } else { 0 },
        "{case}"
    );
    assert!(m.errors.is_empty(), "{case}: {:?}", m.errors);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn core_nats_counts_alike_on_both_paths_open_and_closed_loop() {
    let s = nats_server(false);
    let target = format!("nats://127.0.0.1:{}", s.port);
    let open = "protocol: nats\nsubscribers: 1\npayloadBytes: 32\nratePerPublisher: 2000\nmessagesPerPublisher: 1000\n";
    let closed = "protocol: nats\nsubscribers: 1\npayloadBytes: 128\nmessagesPerPublisher: 20000\ndrainSeconds: 10\n";
    for client in [ClientPath::Wire, ClientPath::Library] {
        let r = run_with(client, open, &target).await;
        assert_exact(&r, 1000, false, &format!("{client:?} open loop"));
        let r = run_with(client, closed, &target).await;
        assert_exact(&r, 20_000, false, &format!("{client:?} closed loop"));
        assert!(r.generator.closed_loop);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mqtt_qos_0_and_1_count_alike_on_both_paths() {
    let s = mosquitto();
    let target = format!("mqtt://127.0.0.1:{}", s.port);
    for client in [ClientPath::Wire, ClientPath::Library] {
        for qos in [0, 1] {
            let yaml = format!(
                "protocol: mqtt\nsubscribers: 1\npayloadBytes: 64\nmessagesPerPublisher: 5000\ndrainSeconds: 10\nmqtt: {{qos: {qos}, maxInFlight: 100}}\n"
            );
            let r = run_with(client, &yaml, &target).await;
            let case = format!("{client:?} QoS {qos}");
            assert_exact(&r, 5000, qos == 1, &case);
            // QoS 1 acknowledges every publish: none acknowledged and lost.
            assert_eq!(r.measured.lost_acked, (qos == 1).then_some(0), "{case}");
        }
    }
}
