//! Results reach the operator intact, and only the operator drives runners.
//! - With `resultsHoldSeconds: 0` the log is the only path: records far above 16 KiB (8000
//!   topics make long per-topic vectors) over 6 trials, while the runner floods stderr at
//!   `logLevel: trace`, all arrive intact: the merged counts equal the runner's own account.
//! - A pod in another namespace cannot release, read or confirm a runner: 401 without a
//!   credential, 403 with one signed by another key for this very run (or no connection where
//!   NetworkPolicy is enforced); the run is unaffected and its results come over the control
//!   endpoint. Runner pods hold only the operator's public key (the one in its control-key
//!   Secret) and their run's uid; the run's namespace holds no Secret at all.
use anyhow::{ensure, Context, Result};
use k8s_openapi::api::core::v1::{Namespace, Pod, Secret};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, DeleteParams, ListParams, LogParams, PostParams};
use kube::ResourceExt;
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::runs::{field as s, finished};
use msgbench_e2e::{run, servers, toolbox, wait, TestContext};
use runner_api::control_auth::{self, ControlSigner};
use std::time::Duration;

/// What an outsider tries on a runner's control port.
const CONTROL_REQUESTS: [&str; 4] = [
    "POST /start",
    "GET /results",
    "GET /progress",
    "POST /results/ack",
];

const SERVER: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: JetStreamCluster
metadata:
  name: nats1
spec:
  replicas: 1
  resources:
    requests: {cpu: 10m, memory: 64Mi}
    limits: {memory: 256Mi}
  placement:
    podAntiAffinity: none
"#;

const FLOODED: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata:
  name: flooded
spec:
  target:
    serverRef: {kind: JetStreamCluster, name: nats1}
  workload:
    protocol: nats
    topics: 8000
    publishers: 1
    subscribers: 1
    payloadBytes: 64
    ratePerPublisher: 500
    durationSeconds: 2
    drainSeconds: 1
  runners:
    count: 1
    resultsHoldSeconds: 0
    logLevel: trace
    resources:
      requests: {cpu: 10m, memory: 32Mi}
      limits: {memory: 256Mi}
  trials: 6
  settleSeconds: 0
  barrierTimeoutSeconds: 60
"#;

const GUARDED: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata:
  name: guarded
spec:
  target:
    serverRef: {kind: JetStreamCluster, name: nats1}
  workload:
    protocol: nats
    publishers: 1
    subscribers: 1
    payloadBytes: 64
    ratePerPublisher: 200
    durationSeconds: 15
    drainSeconds: 1
  runners:
    count: 1
    resources:
      requests: {cpu: 10m, memory: 32Mi}
      limits: {memory: 128Mi}
  barrierTimeoutSeconds: 60
"#;

#[tokio::test]
async fn records_far_above_16_kib_arrive_intact_through_a_flooded_log() {
    run("runner-results-log", flooded).await;
}

#[tokio::test]
async fn only_the_operator_can_drive_a_runner() {
    run("runner-control-auth", guarded).await;
}

/// Sums of `published=`/`received=` over the runner's own "trial finished" lines.
fn runner_account(log: &str) -> (u64, u64, usize) {
    let field = |line: &str, key: &str| -> u64 {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("trial finished"))
        .collect();
    let published = lines.iter().map(|l| field(l, "published=")).sum();
    let received = lines.iter().map(|l| field(l, "received=")).sum();
    (published, received, lines.len())
}

async fn runner_pods(ctx: &TestContext, run: &str) -> Result<Vec<Pod>> {
    let sel = format!("app.kubernetes.io/name=benchmarkrun,app.kubernetes.io/instance={run}");
    Ok(Api::<Pod>::namespaced(ctx.client.clone(), &ctx.ns)
        .list(&ListParams::default().labels(&sel))
        .await?
        .items)
}

