//! An MqttBroker that requires a login (`spec.auth` from a Secret) and serves only TLS
//! (`spec.tls`, a Secret with a throwaway CA's certificate for the Service's names) is
//! benchmarked by reference: its pod hashes the Secret's user into mosquitto's password file at
//! start and mounts the certificate and key, the runner pods read the same user Secret through
//! `secretKeyRef` and mount only the TLS Secret's `ca.crt`, and the run at
//! `mqtts://mq-auth.<ns>.svc:1883` ends Succeeded with every message delivered. A plain MQTT
//! client gets no CONNACK (TLS is enforced); an anonymous client over TLS, with the CA but
//! without credentials, is refused at once (CONNACK return code 5: the run fails saying the
//! login was refused); the operator reports the broker's usage as unavailable (it never reads
//! the Secret `$SYS` would need); and neither the password nor the private key appears in a
//! ConfigMap, the BenchmarkRun, the namespace's Events, the runner pods' logs or the operator's
//! log.
use anyhow::{ensure, Context, Result};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject, PostParams};
use msgbench_crds::conditions::TARGET_READY;
use msgbench_e2e::certs::{service_names, TestCa};
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::runs::{delivered_exactly, field as s, finished};
use msgbench_e2e::secrets::never_shown;
use msgbench_e2e::{run, servers, toolbox, TestContext};
use serde_json::json;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const BROKER: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: MqttBroker
metadata:
  name: mq-auth
spec:
  engine: mosquitto
  auth: {secretName: mq-auth-user}
  tls: {secretName: mq-auth-tls}
  maxQueuedMessages: 100000
  resources:
    requests: {cpu: 10m, memory: 32Mi}
    limits: {memory: 128Mi}
"#;

const RUN: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata: {name: mqtt-auth-run}
spec:
  target: {serverRef: {kind: MqttBroker, name: mq-auth}}
  workload:
    protocol: mqtt
    ratePerPublisher: 200
    durationSeconds: 4
    warmupSeconds: 0
    drainSeconds: 2
    mqtt: {qos: 1}
  runners:
    resources:
      requests: {cpu: 20m, memory: 32Mi}
      limits: {memory: 128Mi}
"#;

/// The same broker as an `endpoint` target with its CA but no credentials: the TLS handshake
/// succeeds, the broker refuses the anonymous login, and the runner says so at once instead of
/// retrying for the whole connect window.
const WITHOUT_CREDENTIALS: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata: {name: mqtt-no-auth-run}
spec:
  target:
    endpoint:
      protocol: mqtt
      url: "mqtts://mq-auth.NS.svc:1883"
      tls: {ca: {secretName: mq-auth-tls, key: ca.crt}}
  connectTimeoutSeconds: 120
  workload:
    protocol: mqtt
    ratePerPublisher: 10
    durationSeconds: 2
    warmupSeconds: 0
    mqtt: {qos: 1}
  runners:
    resources:
      requests: {cpu: 20m, memory: 32Mi}
      limits: {memory: 128Mi}
"#;

/// MQTT 3.1.1 CONNECT without user name or password (clean session, keep-alive 60, client id
/// `a`), as printf octal: a plain listener would answer CONNACK (20 02 ..); the TLS listener
/// takes it for a broken handshake and closes.
const ANONYMOUS_CONNECT: &str = r"\020\015\000\004MQTT\004\002\000\074\000\001a";

#[tokio::test]
async fn a_broker_with_a_login_and_tls_is_benchmarked_and_no_secret_is_shown() {
    run("mqtt-auth", body).await;
}

