//! A running BenchmarkRun must not trigger itself: its own status writes are not a reason to
//! reconcile again, and `status.progress` is written at most every 5 s. Counted from outside,
//! on a watch of the run: every change of its resourceVersion while it is Running.
use anyhow::{ensure, Result};
use futures::{StreamExt, TryStreamExt};
use kube::runtime::{watcher, WatchStreamExt};
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::runs::{field as s, finished};
use msgbench_e2e::{run, servers, TestContext};
use serde_json::Value;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// 40 s of light core-NATS load: long enough to count writes per minute.
const RUN: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata:
  name: writes
spec:
  target:
    serverRef: {kind: JetStreamCluster, name: writes-js}
  workload:
    protocol: nats
    publishers: 1
    subscribers: 1
    payloadBytes: 128
    ratePerPublisher: 500
    durationSeconds: 40
  runners:
    count: 1
    resources:
      requests: {cpu: 10m, memory: 32Mi}
      limits: {memory: 128Mi}
  barrierTimeoutSeconds: 60
"#;

/// Progress every 5 s is 12 writes a minute; allow the phase changes on top.
const MAX_WRITES_PER_MINUTE: f64 = 16.0;

#[tokio::test]
async fn a_running_run_writes_its_status_a_few_times_a_minute() {
    run("run-status-writes", body).await;
}

async fn body(ctx: TestContext) -> Result<()> {
    kinds::create(
        &ctx.client,
        &ctx.ns,
        &servers::js_memory("writes-js", 1, "none"),
    )
    .await?;
    servers::wait_ready(
        &ctx,
        Kind::JetStreamCluster,
        "writes-js",
        Duration::from_secs(240),
    )
    .await?;
    let api = Kind::BenchmarkRun.api(&ctx.client, &ctx.ns);
    let cfg = watcher::Config::default().fields("metadata.name=writes");
    let counter = tokio::spawn(async move {
        // (resourceVersion, seconds since the first Running) of every Running version seen.
        let mut seen = BTreeSet::new();
        let mut first: Option<Instant> = None;
        let mut last = Duration::ZERO;
        let mut stream = watcher(api, cfg).applied_objects().boxed();
        while let Ok(Some(o)) = stream.try_next().await {
            let phase = o.data.pointer("/status/phase").and_then(Value::as_str);
            match phase {
                Some("Running") => {
                    let at = *first.get_or_insert_with(Instant::now);
                    last = at.elapsed();
                    seen.insert(o.metadata.resource_version.clone().unwrap_or_default());
                }
                Some("Succeeded" | "Failed" | "Merging") if first.is_some() => break,
                _ => {}
            }
        }
        (seen.len(), last)
    });
    kinds::create(&ctx.client, &ctx.ns, RUN).await?;
    let done = finished(&ctx, "writes", Duration::from_secs(300)).await?;
    ensure!(
        s(&done, "/status/phase") == "Succeeded",
        "verdict {}",
        s(&done, "/status/verdict")
    );
    let (writes, running) = tokio::time::timeout(Duration::from_secs(30), counter).await??;
    ensure!(
        running >= Duration::from_secs(30),
        "Running seen for only {running:?}"
    );
    let per_minute = writes as f64 * 60.0 / running.as_secs_f64();
    println!("{writes} status versions in {running:?} of Running: {per_minute:.1} per minute");
    ensure!(
        per_minute <= MAX_WRITES_PER_MINUTE,
        "{writes} writes in {running:?} while Running ({per_minute:.1}/min, at most {MAX_WRITES_PER_MINUTE})"
    );
    Ok(())
}
