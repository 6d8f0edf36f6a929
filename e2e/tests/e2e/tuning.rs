//! Tuning is real: a pinned server pod is Guaranteed, its main process runs on one exclusive CPU
//! (Cpus_allowed_list read inside the server's PID namespace by an ephemeral toolbox container),
//! the requested sysctls read back in the pod, nats-server runs with GOMAXPROCS 1, and the status
//! reports what was observed. Pins the node's one allocatable CPU: removes leftovers first.
use anyhow::{ensure, Context, Result};
use kube::api::DynamicObject;
use msgbench_e2e::harness::remove_leftover_namespaces;
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::procfs::{cpu_list, last_field_map};
use msgbench_e2e::{node, probe, run, servers, toolbox, wait, TestContext};
use serde_json::Value;
use std::time::Duration;

const NAME: &str = "pinned";

const MANIFEST: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: JetStreamCluster
metadata:
  name: pinned
spec:
  replicas: 1
  jetstream:
    storage:
      type: memory
    maxMemoryStore: 64Mi
  resources:
    requests: {cpu: 1, memory: 256Mi}
    limits: {cpu: 1, memory: 256Mi}
  tuning:
    cpuPinning: true
    allowUnsafeSysctls: true
    sysctls:
      - {name: net.core.somaxconn, value: "8192"}
      - {name: net.ipv4.tcp_keepalive_time, value: "301"}
"#;

#[tokio::test]
async fn pinned_server_gets_an_exclusive_cpu_and_sysctls() {
    run("tuning", body).await;
}

async fn body(ctx: TestContext) -> Result<()> {
    // The node has one allocatable CPU; a kept namespace from an earlier failure may hold it.
    remove_leftover_namespaces(&ctx.client, &ctx.ns, Duration::from_secs(180)).await?;
    node::wait_for_free_cpu(&ctx.client, 1000, Duration::from_secs(120)).await?;
    kinds::create(&ctx.client, &ctx.ns, MANIFEST).await?;
    servers::wait_ready(&ctx, Kind::JetStreamCluster, NAME, Duration::from_secs(240)).await?;

    let pods = servers::server_pods(&ctx, NAME).await?;
    ensure!(
        pods.len() == 1,
        "expected 1 server pod, found {}",
        pods.len()
    );
    let pod = &pods[0];
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let qos = pod
        .status
        .as_ref()
        .and_then(|s| s.qos_class.clone())
        .unwrap_or_default();
    ensure!(
        qos == "Guaranteed",
        "pinned pod QoS class is {qos:?}, want Guaranteed"
    );

    // Inside the server container's PID namespace PID 1 is nats-server; `self` is the toolbox,
    // which runs in the shared pool — so the two cpusets must be disjoint.
    let script = "set -e
echo \"server $(grep Cpus_allowed_list /proc/1/status)\"
echo \"toolbox $(grep Cpus_allowed_list /proc/self/status)\"
echo \"sysctl net.core.somaxconn $(cat /proc/sys/net/core/somaxconn)\"
echo \"sysctl net.ipv4.tcp_keepalive_time $(cat /proc/sys/net/ipv4/tcp_keepalive_time)\"";
    let container = servers::server_container(pod)?;
    let out = toolbox::inspect_container(
        &ctx.client,
        &ctx.ns,
        &pod_name,
        &container,
        "inspect-tuning",
        script,
        Duration::from_secs(90),
    )
    .await
    .context("reading tuning inside the pod")?;
    eprintln!("{}", out.trim());
    let seen = last_field_map(&out);
    let server_cpus = cpu_list(
        seen.get("server Cpus_allowed_list:")
            .context("no server cpuset in output")?,
    )?;
    let toolbox_cpus = cpu_list(
        seen.get("toolbox Cpus_allowed_list:")
            .context("no toolbox cpuset in output")?,
    )?;
    ensure!(
        server_cpus.len() == 1,
        "pinned server should run on exactly one CPU, got {server_cpus:?}"
    );
    ensure!(
        server_cpus[0] != 0,
        "pinned server must not get the reserved CPU 0"
    );
    ensure!(
        !toolbox_cpus.contains(&server_cpus[0]),
        "CPU {} is not exclusive: the shared pool ({toolbox_cpus:?}) contains it",
        server_cpus[0]
    );
    ensure!(
        seen.get("sysctl net.core.somaxconn").map(String::as_str) == Some("8192"),
        "somaxconn not applied: {out}"
    );
    ensure!(
        seen.get("sysctl net.ipv4.tcp_keepalive_time")
            .map(String::as_str)
            == Some("301"),
        "tcp_keepalive_time not applied: {out}"
    );

    // nats-server sized itself to the one CPU (GOMAXPROCS), not to the node.
    let varz: Value = serde_json::from_str(
        &probe::pod_get(&ctx.client, &ctx.ns, &pod_name, 8222, "/varz").await?,
    )?;
    ensure!(
        varz["gomaxprocs"].as_i64() == Some(1),
        "nats-server GOMAXPROCS should be 1, /varz says {}",
        varz["gomaxprocs"]
    );

    // The status reports what was observed, not what was asked for (it may trail the Ready flip
    // by a reconcile, so wait for the observation to land).
    let api = Kind::JetStreamCluster.api(&ctx.client, &ctx.ns);
    let want_cpus = server_cpus.len();
    let cr = wait::until(
        &api,
        NAME,
        Duration::from_secs(60),
        "status.observedTuning reports the pinning",
        move |o: &DynamicObject| {
            let t = o.data.pointer("/status/observedTuning");
            t.is_some_and(|t| {
                t["qosClass"] == "Guaranteed"
                    && t["pinningEffective"] == true
                    && t["cpus"].is_string()
            })
        },
    )
    .await?;
    let observed = &cr.data["status"]["observedTuning"];
    let applied: Vec<&str> = observed["sysctlsApplied"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["name"].as_str())
        .collect();
    ensure!(
        applied.contains(&"net.core.somaxconn") && applied.contains(&"net.ipv4.tcp_keepalive_time"),
        "status.observedTuning.sysctlsApplied: {observed}"
    );
    // `cpus` is what the server itself saw: a count ("1 visible to the server") or a cpuset.
    let cpus = observed["cpus"].as_str().unwrap_or_default();
    match cpus.split_whitespace().collect::<Vec<_>>().as_slice() {
        [n, "visible", ..] => ensure!(
            n.parse::<usize>().ok() == Some(want_cpus),
            "status.observedTuning.cpus {cpus:?}, the pod has {want_cpus} CPU(s)"
        ),
        _ => ensure!(
            cpu_list(cpus)? == server_cpus,
            "status.observedTuning.cpus {cpus:?} differs from the pod's {server_cpus:?}"
        ),
    }
    Ok(())
}
