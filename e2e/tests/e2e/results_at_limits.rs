//! The largest results admission allows, four runs at once, are merged by an operator that
//! stays under its memory limit (one results budget for the whole operator, not one per run).
//! Each run sits at both corners at once: 32 step-load stages (the most a record may carry, each
//! with its own histograms) and 2550 phase records (runners x trials x phases, the bound is
//! 2560); the four share their server (`shareTarget`) so they finish together. The operator is
//! restarted first so its peak resident memory (VmHWM, exported as
//! `msgbench_process_peak_resident_memory_bytes`) is these runs'; the test fails if the peak
//! reaches the container's limit, if the operator restarted (OOM-killed), or if any run failed
//! or misses a stage in its merged result.
use anyhow::{ensure, Context, Result};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use msgbench_e2e::chart::{self, OPERATOR_SELECTOR};
use msgbench_e2e::harness::{operator_memory_limit, scale_operator};
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::{probe, run, runs, servers, TestContext};
use std::time::Duration;

const RUNNERS: i64 = 15;
const TRIALS: i64 = 5;
const STAGES: i64 = 32;
const RUNS: usize = 4;

fn run_manifest(name: &str) -> String {
    format!(
        r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata:
  name: {name}
spec:
  shareTarget: true
  target: {{serverRef: {{kind: JetStreamCluster, name: limits}}}}
  workload:
    protocol: nats
    publishers: 1
    subscribers: 1
    payloadBytes: 64
    warmupSeconds: 1
    stages: {{dimension: rate, start: 20, step: 5, count: {STAGES}, stageSeconds: 1}}
  runners:
    count: {RUNNERS}
    resources:
      requests: {{cpu: 5m, memory: 16Mi}}
      limits: {{memory: 128Mi}}
  trials: {TRIALS}
  settleSeconds: 0
  barrierTimeoutSeconds: 300
"#
    )
}

#[tokio::test]
async fn the_largest_admitted_results_merge_under_the_operator_memory_limit() {
    run("results-limits", body).await;
}

async fn body(ctx: TestContext) -> Result<()> {
    // 15 x 5 records x (measured + warm-up + 32 stages) = 2550 of the 2560 admission allows.
    ensure!(RUNNERS * TRIALS * (2 + STAGES) <= 2560 && RUNNERS * TRIALS * (2 + STAGES) > 2500);
    let limit = operator_memory_limit(&ctx.client).await?;
    let replicas = operator_replicas(&ctx).await?;
    scale_operator(&ctx.client, 0, Duration::from_secs(180)).await?;
    scale_operator(&ctx.client, replicas, Duration::from_secs(180)).await?;
    let restarts_before = operator_restarts(&ctx).await?;

    kinds::create(
        &ctx.client,
        &ctx.ns,
        &servers::js_memory("limits", 1, "none"),
    )
    .await?;
    servers::wait_ready(
        &ctx,
        Kind::JetStreamCluster,
        "limits",
        Duration::from_secs(240),
    )
    .await?;
    let names: Vec<String> = (1..=RUNS).map(|i| format!("largest-{i}")).collect();
    for name in &names {
        kinds::create(&ctx.client, &ctx.ns, &run_manifest(name)).await?;
    }
    let mut done = Vec::new();
    for name in &names {
        done.push(runs::finished(&ctx, name, Duration::from_secs(1200)).await?);
    }

    let peak = operator_peak_bytes(&ctx).await?;
    eprintln!(
        "operator peak resident memory: {:.1} MiB of its {:.0} MiB limit",
        peak as f64 / 1048576.0,
        limit as f64 / 1048576.0
    );
    for (name, done) in names.iter().zip(&done) {
        complete(name, done)?;
    }
    ensure!(
        operator_restarts(&ctx).await? == restarts_before,
        "the operator restarted while merging (OOM-killed?)"
    );
    ensure!(
        peak < limit,
        "operator peak {peak} B reached its {limit} B memory limit"
    );
    Ok(())
}

/// Succeeded, with every stage and the warm-up in its merged result.
fn complete(name: &str, done: &kube::core::DynamicObject) -> Result<()> {
    ensure!(
        runs::field(done, "/status/phase") == "Succeeded",
        "{name} did not succeed: {}",
        kinds::conditions_summary(done)
    );
    let stages = runs::field(done, "/status/result/stages")
        .as_array()
        .map_or(0, Vec::len);
    ensure!(
        stages as i64 == STAGES,
        "{name}: {stages} of {STAGES} stages in the merged result"
    );
    ensure!(
        !runs::field(done, "/status/result/warmup").is_null(),
        "{name}: no warm-up in the merged result"
    );
    Ok(())
}

async fn operator(ctx: &TestContext) -> Result<Deployment> {
    Api::<Deployment>::namespaced(ctx.client.clone(), chart::namespace())
        .get(chart::operator_deployment())
        .await
        .context("reading the operator Deployment")
}

async fn operator_replicas(ctx: &TestContext) -> Result<i32> {
    Ok(operator(ctx)
        .await?
        .spec
        .and_then(|s| s.replicas)
        .unwrap_or(1)
        .max(1))
}

async fn operator_pods(ctx: &TestContext) -> Result<Vec<Pod>> {
    Ok(
        Api::<Pod>::namespaced(ctx.client.clone(), chart::namespace())
            .list(&ListParams::default().labels(OPERATOR_SELECTOR))
            .await?
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect(),
    )
}

async fn operator_restarts(ctx: &TestContext) -> Result<i32> {
    Ok(operator_pods(ctx)
        .await?
        .iter()
        .flat_map(|p| {
            p.status
                .iter()
                .flat_map(|s| s.container_statuses.iter().flatten())
        })
        .map(|c| c.restart_count)
        .sum())
}

/// The largest peak over the operator pods (only the leader merges results).
async fn operator_peak_bytes(ctx: &TestContext) -> Result<i64> {
    let text = probe::operator_metrics(&ctx.client).await?;
    let peaks = text
        .lines()
        .filter_map(|l| l.strip_prefix("msgbench_process_peak_resident_memory_bytes "))
        .map(|v| v.trim().parse::<f64>().map(|b| b as i64))
        .collect::<Result<Vec<_>, _>>()?;
    peaks
        .into_iter()
        .max()
        .context("the operator exports no peak memory gauge")
}
