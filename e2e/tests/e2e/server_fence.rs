//! Fenced by default, on a cluster that enforces NetworkPolicy (kind: kube-router; the local
//! cluster's bridge plugin enforces nothing, so there the test skips and says why). A 3-server
//! JetStreamCluster's pods refuse a pod in another namespace on the client (4222), route (6222)
//! and monitoring (8222) ports; a pod of the server's own namespace reaches the client port only
//! (the control case that shows the probe sees an open port); and a BenchmarkRun in the server's
//! namespace Succeeds with every message delivered.
use anyhow::{ensure, Context, Result};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, PostParams};
use msgbench_e2e::cluster::flavour::Flavour;
use msgbench_e2e::harness::e2e_label;
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::runs::{field as s, finished};
use msgbench_e2e::{run, servers, toolbox, wait, TestContext};
use serde_json::json;
use std::time::Duration;

const NAME: &str = "js-fence";
const PORTS: [u16; 3] = [4222, 6222, 8222];

const MANIFEST: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: JetStreamCluster
metadata:
  name: js-fence
spec:
  replicas: 3
  jetstream:
    storage:
      type: memory
    maxMemoryStore: 64Mi
  resources:
    requests: {cpu: 10m, memory: 128Mi}
    limits: {memory: 256Mi}
  placement:
    podAntiAffinity: none
"#;

const RUN: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata: {name: fenced-run}
spec:
  target: {serverRef: {kind: JetStreamCluster, name: js-fence}}
  workload:
    protocol: jetstream
    ratePerPublisher: 200
    durationSeconds: 4
    warmupSeconds: 0
    drainSeconds: 2
    jetstream: {stream: fenced, replicas: 3, storage: memory}
  runners:
    resources:
      requests: {cpu: 20m, memory: 32Mi}
      limits: {memory: 128Mi}
"#;

#[tokio::test]
async fn another_namespace_cannot_reach_a_fenced_cluster_while_a_run_beside_it_succeeds() {
    if let Some(why) = Flavour::current().network_policy_unenforced() {
        eprintln!("skipped: {why}");
        return;
    }
    run("server-fence", body).await;
}

async fn body(ctx: TestContext) -> Result<()> {
    kinds::create(&ctx.client, &ctx.ns, MANIFEST).await?;
    servers::wait_ready(&ctx, Kind::JetStreamCluster, NAME, Duration::from_secs(240)).await?;
    let ips: Vec<String> = (servers::server_pods(&ctx, NAME).await?.iter())
        .map(servers::pod_ip)
        .collect::<Result<_>>()?;
    ensure!(ips.len() == 3, "3 server pods, found {ips:?}");

    // The policy is programmed asynchronously: both sides are polled until they hold.
    let stranger_ns = other_namespace(&ctx).await?;
    let outcome = async {
        let seen = reachable_until(&ctx, &stranger_ns, "stranger", &ips, |open| open.is_empty())
            .await
            .context("a pod in another namespace reached the servers")?;
        eprintln!("from {stranger_ns}: open {seen:?} (want none)");
        let seen = reachable_until(&ctx, &ctx.ns, "neighbour", &ips, |open| {
            open.iter().all(|(_, p)| *p == 4222) && open.len() == ips.len()
        })
        .await
        .context("a pod of the server's namespace: client port only")?;
        eprintln!("from {}: open {seen:?} (want 4222 on each)", ctx.ns);
        anyhow::Ok(())
    }
    .await;
    let _ = Api::<Namespace>::all(ctx.client.clone())
        .delete(&stranger_ns, &DeleteParams::background())
        .await;
    outcome?;

    kinds::create(&ctx.client, &ctx.ns, RUN).await?;
    let br = finished(&ctx, "fenced-run", Duration::from_secs(300)).await?;
    ensure!(
        s(&br, "/status/phase") == "Succeeded",
        "verdict {}",
        s(&br, "/status/verdict")
    );
    let published = s(&br, "/status/result/published").as_u64();
    let received = s(&br, "/status/result/received").as_u64();
    ensure!(
        published == Some(800) && received == published,
        "published {published:?}, received {received:?}"
    );
    Ok(())
}

/// A namespace of the suite's own (labelled, so a leftover is found and removed).
async fn other_namespace(ctx: &TestContext) -> Result<String> {
    let name = format!("{}-stranger", ctx.ns.chars().take(50).collect::<String>());
    let ns: Namespace = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {e2e_label(): "true"}}
    }))?;
    Api::<Namespace>::all(ctx.client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .with_context(|| format!("creating namespace {name}"))?;
    Ok(name)
}

/// Probes every (server, port) from a fresh toolbox pod in `ns` until `want` holds of the open
/// ones; the last set seen, or an error naming it. A port is open when its first bytes arrive
/// (nats sends INFO on 4222 and 6222, the monitor answers HTTP on 8222).
async fn reachable_until(
    ctx: &TestContext,
    ns: &str,
    who: &str,
    ips: &[String],
    want: impl Fn(&[(String, u16)]) -> bool,
) -> Result<Vec<(String, u16)>> {
    let (mut attempt, want) = (0, &want);
    wait::poll(
        Duration::from_secs(90),
        Duration::from_secs(3),
        &format!("{who} in {ns} sees the fence"),
        || {
            attempt += 1;
            let name = format!("{who}-{attempt}");
            async move {
                let open = probe(ctx, ns, &name, ips).await?;
                if want(&open) {
                    return Ok(Some(open));
                }
                eprintln!("{name}: open {open:?}, not yet as wanted");
                Ok(None)
            }
        },
    )
    .await
}

async fn probe(
    ctx: &TestContext,
    ns: &str,
    name: &str,
    ips: &[String],
) -> Result<Vec<(String, u16)>> {
    let mut script = String::new();
    for ip in ips {
        for port in PORTS {
            script.push_str(&format!(
                "n=$(printf 'GET /healthz HTTP/1.0\\r\\n\\r\\n' | nc -w 3 {ip} {port} 2>/dev/null \
                 | head -c 4 | wc -c); echo \"{ip} {port} $n\"\n"
            ));
        }
    }
    let out = toolbox::run_script(&ctx.client, ns, name, &script, Duration::from_secs(90)).await?;
    ensure!(out.succeeded, "probe pod {name} failed: {}", out.logs);
    let open = (out.logs.lines())
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (ip, port, n) = (f.next()?, f.next()?.parse().ok()?, f.next()?);
            (n != "0").then(|| (ip.to_string(), port))
        })
        .collect();
    Ok(open)
}