async fn flooded(ctx: TestContext) -> Result<()> {
    kinds::create(&ctx.client, &ctx.ns, SERVER).await?;
    servers::wait_ready(
        &ctx,
        Kind::JetStreamCluster,
        "nats1",
        Duration::from_secs(180),
    )
    .await?;
    kinds::create(&ctx.client, &ctx.ns, FLOODED).await?;
    let done = finished(&ctx, "flooded", Duration::from_secs(240)).await?;
    ensure!(
        s(&done, "/status/phase") == "Succeeded",
        "run did not succeed: {}",
        s(&done, "/status/verdict")
    );
    let pods = runner_pods(&ctx, "flooded").await?;
    let pod = pods.first().context("no runner pod kept")?;
    let name = pod.metadata.name.clone().unwrap_or_default();
    let log = Api::<Pod>::namespaced(ctx.client.clone(), &ctx.ns)
        .logs(&name, &LogParams::default())
        .await?;
    let frames = log
        .lines()
        .filter(|l| l.contains("MSGBENCH-FRAME v2"))
        .count();
    let batches = log.lines().filter(|l| l.contains("batch sent")).count();
    let longest = log.lines().map(str::len).max().unwrap_or(0);
    ensure!(
        frames >= 6 * 3,
        "expected records of several frames each (over 16 KiB), saw {frames} frames"
    );
    ensure!(
        batches > 1000,
        "the runner's stderr should be flooded at trace level: {batches} batch lines"
    );
    ensure!(longest < 16 * 1024, "a log line of {longest} bytes");
    let (published, received, trials) = runner_account(&log);
    ensure!(trials == 6, "runner reported {trials} finished trials");
    let merged_pub = s(&done, "/status/result/published").as_u64().unwrap_or(0);
    let merged_recv = s(&done, "/status/result/received").as_u64().unwrap_or(0);
    ensure!(
        (merged_pub, merged_recv) == (published, received),
        "operator merged published/received {merged_pub}/{merged_recv}, runner's own {published}/{received}"
    );
    ensure!(
        published >= 6 * 900,
        "only {published} published over 6 trials"
    );
    ensure!(
        s(&done, "/status/trials").as_array().map_or(0, Vec::len) == 6,
        "6 trials in status"
    );
    Ok(())
}

