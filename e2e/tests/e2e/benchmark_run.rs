//! BenchmarkRun end to end on the local cluster: runner pods under Pod Security "restricted"
//! with no API token, released together at the start barrier, results merged from their logs
//! into status with a verdict; a missing target fails without pods; an unattainable threshold
//! fails with ThresholdsNotMet, and `kubectl msgbench gate` exits 0 on the passing run and 1 on
//! that one, with a JUnit file an XML parser reads; deleting the Job keeps the results.
use anyhow::{ensure, Context, Result};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use msgbench_crds::conditions::{COMPLETE, RECONCILING, STALLED, SUCCEEDED};
use msgbench_crds::RunFailureReason;
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::runs::{condition_status, field as s, finished};
use msgbench_e2e::{run, servers, wait, TestContext};
use serde_json::{json, Value};
use std::time::Duration;

/// JetStream R1, async publish with an ack window, push consumer, 2 trials.
const R1: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata:
  name: js-r1
spec:
  target:
    serverRef: {kind: JetStreamCluster, name: js1}
  workload:
    protocol: jetstream
    publishers: 1
    subscribers: 1
    payloadBytes: 128
    ratePerPublisher: 200
    durationSeconds: 3
    drainSeconds: 1
    jetstream: {stream: e2e-r1, replicas: 1, storage: memory, publish: async, maxInFlight: 200, consumer: push}
  runners:
    count: 1
    resources:
      requests: {cpu: 20m, memory: 32Mi}
      limits: {memory: 128Mi}
  trials: 2
  settleSeconds: 1
  barrierTimeoutSeconds: 60
  thresholds:
    - {metric: deliveredRatio, op: ge, value: 0.99}
    - {metric: latencyP99Ms, op: le, value: 0.001, severity: warn}
"#;

const MISSING: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata:
  name: missing-target
spec:
  target:
    serverRef: {kind: JetStreamCluster, name: does-not-exist}
  workload: {protocol: nats, ratePerPublisher: 10, durationSeconds: 1}
  targetReadyTimeoutSeconds: 8
"#;

fn core_nats_two_runners(url: &str) -> String {
    format!(
        r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata:
  name: unattainable
spec:
  target:
    endpoint: {{protocol: nats, url: "{url}"}}
  workload: {{protocol: nats, topicPrefix: other, publishers: 1, subscribers: 1, payloadBytes: 64, ratePerPublisher: 100, durationSeconds: 2, drainSeconds: 1}}
  runners:
    count: 2
    resources:
      requests: {{cpu: 10m, memory: 32Mi}}
      limits: {{memory: 128Mi}}
  barrierTimeoutSeconds: 60
  thresholds:
    - {{metric: receiveRate, op: ge, value: 1000000000}}
"#
    )
}

#[tokio::test]
async fn benchmark_runs_end_with_results_and_clear_verdicts() {
    run("benchmark-run", body).await;
}

