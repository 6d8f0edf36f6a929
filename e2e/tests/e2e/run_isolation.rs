//! Runs applied together against one server, all with the default subject prefix and stream
//! name: by default they take turns (one run per target, in the order applied; a run naming the
//! server by its Service URL is a run on that server too) and each counts exactly its own
//! messages; two runs that set `spec.shareTarget` load the server together,
//! say so, and still never count each other's messages.
use anyhow::{ensure, Result};
use kube::core::DynamicObject;
use msgbench_crds::conditions::{SUCCEEDED, TARGET_READY};
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::runs::{condition_status, field as s, finished};
use msgbench_e2e::{run, servers, TestContext};
use serde_json::Value;
use std::time::Duration;

/// The MqttBroker beside `servers::js_memory("js1", 1, "none")`.
const MQTT_BROKER: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: MqttBroker
metadata: {name: mq}
spec:
  engine: mosquitto
  replicas: 1
  resources:
    requests: {cpu: 10m, memory: 32Mi}
    limits: {memory: 128Mi}
"#;

/// A 3 s run on `target` with every name left at its default (stream MSGBENCH, prefix
/// msgbench): before run isolation, two of these on one server spoiled each other.
fn bench(name: &str, target: &str, workload: &str, share: bool) -> String {
    format!(
        r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata: {{name: {name}}}
spec:
  target: {target}
  workload:
    publishers: 1
    subscribers: 1
    payloadBytes: 64
    ratePerPublisher: 200
    durationSeconds: 3
    drainSeconds: 2
    {workload}
  runners:
    count: 1
    resources:
      requests: {{cpu: 10m, memory: 32Mi}}
      limits: {{memory: 128Mi}}
  shareTarget: {share}
  barrierTimeoutSeconds: 120
  targetReadyTimeoutSeconds: 300
"#
    )
}

const JS: &str = "{serverRef: {kind: JetStreamCluster, name: js1}}";
const MQ: &str = "{serverRef: {kind: MqttBroker, name: mq}}";
const JS_LOAD: &str =
    "protocol: jetstream\n    jetstream: {replicas: 1, storage: memory, publish: async}";
const MQ_LOAD: &str = "protocol: mqtt\n    mqtt: {qos: 1}";

#[tokio::test]
async fn runs_sharing_a_server_take_turns_and_count_only_their_own_messages() {
    run("run-isolation", body).await;
}

async fn body(ctx: TestContext) -> Result<()> {
    let js = servers::js_memory("js1", 1, "none");
    for m in [js.as_str(), MQTT_BROKER] {
        kinds::create(&ctx.client, &ctx.ns, m).await?;
    }
    servers::wait_ready(
        &ctx,
        Kind::JetStreamCluster,
        "js1",
        Duration::from_secs(180),
    )
    .await?;
    servers::wait_ready(&ctx, Kind::MqttBroker, "mq", Duration::from_secs(180)).await?;
    // The same server by its Service's URL, as a team's own server would be given.
    let js_url = format!(
        "{{endpoint: {{protocol: jetstream, url: 'nats://js1.{}.svc:4222'}}}}",
        ctx.ns
    );
    // Applied together, in this order; names sort in the same order, since runs created in
    // one second go by name.
    let runs = [
        ("js-a", JS, JS_LOAD, false),
        ("js-b", JS, JS_LOAD, false),
        ("js-c-url", js_url.as_str(), JS_LOAD, false),
        ("mq-a", MQ, MQ_LOAD, false),
        ("mq-b", MQ, MQ_LOAD, false),
        ("js-s1", JS, JS_LOAD, true),
        ("js-s2", JS, JS_LOAD, true),
    ];
    for (name, target, load, share) in runs {
        kinds::create(&ctx.client, &ctx.ns, &bench(name, target, load, share)).await?;
    }
    let mut done = Vec::new();
    for (name, ..) in runs {
        let o = finished(&ctx, name, Duration::from_secs(600)).await?;
        exact(name, &o)?;
        done.push(o);
    }
    let start = |i: usize| start_seconds(&done[i]);
    // Exclusive runs of one target never overlap: the second started after the first's 3 s.
    for (first, second) in [(0, 1), (1, 2), (3, 4), (2, 5)] {
        let gap = start(second)? - start(first)?;
        ensure!(
            gap >= 3,
            "{} started {gap}s after {}: their loads overlapped",
            runs[second].0,
            runs[first].0
        );
    }
    // The two sharing runs say so; the later one names the earlier it ran alongside.
    for i in [5, 6] {
        let c = kinds::condition(&done[i], TARGET_READY)
            .cloned()
            .unwrap_or(Value::Null);
        ensure!(
            c["reason"] == "TargetShared",
            "{}: TargetReady should say TargetShared, got {c}",
            runs[i].0
        );
    }
    let msg = kinds::condition(&done[6], TARGET_READY).map(|c| c["message"].to_string());
    ensure!(
        msg.as_deref().is_some_and(|m| m.contains("js-s1")),
        "js-s2 should name js-s1 as running alongside: {msg:?}"
    );
    Ok(())
}

/// Succeeded, and every figure exact: all expected deliveries, no duplicate, nothing out of
/// order, nothing from another run.
fn exact(name: &str, o: &DynamicObject) -> Result<()> {
    ensure!(
        condition_status(o, SUCCEEDED) == "True",
        "{name} did not succeed: {}",
        kinds::conditions_summary(o)
    );
    let r = s(o, "/status/result");
    let n = |k: &str| r[k].as_u64().unwrap_or(u64::MAX);
    ensure!(
        n("expected") > 0 && n("received") == n("expected"),
        "{name}: received {} of {} expected",
        n("received"),
        n("expected")
    );
    ensure!(
        (n("duplicates"), n("outOfOrder"), n("foreign")) == (0, 0, 0),
        "{name}: duplicates {}, out of order {}, foreign {}",
        n("duplicates"),
        n("outOfOrder"),
        n("foreign")
    );
    Ok(())
}

fn start_seconds(o: &DynamicObject) -> Result<i64> {
    let t = s(o, "/status/startTime").as_str().unwrap_or_default();
    let ts: k8s_openapi::jiff::Timestamp = t
        .parse()
        .map_err(|e| anyhow::anyhow!("status.startTime {t:?}: {e}"))?;
    Ok(ts.as_second())
}