async fn guarded(ctx: TestContext) -> Result<()> {
    kinds::create(&ctx.client, &ctx.ns, SERVER).await?;
    servers::wait_ready(
        &ctx,
        Kind::JetStreamCluster,
        "nats1",
        Duration::from_secs(180),
    )
    .await?;
    kinds::create(&ctx.client, &ctx.ns, GUARDED).await?;
    let api = Kind::BenchmarkRun.api(&ctx.client, &ctx.ns);
    wait::until(
        &api,
        "guarded",
        Duration::from_secs(120),
        "run Running",
        |o: &kube::api::DynamicObject| s(o, "/status/phase") == "Running",
    )
    .await?;
    let pod = runner_pods(&ctx, "guarded")
        .await?
        .into_iter()
        .next()
        .context("no runner pod")?;
    let ip = servers::pod_ip(&pod)?;

    // The run's NetworkPolicy admits only the operator to the control port.
    let nps = Api::<NetworkPolicy>::namespaced(ctx.client.clone(), &ctx.ns)
        .list(&ListParams::default().labels("app.kubernetes.io/instance=guarded"))
        .await?
        .items;
    ensure!(
        nps.len() == 1,
        "one NetworkPolicy per run generation, got {}",
        nps.len()
    );
    let np = serde_json::to_value(&nps[0])?;
    ensure!(
        np["spec"]["ingress"][0]["from"][0]["namespaceSelector"]["matchLabels"]
            ["kubernetes.io/metadata.name"]
            == msgbench_e2e::chart::namespace(),
        "policy peer: {np}"
    );

    // An outsider tries to release trial 2, read the results and confirm them.
    let outsider = format!("{}-outsider", ctx.ns);
    let nsapi = Api::<Namespace>::all(ctx.client.clone());
    let ns: Namespace = serde_json::from_value(serde_json::json!({
        "metadata": {"name": outsider, "labels": {(msgbench_e2e::harness::e2e_label()): "true"}}
    }))?;
    nsapi.create(&PostParams::default(), &ns).await?;
    // Credentials for this very run and each request, signed by a key that is not the
    // operator's.
    let run_uid = api.get("guarded").await?.uid().context("run uid")?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    let forger = ControlSigner::from_seed(rand::random());
    // `try AUTH 'METHOD PATH' 'HEADER'`: one request, its status line prefixed with AUTH and
    // the request.
    let mut script = format!(
        r#"try() {{
  body='{{"startAtUnixMs":1,"trial":2,"records":1}}'
  printf "%s HTTP/1.1\r\nHost: r\r\n$3Content-Type: application/json\r\nContent-Length: %s\r\nConnection: close\r\n\r\n%s" "$2" "${{#body}}" "$body" \
    | timeout 5 nc {ip} 9090 | head -n 1 | sed "s|^|$1 $2 -> |"
  echo "$1 $2 done"
}}
"#
    );
    for auth in ["none", "forged"] {
        for req in CONTROL_REQUESTS {
            let (method, path) = req.split_once(' ').context("method and path")?;
            let claim = control_auth::Claim {
                scope: &run_uid,
                method,
                path,
            };
            let header = match auth {
                "forged" => format!(
                    "Authorization: Bearer {}\\r\\n",
                    forger.credential(&claim, now, rand::random())
                ),
                _ => String::new(),
            };
            script.push_str(&format!("try {auth} '{req}' '{header}'\n"));
        }
    }
    let out = toolbox::run_script(
        &ctx.client,
        &outsider,
        "outsider",
        &script,
        Duration::from_secs(90),
    )
    .await;
    let _ = nsapi.delete(&outsider, &DeleteParams::background()).await;
    let out = out?;
    for (auth, refusal) in [("none", "401"), ("forged", "403")] {
        for req in CONTROL_REQUESTS {
            let what = format!("{auth} {req}");
            ensure!(
                out.logs.contains(&format!("{what} done")),
                "script did not try {what}: {}",
                out.logs
            );
            let answered_ok = out
                .logs
                .lines()
                .any(|l| l.starts_with(&format!("{what} -> HTTP/1.1 2")));
            ensure!(!answered_ok, "an outsider was served {what}: {}", out.logs);
            let refused = out
                .logs
                .lines()
                .any(|l| l.starts_with(&format!("{what} -> HTTP/1.1 {refusal}")));
            let no_line = !out.logs.contains(&format!("{what} -> "));
            ensure!(
                refused || no_line,
                "{what}: neither {refusal} nor blocked: {}",
                out.logs
            );
        }
    }

    // The run is unaffected and finishes with all its results.
    let done = finished(&ctx, "guarded", Duration::from_secs(120)).await?;
    ensure!(
        s(&done, "/status/phase") == "Succeeded",
        "run did not succeed: {}",
        s(&done, "/status/verdict")
    );
    ensure!(s(&done, "/status/result/received").as_u64().unwrap_or(0) >= 2500);

    // The runner pod has the operator's public key and the run's uid; no Secret exists here.
    let key = Api::<Secret>::namespaced(ctx.client.clone(), msgbench_e2e::chart::namespace())
        .get("msgbench-operator-control-key")
        .await?;
    let seed: [u8; 32] = key
        .data
        .and_then(|d| d.get(control_auth::SEED_KEY).map(|b| b.0.clone()))
        .and_then(|b| b.try_into().ok())
        .context("the control key Secret holds no 32-byte seed")?;
    let public = ControlSigner::from_seed(seed).public_key();
    // Current key first; a previous one follows only after a rotation.
    let pod_keys =
        |v: Option<String>| v.map(|k| k.split(',').next().unwrap_or_default().to_string());
    let env: Vec<(String, Option<String>)> = pod
        .spec
        .as_ref()
        .map(|s| s.containers[0].env.clone().unwrap_or_default())
        .unwrap_or_default()
        .into_iter()
        .map(|e| (e.name, e.value))
        .collect();
    let var = |n: &str| {
        env.iter()
            .find(|(k, _)| k == n)
            .and_then(|(_, v)| v.clone())
    };
    ensure!(
        pod_keys(var(control_auth::PUBLIC_KEY_ENV)) == Some(public),
        "runner pod's public key is not the operator's: {env:?}"
    );
    ensure!(
        var(control_auth::RUN_UID_ENV) == Some(run_uid.clone()),
        "runner pod's run uid: {env:?}"
    );
    let secrets = Api::<Secret>::namespaced(ctx.client.clone(), &ctx.ns)
        .list(&ListParams::default())
        .await?;
    let names: Vec<String> = secrets.items.iter().map(|s| s.name_any()).collect();
    ensure!(
        names.is_empty(),
        "Secrets in the run's namespace: {names:?}"
    );
    // The runner exits once the operator confirmed the results (well before its 120 s hold).
    let pods = Api::<Pod>::namespaced(ctx.client.clone(), &ctx.ns);
    let runner = pod.metadata.name.clone().unwrap_or_default();
    wait::until(
        &pods,
        &runner,
        Duration::from_secs(60),
        "runner exited after the ack",
        |p: &Pod| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded"),
    )
    .await?;
    let log = pods.logs(&runner, &LogParams::default()).await?;
    ensure!(
        log.contains("the operator has every result"),
        "runner did not see the ack: {}",
        wait::truncate(&log, 2000)
    );
    Ok(())
}
