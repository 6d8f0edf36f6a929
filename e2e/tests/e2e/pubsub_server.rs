//! A PubSubServer becomes Ready and answers the contract's HTTP publish API through its Service
//! (via the API server's service proxy); a BenchmarkRun with protocol socketio then makes the
//! full round trip through that Service: HTTP publish → Socket.IO delivery to two subscribers,
//! every message delivered, latency recorded.
use anyhow::{ensure, Context, Result};
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DynamicObject, ListParams};
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::{probe, run, servers, wait, TestContext};
use serde_json::{json, Value};
use std::time::Duration;

const NAME: &str = "pss";

/// 1 publisher at 100 publishes/s for 3 s to two Socket.IO subscribers in the topic's room.
const SOCKETIO_RUN: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata:
  name: socketio-round-trip
spec:
  target:
    serverRef: {kind: PubSubServer, name: pss}
  workload:
    protocol: socketio
    publishers: 1
    subscribers: 2
    topics: 1
    topicPrefix: e2e-sio
    payloadBytes: 64
    ratePerPublisher: 100
    durationSeconds: 3
    warmupSeconds: 0
    drainSeconds: 5
  runners:
    count: 1
    resources:
      requests: {cpu: 10m, memory: 32Mi}
      limits: {memory: 128Mi}
  barrierTimeoutSeconds: 60
  thresholds:
    - {metric: deliveredRatio, op: ge, value: 1.0}
"#;

#[tokio::test]
async fn pubsub_server_ready_and_accepts_publishes() {
    run("pubsub-server", body).await;
}

async fn body(ctx: TestContext) -> Result<()> {
    kinds::create(&ctx.client, &ctx.ns, &servers::pubsub_memory(NAME)).await?;
    let ready =
        servers::wait_ready(&ctx, Kind::PubSubServer, NAME, Duration::from_secs(180)).await?;
    ensure!(
        ready
            .data
            .pointer("/status/readyReplicas")
            .and_then(Value::as_i64)
            == Some(1),
        "status.readyReplicas should be 1: {}",
        kinds::conditions_summary(&ready)
    );
    let url = ready
        .data
        .pointer("/status/url")
        .and_then(Value::as_str)
        .unwrap_or_default();
    ensure!(
        url.starts_with("http://"),
        "status.url should be an http:// URL, got {url:?}"
    );
    let svc = Api::<Service>::namespaced(ctx.client.clone(), &ctx.ns)
        .list(&ListParams::default().labels(&servers::instance_selector(NAME)))
        .await?
        .items
        .into_iter()
        .find(|s| s.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) != Some("None"))
        .and_then(|s| s.metadata.name)
        .context("PubSubServer has no client Service")?;

    // Contract: POST /publish {"topic","payload","publisher"} -> 200 {"id": u64}; bad input -> 400.
    let first = publish(
        &ctx,
        &svc,
        &json!({"topic": "e2e", "payload": "hello", "publisher": "e2e"}),
    )
    .await?;
    let second = publish(&ctx, &svc, &json!({"topic": "e2e", "payload": {"n": 2}})).await?;
    ensure!(
        second > first,
        "publish ids must increase: {first} then {second}"
    );
    let bad = probe::service_post_json(
        &ctx.client,
        &ctx.ns,
        &svc,
        8080,
        "/publish",
        &json!({"payload": "no topic"}),
    )
    .await;
    ensure!(
        bad.is_err(),
        "a publish without topic must be rejected, got {bad:?}"
    );

    // The server exports Prometheus metrics on the same port.
    let metrics = wait::poll(
        Duration::from_secs(30),
        Duration::from_secs(1),
        "pubsub-server /metrics",
        || {
            let (client, ns, svc) = (ctx.client.clone(), ctx.ns.clone(), svc.clone());
            async move {
                Ok(Some(
                    probe::service_get(&client, &ns, &svc, 8080, "/metrics").await?,
                ))
            }
        },
    )
    .await?;
    ensure!(
        metrics.contains("# TYPE"),
        "/metrics is not Prometheus text:\n{}",
        wait::truncate(&metrics, 500)
    );

    socketio_round_trip(&ctx).await
}

fn at<'a>(o: &'a DynamicObject, ptr: &str) -> &'a Value {
    o.data.pointer(ptr).unwrap_or(&Value::Null)
}

/// The bench-runner's socketio driver against the PubSubServer's Service: HTTP publishes reach
/// both Socket.IO subscribers, all of them, with delivery and publish latency recorded.
async fn socketio_round_trip(ctx: &TestContext) -> Result<()> {
    kinds::create(&ctx.client, &ctx.ns, SOCKETIO_RUN).await?;
    let api = Kind::BenchmarkRun.api(&ctx.client, &ctx.ns);
    let run = wait::until(
        &api,
        "socketio-round-trip",
        Duration::from_secs(300),
        "BenchmarkRun socketio-round-trip finished",
        |o| {
            matches!(
                o.data.pointer("/status/phase").and_then(Value::as_str),
                Some("Succeeded" | "Failed")
            )
        },
    )
    .await?;
    ensure!(
        at(&run, "/status/phase") == "Succeeded",
        "socketio run should succeed: verdict {} conditions {}",
        at(&run, "/status/verdict"),
        kinds::conditions_summary(&run)
    );
    let r = at(&run, "/status/result");
    // 3 s × 100 publishes/s, each delivered to both subscribers.
    ensure!(r["published"].as_u64() == Some(300), "published: {r}");
    ensure!(r["expected"].as_u64() == Some(600), "expected: {r}");
    ensure!(
        r["deliveredRatio"].as_f64() == Some(1.0),
        "deliveredRatio: {r}"
    );
    ensure!(
        r["latency"]["count"].as_u64() == Some(600),
        "one delivery latency per delivery: {r}"
    );
    ensure!(
        r["latency"]["p99Ms"].as_f64() > Some(0.0),
        "delivery p99: {r}"
    );
    ensure!(
        r["publishAckLatency"]["p99Ms"].as_f64() > Some(0.0),
        "HTTP publish latency: {r}"
    );
    Ok(())
}

async fn publish(ctx: &TestContext, svc: &str, body: &Value) -> Result<u64> {
    let resp = probe::service_post_json(&ctx.client, &ctx.ns, svc, 8080, "/publish", body).await?;
    let v: Value =
        serde_json::from_str(&resp).with_context(|| format!("publish response {resp:?}"))?;
    v["id"]
        .as_u64()
        .with_context(|| format!("publish response without numeric id: {resp}"))
}
