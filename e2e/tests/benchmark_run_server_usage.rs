//! status.result.serverUsage: a BenchmarkRun against a JetStreamCluster ends with the server
//! pods' CPU and memory sampled from nats `/varz` during the run (baseline before the barrier,
//! samples under load, one row per server pod); a connection workload gets memory per
//! connection; a PubSubServer run reads pubsub-server `/health`.
use anyhow::{ensure, Result};
use kube::api::DynamicObject;
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::runs::{field as s, finished};
use msgbench_e2e::{run, servers, wait, TestContext};
use serde_json::Value;
use std::time::Duration;

const SERVER: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: JetStreamCluster
metadata:
  name: usage-js
spec:
  replicas: 1
  jetstream:
    storage:
      type: memory
    maxMemoryStore: 64Mi
  resources:
    requests: {cpu: 10m, memory: 64Mi}
    limits: {memory: 256Mi}
  placement:
    podAntiAffinity: none
"#;

/// Long enough for several 3 s samples under a load nats notices.
const RUN: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata:
  name: usage
spec:
  target:
    serverRef: {kind: JetStreamCluster, name: usage-js}
  workload:
    protocol: jetstream
    publishers: 1
    subscribers: 1
    payloadBytes: 256
    ratePerPublisher: 2000
    durationSeconds: 12
    drainSeconds: 1
    jetstream: {stream: usage, replicas: 1, storage: memory, publish: async, maxInFlight: 200, consumer: push}
  runners:
    count: 1
    resources:
      requests: {cpu: 20m, memory: 32Mi}
      limits: {memory: 128Mi}
  barrierTimeoutSeconds: 60
"#;

/// 300 idle connections held for 8 s: what each costs the server in memory.
const CONNECTIONS_RUN: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata:
  name: usage-connections
spec:
  target:
    serverRef: {kind: JetStreamCluster, name: usage-js}
  workload:
    protocol: nats
    publishers: 0
    subscribers: 0
    connections: {count: 300, maxPerSecond: 300, concurrency: 20, holdSeconds: 8}
  runners:
    count: 1
    resources:
      requests: {cpu: 10m, memory: 32Mi}
      limits: {memory: 128Mi}
  barrierTimeoutSeconds: 60
"#;

const PUBSUB: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: PubSubServer
metadata:
  name: usage-ps
spec:
  protocol: socketio
  emitMode: parallel
  database: memory
  resources:
    requests: {cpu: 10m, memory: 32Mi}
    limits: {memory: 128Mi}
"#;

const PUBSUB_RUN: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata:
  name: usage-pubsub
spec:
  target:
    serverRef: {kind: PubSubServer, name: usage-ps}
  workload:
    protocol: socketio
    publishers: 2
    subscribers: 4
    payloadBytes: 64
    ratePerPublisher: 200
    durationSeconds: 10
    socketio: {allRoom: true}
  runners:
    count: 1
    resources:
      requests: {cpu: 10m, memory: 32Mi}
      limits: {memory: 128Mi}
  barrierTimeoutSeconds: 60
"#;

#[tokio::test]
async fn a_jetstream_run_reports_server_cpu_and_memory() {
    run("benchmark-run-server-usage", body).await;
}

/// The usage of a finished run: in the result, or in status when no result was merged.
fn usage(o: &DynamicObject) -> Value {
    let in_result = s(o, "/status/result/serverUsage");
    if in_result.is_null() {
        s(o, "/status/serverUsage").clone()
    } else {
        in_result.clone()
    }
}

