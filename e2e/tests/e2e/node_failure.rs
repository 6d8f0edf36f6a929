//! A node lost mid-run (`NODES=3 make e2e`, local or kind; ignored on one node): the node that
//! holds the run's runner and one server of a 3-server JetStreamCluster goes dark like a machine
//! that lost power (local: `e2e/cluster/node stop`, its traffic dropped, then its kubelet, pods
//! and runtime killed; kind: the node container paused, every process frozen at once). Within the node controller's grace period plus a bound, the run ends
//! Failed with reason RunnerNodeLost naming the node, and the JetStreamCluster reports Degraded
//! (NodeNotReady, naming it). When the node comes back, the cluster is Ready again.
use anyhow::{ensure, Context, Result};
use msgbench_crds::conditions::DEGRADED;
use msgbench_crds::RunFailureReason;
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::nodes::{self, StoppedNode};
use msgbench_e2e::runs::{self, field};
use msgbench_e2e::{run, servers, wait, TestContext};
use std::time::{Duration, Instant};

/// The runner is put on the node that will fail; the run lasts well past the node
/// controller's grace period (50 s by default), so it is still running when the loss shows.
fn run_on(node: &str) -> String {
    format!(
        r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata:
  name: on-lost-node
spec:
  target:
    serverRef: {{kind: JetStreamCluster, name: js-nodes}}
  workload: {{protocol: nats, ratePerPublisher: 50, durationSeconds: 240}}
  runners:
    count: 1
    avoidServerNodes: false
    resources:
      requests: {{cpu: 10m, memory: 32Mi}}
      limits: {{memory: 128Mi}}
    placement:
      nodeSelector: {{kubernetes.io/hostname: {node}}}
"#
    )
}

#[tokio::test]
#[ignore = "needs 3 nodes: NODES=3 make e2e"]
async fn a_node_lost_mid_run_ends_the_run_naming_it_and_the_servers_recover() {
    run("node-failure", body).await;
}

async fn body(ctx: TestContext) -> Result<()> {
    nodes::require(&ctx.client, 3).await?;
    let servers_yaml = servers::js_memory("js-nodes", 3, "required");
    kinds::create(&ctx.client, &ctx.ns, &servers_yaml).await?;
    let ready_within = Duration::from_secs(240);
    servers::wait_ready(&ctx, Kind::JetStreamCluster, "js-nodes", ready_within).await?;
    // The victim holds a server, is not the control plane's node and not the operator's.
    let operator = nodes::operator_nodes(&ctx.client).await?;
    let victim = servers::server_pods(&ctx, "js-nodes")
        .await?
        .iter()
        .filter_map(nodes::pod_node)
        .filter(|n| nodes::can_stop(n) && !operator.contains(n))
        .min()
        .context("a server node other than the control plane's and the operator's")?;

    kinds::create(&ctx.client, &ctx.ns, &run_on(&victim)).await?;
    let runs_api = Kind::BenchmarkRun.api(&ctx.client, &ctx.ns);
    wait::until(
        &runs_api,
        "on-lost-node",
        Duration::from_secs(180),
        "run Running",
        |o| field(o, "/status/phase") == "Running",
    )
    .await?;

    let stopped = StoppedNode::stop(&victim)?;
    let t0 = Instant::now();
    // Grace period (50 s) + the node controller's 5 s monitor period + a pass or two.
    let done = runs::finished(&ctx, "on-lost-node", Duration::from_secs(150)).await?;
    let verdict = field(&done, "/status/verdict");
    ensure!(
        verdict["reason"] == RunFailureReason::RunnerNodeLost.as_str()
            && verdict["message"]
                .as_str()
                .is_some_and(|m| m.contains(&format!("node {victim}"))),
        "RunnerNodeLost naming {victim}: {verdict}"
    );
    println!(
        "run ended {:?} after the node stopped: {verdict}",
        t0.elapsed()
    );

    let servers_api = Kind::JetStreamCluster.api(&ctx.client, &ctx.ns);
    let v = victim.clone();
    let degraded = wait::until(
        &servers_api,
        "js-nodes",
        Duration::from_secs(60),
        "Degraded=True, NodeNotReady",
        move |o| {
            kinds::condition(o, DEGRADED).is_some_and(|c| {
                c["status"] == "True"
                    && c["reason"] == "NodeNotReady"
                    && c["message"].as_str().is_some_and(|m| m.contains(&v))
            })
        },
    )
    .await?;
    println!(
        "servers while the node is down: {}",
        kinds::conditions_summary(&degraded)
    );

    stopped.start()?;
    let back = servers::wait_ready(&ctx, Kind::JetStreamCluster, "js-nodes", ready_within)
        .await
        .context("the cluster is Ready again after the node returned")?;
    ensure!(
        runs::condition_status(&back, DEGRADED) == "False",
        "Degraded cleared: {}",
        kinds::conditions_summary(&back)
    );
    println!("node back; servers: {}", kinds::conditions_summary(&back));
    Ok(())
}
