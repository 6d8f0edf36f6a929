//! status.result.serverUsage: a BenchmarkRun against a JetStreamCluster ends with the server
//! pods' CPU and memory sampled from nats `/varz` during the run (baseline before the barrier,
//! samples under load, one row per server pod); a stepped connection workload on the fresh
//! server gets memory per connection as a least-squares slope over the connection levels; a
//! PubSubServer run reads pubsub-server `/health`. While the first run runs, its runner pod's own
//! `/metrics` serves every runner series the dashboard queries, its sent count climbing.
use anyhow::{ensure, Result};
use kube::api::DynamicObject;
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::runs::{field as s, finished};
use msgbench_e2e::{run, servers, wait, TestContext};
use serde_json::Value;
use std::time::Duration;

/// The runner pod's own `/metrics` (port `metrics`, 9102), read while its run runs: messages
/// sent in trial 1 climb, and every runner series the dashboard's live row queries is there.
async fn runner_metrics_are_live(ctx: &TestContext, run_name: &str) -> Result<()> {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, ListParams};
    let pods = Api::<Pod>::namespaced(ctx.client.clone(), &ctx.ns)
        .list(&ListParams::default().labels(&format!(
            "app.kubernetes.io/instance={run_name},app.kubernetes.io/component=runner"
        )))
        .await?;
    let pod = pods.items.first().and_then(|p| p.metadata.name.clone());
    let pod = pod.ok_or_else(|| anyhow::anyhow!("no runner pod of {run_name}"))?;
    let port = runner_api::agent::METRICS_PORT;
    let sent = |text: &str| -> Option<f64> {
        text.lines()
            .find(|l| {
                l.starts_with("msgbench_runner_messages_sent_total{") && l.contains("trial=\"1\"")
            })
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
    };
    let scrape = || msgbench_e2e::probe::pod_get(&ctx.client, &ctx.ns, &pod, port, "/metrics");
    let first = wait::poll(
        Duration::from_secs(30),
        Duration::from_secs(1),
        "messages sent > 0",
        || async {
            let text = scrape().await?;
            Ok(sent(&text).filter(|&n| n > 0.0).map(|n| (n, text)))
        },
    )
    .await?;
    let dashboard = std::fs::read_to_string(
        msgbench_e2e::cluster::repo_root().join("config/dashboards/msgbench-operator.json"),
    )?;
    let wanted: std::collections::BTreeSet<&str> = dashboard
        .match_indices("msgbench_runner_")
        .map(|(at, _)| {
            let rest = &dashboard[at..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            rest[..end].trim_end_matches("_bucket")
        })
        .collect();
    ensure!(!wanted.is_empty(), "the dashboard queries no runner series");
    let missing: Vec<&&str> = wanted.iter().filter(|m| !first.1.contains(**m)).collect();
    ensure!(
        missing.is_empty(),
        "runner /metrics lacks {missing:?}:\n{}",
        first.1
    );
    let climbed = wait::poll(
        Duration::from_secs(10),
        Duration::from_secs(1),
        "sent climbs",
        || async { Ok(sent(&scrape().await?).filter(|&n| n > first.0)) },
    )
    .await?;
    eprintln!(
        "runner {pod} /metrics live: sent {} then {climbed}",
        first.0
    );
    Ok(())
}

/// Long enough for several 5 s samples under a load nats notices, and for
/// reading the runner's live /metrics after the first.
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
    durationSeconds: 20
    drainSeconds: 1
    jetstream: {stream: usage, replicas: 1, storage: memory, publish: async, maxInFlight: 200, consumer: push}
  runners:
    count: 1
    resources:
      requests: {cpu: 20m, memory: 32Mi}
      limits: {memory: 128Mi}
  barrierTimeoutSeconds: 60
"#;

