//! A broker a team runs without msgbench — mosquitto from plain manifests (the endpoint
//! sample's, `config/samples/endpoint-servers/mosquitto.yaml`), with a password file and only a
//! TLS listener — is benchmarked by `endpoint`: `mqtts://`, the CA from a ConfigMap, the login
//! from a Secret. QoS 0 and QoS 1 deliver every message. A wrong password ends
//! `TargetAuthFailed` and an untrusted CA `TargetTLSFailed` (naming the issuer the runner saw),
//! each within 30 s of the run's creation, not at the end of its connect window; the password
//! never appears in the run, an Event, a runner's log or the operator's log.
use anyhow::Result;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, PostParams};
use msgbench_e2e::certs::{service_names, TestCa};
use msgbench_e2e::kinds;
use msgbench_e2e::manifests::{create_sample, wait_ready};
use msgbench_e2e::runs::{
    delivered_exactly, finished, refused_fast, target_refused, untrusted_ca_named,
};
use msgbench_e2e::secrets::{self, never_shown};
use msgbench_e2e::{run, TestContext};
use serde_json::json;
use std::time::Duration;

/// A run at the broker: `NAME`, `QOS`, `SECRET` and `CA` (a ConfigMap) filled in per case.
fn run_at_broker(ns: &str, name: &str, qos: u8, secret: &str, ca: &str) -> String {
    format!(
        r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata: {{name: {name}}}
spec:
  target:
    endpoint:
      protocol: mqtt
      url: "mqtts://team-mqtt.{ns}.svc:8883"
      auth: {{secretName: {secret}, mode: userPassword}}
      tls: {{ca: {{configMapName: {ca}, key: ca.pem}}}}
  connectTimeoutSeconds: 120
  workload:
    protocol: mqtt
    ratePerPublisher: 200
    durationSeconds: 3
    warmupSeconds: 0
    drainSeconds: 2
    mqtt: {{qos: {qos}}}
  runners:
    resources:
      requests: {{cpu: 20m, memory: 32Mi}}
      limits: {{memory: 128Mi}}
"#
    )
}

#[tokio::test]
async fn a_broker_the_team_runs_with_passwords_and_tls_is_benchmarked_by_endpoint() {
    run("endpoint-mqtts", body).await;
}

async fn body(ctx: TestContext) -> Result<()> {
    let password = format!("msgbench-e2e-mqtts-{:x}", rand::random::<u64>());
    let (ca, other_ca) = (TestCa::new("team-ca")?, TestCa::new("someone-else")?);
    let server = ca.issue(&service_names("team-mqtt", &ctx.ns))?;
    secrets::create(
        &ctx,
        [
            json!({"metadata": {"name": "team-mqtt-user"},
                   "stringData": {"username": "bench", "password": password}}),
            json!({"metadata": {"name": "wrong-user"},
                   "stringData": {"username": "bench", "password": "not-the-password"}}),
            json!({"metadata": {"name": "team-mqtt-tls"}, "type": "kubernetes.io/tls",
                   "stringData": {"tls.crt": server.cert, "tls.key": server.key}}),
        ],
    )
    .await?;
    let maps = Api::<ConfigMap>::namespaced(ctx.client.clone(), &ctx.ns);
    for (name, pem) in [("team-ca", &ca.pem), ("other-ca", &other_ca.pem)] {
        let cm = json!({"metadata": {"name": name}, "data": {"ca.pem": pem}});
        maps.create(&PostParams::default(), &serde_json::from_value(cm)?)
            .await?;
    }
    // The team's server, nothing msgbench made: the endpoint samples' own (its header says
    // how a team makes the Secrets created above).
    for (kind, name) in
        create_sample(&ctx.client, &ctx.ns, "endpoint-servers/mosquitto.yaml").await?
    {
        wait_ready(&ctx.client, &ctx.ns, &kind, &name).await?;
    }

    for (name, qos) in [("mqtts-qos0", 0), ("mqtts-qos1", 1)] {
        let manifest = run_at_broker(&ctx.ns, name, qos, "team-mqtt-user", "team-ca");
        kinds::create(&ctx.client, &ctx.ns, &manifest).await?;
        let br = finished(&ctx, name, Duration::from_secs(300)).await?;
        delivered_exactly(&br, 600)?; // 200/s for 3 s
        never_shown(&ctx, &password, name, &serde_json::to_string(&br)?).await?;
    }
    let auth = refused(&ctx, "mqtts-wrong-password", "wrong-user", "team-ca").await?;
    target_refused(&auth, "TargetAuthFailed")?;
    let tls = refused(&ctx, "mqtts-wrong-ca", "team-mqtt-user", "other-ca").await?;
    untrusted_ca_named(&tls, "team-ca")
}

/// A run that must fail fast: ended within 30 s of its creation (its connect window is 120 s).
async fn refused(ctx: &TestContext, name: &str, secret: &str, ca: &str) -> Result<DynamicObject> {
    refused_fast(ctx, name, &run_at_broker(&ctx.ns, name, 1, secret, ca)).await
}
