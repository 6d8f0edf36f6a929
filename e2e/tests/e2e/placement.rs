//! Placement on real pods over several nodes (`NODES=3 make e2e`; ignored on one node):
//! - a 3-server JetStreamCluster with required anti-affinity lands on 3 nodes in 3 zones; with
//!   only 2 nodes open (one cordoned) a replaced server stays Pending and the cluster says why
//!   (Degraded, in the scheduler's words), and recovers once the node is back;
//! - runners keep off the server's node (`avoidServerNodes`, the default) and spread over nodes
//!   (`podAntiAffinity: required`), and the run's `environment.sharedNodes` is false.
//!   (A runner no node can take ends its run as RunnersUnschedulable: benchmark_run_failures.)
use anyhow::{ensure, Context, Result};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};
use msgbench_crds::conditions::{DEGRADED, READY};
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::nodes::{self, Cordoned};
use msgbench_e2e::runs::{self, field};
use msgbench_e2e::{run, servers, wait, TestContext};
use std::collections::BTreeSet;
use std::time::Duration;

#[tokio::test]
#[ignore = "needs 3 nodes: NODES=3 make e2e"]
async fn required_anti_affinity_spreads_servers_and_says_why_one_cannot_be_placed() {
    run("placement-servers", spread).await;
}

async fn spread(ctx: TestContext) -> Result<()> {
    let all = nodes::require(&ctx.client, 3).await?;
    kinds::create(
        &ctx.client,
        &ctx.ns,
        &servers::js_memory("js-spread", 3, "required"),
    )
    .await?;
    let timeout = Duration::from_secs(240);
    servers::wait_ready(&ctx, Kind::JetStreamCluster, "js-spread", timeout).await?;
    let pods = servers::server_pods(&ctx, "js-spread").await?;
    let on: BTreeSet<String> = pods.iter().filter_map(nodes::pod_node).collect();
    ensure!(on.len() == 3, "3 servers on 3 nodes, got {on:?}");
    let zones: BTreeSet<_> = all
        .iter()
        .filter(|n| on.contains(&nodes::name(n)))
        .filter_map(nodes::zone)
        .collect();
    ensure!(zones.len() == 3, "3 zones, got {zones:?}");

    // Two nodes open: the replaced server has nowhere to go, and the cluster says so.
    let victim = pods.last().context("a server pod")?;
    let node = nodes::pod_node(victim).context("scheduled")?;
    let cordoned = Cordoned::cordon(&ctx.client, &node).await?;
    let pod_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let name = victim.metadata.name.clone().unwrap_or_default();
    pod_api.delete(&name, &DeleteParams::default()).await?;
    let api = Kind::JetStreamCluster.api(&ctx.client, &ctx.ns);
    let degraded = wait::until(
        &api,
        "js-spread",
        Duration::from_secs(120),
        "Degraded=True, Unschedulable",
        |o| {
            kinds::condition(o, DEGRADED)
                .is_some_and(|c| c["status"] == "True" && c["reason"] == "Unschedulable")
        },
    )
    .await?;
    let msg = kinds::condition(&degraded, DEGRADED).unwrap()["message"].to_string();
    ensure!(
        msg.contains(&name) && msg.contains("anti-affinity"),
        "the scheduler's reason, naming the pod: {msg}"
    );
    ensure!(
        runs::condition_status(&degraded, READY) == "False",
        "not Ready with 2 of 3: {}",
        kinds::conditions_summary(&degraded)
    );
    println!("with 2 nodes open: {msg}");

    cordoned.uncordon().await?;
    let back = servers::wait_ready(&ctx, Kind::JetStreamCluster, "js-spread", timeout).await?;
    ensure!(
        runs::condition_status(&back, DEGRADED) == "False",
        "Degraded cleared: {}",
        kinds::conditions_summary(&back)
    );
    let on: BTreeSet<String> = servers::server_pods(&ctx, "js-spread")
        .await?
        .iter()
        .filter_map(nodes::pod_node)
        .collect();
    ensure!(on.len() == 3, "spread again over 3 nodes, got {on:?}");
    Ok(())
}

const APART: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata:
  name: apart
spec:
  target:
    serverRef: {kind: JetStreamCluster, name: js-one}
  workload: {protocol: nats, ratePerPublisher: 100, durationSeconds: 3}
  runners:
    count: 2
    resources:
      requests: {cpu: 10m, memory: 32Mi}
      limits: {memory: 128Mi}
    placement:
      podAntiAffinity: required
"#;

#[tokio::test]
#[ignore = "needs 3 nodes: NODES=3 make e2e"]
async fn runners_keep_off_the_servers_node_and_spread() {
    run("placement-runners", apart).await;
}

async fn apart(ctx: TestContext) -> Result<()> {
    nodes::require(&ctx.client, 3).await?;
    kinds::create(
        &ctx.client,
        &ctx.ns,
        &servers::js_memory("js-one", 1, "preferred"),
    )
    .await?;
    let timeout = Duration::from_secs(240);
    servers::wait_ready(&ctx, Kind::JetStreamCluster, "js-one", timeout).await?;
    let server_node = servers::server_pods(&ctx, "js-one")
        .await?
        .first()
        .and_then(nodes::pod_node)
        .context("the server is scheduled")?;
    kinds::create(&ctx.client, &ctx.ns, APART).await?;
    let done = runs::finished(&ctx, "apart", Duration::from_secs(240)).await?;
    ensure!(
        field(&done, "/status/phase") == "Succeeded",
        "run succeeded: {}",
        field(&done, "/status/verdict")
    );
    let env = field(&done, "/status/environment");
    let runner_nodes: BTreeSet<&str> = env["runnerPods"]
        .as_array()
        .context("environment.runnerPods")?
        .iter()
        .filter_map(|p| p["node"].as_str())
        .collect();
    ensure!(
        runner_nodes.len() == 2 && !runner_nodes.contains(server_node.as_str()),
        "2 runners on 2 nodes, neither the server's {server_node}: {env}"
    );
    ensure!(env["sharedNodes"] == false, "sharedNodes false: {env}");
    println!("server on {server_node}, runners on {runner_nodes:?}");
    Ok(())
}