async fn body(ctx: TestContext) -> Result<()> {
    // Runner pods must pass Pod Security "restricted".
    Api::<Namespace>::all(ctx.client.clone())
        .patch(
            &ctx.ns,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {
                "pod-security.kubernetes.io/enforce": "restricted"}}})),
        )
        .await?;

    // A missing target is waited for (objects arrive in any order), then Failed/TargetNotFound
    // at targetReadyTimeoutSeconds, and no runner pods ever.
    kinds::create(&ctx.client, &ctx.ns, MISSING).await?;
    let m = finished(&ctx, "missing-target", Duration::from_secs(60)).await?;
    ensure!(
        s(&m, "/status/verdict/message")
            .as_str()
            .is_some_and(|m| m.contains("still missing after 8s")),
        "verdict: {}",
        s(&m, "/status/verdict")
    );
    ensure!(
        s(&m, "/status/verdict/reason") == RunFailureReason::TargetNotFound.as_str(),
        "verdict: {}",
        s(&m, "/status/verdict")
    );
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let sel = "app.kubernetes.io/instance=missing-target";
    ensure!(jobs
        .list(&ListParams::default().labels(sel))
        .await?
        .items
        .is_empty());

    kinds::create(&ctx.client, &ctx.ns, &servers::js_memory("js1", 1, "none")).await?;
    let server = servers::wait_ready(
        &ctx,
        Kind::JetStreamCluster,
        "js1",
        Duration::from_secs(240),
    )
    .await?;
    let url = s(&server, "/status/url")
        .as_str()
        .context("server url")?
        .to_string();

    kinds::create(&ctx.client, &ctx.ns, R1).await?;
    kinds::create(&ctx.client, &ctx.ns, &core_nats_two_runners(&url)).await?;
    let r1 = finished(&ctx, "js-r1", Duration::from_secs(300)).await?;
    ensure!(
        s(&r1, "/status/phase") == "Succeeded",
        "js-r1 should succeed: verdict {} conditions {}",
        s(&r1, "/status/verdict"),
        kinds::conditions_summary(&r1)
    );
    let result = s(&r1, "/status/result");
    let published = result["published"].as_u64().unwrap_or(0);
    // 2 trials x 3 s x 200 msg/s, merged over trials.
    ensure!(
        published == 1200,
        "published {published}, want 1200: {result}"
    );
    ensure!(result["deliveredRatio"].as_f64() >= Some(0.99), "{result}");
    ensure!(
        result["latency"]["count"].as_u64() >= Some(1188),
        "{result}"
    );
    ensure!(
        result["publishAckLatency"]["p99Ms"].as_f64() > Some(0.0),
        "{result}"
    );
    ensure!(
        result["histogram"].as_str().is_some_and(|h| h.len() > 20),
        "merged histogram kept"
    );
    ensure!(s(&r1, "/status/trials").as_array().map(Vec::len) == Some(2));
    let stats = s(&r1, "/status/statistics/receiveRate");
    ensure!(
        stats["ci95Low"].as_f64() <= stats["mean"].as_f64(),
        "{stats}"
    );
    ensure!(s(&r1, "/status/headline/p99")
        .as_str()
        .is_some_and(|p| p.ends_with('s')));
    ensure!(
        s(&r1, "/status/environment/sharedNodes") == true,
        "one node: shared"
    );
    let th = s(&r1, "/status/thresholds");
    ensure!(
        th[0]["passed"] == true && th[1]["passed"] == false,
        "thresholds {th}"
    );
    for (type_, want) in [
        (COMPLETE, "True"),
        (SUCCEEDED, "True"),
        (STALLED, "False"),
        (RECONCILING, "False"),
    ] {
        ensure!(
            condition_status(&r1, type_) == want,
            "{type_} should be {want}: {}",
            kinds::conditions_summary(&r1)
        );
    }

    // Runner pods had no API token and ran as restricted pods.
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let runners = pods
        .list(
            &ListParams::default()
                .labels("app.kubernetes.io/instance=js-r1,app.kubernetes.io/component=runner"),
        )
        .await?
        .items;
    ensure!(
        runners.len() == 1,
        "one runner pod, found {}",
        runners.len()
    );
    let spec = runners[0].spec.clone().unwrap_or_default();
    ensure!(spec.automount_service_account_token == Some(false));
    ensure!(spec.containers[0]
        .volume_mounts
        .iter()
        .flatten()
        .all(|m| !m.mount_path.contains("serviceaccount")));

    // An unattainable threshold over two runners merged from an endpoint target.
    let u = finished(&ctx, "unattainable", Duration::from_secs(300)).await?;
    ensure!(
        s(&u, "/status/verdict/reason") == RunFailureReason::ThresholdsNotMet.as_str(),
        "verdict {}",
        s(&u, "/status/verdict")
    );
    let ur = s(&u, "/status/result");
    // Two runners x 2 s x 100 msg/s; each runner's subscriber also gets the other's messages:
    // counts are exact sums over runners.
    ensure!(ur["published"].as_u64() == Some(400), "{ur}");
    ensure!(ur["expected"].as_u64() == Some(800), "{ur}");
    ensure!(ur["deliveredRatio"].as_f64() >= Some(0.99), "{ur}");
    ensure!(
        s(&u, "/status/environment/runnerPods")
            .as_array()
            .map(Vec::len)
            == Some(2)
    );

    gate_reads_both(&ctx)?;

    // Deleting the Job keeps the results.
    let job = s(&r1, "/status/jobName")
        .as_str()
        .context("jobName")?
        .to_string();
    jobs.delete(&job, &DeleteParams::background()).await?;
    wait::until_deleted(&jobs, &job, Duration::from_secs(60)).await?;
    let api = Kind::BenchmarkRun.api(&ctx.client, &ctx.ns);
    let after = api.get("js-r1").await?;
    ensure!(s(&after, "/status/phase") == "Succeeded");
    ensure!(s(&after, "/status/result/published").as_u64() == Some(1200));

    // GitOps: a changed spec is a fresh run (no silent re-run of an unchanged one); the previous
    // outcome moves to history, and ttlSecondsAfterFinished: 0 removes the new runner Job.
    api.patch(
        "js-r1",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"trials": 1, "ttlSecondsAfterFinished": 0}})),
    )
    .await?;
    // Complete=True for generation 2: generation 1's Complete does not count.
    let g2 = finished(&ctx, "js-r1", Duration::from_secs(300)).await?;
    ensure!(
        s(&g2, "/status/observedGeneration") == 2,
        "observedGeneration {}",
        s(&g2, "/status/observedGeneration")
    );
    let history = s(&g2, "/status/history");
    ensure!(
        history.as_array().map(Vec::len) == Some(1) && history[0]["generation"] == 1,
        "history {history}"
    );
    ensure!(
        history[0]["phase"] == "Succeeded" && history[0]["verdict"]["reason"] == "Succeeded",
        "history {history}"
    );
    ensure!(s(&g2, "/status/trials").as_array().map(Vec::len) == Some(1));
    let job2 = s(&g2, "/status/jobName")
        .as_str()
        .context("jobName")?
        .to_string();
    ensure!(job2 != job, "a fresh Job per generation");
    wait::until_deleted(&jobs, &job2, Duration::from_secs(60)).await?;
    Ok(())
}

