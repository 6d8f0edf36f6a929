//! A kubelet refusal is a status, not a pod storm: an unsafe sysctl the node's kubelet does not
//! allow-list (opted into in the spec, so admission accepts it) makes the pod fail with
//! SysctlForbidden; the CR must report Degraded with that reason and the operator must stop the
//! StatefulSet from recreating rejected pods.
use anyhow::{ensure, Context, Result};
use k8s_openapi::api::apps::v1::StatefulSet;
use kube::api::{Api, DynamicObject, ListParams};
use msgbench_crds::conditions::{DEGRADED, READY};
use msgbench_e2e::cpu_hog::{self, CpuHog};
use msgbench_e2e::harness::remove_leftover_namespaces;
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::{run, servers, wait, TestContext};
use std::time::Duration;

const NAME: &str = "refused";

// kernel.msgmax is IPC-namespaced (valid in a pod) but not on the e2e kubelet's allow-list
// (which has only net.core.somaxconn and net.ipv4.tcp_max_syn_backlog).
const MANIFEST: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: JetStreamCluster
metadata:
  name: refused
spec:
  replicas: 1
  jetstream:
    storage:
      type: memory
    maxMemoryStore: 32Mi
  resources:
    requests: {cpu: 10m, memory: 64Mi}
    limits: {memory: 128Mi}
  tuning:
    allowUnsafeSysctls: true
    sysctls:
      - {name: kernel.msgmax, value: "65536"}
"#;

#[tokio::test]
async fn sysctl_forbidden_becomes_degraded_without_a_pod_storm() {
    run("kubelet-refusal", body).await;
}

async fn body(ctx: TestContext) -> Result<()> {
    kinds::create(&ctx.client, &ctx.ns, MANIFEST).await?;
    let api = Kind::JetStreamCluster.api(&ctx.client, &ctx.ns);
    let cr = wait::until(
        &api,
        NAME,
        Duration::from_secs(120),
        "Degraded=True reason SysctlForbidden",
        |o: &DynamicObject| {
            kinds::condition(o, DEGRADED)
                .is_some_and(|c| c["status"] == "True" && c["reason"] == "SysctlForbidden")
        },
    )
    .await?;
    let degraded = kinds::condition(&cr, DEGRADED).cloned().unwrap_or_default();
    eprintln!("Degraded: {}", degraded["message"]);
    ensure!(
        kinds::condition(&cr, READY).is_some_and(|c| c["status"] == "False"),
        "a refused server must not be Ready: {}",
        kinds::conditions_summary(&cr)
    );

    // No storm: the StatefulSet is held at 0 replicas and no server pods remain.
    let sts_api = Api::<StatefulSet>::namespaced(ctx.client.clone(), &ctx.ns);
    let sts = sts_api
        .list(&ListParams::default().labels(&servers::instance_selector(NAME)))
        .await?
        .items
        .into_iter()
        .next()
        .context("no StatefulSet for the refused server")?;
    let sts_name = sts.metadata.name.clone().unwrap_or_default();
    wait::until(
        &sts_api,
        &sts_name,
        Duration::from_secs(60),
        "StatefulSet held at 0 replicas",
        |s: &StatefulSet| s.spec.as_ref().and_then(|s| s.replicas) == Some(0),
    )
    .await?;
    wait::poll(
        Duration::from_secs(90),
        Duration::from_secs(2),
        "no server pods left",
        || {
            let ctx = ctx.clone();
            async move {
                let pods = servers::children_including_terminating(&ctx, NAME).await?;
                Ok(pods.iter().all(|c| c.kind != "Pod").then_some(()))
            }
        },
    )
    .await?;
    // And it stays Degraded (the hold is remembered for this generation).
    let again = api.get(NAME).await?;
    ensure!(
        kinds::condition(&again, DEGRADED).and_then(|c| c["reason"].as_str())
            == Some("SysctlForbidden"),
        "Degraded did not stick: {}",
        kinds::conditions_summary(&again)
    );
    Ok(())
}

/// A pod the kubelet refuses with OutOfcpu (a transient refusal) is retried after the hold, and
/// the server becomes Ready once the CPU is free — no spec change needed.
#[tokio::test]
async fn out_of_cpu_is_retried_and_recovers_once_cpu_is_free() {
    run("kubelet-outofcpu", out_of_cpu).await;
}

const STARVED: &str = "starved";
const STARVED_MANIFEST: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: JetStreamCluster
metadata:
  name: starved
spec:
  replicas: 1
  jetstream:
    storage:
      type: memory
    maxMemoryStore: 32Mi
  resources:
    requests: {cpu: 10m, memory: 64Mi}
    limits: {memory: 128Mi}
"#;

async fn out_of_cpu(ctx: TestContext) -> Result<()> {
    let dir = cpu_hog::static_pod_dir();
    // Pods of earlier tests' namespaces still being deleted would free CPU after the hog took it.
    remove_leftover_namespaces(&ctx.client, &ctx.ns, Duration::from_secs(240)).await?;
    let hog = CpuHog::take_all(&ctx.client, dir).await?;
    eprintln!(
        "the kubelet runs a {}m CPU hog the scheduler cannot see",
        hog.millis
    );
    kinds::create(&ctx.client, &ctx.ns, STARVED_MANIFEST).await?;
    let api = Kind::JetStreamCluster.api(&ctx.client, &ctx.ns);
    let cr = wait::until(
        &api,
        STARVED,
        Duration::from_secs(120),
        "Degraded=True reason OutOfcpu, retrying",
        |o: &DynamicObject| {
            kinds::condition(o, DEGRADED).is_some_and(|c| {
                c["status"] == "True"
                    && c["reason"] == "OutOfcpu"
                    && c["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("retrying at"))
            })
        },
    )
    .await?;
    eprintln!(
        "Degraded: {}",
        kinds::condition(&cr, DEGRADED).map_or(String::new(), |c| c["message"].to_string())
    );
    ensure!(
        kinds::condition(&cr, READY).is_some_and(|c| c["status"] == "False"),
        "a refused server must not be Ready: {}",
        kinds::conditions_summary(&cr)
    );

    hog.release().await?;
    // The hold lasts 30 s from the refusal; then the operator scales up and the pod is admitted.
    let ready = wait::until(
        &api,
        STARVED,
        Duration::from_secs(180),
        "Ready=True once the CPU is free",
        |o: &DynamicObject| kinds::condition(o, READY).is_some_and(|c| c["status"] == "True"),
    )
    .await?;
    ensure!(
        !kinds::condition(&ready, DEGRADED).is_some_and(|c| c["status"] == "True"),
        "Ready but still Degraded: {}",
        kinds::conditions_summary(&ready)
    );
    Ok(())
}