async fn body(ctx: TestContext) -> Result<()> {
    kinds::create(&ctx.client, &ctx.ns, PUBSUB).await?;
    kinds::create(&ctx.client, &ctx.ns, SERVER).await?;
    servers::wait_ready(
        &ctx,
        Kind::JetStreamCluster,
        "usage-js",
        Duration::from_secs(240),
    )
    .await?;
    kinds::create(&ctx.client, &ctx.ns, RUN).await?;
    let api = Kind::BenchmarkRun.api(&ctx.client, &ctx.ns);

    // While running, the accumulators are in status (an operator restart keeps them).
    let live = wait::until(
        &api,
        "usage",
        Duration::from_secs(180),
        "usage sampled while running",
        |o| {
            o.data.pointer("/status/phase").and_then(Value::as_str) == Some("Running")
                && o.data
                    .pointer("/status/serverUsage/samples")
                    .and_then(Value::as_u64)
                    .is_some_and(|n| n >= 1)
        },
    )
    .await?;
    ensure!(
        s(&live, "/status/serverUsage/pods/0/memoryBytesBaseline").as_u64() > Some(0),
        "baseline before the barrier: {}",
        s(&live, "/status/serverUsage")
    );

    let done = finished(&ctx, "usage", Duration::from_secs(180)).await?;
    ensure!(
        s(&done, "/status/phase") == "Succeeded",
        "verdict {}",
        s(&done, "/status/verdict")
    );
    let u = s(&done, "/status/result/serverUsage");
    ensure!(u["source"] == "nats /varz", "{u}");
    ensure!(u["unavailable"].is_null(), "{u}");
    ensure!(u["samples"].as_u64() >= Some(2), "several samples: {u}");
    ensure!(u["cpuCoresMean"].as_f64() > Some(0.0), "cpu: {u}");
    ensure!(
        u["cpuCoresMax"].as_f64() >= u["cpuCoresMean"].as_f64(),
        "{u}"
    );
    ensure!(
        u["memoryBytesMax"].as_u64() > Some(1_000_000),
        "memory: {u}"
    );
    let pods = u["pods"].as_array().cloned().unwrap_or_default();
    ensure!(pods.len() == 1, "one row per server pod: {u}");
    ensure!(
        pods[0]["pod"]
            .as_str()
            .is_some_and(|p| p.starts_with("usage-js")),
        "{u}"
    );
    // Moved into the result: not kept twice.
    ensure!(
        s(&done, "/status/serverUsage").is_null(),
        "{}",
        s(&done, "/status")
    );
    println!("serverUsage: {u}");

    // Connections: the server's own count of added connections divides the memory they took.
    kinds::create(&ctx.client, &ctx.ns, CONNECTIONS_RUN).await?;
    let c = finished(&ctx, "usage-connections", Duration::from_secs(240)).await?;
    let cu = usage(&c);
    ensure!(
        cu["pods"][0]["connectionsMax"].as_u64() >= Some(300),
        "nats counted the connections: {cu} (verdict {})",
        s(&c, "/status/verdict")
    );
    let per = cu["memoryBytesPerConnection"].as_f64().unwrap_or(0.0);
    // A nats client connection costs kilobytes, never bytes or megabytes.
    ensure!(
        (500.0..5_000_000.0).contains(&per),
        "memory per connection {per}: {cu}"
    );
    println!("connections serverUsage: {cu}");

    // PubSubServer: process CPU seconds and RSS from /health.
    servers::wait_ready(
        &ctx,
        Kind::PubSubServer,
        "usage-ps",
        Duration::from_secs(240),
    )
    .await?;
    kinds::create(&ctx.client, &ctx.ns, PUBSUB_RUN).await?;
    let p = finished(&ctx, "usage-pubsub", Duration::from_secs(240)).await?;
    let pu = usage(&p);
    ensure!(pu["source"] == "pubsub-server /health", "{pu}");
    ensure!(
        pu["samples"].as_u64() >= Some(2),
        "{pu} (verdict {})",
        s(&p, "/status/verdict")
    );
    ensure!(pu["cpuCoresMean"].as_f64() > Some(0.0), "cpu: {pu}");
    ensure!(
        pu["memoryBytesMax"].as_u64() > Some(1_000_000),
        "memory: {pu}"
    );
    println!("pubsub serverUsage: {pu}");
    Ok(())
}
