//! An MqttBroker of each built-in engine (mosquitto, rumqttd: the images the chart names) becomes
//! Ready and a publish/subscribe round trip works through its Service DNS name, from a pod (MQTT
//! 3.1.1 packets written by hand with busybox printf + nc).
use anyhow::{ensure, Context, Result};
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, ListParams};
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::{run, servers, toolbox, TestContext};
use serde_json::Value;
use std::time::Duration;

const NAME: &str = "mq";

fn manifest(engine: &str) -> String {
    format!(
        r#"
apiVersion: msgbench.dev/v1alpha1
kind: MqttBroker
metadata:
  name: mq
spec:
  engine: {engine}
  replicas: 1
  resources:
    requests: {{cpu: 10m, memory: 32Mi}}
    limits: {{memory: 128Mi}}
"#
    )
}

#[tokio::test]
async fn mosquitto_round_trip_through_service_dns() {
    run("mqtt-broker", |ctx| body(ctx, "mosquitto")).await;
}

/// rumqttd with the config the operator renders, in msgbench's own rumqttd image.
#[tokio::test]
async fn rumqttd_round_trip_through_service_dns() {
    run("mqtt-rumqttd", |ctx| body(ctx, "rumqttd")).await;
}

/// MQTT 3.1.1 packets (fixed header, remaining length, variable header, payload) as printf octal.
/// CONNECT clean session, keepalive 60, client id $1.
const CONNECT_SUB: &str = r"\020\015\000\004MQTT\004\002\000\074\000\001s";
const CONNECT_PUB: &str = r"\020\015\000\004MQTT\004\002\000\074\000\001p";
/// SUBSCRIBE packet id 1, topic e2e/rt, QoS 0.
const SUBSCRIBE: &str = r"\202\013\000\001\000\006e2e/rt\000";
/// PUBLISH QoS 0 to e2e/rt, payload hello-msgbench (14 bytes): remaining 2 + 6 + 14 = 22.
const PUBLISH: &str = r"\060\026\000\006e2e/rthello-msgbench";
const DISCONNECT: &str = r"\340\000";

async fn body(ctx: TestContext, engine: &str) -> Result<()> {
    kinds::create(&ctx.client, &ctx.ns, &manifest(engine)).await?;
    let ready = servers::wait_ready(&ctx, Kind::MqttBroker, NAME, Duration::from_secs(180)).await?;
    let url = ready
        .data
        .pointer("/status/url")
        .and_then(Value::as_str)
        .unwrap_or_default();
    ensure!(
        url.starts_with("mqtt://"),
        "status.url should be an MQTT URL, got {url:?}"
    );

    // The client Service: the instance's non-headless Service exposing 1883.
    let services = Api::<Service>::namespaced(ctx.client.clone(), &ctx.ns)
        .list(&ListParams::default().labels(&servers::instance_selector(NAME)))
        .await?
        .items;
    let svc = services
        .iter()
        .find(|s| {
            let spec = s.spec.as_ref();
            spec.and_then(|s| s.cluster_ip.as_deref()) != Some("None")
                && spec
                    .and_then(|s| s.ports.as_ref())
                    .is_some_and(|ps| ps.iter().any(|p| p.port == 1883))
        })
        .and_then(|s| s.metadata.name.clone())
        .with_context(|| {
            format!(
                "no client Service with port 1883 among {} services",
                services.len()
            )
        })?;
    let host = format!("{svc}.{}.svc.cluster.local", ctx.ns);

    let script = format!(
        r#"set -u
nslookup {host} >/dev/null 2>&1 || {{ echo "DNS does not resolve {host}"; nslookup {host}; exit 1; }}
( printf '{CONNECT_SUB}{SUBSCRIBE}'; sleep 60 ) | nc {host} 1883 > /tmp/sub.out &
i=0; until [ "$(od -An -tx1 /tmp/sub.out | tr -d ' \n' | grep -c 20020000.*9003000100)" = 1 ]; do
  i=$((i+1)); [ $i -gt 100 ] && {{ echo "no CONNACK+SUBACK"; od -An -tx1 /tmp/sub.out; exit 1; }}; sleep 0.1; done
for attempt in $(seq 1 30); do
  ( printf '{CONNECT_PUB}{PUBLISH}{DISCONNECT}'; sleep 0.3 ) | nc {host} 1883 > /dev/null
  if grep -q hello-msgbench /tmp/sub.out; then echo "ROUND TRIP OK via {host} after $attempt publish(es)"; exit 0; fi
  sleep 0.5
done
echo "subscriber never received the message"; od -c /tmp/sub.out; exit 1
"#
    );
    let out = toolbox::run_script(
        &ctx.client,
        &ctx.ns,
        "mqtt-round-trip",
        &script,
        Duration::from_secs(120),
    )
    .await?;
    ensure!(
        out.succeeded && out.logs.contains("ROUND TRIP OK"),
        "MQTT round trip through {engine} failed:\n{}",
        out.logs
    );
    eprintln!("{}", out.logs.trim());
    Ok(())
}
