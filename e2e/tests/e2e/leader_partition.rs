//! The leader loses the API server for 20 s in the middle of a run with faults (its packets to
//! the API are dropped, so its requests hang; local and kind). With two replicas:
//! - the leader steps down on its own within its renew deadline, before the Lease can pass to
//!   the standby: the Lease's holder moves away from it, and its new acquire time is later than
//!   the old holder's last renewal plus the step-down bound, so two leaders never act at once;
//! - it steps down in the same process: its live container's log says why and that it
//!   campaigns again, the container never restarted, and it is a ready standby afterwards;
//! - the standby takes the Lease and finishes the run: it Succeeds;
//! - the fault records match the pod deletions that happened: every recorded kill replaced its
//!   pod exactly once, and no pod was deleted without a record.
use anyhow::{ensure, Context, Result};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, LogParams};
use msgbench_e2e::chart;
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::operator_lease::{
    holder, lease, lease_held_by_one_of, one_leading_replica, two_replicas, LEASE_SECONDS,
};
use msgbench_e2e::partition::ApiPartition;
use msgbench_e2e::runs::{field as s, finished};
use msgbench_e2e::{run, servers, wait, TestContext};
use serde_json::Value;
use std::collections::BTreeSet;
use std::time::Duration;

/// How long a leader acts without a successful renewal (the operator's renew deadline).
const STEP_DOWN_WITHIN: i64 = 10;
const PARTITION: Duration = Duration::from_secs(20);

/// 70 s of R3 load with a kill before the partition and one after the standby took over.
const RUN: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata: {name: partitioned}
spec:
  target: {serverRef: {kind: JetStreamCluster, name: js3}}
  workload:
    protocol: jetstream
    publishers: 1
    subscribers: 1
    payloadBytes: 128
    ratePerPublisher: 50
    durationSeconds: 70
    drainSeconds: 2
    jetstream: {replicas: 3, storage: memory}
  runners:
    resources:
      requests: {cpu: 20m, memory: 32Mi}
      limits: {memory: 128Mi}
  barrierTimeoutSeconds: 120
  faults:
    - {afterSeconds: 3, action: kill, pod: ordinal, ordinal: 1}
    - {afterSeconds: 55, action: kill, pod: ordinal, ordinal: 2}
"#;

#[tokio::test]
async fn a_partitioned_leader_steps_down_before_the_standby_leads_and_the_run_succeeds() {
    run("leader-partition", body).await;
}

async fn body(ctx: TestContext) -> Result<()> {
    let outcome = partitioned_run(&ctx).await;
    // Back to one leading replica whatever happened: the CPU pinning tests need the node.
    let restored = one_leading_replica(&ctx.client, Duration::from_secs(90)).await;
    outcome?;
    restored.context("restoring one leading operator replica")?;
    Ok(())
}

async fn partitioned_run(ctx: &TestContext) -> Result<()> {
    let (leader, standby) = two_replicas(&ctx.client).await?;
    let restarts_before = operator_restarts(ctx, &leader).await?;

    kinds::create(&ctx.client, &ctx.ns, &servers::js_memory("js3", 3, "none")).await?;
    servers::wait_ready(ctx, Kind::JetStreamCluster, "js3", Duration::from_secs(240)).await?;
    let uids_before = server_uids(ctx).await?;
    kinds::create(&ctx.client, &ctx.ns, RUN).await?;
    // The first kill is recorded as done: then cut the leader off.
    let runs = Kind::BenchmarkRun.api(&ctx.client, &ctx.ns);
    wait::until(
        &runs,
        "partitioned",
        Duration::from_secs(240),
        "first fault executed",
        |o| o.data.pointer("/status/faults/0/executedTime").is_some(),
    )
    .await?;
    let cut = ApiPartition::block(&leader)?;
    eprintln!("partition: leader {leader} cut off from the API for {PARTITION:?}");
    // The old leader's last renewal: read once it can write no more (a request already on
    // its way has landed after a second).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let last = renew_time(&ctx.client).await?;
    // The holder moves away from the partitioned leader, to the only other replica.
    let taken = lease_held_by_one_of(&ctx.client, std::slice::from_ref(&standby), PARTITION * 2)
        .await
        .context("the standby should take the Lease while the leader is cut off")?;
    ensure!(
        taken != leader,
        "the Lease still names the partitioned {leader}"
    );
    tokio::time::sleep(PARTITION.saturating_sub(Duration::from_secs(LEASE_SECONDS as u64))).await;
    cut.lift()?;
    drop(cut);

    let l = lease(&ctx.client).await?;
    let spec = l.spec.clone().unwrap_or_default();
    let acquired = spec
        .acquire_time
        .context("Lease acquireTime")?
        .0
        .as_second();
    ensure!(
        holder(&l).as_deref() == Some(taken.as_str()) && acquired >= last + STEP_DOWN_WITHIN,
        "the standby acquired the Lease at {acquired}, only {}s after the old leader's last \
         renewal at {last}: the old leader may still have been acting",
        acquired - last
    );
    stepped_down_in_process(ctx, &leader, restarts_before).await?;

    let done = finished(ctx, "partitioned", Duration::from_secs(300)).await?;
    ensure!(
        s(&done, "/status/phase") == "Succeeded",
        "the run did not succeed: {}",
        kinds::conditions_summary(&done)
    );
    faults_match_deletions(ctx, &done, &uids_before).await
}

