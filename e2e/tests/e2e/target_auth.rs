//! A JetStreamCluster that requires a token (`spec.auth` from a Secret) is benchmarked by
//! reference: its servers take the token from the Secret, the runner pods read it from the same
//! Secret through `secretKeyRef`, and the run ends Succeeded with every message delivered. The
//! token never appears where people and tools look: not in any ConfigMap of the namespace, the
//! BenchmarkRun, the namespace's Events, the runner pods' logs or the operator's log.
use anyhow::{ensure, Context, Result};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use msgbench_crds::conditions::TARGET_READY;
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::runs::{field as s, finished};
use msgbench_e2e::secrets::never_shown;
use msgbench_e2e::{run, servers, TestContext};
use serde_json::json;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const JS_AUTH: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: JetStreamCluster
metadata:
  name: js-auth
spec:
  replicas: 1
  auth: {secretName: js-auth-token, mode: token}
  jetstream:
    storage:
      type: memory
    maxMemoryStore: 32Mi
  resources:
    requests: {cpu: 10m, memory: 32Mi}
    limits: {memory: 128Mi}
"#;

const RUN: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata: {name: auth-run}
spec:
  target: {serverRef: {kind: JetStreamCluster, name: js-auth}}
  workload:
    protocol: jetstream
    ratePerPublisher: 200
    durationSeconds: 4
    warmupSeconds: 0
    drainSeconds: 2
    jetstream: {stream: auth, replicas: 1, storage: memory}
  runners:
    resources:
      requests: {cpu: 20m, memory: 32Mi}
      limits: {memory: 128Mi}
"#;

/// The same server as a plain `endpoint` target: no credentials, so the server refuses it (the
/// proof that the Succeeded run above really authenticated).
const WITHOUT_CREDENTIALS: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata: {name: no-auth-run}
spec:
  target: {endpoint: {protocol: jetstream, url: "nats://js-auth.NS.svc:4222"}}
  connectTimeoutSeconds: 5
  workload:
    protocol: jetstream
    ratePerPublisher: 10
    durationSeconds: 2
    warmupSeconds: 0
    jetstream: {stream: no-auth, replicas: 1, storage: memory}
  runners:
    resources:
      requests: {cpu: 20m, memory: 32Mi}
      limits: {memory: 128Mi}
"#;

#[tokio::test]
async fn a_server_with_a_token_is_benchmarked_and_the_token_is_never_shown() {
    run("target-auth", body).await;
}

async fn body(ctx: TestContext) -> Result<()> {
    // Unique per run, so a match can only be this test's token.
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
    let token = format!("msgbench-e2e-token-{nanos:x}");
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "js-auth-token"},
        "stringData": {"token": token},
    }))?;
    Api::<Secret>::namespaced(ctx.client.clone(), &ctx.ns)
        .create(&PostParams::default(), &secret)
        .await?;
    kinds::create(&ctx.client, &ctx.ns, JS_AUTH).await?;
    servers::wait_ready(
        &ctx,
        Kind::JetStreamCluster,
        "js-auth",
        Duration::from_secs(240),
    )
    .await?;
    kinds::create(&ctx.client, &ctx.ns, RUN).await?;
    let br = finished(&ctx, "auth-run", Duration::from_secs(300)).await?;
    ensure!(
        s(&br, "/status/phase") == "Succeeded",
        "verdict {}",
        s(&br, "/status/verdict")
    );
    let (published, received) = (
        s(&br, "/status/result/published")
            .as_u64()
            .context("published")?,
        s(&br, "/status/result/received")
            .as_u64()
            .context("received")?,
    );
    ensure!(
        published == 800 && received == published,
        "published {published}, received {received}"
    );
    never_shown(&ctx, &token, "auth-run", &serde_json::to_string(&br)?).await?;

    let url = s(&br, "/status/conditions")
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == TARGET_READY))
        .and_then(|c| c["message"].as_str())
        .context("TargetReady message (the URL)")?
        .to_string();
    kinds::create(
        &ctx.client,
        &ctx.ns,
        &WITHOUT_CREDENTIALS.replace("nats://js-auth.NS.svc:4222", &url),
    )
    .await?;
    let refused = finished(&ctx, "no-auth-run", Duration::from_secs(180)).await?;
    let verdict = s(&refused, "/status/verdict").to_string();
    ensure!(
        s(&refused, "/status/phase") == "Failed"
            && verdict.to_lowercase().contains("authorization"),
        "a run without credentials: {verdict}"
    );
    Ok(())
}