fn replicated(name: &str, replicas: u32, baseline: Option<&str>) -> String {
    let base = baseline.map_or(String::new(), |b| format!("  baselineRef: {{name: {b}}}\n"));
    format!(
        r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata:
  name: {name}
spec:
  target:
    serverRef: {{kind: JetStreamCluster, name: js3}}
  workload:
    protocol: jetstream
    topicPrefix: {name}
    payloadBytes: 128
    ratePerPublisher: 300
    durationSeconds: 2
    drainSeconds: 1
    jetstream: {{stream: {name}, replicas: {replicas}, storage: memory, publish: async, maxInFlight: 200, consumer: push}}
  runners:
    resources:
      requests: {{cpu: 20m, memory: 32Mi}}
      limits: {{memory: 128Mi}}
  trials: 3
  settleSeconds: 1
{base}"#
    )
}

/// R2 against R1 on a 3-server cluster: the R2 run waits for its baseline, then reports ratio,
/// difference and significance per figure. A runner pod killed mid-run fails its run with a reason.
#[tokio::test]
async fn r2_is_compared_with_r1_and_a_killed_runner_fails_the_run() {
    run("benchmark-r1-r2", r1_r2).await;
}

async fn r1_r2(ctx: TestContext) -> Result<()> {
    kinds::create(&ctx.client, &ctx.ns, &servers::js_memory("js3", 3, "none")).await?;
    servers::wait_ready(
        &ctx,
        Kind::JetStreamCluster,
        "js3",
        Duration::from_secs(240),
    )
    .await?;
    kinds::create(&ctx.client, &ctx.ns, &replicated("r1", 1, None)).await?;
    kinds::create(&ctx.client, &ctx.ns, &replicated("r2", 2, Some("r1"))).await?;
    let r1 = finished(&ctx, "r1", Duration::from_secs(300)).await?;
    ensure!(
        s(&r1, "/status/phase") == "Succeeded",
        "r1: {}",
        s(&r1, "/status/verdict")
    );
    let r2 = finished(&ctx, "r2", Duration::from_secs(300)).await?;
    ensure!(
        s(&r2, "/status/phase") == "Succeeded",
        "r2: {}",
        s(&r2, "/status/verdict")
    );
    // r2 waited for r1: it started after r1 completed (never two loads on one target).
    let (r1_done, r2_start) = (
        s(&r1, "/status/completionTime")
            .as_str()
            .unwrap_or_default()
            .to_string(),
        s(&r2, "/status/startTime")
            .as_str()
            .unwrap_or_default()
            .to_string(),
    );
    ensure!(
        r2_start >= r1_done,
        "r2 started {r2_start} before r1 finished {r1_done}"
    );
    let cmp = s(&r2, "/status/comparison");
    ensure!(
        cmp["baseline"] == "r1" && cmp["reason"].is_null(),
        "comparison {cmp}"
    );
    let figures = cmp["figures"].as_array().context("figures")?;
    let rate = figures
        .iter()
        .find(|f| f["figure"] == "receiveRate")
        .context("receiveRate row")?;
    ensure!(rate["ratio"].as_f64().is_some_and(|r| r > 0.0), "{rate}");
    ensure!(rate["significant"].is_boolean(), "{rate}");
    eprintln!("r2 vs r1: {}", serde_json::to_string(&cmp)?);

    // A runner killed mid-run: Failed with a reason, well within the deadline.
    let long = replicated("killed", 1, None).replace("durationSeconds: 2", "durationSeconds: 60");
    kinds::create(&ctx.client, &ctx.ns, &long).await?;
    let api = Kind::BenchmarkRun.api(&ctx.client, &ctx.ns);
    wait::until(
        &api,
        "killed",
        Duration::from_secs(120),
        "killed Running",
        |o| o.data.pointer("/status/phase").and_then(Value::as_str) == Some("Running"),
    )
    .await?;
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let runner = pods
        .list(&ListParams::default().labels("app.kubernetes.io/instance=killed"))
        .await?
        .items
        .into_iter()
        .next()
        .context("runner pod")?;
    let name = runner.metadata.name.clone().unwrap_or_default();
    pods.delete(&name, &DeleteParams::default()).await?;
    let k = finished(&ctx, "killed", Duration::from_secs(60)).await?;
    ensure!(
        s(&k, "/status/verdict/reason") == RunFailureReason::RunnerFailed.as_str(),
        "killed: {}",
        s(&k, "/status/verdict")
    );
    Ok(())
}

