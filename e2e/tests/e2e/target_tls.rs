//! A secured JetStreamCluster — a token (`spec.auth`) and TLS (`spec.tls`), both from Secrets —
//! is benchmarked by reference: the servers mount their certificate and key, the runner pods
//! only the CA, and the run ends Succeeded with every message delivered over `tls://`. A client
//! without the CA is refused at the handshake (TLS is really enforced); protocol nats against
//! the same server goes over TLS too (through async-nats, as the batched client speaks no TLS)
//! and delivers every message. Neither
//! the token nor the private key appears in a ConfigMap, the BenchmarkRun, an Event, a runner's
//! log or the operator's log.
use anyhow::{ensure, Context, Result};
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::runs::{field as s, finished};
use msgbench_e2e::secrets::{self, never_shown};
use msgbench_e2e::{run, servers, TestContext};
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use serde_json::json;
use std::time::Duration;

const JS_TLS: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: JetStreamCluster
metadata:
  name: js-tls
spec:
  replicas: 1
  auth: {secretName: js-tls-token, mode: token}
  tls: {secretName: js-tls-cert}
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
metadata: {name: tls-run}
spec:
  target: {serverRef: {kind: JetStreamCluster, name: js-tls}}
  workload:
    protocol: jetstream
    ratePerPublisher: 200
    durationSeconds: 4
    warmupSeconds: 0
    drainSeconds: 2
    jetstream: {stream: tls, replicas: 1, storage: memory}
  runners:
    resources:
      requests: {cpu: 20m, memory: 32Mi}
      limits: {memory: 128Mi}
"#;

/// The same server as a plain endpoint: no CA, no token.
const WITHOUT_CA: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata: {name: no-ca-run}
spec:
  target: {endpoint: {protocol: jetstream, url: "nats://js-tls.NS.svc:4222"}}
  connectTimeoutSeconds: 5
  workload:
    protocol: jetstream
    ratePerPublisher: 10
    durationSeconds: 2
    warmupSeconds: 0
    jetstream: {stream: no-ca, replicas: 1, storage: memory}
  runners:
    resources:
      requests: {cpu: 20m, memory: 32Mi}
      limits: {memory: 128Mi}
"#;

const CORE_NATS: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata: {name: core-nats-run}
spec:
  target: {serverRef: {kind: JetStreamCluster, name: js-tls}}
  workload: {protocol: nats, ratePerPublisher: 10, durationSeconds: 2, warmupSeconds: 0}
  runners:
    resources:
      requests: {cpu: 20m, memory: 32Mi}
      limits: {memory: 128Mi}
"#;

#[tokio::test]
async fn a_server_with_a_token_and_tls_is_benchmarked_and_neither_secret_is_shown() {
    run("target-tls", body).await;
}

/// A CA and the servers' certificate for the client Service's names, as the Secret's data:
/// (ca.crt, tls.crt, tls.key) PEM.
fn certificates(ns: &str) -> Result<(String, String, String)> {
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca.self_signed(&ca_key)?;
    let key = KeyPair::generate()?;
    let names = vec![
        format!("js-tls.{ns}.svc"),
        format!("js-tls.{ns}.svc.cluster.local"),
    ];
    let cert = CertificateParams::new(names)?.signed_by(&key, &ca_cert, &ca_key)?;
    Ok((ca_cert.pem(), cert.pem(), key.serialize_pem()))
}

async fn body(ctx: TestContext) -> Result<()> {
    let token = format!("msgbench-e2e-tls-token-{:x}", rand::random::<u64>());
    let (ca, cert, key) = certificates(&ctx.ns)?;
    secrets::create(
        &ctx,
        [
            json!({"metadata": {"name": "js-tls-token"}, "stringData": {"token": token}}),
            json!({"metadata": {"name": "js-tls-cert"}, "type": "kubernetes.io/tls",
                   "stringData": {"tls.crt": cert, "tls.key": key, "ca.crt": ca}}),
        ],
    )
    .await?;
    kinds::create(&ctx.client, &ctx.ns, JS_TLS).await?;
    servers::wait_ready(
        &ctx,
        Kind::JetStreamCluster,
        "js-tls",
        Duration::from_secs(240),
    )
    .await?;

    kinds::create(&ctx.client, &ctx.ns, RUN).await?;
    let br = finished(&ctx, "tls-run", Duration::from_secs(300)).await?;
    ensure!(
        s(&br, "/status/phase") == "Succeeded",
        "verdict {}, conditions {}",
        s(&br, "/status/verdict"),
        kinds::conditions_summary(&br)
    );
    let published = s(&br, "/status/result/published")
        .as_u64()
        .context("published")?;
    let received = s(&br, "/status/result/received")
        .as_u64()
        .context("received")?;
    ensure!(
        published == 800 && received == published,
        "published {published}, received {received}"
    );
    let target_ready = kinds::conditions_summary(&br);
    ensure!(
        target_ready.contains(&format!("tls://js-tls.{}.svc:4222", ctx.ns)),
        "the run did not use the tls:// URL: {target_ready}"
    );
    // The key's first base64 line stands for the whole key.
    let key_line = key.lines().nth(1).context("PEM key body")?;
    let run_json = serde_json::to_string(&br)?;
    never_shown(&ctx, &token, "tls-run", &run_json).await?;
    never_shown(&ctx, key_line, "tls-run", &run_json).await?;

    let plain = WITHOUT_CA.replace("js-tls.NS.svc", &format!("js-tls.{}.svc", ctx.ns));
    kinds::create(&ctx.client, &ctx.ns, &plain).await?;
    let refused = finished(&ctx, "no-ca-run", Duration::from_secs(180)).await?;
    let verdict = s(&refused, "/status/verdict").to_string().to_lowercase();
    ensure!(
        s(&refused, "/status/phase") == "Failed"
            && (verdict.contains("certificate") || verdict.contains("tls")),
        "a run without the CA: {verdict}"
    );

    kinds::create(&ctx.client, &ctx.ns, CORE_NATS).await?;
    let core = finished(&ctx, "core-nats-run", Duration::from_secs(120)).await?;
    let why = format!(
        "{} {}",
        s(&core, "/status/verdict"),
        kinds::conditions_summary(&core)
    );
    ensure!(
        s(&core, "/status/phase") == "Succeeded",
        "protocol nats against a TLS server: phase {}, {why}",
        s(&core, "/status/phase")
    );
    let (published, received) = (
        s(&core, "/status/result/published").as_u64(),
        s(&core, "/status/result/received").as_u64(),
    );
    ensure!(
        published == Some(20) && received == published,
        "protocol nats over TLS: published {published:?}, received {received:?}"
    );
    ensure!(
        why.contains(&format!("tls://js-tls.{}.svc:4222", ctx.ns)),
        "the core NATS run did not use the tls:// URL: {why}"
    );
    never_shown(
        &ctx,
        &token,
        "core-nats-run",
        &serde_json::to_string(&core)?,
    )
    .await?;
    Ok(())
}
