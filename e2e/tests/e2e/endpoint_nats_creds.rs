//! A NATS cluster a team runs without msgbench — 3 nats-servers from plain manifests, in
//! operator mode (accounts and the user made by the official CLI's `nats auth`), TLS from a
//! throwaway CA, JetStream on — is benchmarked by `endpoint`: `tls://`, the user's credentials
//! file from a Secret, the CA from a Secret. An R3 JetStream run and a core NATS run deliver
//! every message; the run's streams are deleted with the same credentials. The R3 run names
//! each server's monitoring port (`endpoint.monitoring.urls`, the pods' names under the
//! headless Service) and ends with a row per server in `serverUsage`, its memory and version;
//! the core run, without them, says `serverUsage` is unavailable and what to set. A user of
//! another operator ends `TargetAuthFailed` within 30 s of the run's creation. The user's seed
//! never appears in the run, an Event, a runner's log or the operator's log.
use anyhow::{ensure, Context, Result};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, PostParams};
use msgbench_crds::conditions::STREAMS_DELETED;
use msgbench_e2e::certs::{service_names, TestCa};
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::manifests::{create_all, wait_ready};
use msgbench_e2e::nats_auth::NatsOperator;
use msgbench_e2e::runs::{delivered_exactly, ended_within, field as s, finished};
use msgbench_e2e::secrets::{self, never_shown};
use msgbench_e2e::{probe, run, wait, TestContext};
use serde_json::json;
use std::time::Duration;

/// The version the cluster's image runs, as its `/varz` reports it.
const NATS_VERSION: &str = "2.15.2";

/// The team's cluster: three servers with routes between them, client TLS, JetStream in memory,
/// monitoring (plain HTTP) on 8222.
const CLUSTER: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: team-nats-headless}
spec:
  clusterIP: None
  publishNotReadyAddresses: true
  selector: {app: team-nats}
  ports: [{name: routes, port: 6222}]
---
apiVersion: v1
kind: Service
metadata: {name: team-nats}
spec:
  selector: {app: team-nats}
  ports: [{name: client, port: 4222}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: team-nats}