async fn body(ctx: TestContext) -> Result<()> {
    // Unique per run, so a match can only be this test's password.
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
    let password = format!("msgbench-e2e-mqtt-{nanos:x}");
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "mq-auth-user"},
        "stringData": {"username": "bench", "password": password},
    }))?;
    let secrets = Api::<Secret>::namespaced(ctx.client.clone(), &ctx.ns);
    secrets.create(&PostParams::default(), &secret).await?;
    // cert-manager's layout: the broker's certificate names the Service, as the URL does.
    let ca = TestCa::new("mq-auth-ca")?;
    let cert = ca.issue(&service_names("mq-auth", &ctx.ns))?;
    let tls: Secret = serde_json::from_value(json!({
        "metadata": {"name": "mq-auth-tls"}, "type": "kubernetes.io/tls",
        "stringData": {"tls.crt": cert.cert, "tls.key": cert.key, "ca.crt": ca.pem},
    }))?;
    secrets.create(&PostParams::default(), &tls).await?;
    kinds::create(&ctx.client, &ctx.ns, BROKER).await?;
    servers::wait_ready(&ctx, Kind::MqttBroker, "mq-auth", Duration::from_secs(240)).await?;
    plain_gets_no_connack(&ctx).await?;

    kinds::create(&ctx.client, &ctx.ns, RUN).await?;
    let br = finished(&ctx, "mqtt-auth-run", Duration::from_secs(300)).await?;
    delivered_exactly(&br, 800)?; // 200/s for 4 s
    let url = target_url(&br)?;
    ensure!(
        url == format!("mqtts://mq-auth.{}.svc:1883", ctx.ns),
        "the run did not use the broker's mqtts:// URL: {url}"
    );
    let usage = s(&br, "/status/result/serverUsage/unavailable").to_string();
    ensure!(
        usage.contains("credentials the operator does not read"),
        "serverUsage.unavailable: {usage}"
    );
    let run_json = serde_json::to_string(&br)?;
    never_shown(&ctx, &password, "mqtt-auth-run", &run_json).await?;
    // The key's first base64 line stands for the whole key.
    let key_line = cert.key.lines().nth(1).context("PEM key body")?;
    never_shown(&ctx, key_line, "mqtt-auth-run", &run_json).await?;
    without_credentials_fails_fast(&ctx, &url).await
}

/// The URL the run connected to: its TargetReady message.
fn target_url(br: &DynamicObject) -> Result<String> {
    let url = s(br, "/status/conditions")
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == TARGET_READY))
        .and_then(|c| c["message"].as_str())
        .context("TargetReady message (the URL)")?;
    Ok(url.to_string())
}

/// A client in the broker's own namespace (inside its fence) that connects without TLS and
/// sends a CONNECT gets no CONNACK: the connection is made (nc exits 0, so not a refused or
/// unroutable port) and closed by the broker without an MQTT answer.
async fn plain_gets_no_connack(ctx: &TestContext) -> Result<()> {
    let host = format!("mq-auth.{}.svc.cluster.local", ctx.ns);
    let script = format!(
        r#"set -u
for attempt in $(seq 1 20); do
  if (printf '{ANONYMOUS_CONNECT}'; sleep 2) | nc {host} 1883 >/tmp/answer 2>/tmp/err; then
    got=$(od -An -tx1 /tmp/answer | tr -d ' \n')
    case "$got" in
      2002*) echo "PLAIN CONNACK: $got"; exit 1 ;;
      *) echo "PLAIN REFUSED: answer '$got'"; exit 0 ;;
    esac
  fi
  echo "attempt $attempt: $(cat /tmp/err)"; sleep 1
done
exit 1
"#
    );
    let out = toolbox::run_script(
        &ctx.client,
        &ctx.ns,
        "mqtt-plain",
        &script,
        Duration::from_secs(120),
    )
    .await?;
    ensure!(
        out.succeeded && out.logs.contains("PLAIN REFUSED"),
        "a plain MQTT client was not refused by the TLS listener:\n{}",
        out.logs
    );
    Ok(())
}

/// A run by endpoint with the CA and no credentials fails on the refused login, not after its
/// 120 s connect window.
async fn without_credentials_fails_fast(ctx: &TestContext, url: &str) -> Result<()> {
    kinds::create(
        &ctx.client,
        &ctx.ns,
        &WITHOUT_CREDENTIALS.replace("mqtts://mq-auth.NS.svc:1883", url),
    )
    .await?;
    let refused = finished(ctx, "mqtt-no-auth-run", Duration::from_secs(180)).await?;
    let verdict = s(&refused, "/status/verdict").to_string();
    ensure!(
        s(&refused, "/status/phase") == "Failed" && verdict.contains("refused the login"),
        "a run without credentials: {verdict}"
    );
    Ok(())
}
