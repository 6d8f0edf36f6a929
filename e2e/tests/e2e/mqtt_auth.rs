//! An MqttBroker that requires a login (`spec.auth` from a Secret) is benchmarked by reference:
//! its pod hashes the Secret's user into mosquitto's password file at start, the runner pods
//! read the same Secret through `secretKeyRef`, and the run ends Succeeded with every message
//! delivered. An anonymous client is refused (CONNACK return code 5), a run without credentials
//! fails at once saying the login was refused, the operator reports the broker's usage as
//! unavailable (it never reads the Secret `$SYS` would need), and the password never appears
//! in a ConfigMap, the BenchmarkRun, the namespace's Events, the runner pods' logs or the
//! operator's log.
use anyhow::{ensure, Context, Result};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject, PostParams};
use msgbench_crds::conditions::TARGET_READY;
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::runs::{field as s, finished};
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

/// The same broker as a plain `endpoint` target: no credentials, so the broker refuses the
/// login, and the runner says so at once instead of retrying for the whole connect window.
const WITHOUT_CREDENTIALS: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata: {name: mqtt-no-auth-run}
spec:
  target: {endpoint: {protocol: mqtt, url: "mqtt://mq-auth.NS.svc:1883"}}
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
/// `a`), as printf octal: mosquitto answers CONNACK 20 02 00 05 (not authorized) and closes.
const ANONYMOUS_CONNECT: &str = r"\020\015\000\004MQTT\004\002\000\074\000\001a";

#[tokio::test]
async fn a_broker_with_a_login_is_benchmarked_and_the_password_is_never_shown() {
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
    Api::<Secret>::namespaced(ctx.client.clone(), &ctx.ns)
        .create(&PostParams::default(), &secret)
        .await?;
    kinds::create(&ctx.client, &ctx.ns, BROKER).await?;
    servers::wait_ready(&ctx, Kind::MqttBroker, "mq-auth", Duration::from_secs(240)).await?;
    anonymous_is_refused(&ctx).await?;

    kinds::create(&ctx.client, &ctx.ns, RUN).await?;
    let br = finished(&ctx, "mqtt-auth-run", Duration::from_secs(300)).await?;
    ensure!(
        s(&br, "/status/phase") == "Succeeded",
        "verdict {}",
        s(&br, "/status/verdict")
    );
    let count = |p: &str| s(&br, p).as_u64().with_context(|| p.to_string());
    let (published, received) = (
        count("/status/result/published")?,
        count("/status/result/received")?,
    );
    ensure!(
        published == 800 && received == published,
        "published {published}, received {received}"
    );
    let usage = s(&br, "/status/result/serverUsage/unavailable").to_string();
    ensure!(
        usage.contains("credentials the operator does not read"),
        "serverUsage.unavailable: {usage}"
    );
    never_shown(
        &ctx,
        &password,
        "mqtt-auth-run",
        &serde_json::to_string(&br)?,
    )
    .await?;
    without_credentials_fails_fast(&ctx, &br).await
}

/// A client in the broker's own namespace (inside its fence) without a login gets CONNACK
/// return code 5.
async fn anonymous_is_refused(ctx: &TestContext) -> Result<()> {
    let host = format!("mq-auth.{}.svc.cluster.local", ctx.ns);
    let script = format!(
        r#"set -u
for attempt in $(seq 1 20); do
  ack=$( (printf '{ANONYMOUS_CONNECT}'; sleep 2) | nc {host} 1883 | od -An -tx1 | tr -d ' \n')
  [ "$ack" = 20020005 ] && {{ echo "ANONYMOUS REFUSED: CONNACK $ack"; exit 0; }}
  echo "attempt $attempt: CONNACK '$ack'"; sleep 1
done
exit 1
"#
    );
    let out = toolbox::run_script(
        &ctx.client,
        &ctx.ns,
        "mqtt-anonymous",
        &script,
        Duration::from_secs(120),
    )
    .await?;
    ensure!(
        out.succeeded && out.logs.contains("ANONYMOUS REFUSED"),
        "an anonymous client was not refused:\n{}",
        out.logs
    );
    Ok(())
}

/// A run by endpoint (no credentials) fails on the refused login, not after its 120 s connect
/// window.
async fn without_credentials_fails_fast(ctx: &TestContext, br: &DynamicObject) -> Result<()> {
    let url = s(br, "/status/conditions")
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == TARGET_READY))
        .and_then(|c| c["message"].as_str())
        .context("TargetReady message (the URL)")?
        .to_string();
    kinds::create(
        &ctx.client,
        &ctx.ns,
        &WITHOUT_CREDENTIALS.replace("mqtt://mq-auth.NS.svc:1883", &url),
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