/// The Lease's renewTime as the test last saw it (seconds).
async fn renew_time(client: &kube::Client) -> Result<i64> {
    let l = lease(client).await?;
    Ok(l.spec
        .and_then(|s| s.renew_time)
        .map_or(0, |t| t.0.as_second()))
}

/// The old leader stepped down without exiting: its live container's log says it lost the
/// Lease at its renew deadline and campaigns again, its container never restarted, and it is
/// ready again as a standby once it reaches the API.
async fn stepped_down_in_process(ctx: &TestContext, pod: &str, restarts_before: i32) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), chart::namespace());
    // The current container only: a restarted one would not have these lines.
    let params = LogParams {
        container: Some(OPERATOR_CONTAINER.into()),
        ..LogParams::default()
    };
    wait::poll(
        Duration::from_secs(60),
        Duration::from_secs(2),
        &format!("{pod}'s live log: stepped down at its renew deadline and campaigns again"),
        || {
            let (pods, params) = (&pods, &params);
            async move {
                let text = pods.logs(pod, params).await?;
                let stepped_down = text
                    .lines()
                    .any(|l| l.contains("lost the lease") && l.contains("renew deadline"));
                let again = text.contains("campaigning again after stepping down");
                Ok((stepped_down && again).then_some(()))
            }
        },
    )
    .await?;
    wait::until(
        &pods,
        pod,
        Duration::from_secs(90),
        &format!("{pod} ready again as a standby"),
        |p: &Pod| is_ready(p),
    )
    .await?;
    let restarts = operator_restarts(ctx, pod).await?;
    ensure!(
        restarts == restarts_before,
        "{pod}'s operator container restarted ({restarts_before} -> {restarts}): stepping down \
         must not exit the process"
    );
    Ok(())
}

const OPERATOR_CONTAINER: &str = "operator";

/// Restarts of `pod`'s operator container.
async fn operator_restarts(ctx: &TestContext, pod: &str) -> Result<i32> {
    let p = Api::<Pod>::namespaced(ctx.client.clone(), chart::namespace())
        .get(pod)
        .await?;
    (p.status.and_then(|s| s.container_statuses))
        .into_iter()
        .flatten()
        .find(|c| c.name == OPERATOR_CONTAINER)
        .map(|c| c.restart_count)
        .with_context(|| format!("{pod} has no {OPERATOR_CONTAINER} container status"))
}

fn is_ready(p: &Pod) -> bool {
    (p.status.as_ref())
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

async fn server_uids(ctx: &TestContext) -> Result<BTreeSet<(String, String)>> {
    Ok(servers::server_pods(ctx, "js3")
        .await?
        .iter()
        .filter_map(|p| Some((p.metadata.name.clone()?, p.metadata.uid.clone()?)))
        .collect())
}

/// Every recorded kill names a pod that was replaced, and only those pods were replaced.
async fn faults_match_deletions(
    ctx: &TestContext,
    done: &kube::core::DynamicObject,
    before: &BTreeSet<(String, String)>,
) -> Result<()> {
    let faults = s(done, "/status/faults")
        .as_array()
        .cloned()
        .unwrap_or_default();
    ensure!(faults.len() == 2, "two fault records: {faults:?}");
    let recorded: BTreeSet<String> = faults
        .iter()
        .filter(|f| !f["executedTime"].is_null())
        .filter_map(|f| f["pod"].as_str().map(str::to_string))
        .collect();
    let after = server_uids(ctx).await?;
    let replaced: BTreeSet<String> = before
        .iter()
        .filter(|b| !after.contains(b))
        .map(|(name, _)| name.clone())
        .collect();
    ensure!(
        recorded == replaced && recorded.len() == 2,
        "recorded kills {recorded:?}, replaced pods {replaced:?}: {}",
        Value::Array(faults)
    );
    Ok(())
}
