//! Transients are waited out within a bound, then reported with their reason:
//! - a run applied together with its server, the run listed first (GitOps), succeeds: the
//!   operator waits for the server, then for a ready endpoint behind its Service, and the
//!   runners retry a connection the Service cannot take yet;
//! - an `endpoint` URL naming a Service without ready endpoints fails TargetUnreachable at
//!   targetReadyTimeoutSeconds (TargetReady EndpointsNotReady until then), with no runner Job;
//! - a URL the runner cannot connect to (no Service to check) fails TargetUnreachable through
//!   the runner's structured termination message after connectTimeoutSeconds.
use anyhow::{ensure, Context, Result};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, DynamicObject, ListParams, LogParams, PostParams};
use kube::ResourceExt;
use msgbench_crds::conditions::TARGET_READY;
use msgbench_crds::RunFailureReason;
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::runs::{field as s, finished};
use msgbench_e2e::{run, wait, TestContext};
use serde_json::Value;
use std::time::{Duration, Instant};

/// One file as a GitOps tool would apply it: the run first, its server after it.
const RUN_THEN_SERVER: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata:
  name: applied-with-server
spec:
  target:
    serverRef: {kind: PubSubServer, name: late-pss}
  workload:
    protocol: socketio
    publishers: 1
    subscribers: 1
    topics: 1
    topicPrefix: e2e-transient
    payloadBytes: 64
    ratePerPublisher: 50
    durationSeconds: 2
    warmupSeconds: 0
    drainSeconds: 2
  runners:
    count: 1
    resources:
      requests: {cpu: 10m, memory: 32Mi}
      limits: {memory: 128Mi}
  targetReadyTimeoutSeconds: 180
  barrierTimeoutSeconds: 60
  thresholds:
    - {metric: deliveredRatio, op: ge, value: 1.0}
---
apiVersion: msgbench.dev/v1alpha1
kind: PubSubServer
metadata:
  name: late-pss
spec:
  protocol: socketio
  emitMode: parallel
  database: memory
  resources:
    requests: {cpu: 10m, memory: 32Mi}
    limits: {memory: 128Mi}
"#;

#[tokio::test]
async fn a_run_applied_before_its_server_succeeds() {
    run("benchmark-run-transient-apply", applied_together).await;
}

async fn applied_together(ctx: TestContext) -> Result<()> {
    // Applied in file order, back to back, as `kubectl apply -f` does.
    for doc in RUN_THEN_SERVER.split("\n---\n") {
        kinds::create(&ctx.client, &ctx.ns, doc).await?;
    }
    let t0 = Instant::now();
    let seen =
        reasons_until_finished(&ctx, "applied-with-server", Duration::from_secs(240)).await?;
    let r = finished(&ctx, "applied-with-server", Duration::from_secs(10)).await?;
    ensure!(
        s(&r, "/status/phase") == "Succeeded",
        "verdict {} ({})",
        s(&r, "/status/verdict"),
        kinds::conditions_summary(&r)
    );
    let ready = kinds::condition(&r, TARGET_READY).context("TargetReady condition")?;
    ensure!(ready["status"] == "True", "TargetReady: {ready}");
    ensure!(
        s(&r, "/status/result/received").as_u64() == Some(100),
        "received {} of 100",
        s(&r, "/status/result/received")
    );
    // Which transients this run met (timing-dependent, so reported, not asserted).
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let lp = ListParams::default().labels("app.kubernetes.io/instance=applied-with-server");
    let mut retries = 0;
    for p in pods.list(&lp).await?.items {
        let log = pods
            .logs(&p.name_any(), &LogParams::default())
            .await
            .unwrap_or_default();
        retries += log.matches("not reachable yet").count();
    }
    println!(
        "run applied before its server succeeded after {:?}; TargetReady reasons seen: {seen:?}; \
         runner connect retries: {retries}",
        t0.elapsed()
    );
    Ok(())
}

/// Polls the run until it finishes and returns every TargetReady reason it showed on the way.
async fn reasons_until_finished(
    ctx: &TestContext,
    name: &str,
    timeout: Duration,
) -> Result<Vec<String>> {
    let api = Kind::BenchmarkRun.api(&ctx.client, &ctx.ns);
    let seen = std::sync::Mutex::new(Vec::<String>::new());
    wait::poll(
        timeout,
        Duration::from_millis(500),
        &format!("{name} finished"),
        || {
            let (api, seen) = (api.clone(), &seen);
            async move {
                let o = api.get(name).await?;
                if let Some(r) =
                    kinds::condition(&o, TARGET_READY).and_then(|c| c["reason"].as_str())
                {
                    let mut seen = seen.lock().expect("reasons");
                    if seen.last().map(String::as_str) != Some(r) {
                        seen.push(r.to_string());
                    }
                }
                Ok(matches!(
                    s(&o, "/status/phase").as_str(),
                    Some("Succeeded" | "Failed")
                )
                .then_some(()))
            }
        },
    )
    .await?;
    Ok(seen.into_inner().expect("reasons"))
}

/// Selects no pod: the Service exists, its EndpointSlice lists nothing ready.
const EMPTY_SERVICE: &str = r#"
apiVersion: v1
kind: Service
metadata:
  name: nobody-home
