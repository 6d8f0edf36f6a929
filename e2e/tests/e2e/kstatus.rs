//! The four kinds as kstatus itself judges them (sigs.k8s.io/cli-utils through
//! `e2e/kstatusprobe`, what Flux's `wait` and kpt run): InProgress while rolling out or running,
//! Current once Ready (a server) or passed (a run), Failed when the spec cannot be served — a
//! sysctl the kubelet refuses (admission accepts it: the spec opts in), a run whose target
//! nothing listens on.
use anyhow::{ensure, Result};
use kube::api::DynamicObject;
use msgbench_crds::conditions::{READY, RECONCILING, STALLED};
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::runs::finished;
use msgbench_e2e::{kstatus, run, wait, TestContext};
use std::time::Duration;

/// The kubelet's allow-list on the e2e node has only net.core.somaxconn and
/// net.ipv4.tcp_max_syn_backlog: kernel.msgmax (IPC-namespaced) is refused with SysctlForbidden.
const FORBIDDEN_TUNING: &str = r#"
  tuning:
    allowUnsafeSysctls: true
    sysctls:
      - {name: kernel.msgmax, value: "65536"}"#;

const RESOURCES: &str = r#"
  resources:
    requests: {cpu: 10m, memory: 32Mi}
    limits: {memory: 128Mi}"#;

fn server(kind: Kind, name: &str, extra: &str) -> String {
    let spec = match kind {
        Kind::JetStreamCluster => {
            "  replicas: 1\n  jetstream:\n    storage: {type: memory}\n    maxMemoryStore: 32Mi"
        }
        Kind::MqttBroker => "  engine: mosquitto\n  replicas: 1",
        _ => "  protocol: socketio\n  emitMode: parallel\n  database: memory",
    };
    format!(
        "apiVersion: msgbench.dev/v1alpha1\nkind: {}\nmetadata:\n  name: {name}\nspec:\n{spec}{RESOURCES}{extra}\n",
        kind.name()
    )
}

/// kstatus' verdict on `obj` is `want`; the error shows the conditions it read.
fn judged(obj: &DynamicObject, want: &str) -> Result<()> {
    let got = kstatus::compute(obj)?;
    ensure!(
        got.status == want,
        "kstatus says {} ({}), want {want}; conditions: {}",
        got.status,
        got.message,
        kinds::conditions_summary(obj)
    );
    Ok(())
}

/// Waits for `name` to satisfy `what` (a condition True for its current generation).
async fn until_true(
    ctx: &TestContext,
    kind: Kind,
    name: &str,
    type_: &'static str,
) -> Result<DynamicObject> {
    let api = kind.api(&ctx.client, &ctx.ns);
    let what = format!("{} {name}: {type_}=True", kind.name());
    wait::until(&api, name, Duration::from_secs(180), &what, move |o| {
        kinds::is_true_now(o, type_)
    })
    .await
}

async fn server_kind(ctx: TestContext, kind: Kind) -> Result<()> {
    kinds::create(&ctx.client, &ctx.ns, &server(kind, "served", "")).await?;
    kinds::create(
        &ctx.client,
        &ctx.ns,
        &server(kind, "refused", FORBIDDEN_TUNING),
    )
    .await?;

    let rolling = until_true(&ctx, kind, "served", RECONCILING).await?;
    judged(&rolling, "InProgress")?;
    let ready = until_true(&ctx, kind, "served", READY).await?;
    judged(&ready, "Current")?;

    let refused = until_true(&ctx, kind, "refused", STALLED).await?;
    let stalled = kinds::condition(&refused, STALLED)
        .cloned()
        .unwrap_or_default();
    ensure!(
        stalled["reason"] == "SysctlForbidden",
        "Stalled reason: {stalled}"
    );
    judged(&refused, "Failed")
}

#[tokio::test]
async fn jetstream_cluster() {
    run("kstatus-js", |ctx| server_kind(ctx, Kind::JetStreamCluster)).await;
}

#[tokio::test]
async fn mqtt_broker() {
    run("kstatus-mqtt", |ctx| server_kind(ctx, Kind::MqttBroker)).await;
}

#[tokio::test]
async fn pubsub_server() {
    run("kstatus-pubsub", |ctx| server_kind(ctx, Kind::PubSubServer)).await;
}

fn run_manifest(name: &str, target: &str, extra: &str) -> String {
    format!(
        r#"apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata:
  name: {name}
spec:
  target: {target}
  workload: {{protocol: nats, publishers: 1, subscribers: 1, payloadBytes: 64, ratePerPublisher: 20, durationSeconds: 2, drainSeconds: 1}}
  runners:
    count: 1
    resources:
      requests: {{cpu: 10m, memory: 32Mi}}
      limits: {{memory: 128Mi}}
  barrierTimeoutSeconds: 60
{extra}"#
    )
}

/// A running run is InProgress, a passed one Current, a failed one (nothing listens on its
/// target) Failed: what a Flux `wait` on a BenchmarkRun should read as the gate.
#[tokio::test]
async fn benchmark_run() {
    run("kstatus-run", |ctx| async move {
        kinds::create(
            &ctx.client,
            &ctx.ns,
            &server(Kind::JetStreamCluster, "js", ""),
        )
        .await?;
        let target = "{serverRef: {kind: JetStreamCluster, name: js}}";
        kinds::create(&ctx.client, &ctx.ns, &run_manifest("passes", target, "")).await?;
        let nobody = r#"{endpoint: {protocol: nats, url: "nats://127.0.0.1:4222"}}"#;
        let fails = run_manifest("fails", nobody, "  connectTimeoutSeconds: 3\n");
        kinds::create(&ctx.client, &ctx.ns, &fails).await?;

        let running = until_true(&ctx, Kind::BenchmarkRun, "passes", RECONCILING).await?;
        judged(&running, "InProgress")?;
        let passed = finished(&ctx, "passes", Duration::from_secs(240)).await?;
        ensure!(
            kinds::is_true_now(&passed, "Succeeded"),
            "the run did not pass: {}",
            kinds::conditions_summary(&passed)
        );
        judged(&passed, "Current")?;

        let failed = finished(&ctx, "fails", Duration::from_secs(120)).await?;
        judged(&failed, "Failed")
    })
    .await;
}
