//! Months of history do not grow the operator: finished runs whose statuses add up to well past
//! the operator's memory limit (64 Mi: this module installs the chart with half the suite's
//! 128 Mi, `chart::module_values`) are reconciled, the operator is
//! restarted so it lists them all again from scratch (the relist that crash-looped it before),
//! and it keeps running without a restart while a new run still Succeeds. Before the cache kept
//! only a summary of each run, this operator was OOMKilled at 1,250 demo-size runs.
use anyhow::{ensure, Context, Result};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams};
use msgbench_e2e::chart::{self, OPERATOR_SELECTOR};
use msgbench_e2e::harness::operator_memory_limit;
use msgbench_e2e::history::{fill, Mix};
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::runs::{field as s, finished};
use msgbench_e2e::{operator_lease, probe, run, servers, wait, TestContext};
use std::time::Duration;

/// 4 runs at the largest status admission allows (1.37 MiB) and 420 soak-size runs (234 KiB):
/// about 106 MB of status, 1.58 times the operator's 64 Mi limit.
const HISTORY: Mix = Mix {
    largest: 4,
    soak: 420,
    demo: 0,
};
const LIMIT_BYTES: u64 = 64 << 20;

const NEW_RUN: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata:
  name: after-history
spec:
  target:
    serverRef: {kind: JetStreamCluster, name: history-js}
  workload:
    protocol: nats
    publishers: 1
    subscribers: 1
    payloadBytes: 64
    ratePerPublisher: 200
    durationSeconds: 3
  runners:
    count: 1
    resources:
      requests: {cpu: 10m, memory: 32Mi}
      limits: {memory: 128Mi}
  barrierTimeoutSeconds: 60
"#;

#[tokio::test]
async fn history_past_the_memory_limit_neither_restarts_the_operator_nor_stops_new_runs() {
    run("finished-runs", body).await;
}

async fn body(ctx: TestContext) -> Result<()> {
    let runs = HISTORY.largest + HISTORY.soak + HISTORY.demo;
    let limit = operator_memory_limit(&ctx.client).await?;
    ensure!(
        limit as u64 == LIMIT_BYTES,
        "the operator's memory limit is {limit} B, not this module's {LIMIT_BYTES} B"
    );
    let reconciled_before = reconciles(&ctx).await?;
    let bytes = fill(&ctx.client, &ctx.ns, HISTORY).await?;
    println!(
        "{runs} finished runs, {:.0} MiB of status",
        bytes as f64 / 1048576.0
    );
    ensure!(bytes > LIMIT_BYTES * 3 / 2, "only {bytes} B of status");
    // Every run of the history reached the running operator (each creation and status write
    // is an event; one reconcile each at least).
    reconciled_at_least(&ctx, reconciled_before + runs as u64).await?;
    // A new process lists all of it again, from nothing.
    restart_operator(&ctx).await?;
    reconciled_at_least(&ctx, runs as u64).await?;
    let server = servers::js_memory("history-js", 1, "none");
    kinds::create(&ctx.client, &ctx.ns, &server).await?;
    let ready = Duration::from_secs(240);
    servers::wait_ready(&ctx, Kind::JetStreamCluster, "history-js", ready).await?;
    kinds::create(&ctx.client, &ctx.ns, NEW_RUN).await?;
    let done = finished(&ctx, "after-history", Duration::from_secs(300)).await?;
    ensure!(
        s(&done, "/status/phase") == "Succeeded",
        "the new run: {}",
        s(&done, "/status/verdict")
    );
    never_restarted(&ctx).await?;
    let peak = metric(&probe::operator_metrics(&ctx.client).await?, PEAK_RSS)?;
    println!(
        "operator peak RSS after the relist and the new run: {:.1} MiB",
        peak / 1048576.0
    );
    ensure!((peak as u64) < LIMIT_BYTES, "peak RSS {peak} B");
    Ok(())
}

const RECONCILES: &str = "msgbench_reconcile_total{kind=\"benchmarkrun\"}";
const PEAK_RSS: &str = "msgbench_process_peak_resident_memory_bytes";

/// The value of the series `name` (with its labels as written) in a Prometheus text page.
fn metric(page: &str, name: &str) -> Result<f64> {
    page.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .with_context(|| format!("{name} not on the operator's /metrics"))
}

async fn reconciles(ctx: &TestContext) -> Result<u64> {
    Ok(metric(&probe::operator_metrics(&ctx.client).await?, RECONCILES)? as u64)
}

async fn reconciled_at_least(ctx: &TestContext, n: u64) -> Result<()> {
    let what = format!("the operator reconciled BenchmarkRuns {n} times");
    wait::poll(
        Duration::from_secs(300),
        Duration::from_secs(3),
        &what,
        || async { Ok((reconciles(ctx).await? >= n).then_some(())) },
    )
    .await
}

/// Deletes the operator pod and waits until its successor leads.
async fn restart_operator(ctx: &TestContext) -> Result<()> {
    let before = operator_lease::operator_pods(&ctx.client).await?;
    let pods = Api::<Pod>::namespaced(ctx.client.clone(), chart::namespace());
    for p in &before {
        pods.delete(p, &DeleteParams::default()).await?;
    }
    let what = "a new operator pod";
    let new = wait::poll(
        Duration::from_secs(120),
        Duration::from_secs(2),
        what,
        || async {
            let now = operator_lease::operator_pods(&ctx.client).await?;
            Ok((!now.is_empty() && now.iter().all(|p| !before.contains(p))).then_some(now))
        },
    )
    .await?;
    let timeout = Duration::from_secs(120);
    operator_lease::lease_held_by_one_of(&ctx.client, &new, timeout).await?;
    Ok(())
}

/// No operator container restarted, and none was ever OOMKilled.
async fn never_restarted(ctx: &TestContext) -> Result<()> {
    let pods = Api::<Pod>::namespaced(ctx.client.clone(), chart::namespace())
        .list(&ListParams::default().labels(OPERATOR_SELECTOR))
        .await?;
    for p in pods
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
    {
        for c in p
            .status
            .iter()
            .flat_map(|s| s.container_statuses.iter().flatten())
        {
            let last = c.last_state.as_ref().and_then(|l| l.terminated.as_ref());
            ensure!(
                c.restart_count == 0,
                "operator pod {:?} restarted {} times (last: {:?})",
                p.metadata.name,
                c.restart_count,
                last.map(|t| t.reason.clone())
            );
        }
    }
    Ok(())
}