/// The operator is down while the runners finish: a runner holds its results for
/// `resultsHoldSeconds`, then exits with them framed in its log; once back, the operator
/// collects them from there (state lives in status, so nothing is re-run).
#[tokio::test]
async fn a_run_survives_an_operator_outage() {
    run("benchmark-operator-down", operator_down).await;
}

async fn operator_down(ctx: TestContext) -> Result<()> {
    kinds::create(&ctx.client, &ctx.ns, &servers::js_memory("js1", 1, "none")).await?;
    servers::wait_ready(
        &ctx,
        Kind::JetStreamCluster,
        "js1",
        Duration::from_secs(240),
    )
    .await?;
    let manifest = R1
        .replace("durationSeconds: 3", "durationSeconds: 8")
        .replace("trials: 2", "trials: 1")
        .replace(
            "    count: 1\n",
            "    count: 1\n    resultsHoldSeconds: 10\n",
        );
    ensure!(manifest.contains("resultsHoldSeconds: 10"), "manifest edit");
    kinds::create(&ctx.client, &ctx.ns, &manifest).await?;
    let api = Kind::BenchmarkRun.api(&ctx.client, &ctx.ns);
    wait::until(
        &api,
        "js-r1",
        Duration::from_secs(120),
        "js-r1 Running",
        |o| o.data.pointer("/status/phase").and_then(Value::as_str) == Some("Running"),
    )
    .await?;
    let scale = msgbench_e2e::harness::scale_operator;
    scale(&ctx.client, 0, Duration::from_secs(90)).await?;
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let outcome = async {
        // The runner finishes while nobody watches.
        wait::poll(
            Duration::from_secs(120),
            Duration::from_secs(2),
            "runner pod Succeeded while the operator is down",
            || {
                let pods = pods.clone();
                async move {
                    let l = pods
                        .list(&ListParams::default().labels("app.kubernetes.io/instance=js-r1"))
                        .await?;
                    let done = l.items.iter().any(|p| {
                        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded")
                    });
                    anyhow::Ok(done.then_some(()))
                }
            },
        )
        .await?;
        scale(&ctx.client, 1, Duration::from_secs(120)).await?;
        let done = finished(&ctx, "js-r1", Duration::from_secs(120)).await?;
        ensure!(
            s(&done, "/status/phase") == "Succeeded",
            "after the outage: {}",
            s(&done, "/status/verdict")
        );
        ensure!(s(&done, "/status/result/published").as_u64() == Some(1600));
        // The results came through the log: the runner never heard from the operator.
        let runner = pods
            .list(&ListParams::default().labels("app.kubernetes.io/instance=js-r1"))
            .await?
            .items
            .into_iter()
            .find_map(|p| p.metadata.name)
            .context("runner pod")?;
        let log = pods.logs(&runner, &Default::default()).await?;
        ensure!(
            log.contains("no confirmation from the operator within the hold"),
            "runner log: {}",
            wait::truncate(&log, 1500)
        );
        anyhow::Ok(())
    }
    .await;
    if outcome.is_err() {
        let _ = scale(&ctx.client, 1, Duration::from_secs(120)).await;
    }
    outcome
}

