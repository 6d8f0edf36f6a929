//! A 3-server JetStreamCluster becomes Ready, the servers form one cluster (each sees the two others
//! as routes, read from the monitoring endpoint through the API server's pod proxy), and a message
//! published on one server is delivered to a subscriber connected to another.
use anyhow::{ensure, Context, Result};
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::{probe, run, servers, toolbox, wait, TestContext};
use serde_json::Value;
use std::collections::BTreeSet;
use std::time::Duration;

const NAME: &str = "js3";

const MANIFEST: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: JetStreamCluster
metadata:
  name: js3
spec:
  replicas: 3
  jetstream:
    storage:
      type: memory
    maxMemoryStore: 64Mi
  resources:
    requests: {cpu: 10m, memory: 128Mi}
    limits: {memory: 256Mi}
  placement:
    podAntiAffinity: none
"#;

#[tokio::test]
async fn jetstream_cluster_of_three_routes_messages_between_servers() {
    run("jetstream-cluster", body).await;
}

async fn body(ctx: TestContext) -> Result<()> {
    kinds::create(&ctx.client, &ctx.ns, MANIFEST).await?;
    let ready =
        servers::wait_ready(&ctx, Kind::JetStreamCluster, NAME, Duration::from_secs(240)).await?;
    ensure!(
        ready
            .data
            .pointer("/status/readyReplicas")
            .and_then(Value::as_i64)
            == Some(3),
        "status.readyReplicas should be 3: {}",
        kinds::conditions_summary(&ready)
    );
    let url = ready
        .data
        .pointer("/status/url")
        .and_then(Value::as_str)
        .unwrap_or_default();
    ensure!(
        url.starts_with("nats://"),
        "status.url should be a nats:// URL, got {url:?}"
    );

    let pods = servers::server_pods(&ctx, NAME).await?;
    ensure!(
        pods.len() == 3,
        "expected 3 server pods, found {}",
        pods.len()
    );
    let names: Vec<String> = pods
        .iter()
        .map(|p| p.metadata.name.clone().unwrap_or_default())
        .collect();

    // One cluster: every server reports a route to each of the two others, by server name.
    let mut server_names = BTreeSet::new();
    for pod in &names {
        let (me, peers) = wait::poll(
            Duration::from_secs(90),
            Duration::from_secs(2),
            &format!("{pod} routes to 2 peers"),
            || {
                let (client, ns, pod) = (ctx.client.clone(), ctx.ns.clone(), pod.clone());
                async move {
                    let routez: Value = serde_json::from_str(
                        &probe::pod_get(&client, &ns, &pod, 8222, "/routez").await?,
                    )?;
                    let me = routez["server_name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    let peers: BTreeSet<String> = routez["routes"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        // Route pooling (nats 2.10+) opens several connections per peer: count peers.
                        .filter_map(|r| {
                            r["remote_name"]
                                .as_str()
                                .or(r["remote_id"].as_str())
                                .map(str::to_string)
                        })
                        .filter(|r| *r != me)
                        .collect();
                    Ok((peers.len() == 2).then_some((me, peers)))
                }
            },
        )
        .await?;
        eprintln!("{pod}: server {me} routes to {peers:?}");
        server_names.insert(me);
    }
    ensure!(
        server_names.len() == 3,
        "servers must have distinct names, got {server_names:?}"
    );

    // JetStream is on and meta-clustered: /jsz reports a meta leader and 3 cluster members.
    let jsz: Value = serde_json::from_str(
        &probe::pod_get(&ctx.client, &ctx.ns, &names[0], 8222, "/jsz").await?,
    )?;
    ensure!(
        jsz.get("disabled").and_then(Value::as_bool) != Some(true),
        "JetStream disabled: {jsz}"
    );

    // A message published on the last server reaches a subscriber on the first one — only possible
    // through the cluster routes. Plain NATS protocol over busybox nc from a pod in the namespace.
    let sub_ip = servers::pod_ip(&pods[0])?;
    let pub_ip = servers::pod_ip(&pods[2])?;
    let script = format!(
        r#"set -u
( printf 'CONNECT {{"verbose":false,"pedantic":false,"name":"e2e-sub"}}\r\nSUB e2e.route 1\r\nPING\r\n'; sleep 60 ) | nc {sub_ip} 4222 > /tmp/sub.out &
i=0; until grep -q PONG /tmp/sub.out; do i=$((i+1)); [ $i -gt 100 ] && {{ echo "no PONG from subscriber server"; cat /tmp/sub.out; exit 1; }}; sleep 0.1; done
for attempt in $(seq 1 40); do
  ( printf 'CONNECT {{"verbose":false,"pedantic":false,"name":"e2e-pub"}}\r\nPUB e2e.route 14\r\nhello-msgbench\r\nPING\r\n'; sleep 0.3 ) | nc {pub_ip} 4222 > /tmp/pub.out
  if grep -q 'MSG e2e.route 1 14' /tmp/sub.out && grep -q hello-msgbench /tmp/sub.out; then
    echo "RECEIVED via route after $attempt publish(es)"; exit 0
  fi
  sleep 0.5
done
echo "subscriber never received the message"; echo "--- sub"; cat /tmp/sub.out; echo "--- pub"; cat /tmp/pub.out; exit 1
"#
    );
    let out = toolbox::run_script(
        &ctx.client,
        &ctx.ns,
        "nats-route-check",
        &script,
        Duration::from_secs(120),
    )
    .await
    .context("running the cross-server publish/subscribe pod")?;
    ensure!(
        out.succeeded && out.logs.contains("RECEIVED via route"),
        "cross-server delivery failed:\n{}",
        out.logs
    );
    eprintln!("{}", out.logs.trim());

    // JetStream replication across the servers: an R3 memory stream created through one server,
    // a publish acknowledged through another, and the stream reporting 1 message and 2 current
    // replicas (JetStream API requests over plain NATS protocol).
    let script = JETSTREAM_R3_SCRIPT
        .replace("__A__", &sub_ip)
        .replace("__C__", &pub_ip);
    let out = toolbox::run_script(
        &ctx.client,
        &ctx.ns,
        "jetstream-r3-check",
        &script,
        Duration::from_secs(150),
    )
    .await
    .context("running the JetStream R3 pod")?;
    ensure!(
        out.succeeded && out.logs.contains("JETSTREAM R3 OK"),
        "R3 stream replication failed:\n{}",
        out.logs
    );
    eprintln!("{}", out.logs.trim());
    Ok(())
}

const JETSTREAM_R3_SCRIPT: &str = r#"set -u
A=__A__; C=__C__; PA=4222; PC=4222
req() { # req <host> <port> <subject> <payload>: one request/reply on a fresh connection; prints the reply
  rm -f /tmp/req.out; touch /tmp/req.out
  ( printf 'CONNECT {"verbose":false,"pedantic":false,"name":"e2e-js"}\r\nSUB _INBOX.e2e 9\r\nPUB %s _INBOX.e2e %d\r\n%s\r\n' "$3" "${#4}" "$4"
    i=0; while [ $i -lt 50 ] && ! grep -q '^MSG _INBOX' /tmp/req.out; do sleep 0.1; i=$((i+1)); done; sleep 0.1
  ) | nc "$1" "$2" > /tmp/req.out
  sed -n '/^MSG _INBOX.e2e/{n;p;}' /tmp/req.out | tr -d '\r' | head -1
}
STREAM='{"name":"E2E","subjects":["e2e.js"],"num_replicas":3,"storage":"memory"}'
ok=""
for attempt in $(seq 1 30); do
  r=$(req $A $PA '$JS.API.STREAM.CREATE.E2E' "$STREAM")
  case "$r" in *'"error"'*|"") echo "stream create attempt $attempt: ${r:-no reply}"; sleep 1 ;; *) ok=1; break ;; esac
done
[ -n "$ok" ] || { echo "could not create the R3 stream"; exit 1; }
ack=$(req $C $PC e2e.js hello-js)
echo "publish ack: $ack"
case "$ack" in *'"stream":"E2E"'*) ;; *) echo "no JetStream ack for the publish"; exit 1 ;; esac
for attempt in $(seq 1 30); do
  info=$(req $A $PA '$JS.API.STREAM.INFO.E2E' '')
  current=$(echo "$info" | grep -o '"current":true' | wc -l)
  if echo "$info" | grep -q '"messages":1,' && [ "$current" = 2 ]; then
    leader=$(echo "$info" | grep -o '"leader":"[^"]*"')
    echo "JETSTREAM R3 OK: 1 message, $leader, 2 current replicas"; exit 0
  fi
  sleep 1
done
echo "stream not replicated: $info"; exit 1
"#;