spec:
  replicas: 3
  serviceName: team-nats-headless
  podManagementPolicy: Parallel
  selector: {matchLabels: {app: team-nats}}
  template:
    metadata: {labels: {app: team-nats}}
    spec:
      automountServiceAccountToken: false
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        fsGroup: 65532
        seccompProfile: {type: RuntimeDefault}
      containers:
        - name: nats
          image: ghcr.io/msgbench/nats-server:2.15.2
          args: [--config, /config/nats.conf]
          env: [{name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]
          ports: [{containerPort: 4222}, {containerPort: 6222}, {containerPort: 8222}]
          readinessProbe: {httpGet: {path: /healthz, port: 8222}, periodSeconds: 2}
          resources:
            requests: {cpu: 10m, memory: 32Mi}
            limits: {memory: 256Mi}
          volumeMounts:
            - {name: config, mountPath: /config, readOnly: true}
            - {name: certs, mountPath: /certs, readOnly: true}
            - {name: data, mountPath: /data}
          securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
      volumes:
        - {name: config, configMap: {name: team-nats-config}}
        - {name: certs, secret: {secretName: team-nats-tls}}
        - {name: data, emptyDir: {}}
"#;

/// The server config around the auth settings `nats auth` made.
fn server_config(ns: &str, auth: &str) -> String {
    let route = |i: u8| format!("nats://team-nats-{i}.team-nats-headless.{ns}.svc:6222");
    format!(
        "port: 4222\nhttp_port: 8222\nserver_name: $POD_NAME\n{auth}\
         tls {{\n  cert_file: /certs/tls.crt\n  key_file: /certs/tls.key\n}}\n\
         jetstream {{\n  store_dir: /data\n  max_memory_store: 256MB\n  max_file_store: 1GB\n}}\n\
         cluster {{\n  name: team\n  port: 6222\n  routes: [{}, {}, {}]\n}}\n",
        route(0),
        route(1),
        route(2)
    )
}

/// Each server's monitoring base URL: its pod's name under the headless Service.
fn monitoring_urls(ns: &str) -> Vec<String> {
    (0..3)
        .map(|i| format!("http://team-nats-{i}.team-nats-headless.{ns}.svc:8222"))
        .collect()
}

/// A run at the cluster; `monitored` names every server's monitoring URL and runs long enough
/// for samples under load (one every 5 s).
fn run_at_cluster(ns: &str, name: &str, protocol: &str, creds: &str, monitored: bool) -> String {
    let workload = match protocol {
        "jetstream" => format!(
            "jetstream: {{stream: {name}, replicas: 3, storage: memory, publish: async, maxInFlight: 100}}"
        ),
        _ => String::new(),
    };
    let (monitoring, seconds) = if monitored {
        let quoted: Vec<String> = (monitoring_urls(ns).iter())
            .map(|u| format!("\"{u}\""))
            .collect();
        let urls = quoted.join(", ");
        (format!("monitoring: {{urls: [{urls}]}}"), MONITORED_SECONDS)
    } else {
        (String::new(), 3)
    };
    format!(
        r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata: {{name: {name}}}
spec:
  target:
    endpoint:
      protocol: {protocol}
      url: "tls://team-nats.{ns}.svc:4222"
      auth: {{secretName: {creds}, mode: creds}}
      tls: {{ca: {{secretName: team-nats-ca}}}}
      {monitoring}
  connectTimeoutSeconds: 120
  workload:
    protocol: {protocol}
    ratePerPublisher: 200
    durationSeconds: {seconds}
    warmupSeconds: 0
    drainSeconds: 2
    {workload}
  runners:
    resources:
      requests: {{cpu: 20m, memory: 32Mi}}
      limits: {{memory: 128Mi}}
"#
    )
}

#[tokio::test]
async fn a_nats_cluster_the_team_runs_in_operator_mode_with_tls_is_benchmarked_by_endpoint() {
    run("endpoint-nats-creds", body).await;
}

async fn body(ctx: TestContext) -> Result<()> {
    let store = std::env::temp_dir().join(format!("msgbench-e2e-nats-auth-{}", ctx.ns));
    std::fs::create_dir_all(&store)?;
    let team = NatsOperator::create(&store, "team")?;
    let other = NatsOperator::create(&store, "other")?;
    let ca = TestCa::new("team-nats-ca")?;
    let server = ca.issue(&service_names("team-nats", &ctx.ns))?;
    secrets::create(
        &ctx,
        [
            json!({"metadata": {"name": "bench-creds"}, "stringData": {"creds": team.creds}}),
            json!({"metadata": {"name": "other-creds"}, "stringData": {"creds": other.creds}}),
            json!({"metadata": {"name": "team-nats-tls"}, "type": "kubernetes.io/tls",
                   "stringData": {"tls.crt": server.cert, "tls.key": server.key}}),
            json!({"metadata": {"name": "team-nats-ca"}, "stringData": {"ca.crt": ca.pem}}),
        ],
    )
    .await?;
    let config = server_config(&ctx.ns, &team.server_config());
    let cm = json!({"metadata": {"name": "team-nats-config"}, "data": {"nats.conf": config}});
    Api::<ConfigMap>::namespaced(ctx.client.clone(), &ctx.ns)
        .create(&PostParams::default(), &serde_json::from_value(cm)?)
        .await?;
    create_all(&ctx.client, &ctx.ns, CLUSTER).await?;
    wait_ready(&ctx.client, &ctx.ns, "StatefulSet", "team-nats").await?;
    // The seed's line of the credentials file stands for the whole secret.
    let seed = (team.creds.lines())
        .find(|l| l.starts_with("SU"))
        .context("a seed in the creds file")?
        .to_string();

    for (name, protocol) in [("nats-creds-js", "jetstream"), ("nats-creds-core", "nats")] {
        let monitored = protocol == "jetstream";
        let manifest = run_at_cluster(&ctx.ns, name, protocol, "bench-creds", monitored);
        kinds::create(&ctx.client, &ctx.ns, &manifest).await?;
        let br = finished(&ctx, name, Duration::from_secs(300)).await?;
        if monitored {
            delivered_exactly(&br, 200 * MONITORED_SECONDS)?; // 200/s
            servers_sampled(&br, &ctx.ns)?;
        } else {
            delivered_exactly(&br, 600)?; // 200/s for 3 s
            usage_unavailable_without_monitoring(&br)?;
        }
        never_shown(&ctx, &seed, name, &serde_json::to_string(&br)?).await?;
        if protocol == "jetstream" {
            streams_deleted(&ctx, name).await?;
        }
    }
    let manifest = run_at_cluster(&ctx.ns, "nats-other-operator", "nats", "other-creds", false);
    kinds::create(&ctx.client, &ctx.ns, &manifest).await?;
    let refused = finished(&ctx, "nats-other-operator", Duration::from_secs(120)).await?;
    ensure!(
        s(&refused, "/status/verdict/reason") == "TargetAuthFailed",
        "a user of another operator: {}",
        s(&refused, "/status/verdict")
    );
    ended_within(&refused, 30)?;
    std::fs::remove_dir_all(&store)?;
    Ok(())
}

/// The run's streams were deleted with its credentials (`StreamsDeleted=True`), and no server
/// of the cluster lists a stream carrying the run's id (`/jsz`, every account).
async fn streams_deleted(ctx: &TestContext, name: &str) -> Result<()> {
    let api = Kind::BenchmarkRun.api(&ctx.client, &ctx.ns);
    let br = wait::until(
        &api,
        name,
        Duration::from_secs(120),
        "StreamsDeleted=True",
        |o| kinds::condition(o, STREAMS_DELETED).is_some_and(|c| c["status"] == "True"),
    )
    .await?;
    let uid = br.metadata.uid.as_deref().context("run uid")?;
    let id: String = (uid.chars())
        .filter(char::is_ascii_hexdigit)
        .take(8)
        .collect();
    let mark = format!("_{}G", id.to_uppercase());
    for pod in ["team-nats-0", "team-nats-1", "team-nats-2"] {
        let path = "/jsz?accounts=true&streams=true";
        let body = probe::pod_get(&ctx.client, &ctx.ns, pod, 8222, path).await?;
        ensure!(
            !body.contains(&mark),
            "{pod} still lists a stream of run {name} ({mark}): {}",
            wait::truncate(&body, 2000)
        );
        ensure!(
            body.contains("account_details"),
            "{pod} /jsz lists no account: {body}"
        );
    }
    Ok(())
}

/// The monitored run's length: the barrier's baseline sample and at least one sample under
/// load (the operator samples every 5 s).
const MONITORED_SECONDS: u64 = 10;

/// The monitored run: `serverUsage` from the servers' own `/varz`, one row per monitoring URL
/// (named by its host and port) with memory above 0 and the version the image runs, every
/// server read (no `readErrors`).
fn servers_sampled(br: &DynamicObject, ns: &str) -> Result<()> {
    ensure!(
        CLUSTER.contains(&format!("nats-server:{NATS_VERSION}")),
        "the manifest runs another version than {NATS_VERSION}"
    );
    let u = s(br, "/status/result/serverUsage");
    ensure!(u["source"] == "nats /varz (endpoint monitoring)", "{u}");
    ensure!(u["unavailable"].is_null(), "{u}");
    ensure!(u["readErrors"].is_null(), "every server answered: {u}");
    ensure!(u["memoryBytesMax"].as_u64() > Some(0), "{u}");
    let rows = u["pods"].as_array().cloned().unwrap_or_default();
    let mut names: Vec<&str> = rows.iter().filter_map(|p| p["pod"].as_str()).collect();
    names.sort();
    let urls = monitoring_urls(ns);
    let want: Vec<&str> = (urls.iter())
        .filter_map(|u| u.strip_prefix("http://"))
        .collect();
    ensure!(names == want, "one row per monitoring URL, {want:?}: {u}");
    for p in &rows {
        ensure!(p["memoryBytesMax"].as_u64() > Some(0), "memory: {p}");
        ensure!(p["samples"].as_u64() >= Some(1), "sampled under load: {p}");
        ensure!(p["version"] == NATS_VERSION, "version: {p}");
    }
    println!("endpoint serverUsage: {u}");
    Ok(())
}

/// Without `endpoint.monitoring`: no figures, never zeros, and the reason says what to set.
fn usage_unavailable_without_monitoring(br: &DynamicObject) -> Result<()> {
    let u = s(br, "/status/result/serverUsage");
    let why = u["unavailable"].as_str().unwrap_or_default();
    ensure!(why.contains("endpoint.monitoring.urls"), "{u}");
    ensure!(
        u["pods"].is_null() && u["cpuCoresMean"].is_null() && u["samples"] == 0,
        "{u}"
    );
    Ok(())
}