/// `kubectl msgbench gate` as a pipeline runs it, on the two finished runs: 0 for the passing
/// one, 1 for the unattainable threshold, and JUnit XML that names the failed threshold.
fn gate_reads_both(ctx: &TestContext) -> Result<()> {
    msgbench_e2e::registry::build_plugin()?;
    let dir = std::env::temp_dir().join(format!("{}-gate", ctx.ns));
    std::fs::create_dir_all(&dir)?;
    let gate = |run: &str| {
        let junit = dir.join(format!("{run}.xml"));
        let out = std::process::Command::new(msgbench_e2e::registry::plugin_binary())
            .args(["gate", run, "-n", &ctx.ns, "--timeout", "30s", "--junit"])
            .arg(&junit)
            .arg("--summary")
            .arg(dir.join(format!("{run}.md")))
            .output()?;
        let xml = std::fs::read_to_string(&junit).unwrap_or_default();
        anyhow::Ok((out, xml))
    };
    let (passed, passed_xml) = gate("js-r1")?;
    let (failed, failed_xml) = gate("unattainable")?;
    let _ = std::fs::remove_dir_all(&dir);
    let said = |o: &std::process::Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    ensure!(
        passed.status.code() == Some(0),
        "gate js-r1: {}",
        said(&passed)
    );
    ensure!(
        failed.status.code() == Some(1)
            && said(&failed).contains(RunFailureReason::ThresholdsNotMet.as_str()),
        "gate unattainable: {}",
        said(&failed)
    );
    let failures = |xml: &str| -> Result<usize> {
        let doc = roxmltree::Document::parse(xml).context("JUnit XML")?;
        Ok(doc
            .descendants()
            .filter(|n| n.has_tag_name("failure"))
            .count())
    };
    ensure!(
        failures(&passed_xml)? == 0,
        "passing run's JUnit: {passed_xml}"
    );
    ensure!(
        failures(&failed_xml)? >= 1,
        "failing run's JUnit: {failed_xml}"
    );
    Ok(())
}
