//! The operator deletes a run's JetStream streams by the run's id, whatever happened to its
//! runners, as the server's own `/jsz?streams=true` shows:
//! - a run whose only runner is killed mid-trial (so it cleans up nothing) ends Failed, then
//!   its condition `StreamsDeleted` turns True (`Deleted`), the server lists no stream of the
//!   run's id and the run no longer holds the finalizer;
//! - a run deleted mid-trial is held until its streams are deleted, then goes.
//!
//! On an operator without the sweep, the killed runner's stream stays and the deleted run's
//! stream outlives it: both halves fail.
use anyhow::{ensure, Context, Result};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams};
use kube::ResourceExt;
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::runs::{condition_status, field as s, finished};
use msgbench_e2e::{probe, run, servers, wait, TestContext};
use serde_json::Value;
use std::time::Duration;

const SERVER: &str = "js-sweep";
const FINALIZER: &str = "msgbench.dev/streams";

const MANIFEST: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: JetStreamCluster
metadata:
  name: js-sweep
spec:
  replicas: 1
  jetstream:
    storage:
      type: memory
    maxMemoryStore: 64Mi
  resources:
    requests: {cpu: 10m, memory: 64Mi}
    limits: {memory: 256Mi}
"#;

/// A trial long enough to be cut short: 100 msg/s for 120 s.
fn long_run(name: &str) -> String {
    format!(
        r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata: {{name: {name}}}
spec:
  target: {{serverRef: {{kind: JetStreamCluster, name: js-sweep}}}}
  workload:
    protocol: jetstream
    ratePerPublisher: 100
    durationSeconds: 120
    warmupSeconds: 0
    jetstream: {{stream: sweep, replicas: 1, storage: memory}}
  runners:
    resources:
      requests: {{cpu: 10m, memory: 32Mi}}
      limits: {{memory: 128Mi}}
"#
    )
}

#[tokio::test]
async fn a_killed_runners_and_a_deleted_runs_streams_are_deleted_by_the_operator() {
    run("stream-sweep", body).await;
}

async fn body(ctx: TestContext) -> Result<()> {
    kinds::create(&ctx.client, &ctx.ns, MANIFEST).await?;
    servers::wait_ready(
        &ctx,
        Kind::JetStreamCluster,
        SERVER,
        Duration::from_secs(240),
    )
    .await?;
    let server = servers::server_pods(&ctx, SERVER).await?[0].name_any();

    // 1. The runner is killed mid-trial: the run fails, the operator deletes its stream.
    let killed = started(&ctx, &server, "sweep-killed").await?;
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let runners = ListParams::default()
        .labels("app.kubernetes.io/instance=sweep-killed,app.kubernetes.io/component=runner");
    for p in pods.list(&runners).await?.items {
        pods.delete(&p.name_any(), &DeleteParams::default().grace_period(0))
            .await?;
    }
    let br = finished(&ctx, "sweep-killed", Duration::from_secs(180)).await?;
    ensure!(
        s(&br, "/status/phase") == "Failed",
        "a killed runner fails the run: {}",
        s(&br, "/status/verdict")
    );
    let api = Kind::BenchmarkRun.api(&ctx.client, &ctx.ns);
    let br = wait::until(
        &api,
        "sweep-killed",
        Duration::from_secs(120),
        "StreamsDeleted=True",
        |o| condition_status(o, "StreamsDeleted") == "True",
    )
    .await?;
    let c = kinds::condition(&br, "StreamsDeleted")
        .cloned()
        .unwrap_or_default();
    eprintln!("sweep-killed: StreamsDeleted {c}");
    ensure!(c["reason"] == "Deleted", "reason: {c}");
    ensure!(
        !finalizers(&br).contains(&FINALIZER.to_string()),
        "finalizer released"
    );
    let left = streams_of(&ctx, &server, &killed).await?;
    ensure!(left.is_empty(), "streams of run id {killed} left: {left:?}");

    // 2. The run is deleted mid-trial: held until its stream is deleted, then gone.
    let deleted = started(&ctx, &server, "sweep-deleted").await?;
    api.delete("sweep-deleted", &DeleteParams::background())
        .await?;
    wait::until_deleted(&api, "sweep-deleted", Duration::from_secs(150)).await?;
    let left = streams_of(&ctx, &server, &deleted).await?;
    ensure!(
        left.is_empty(),
        "streams of deleted run id {deleted} left: {left:?}"
    );
    Ok(())
}

/// Creates run `name`, waits until its stream is on the server: the run's id in stream names.
async fn started(ctx: &TestContext, server: &str, name: &str) -> Result<String> {
    let br = kinds::create(&ctx.client, &ctx.ns, &long_run(name)).await?;
    let uid = br.uid().context("run uid")?;
    let id: String = uid
        .chars()
        .filter(char::is_ascii_hexdigit)
        .take(8)
        .collect();
    wait::poll(
        Duration::from_secs(180),
        Duration::from_secs(2),
        &format!("a stream of run {name} (id {id}) on {server}"),
        || async { Ok(Some(streams_of(ctx, server, &id).await?).filter(|s| !s.is_empty())) },
    )
    .await?;
    let api = Kind::BenchmarkRun.api(&ctx.client, &ctx.ns);
    let br = api.get(name).await?;
    ensure!(
        finalizers(&br).contains(&FINALIZER.to_string()),
        "a run with streams holds {FINALIZER}: {:?}",
        finalizers(&br)
    );
    Ok(id)
}

/// The server's streams whose names carry run id `id` (`<stream>_<ID>G<gen>_T<trial>`).
async fn streams_of(ctx: &TestContext, server: &str, id: &str) -> Result<Vec<String>> {
    let body = probe::pod_get(&ctx.client, &ctx.ns, server, 8222, "/jsz?streams=true").await?;
    let jsz: Value = serde_json::from_str(&body).context("/jsz is JSON")?;
    let mark = format!("_{}G", id.to_uppercase());
    let details = jsz["account_details"].as_array().into_iter().flatten();
    Ok(
        (details.flat_map(|a| a["stream_detail"].as_array().into_iter().flatten()))
            .filter_map(|st| st["name"].as_str())
            .filter(|n| n.contains(&mark))
            .map(String::from)
            .collect(),
    )
}

fn finalizers(o: &kube::api::DynamicObject) -> Vec<String> {
    o.metadata.finalizers.clone().unwrap_or_default()
}