/// 500 idle connections opened in 5 steps of 100, each level held 15 s (about 3 operator
/// samples, one every 5 s) and the last 12 s: what each costs the server in memory.
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
    connections: {count: 500, steps: 5, stepHoldSeconds: 15, holdSeconds: 12, maxPerSecond: 500, concurrency: 20}
  runners:
    count: 1
    resources:
      requests: {cpu: 10m, memory: 32Mi}
      limits: {memory: 256Mi}
  barrierTimeoutSeconds: 60
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
    kinds::create(&ctx.client, &ctx.ns, &servers::pubsub_memory("usage-ps")).await?;
    kinds::create(
        &ctx.client,
        &ctx.ns,
        &servers::js_memory("usage-js", 1, "none"),
    )
    .await?;
    servers::wait_ready(
        &ctx,
        Kind::JetStreamCluster,
        "usage-js",
        Duration::from_secs(240),
    )
    .await?;
    // Connections first, on the fresh server: memory still settling after a messaging run
    // (the Go runtime returning its heap) falls over time and so against the rising count.
    // Memory fitted against the server's own connection count over the steps.
    kinds::create(&ctx.client, &ctx.ns, CONNECTIONS_RUN).await?;
    let c = finished(&ctx, "usage-connections", Duration::from_secs(300)).await?;
    let cu = usage(&c);
    println!("connections serverUsage: {cu}");
    check_memory_per_connection(&cu)
        .map_err(|e| e.context(format!("verdict {}", s(&c, "/status/verdict"))))?;
    check_connection_figures(&c)?;

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
    runner_metrics_are_live(&ctx, "usage").await?;

    let done = finished(&ctx, "usage", Duration::from_secs(180)).await?;
    ensure!(
        s(&done, "/status/phase") == "Succeeded",
        "verdict {}",
        s(&done, "/status/verdict")
    );
    let u = s(&done, "/status/result/serverUsage");
    ensure!(u["source"] == "nats /varz", "{u}");
    ensure!(u["unavailable"].is_null(), "{u}");
    ensure!(
        u["memoryPoints"].is_null() && u["memoryPerConnectionFit"].is_null(),
        "no memory-per-connection fit for a messaging workload: {u}"
    );
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

/// Every step level was sampled, and on a fresh server memory per connection is a positive
/// slope that fits: R² at least the threshold, 95 % interval above 0. (Measured here: 35–38 KB
/// per connection, R² 0.98–0.99. On a server still returning heap after a load the same run
/// is reported unavailable with the reason, never 0: see the unit tests of the fit.)
fn check_memory_per_connection(cu: &Value) -> Result<()> {
    ensure!(
        cu["pods"][0]["connectionsMax"].as_u64() >= Some(500),
        "nats counted the connections: {cu}"
    );
    let fit = &cu["memoryPerConnectionFit"];
    // Baseline + 5 levels, each sampled at least twice (5 s cadence, 15 s holds).
    ensure!(
        fit["levels"].as_u64() >= Some(6),
        "every level sampled: {fit}"
    );
    ensure!(
        fit["points"].as_u64() >= Some(11),
        "points per level: {fit}"
    );
    let points = cu["memoryPoints"].as_array().cloned().unwrap_or_default();
    ensure!(
        points
            .windows(2)
            .all(|w| w[1]["connections"].as_u64() >= w[0]["connections"].as_u64()),
        "points only while connections rose or held: {cu}"
    );
    let per = cu["memoryBytesPerConnection"].as_f64();
    ensure!(per.is_some(), "no memory per connection: {fit}");
    ensure!(fit["unavailable"].is_null(), "{fit}");
    ensure!(fit["slope"].as_f64() == per, "{fit}");
    ensure!(fit["ci95Low"].as_f64() > Some(0.0), "{fit}");
    ensure!(
        fit["rSquared"].as_f64() >= fit["minRSquared"].as_f64(),
        "{fit}"
    );
    // A nats client connection costs kilobytes, never bytes or megabytes.
    ensure!(
        per.is_some_and(|p| (2_000.0..500_000.0).contains(&p)),
        "memory per connection {per:?}: {fit}"
    );
    Ok(())
}

/// The connection figures the runner measured reach status: 500 connections opened (a failed
/// one would be an error too), their rate and connect-time percentiles.
fn check_connection_figures(run: &DynamicObject) -> Result<()> {
    let c = s(run, "/status/result/connections");
    println!("connections: {c}");
    let n = |p: &str| c.pointer(p).and_then(Value::as_f64).unwrap_or(-1.0);
    anyhow::ensure!(
        n("/attempted") == 500.0 && n("/connected") + n("/failed") == 500.0,
        "status.result.connections does not account for the 500 connections: {c}"
    );
    anyhow::ensure!(
        s(run, "/status/result/errors").as_f64() >= Some(n("/failed")),
        "failed connections are not counted in errors"
    );
    anyhow::ensure!(
        n("/connectRate") > 0.0
            && n("/connectTime/count") == n("/connected")
            && n("/connectTime/p99Ms") >= n("/connectTime/p50Ms")
            && n("/connectTime/p95Ms") >= n("/connectTime/p50Ms"),
        "connection rate or connect-time percentiles missing: {c}"
    );
    Ok(())
}
