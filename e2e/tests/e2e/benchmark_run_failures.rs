//! BenchmarkRuns the operator must end itself, each with its reason within a bound and no
//! runner pods left behind: a target that never becomes Ready (TargetNotReady, no Job ever),
//! runners that never reach the start barrier (RunnersUnschedulable: their pods can never be
//! scheduled), and a workload longer than activeDeadlineSeconds (DeadlineExceeded after the
//! runners were released). The three run at once; each waits on its own condition.
use anyhow::{ensure, Context, Result};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams};
use msgbench_crds::conditions::{COMPLETE, RECONCILING, STALLED, SUCCEEDED};
use msgbench_crds::RunFailureReason;
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::runs::{condition_status, field as s, finished};
use msgbench_e2e::{run, servers, wait, TestContext};
use std::time::{Duration, Instant};

/// Asks for more CPU than any node has: its pod stays Pending, so it never becomes Ready.
const NEVER_READY_SERVER: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: JetStreamCluster
metadata:
  name: never-ready
spec:
  replicas: 1
  jetstream:
    storage:
      type: memory
    maxMemoryStore: 64Mi
  resources:
    requests: {cpu: "64", memory: 64Mi}
    limits: {memory: 256Mi}
  placement:
    podAntiAffinity: none
"#;

const NOT_READY_RUN: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata:
  name: target-not-ready
spec:
  target:
    serverRef: {kind: JetStreamCluster, name: never-ready}
  workload: {protocol: nats, ratePerPublisher: 10, durationSeconds: 1}
  targetReadyTimeoutSeconds: 10
"#;

/// Two runners that no node can hold: they never reach the barrier.
const BARRIER_RUN: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata:
  name: barrier-timeout
spec:
  target:
    endpoint: {protocol: nats, url: "nats://127.0.0.1:4222"}
  workload: {protocol: nats, ratePerPublisher: 10, durationSeconds: 1}
  runners:
    count: 2
    resources:
      requests: {cpu: "64", memory: 32Mi}
      limits: {memory: 128Mi}
  barrierTimeoutSeconds: 5
"#;

/// A 10-minute workload under a 30 s deadline.
const DEADLINE_RUN: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata:
  name: deadline-exceeded
spec:
  target:
    serverRef: {kind: JetStreamCluster, name: deadline-js}
  workload: {protocol: nats, topicPrefix: deadline, publishers: 1, subscribers: 1, payloadBytes: 64, ratePerPublisher: 20, durationSeconds: 600, drainSeconds: 0}
  runners:
    count: 1
    resources:
      requests: {cpu: 10m, memory: 32Mi}
      limits: {memory: 128Mi}
  barrierTimeoutSeconds: 60
  activeDeadlineSeconds: 30
"#;

#[tokio::test]
async fn runs_the_operator_ends_fail_with_their_reason_and_leave_no_runners() {
    run("benchmark-run-failures", body).await;
}

/// Waits for the end and checks the terminal conditions of a failed run: Complete=True (the
/// CI gate's wait ends), Succeeded=False and Stalled=True (kstatus: Failed), Reconciling=False.
async fn failed(ctx: &TestContext, name: &str, timeout: Duration) -> Result<DynamicObject> {
    let o = finished(ctx, name, timeout).await?;
    ensure!(
        s(&o, "/status/phase") == "Failed",
        "{name} should fail: verdict {}",
        s(&o, "/status/verdict")
    );
    let reason = s(&o, "/status/verdict/reason").as_str().unwrap_or_default();
    for (type_, want) in [
        (COMPLETE, "True"),
        (SUCCEEDED, "False"),
        (STALLED, "True"),
        (RECONCILING, "False"),
    ] {
        ensure!(
            condition_status(&o, type_) == want,
            "{name}: {type_} should be {want}: {}",
            kinds::conditions_summary(&o)
        );
    }
    ensure!(
        kinds::condition(&o, COMPLETE).and_then(|c| c["reason"].as_str()) == Some(reason),
        "{name}: Complete's reason should be the verdict's ({reason}): {}",
        kinds::conditions_summary(&o)
    );
    Ok(o)
}

fn runner_selector(run: &str) -> String {
    format!("app.kubernetes.io/instance={run},app.kubernetes.io/component=runner")
}

