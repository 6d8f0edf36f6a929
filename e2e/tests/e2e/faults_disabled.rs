//! Faults only where the install allows them. This module's install sets the chart's
//! `faults.enabled=false`, `faults.network=false` and `faults.powerLoss=false` (`chart::module_values`; the next test's
//! install puts the e2e values back). A JetStreamCluster that asks for a network fault agent
//! then runs without one: its pods have no `fault-agent` container and nothing in them adds a
//! capability, and the server says why (`Degraded`, reason `FaultInjectionNotAllowed`, naming
//! the chart value). A BenchmarkRun that asks for a fault fails at once (`FaultsNotAllowed`),
//! before any runner starts.
use anyhow::{ensure, Result};
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, ListParams};
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::runs::{field as s, finished};
use msgbench_e2e::{fixtures, run, servers, wait, TestContext};
use std::time::Duration;

const RUN: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata: {name: wants-a-crash}
spec:
  target: {serverRef: {kind: JetStreamCluster, name: js-nofault}}
  workload:
    protocol: jetstream
    ratePerPublisher: 100
    durationSeconds: 10
    jetstream: {stream: nofault, replicas: 1, storage: memory}
  faults:
    - {afterSeconds: 2, action: crash, pod: ordinal, ordinal: 0}
"#;

#[tokio::test]
async fn an_install_without_faults_runs_no_fault_agent_and_says_why() {
    run("faults-disabled", body).await;
}

async fn body(ctx: TestContext) -> Result<()> {
    let server = fixtures::js_memory("js-nofault", 1, "none")
        + "  faultInjection: {enabled: true, network: true}\n";
    kinds::create(&ctx.client, &ctx.ns, &server).await?;
    let api = Kind::JetStreamCluster.api(&ctx.client, &ctx.ns);
    let js = wait::until(
        &api,
        "js-nofault",
        Duration::from_secs(240),
        "Degraded=True, reason FaultInjectionNotAllowed",
        |o| {
            kinds::condition(o, "Degraded")
                .is_some_and(|c| c["status"] == "True" && c["reason"] == "FaultInjectionNotAllowed")
        },
    )
    .await?;
    let degraded = kinds::condition(&js, "Degraded")
        .cloned()
        .unwrap_or_default();
    eprintln!("js-nofault: Degraded {degraded}");
    let message = degraded["message"].as_str().unwrap_or_default();
    ensure!(
        message.contains("faults.enabled"),
        "the reason names the chart value: {message}"
    );
    servers::wait_ready(
        &ctx,
        Kind::JetStreamCluster,
        "js-nofault",
        Duration::from_secs(240),
    )
    .await?;
    for pod in servers::server_pods(&ctx, "js-nofault").await? {
        let spec = pod.spec.unwrap_or_default();
        let names: Vec<&str> = (spec
            .containers
            .iter()
            .chain(spec.init_containers.iter().flatten()))
        .map(|c| c.name.as_str())
        .collect();
        ensure!(!names.contains(&"fault-agent"), "no agent: {names:?}");
        let added: Vec<&String> = (spec.containers.iter())
            .filter_map(|c| {
                c.security_context
                    .as_ref()?
                    .capabilities
                    .as_ref()?
                    .add
                    .as_ref()
            })
            .flatten()
            .collect();
        ensure!(
            added.is_empty(),
            "no container adds a capability: {added:?}"
        );
    }

    kinds::create(&ctx.client, &ctx.ns, RUN).await?;
    let br = finished(&ctx, "wants-a-crash", Duration::from_secs(60)).await?;
    ensure!(
        s(&br, "/status/phase") == "Failed"
            && s(&br, "/status/verdict/reason") == "FaultsNotAllowed",
        "verdict {}",
        s(&br, "/status/verdict")
    );
    let jobs = Api::<Job>::namespaced(ctx.client.clone(), &ctx.ns)
        .list(&ListParams::default())
        .await?;
    ensure!(
        jobs.items.is_empty(),
        "no runner started: {} Jobs",
        jobs.items.len()
    );
    Ok(())
}