spec:
  selector: {app.kubernetes.io/name: nothing-runs-here}
  ports:
    - {name: client, port: 4222, targetPort: 4222}
"#;

fn endpoint_run(name: &str, url: &str, extra: &str) -> String {
    format!(
        r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata:
  name: {name}
spec:
  target:
    endpoint: {{protocol: nats, url: "{url}"}}
  workload: {{protocol: nats, publishers: 1, subscribers: 1, payloadBytes: 64, ratePerPublisher: 10, durationSeconds: 1, drainSeconds: 0}}
  runners:
    count: 1
    resources:
      requests: {{cpu: 10m, memory: 32Mi}}
      limits: {{memory: 128Mi}}
  barrierTimeoutSeconds: 60
{extra}
"#
    )
}

#[tokio::test]
async fn unreachable_targets_fail_with_target_unreachable() {
    run("benchmark-run-transient-unreachable", unreachable).await;
}

async fn unreachable(ctx: TestContext) -> Result<()> {
    let svc: Service = serde_norway::from_str(EMPTY_SERVICE)?;
    Api::<Service>::namespaced(ctx.client.clone(), &ctx.ns)
        .create(&PostParams::default(), &svc)
        .await
        .context("creating the Service without endpoints")?;
    let url = format!("nats://nobody-home.{}.svc:4222", ctx.ns);
    let t0 = Instant::now();
    kinds::create(
        &ctx.client,
        &ctx.ns,
        &endpoint_run("no-endpoints", &url, "  targetReadyTimeoutSeconds: 10"),
    )
    .await?;
    // The runner side: 127.0.0.1 in the runner pod refuses; no Service to check first.
    let t1 = Instant::now();
    kinds::create(
        &ctx.client,
        &ctx.ns,
        &endpoint_run(
            "refused",
            "nats://127.0.0.1:4222",
            "  connectTimeoutSeconds: 3",
        ),
    )
    .await?;

    // While waiting: TargetReady False / EndpointsNotReady naming the Service and port.
    let api = Kind::BenchmarkRun.api(&ctx.client, &ctx.ns);
    let waiting = wait::until(
        &api,
        "no-endpoints",
        Duration::from_secs(30),
        "TargetReady EndpointsNotReady",
        |o| kinds::condition(o, TARGET_READY).is_some_and(|c| c["reason"] == "EndpointsNotReady"),
    )
    .await?;
    let c = kinds::condition(&waiting, TARGET_READY).context("TargetReady")?;
    let msg = c["message"].as_str().unwrap_or_default();
    ensure!(
        msg.contains(&format!("Service {}/nobody-home port 4222", ctx.ns)),
        "TargetReady message: {msg}"
    );

    let r = finished(&ctx, "no-endpoints", Duration::from_secs(60)).await?;
    let took = t0.elapsed();
    ensure!(
        s(&r, "/status/verdict/reason") == RunFailureReason::TargetUnreachable.as_str(),
        "verdict {}",
        s(&r, "/status/verdict")
    );
    let m = s(&r, "/status/verdict/message")
        .as_str()
        .unwrap_or_default();
    ensure!(
        m.contains(&url) && m.contains("within 10s") && m.contains("nobody-home"),
        "verdict message: {m}"
    );
    // targetReadyTimeoutSeconds (10) plus reconcile slack, never before it.
    ensure!(
        took >= Duration::from_secs(10) && took < Duration::from_secs(40),
        "TargetUnreachable after {took:?}"
    );
    target_not_ready_beside_the_verdict(&r)?;
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let lp = ListParams::default().labels("app.kubernetes.io/instance=no-endpoints");
    ensure!(
        jobs.list(&lp).await?.items.is_empty(),
        "no runner Job while the target has no endpoint"
    );

    let r = finished(&ctx, "refused", Duration::from_secs(120)).await?;
    let took = t1.elapsed();
    ensure!(
        s(&r, "/status/verdict/reason") == RunFailureReason::TargetUnreachable.as_str(),
        "verdict {}",
        s(&r, "/status/verdict")
    );
    let m = s(&r, "/status/verdict/message")
        .as_str()
        .unwrap_or_default();
    ensure!(
        m.contains("nats://127.0.0.1:4222") && m.contains("connect attempt(s)"),
        "verdict message: {m}"
    );
    target_not_ready_beside_the_verdict(&r)?;
    ensure!(
        s(&r, "/status/startTime") == &Value::Null,
        "never released: {}",
        s(&r, "/status/startTime")
    );
    // connectTimeoutSeconds (3) after the runner started; pod start and polling on top.
    ensure!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(90),
        "TargetUnreachable after {took:?}"
    );
    println!("no endpoints: {:?}; refused: {took:?}", t0.elapsed());
    Ok(())
}

/// An unreachable target was not ready: TargetReady ends False with the verdict's reason, never
/// True beside a TargetUnreachable verdict.
fn target_not_ready_beside_the_verdict(r: &DynamicObject) -> Result<()> {
    let c = kinds::condition(r, TARGET_READY).context("TargetReady condition")?;
    ensure!(
        c["status"] == "False" && c["reason"] == RunFailureReason::TargetUnreachable.as_str(),
        "TargetReady beside a TargetUnreachable verdict: {c}"
    );
    Ok(())
}