/// Runner pods of `run` that are not finished: none may remain.
async fn wait_no_active_runners(ctx: &TestContext, run: &str, timeout: Duration) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let lp = ListParams::default().labels(&runner_selector(run));
    wait::poll(
        timeout,
        Duration::from_secs(1),
        &format!("runner pods of {run} gone"),
        || {
            let (pods, lp) = (pods.clone(), lp.clone());
            async move {
                let left: Vec<String> = pods
                    .list(&lp)
                    .await?
                    .items
                    .into_iter()
                    .filter(|p| {
                        let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
                        !matches!(phase, Some("Succeeded" | "Failed"))
                    })
                    .filter_map(|p| p.metadata.name)
                    .collect();
                if left.is_empty() {
                    Ok(Some(()))
                } else {
                    anyhow::bail!("still there: {left:?}")
                }
            }
        },
    )
    .await
}

async fn body(ctx: TestContext) -> Result<()> {
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    kinds::create(&ctx.client, &ctx.ns, NEVER_READY_SERVER).await?;
    kinds::create(
        &ctx.client,
        &ctx.ns,
        &servers::js_memory("deadline-js", 1, "none"),
    )
    .await?;
    let t0 = Instant::now();
    kinds::create(&ctx.client, &ctx.ns, NOT_READY_RUN).await?;
    kinds::create(&ctx.client, &ctx.ns, BARRIER_RUN).await?;

    // TargetNotReady at targetReadyTimeoutSeconds (10 s) plus reconcile slack; never a Job.
    let nr = failed(&ctx, "target-not-ready", Duration::from_secs(60)).await?;
    ensure!(
        s(&nr, "/status/verdict/reason") == RunFailureReason::TargetNotReady.as_str(),
        "verdict {}",
        s(&nr, "/status/verdict")
    );
    ensure!(
        s(&nr, "/status/verdict/message")
            .as_str()
            .is_some_and(|m| m.contains("not Ready after 10s")),
        "verdict {}",
        s(&nr, "/status/verdict")
    );
    let lp = ListParams::default().labels("app.kubernetes.io/instance=target-not-ready");
    ensure!(
        jobs.list(&lp).await?.items.is_empty(),
        "no runner Job for a target that never became Ready"
    );

    // RunnersUnschedulable at the barrier's bound: barrierTimeoutSeconds (5) + the operator's
    // 30 s pod-start grace, in the scheduler's words; the pending runners are removed (Job
    // suspended), the Job stays for debugging.
    let bt = failed(&ctx, "barrier-timeout", Duration::from_secs(120)).await?;
    ensure!(
        s(&bt, "/status/verdict/reason") == RunFailureReason::RunnersUnschedulable.as_str(),
        "verdict {}",
        s(&bt, "/status/verdict")
    );
    ensure!(
        s(&bt, "/status/verdict/message").as_str().is_some_and(|m| {
            m.starts_with("0 of 2 runners")
                && m.contains("could not be scheduled")
                && m.contains("Insufficient cpu")
        }),
        "verdict {}",
        s(&bt, "/status/verdict")
    );
    ensure!(s(&bt, "/status/startTime").is_null(), "never released");
    wait_no_active_runners(&ctx, "barrier-timeout", Duration::from_secs(60)).await?;
    let job = s(&bt, "/status/jobName").as_str().context("jobName")?;
    let job = jobs.get(job).await.context("the failed run's Job stays")?;
    ensure!(
        job.spec.as_ref().and_then(|s| s.suspend) == Some(true),
        "Job suspended"
    );
    println!("RunnersUnschedulable reached after {:?}", t0.elapsed());

    // DeadlineExceeded after the runners were released and loaded the server.
    servers::wait_ready(
        &ctx,
        Kind::JetStreamCluster,
        "deadline-js",
        Duration::from_secs(240),
    )
    .await?;
    let t1 = Instant::now();
    kinds::create(&ctx.client, &ctx.ns, DEADLINE_RUN).await?;
    let de = failed(&ctx, "deadline-exceeded", Duration::from_secs(90)).await?;
    let took = t1.elapsed();
    ensure!(
        s(&de, "/status/verdict/reason") == RunFailureReason::DeadlineExceeded.as_str(),
        "verdict {}",
        s(&de, "/status/verdict")
    );
    ensure!(
        !s(&de, "/status/startTime").is_null(),
        "the runners were released before the deadline: {}",
        s(&de, "/status")
    );
    ensure!(
        s(&de, "/status/progress/published").as_u64() > Some(0),
        "load ran: progress {}",
        s(&de, "/status/progress")
    );
    // 30 s deadline, polled every 2-3 s: well before the 600 s workload would end.
    ensure!(
        took < Duration::from_secs(60),
        "DeadlineExceeded after {took:?}"
    );
    wait_no_active_runners(&ctx, "deadline-exceeded", Duration::from_secs(60)).await?;
    println!("DeadlineExceeded reached after {took:?}");
    Ok(())
}
