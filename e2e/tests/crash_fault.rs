//! A `crash` is a crash: on an R3 memory-storage JetStreamCluster with its fault agent, the
//! stream leader's nats-server gets SIGKILL from the agent mid-run, and
//! - the run records the signal as the agent reports it (SIGKILL, nats-server, its pid);
//! - the server's own log of the killed container shows no shutdown: no trapped signal, no lame
//!   duck mode, no JetStream shutdown (what `kill`, a graceful deletion, always shows);
//! - the container restarted in place (same pod, exit code 137), and the stream's leader moved
//!   to another server, as the servers' own `/jsz` reports;
//! - publishing stalled for at least a Raft election (nats-server's election timeout is 4 to 9
//!   s after the last heartbeat; a graceful hand-over stalls for some 40 ms), and no
//!   acknowledged message was lost (R3).
//!
//! Later in the same run the new leader is paused (SIGSTOP for 6 s, then SIGCONT from the agent
//! itself): the record says so, the paused server comes back by itself (never restarted), the
//! leadership moves off it, and still nothing acknowledged is lost.
use anyhow::{ensure, Context, Result};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, LogParams};
use kube::ResourceExt;
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::runs::{field as s, finished};
use msgbench_e2e::{run, servers, TestContext};
use serde_json::Value;
use std::time::Duration;

const RUN: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata: {name: crash}
spec:
  target: {serverRef: {kind: JetStreamCluster, name: jsc}}
  workload:
    protocol: jetstream
    ratePerPublisher: 200
    durationSeconds: 24
    warmupSeconds: 0
    drainSeconds: 3
    jetstream: {stream: crash, replicas: 3, storage: memory}
  runners:
    resources:
      requests: {cpu: 20m, memory: 32Mi}
      limits: {memory: 128Mi}
  settleSeconds: 2
  faults:
    - {afterSeconds: 6, action: crash, pod: streamLeader}
    - {afterSeconds: 14, action: pause, pod: streamLeader, durationSeconds: 6}
"#;

/// What a graceful stop prints, and a crash never does.
const SHUTDOWN_LINES: [&str; 4] = [
    "Trapped",
    "lame duck",
    "Initiating JetStream Shutdown",
    "Server Exiting",
];

/// The least publish stall a leader crash can cost: the followers hear no heartbeat for at least
/// the minimum election timeout (4 s in nats-server's Raft) before one of them campaigns; a
/// second of slack for when the last heartbeat went out before the kill.
const ELECTION_STALL_MS: f64 = 3_000.0;

#[tokio::test]
async fn a_crash_is_a_sigkill_the_server_never_saw_coming() {
    run("crash-fault", body).await;
}

async fn body(ctx: TestContext) -> Result<()> {
    let server = servers::js_memory("jsc", 3, "none") + "  faultInjection: {enabled: true}\n";
    kinds::create(&ctx.client, &ctx.ns, &server).await?;
    servers::wait_ready(
        &ctx,
        Kind::JetStreamCluster,
        "jsc",
        Duration::from_secs(240),
    )
    .await?;
    let before = servers::server_pods(&ctx, "jsc").await?;
    kinds::create(&ctx.client, &ctx.ns, RUN).await?;
    let (done_tx, done_rx) = tokio::sync::watch::channel(false);
    let watcher = tokio::spawn(watch_leaders(ctx.client.clone(), ctx.ns.clone(), done_rx));
    let br = finished(&ctx, "crash", Duration::from_secs(300)).await;
    let _ = done_tx.send(true);
    let leaders = watcher.await??;
    let br = br?;
    ensure!(
        s(&br, "/status/phase") == "Succeeded",
        "verdict {}",
        s(&br, "/status/verdict")
    );
    let f = s(&br, "/status/faults/0");
    let pod = f["pod"]
        .as_str()
        .context("fault record names no pod")?
        .to_string();
    ensure!(
        f["signal"]["signal"] == "SIGKILL" && f["signal"]["process"] == "nats-server",
        "signal as the agent reports it: {f}"
    );
    ensure!(f["signal"]["pid"].as_i64().unwrap_or(0) > 0, "pid: {f}");

    // Restarted in place: the same pod, its server container killed by signal 9.
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let now = pods.get(&pod).await?;
    let was = before
        .iter()
        .find(|p| p.name_any() == pod)
        .context("pod before")?;
    ensure!(now.uid() == was.uid(), "{pod} was replaced, not crashed");
    let nats = now
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == "nats"))
        .context("nats container status")?;
    let exit = nats
        .last_state
        .as_ref()
        .and_then(|l| l.terminated.as_ref())
        .map(|t| t.exit_code);
    ensure!(
        nats.restart_count >= 1 && exit == Some(137),
        "restarts {}, last exit {exit:?}",
        nats.restart_count
    );
    let params = LogParams {
        container: Some("nats".into()),
        previous: true,
        ..LogParams::default()
    };
    let killed_log = pods.logs(&pod, &params).await?;
    ensure!(
        killed_log.contains("Server is ready"),
        "not the server's log: {killed_log}"
    );
    for line in SHUTDOWN_LINES {
        ensure!(
            !killed_log.contains(line),
            "the crashed server logged {line:?}, a graceful stop:\n{}",
            msgbench_e2e::wait::truncate(&killed_log, 3000)
        );
    }

    // The stream's leader moved off the crashed server.
    ensure!(
        leaders.first().map(String::as_str) == Some(pod.as_str()),
        "leaders seen {leaders:?}, the first should be the crashed {pod}"
    );
    ensure!(
        leaders.iter().any(|l| l != &pod),
        "the leader never moved off {pod}: {leaders:?}"
    );

    check_pause(&ctx, &br, &leaders).await?;

    // A real election's stall, and nothing acknowledged lost.
    let effect = &f["effect"];
    let stall = effect["trialPublishStallMs"].as_f64().context("stall")?;
    eprintln!(
        "crash of {pod}: publish stall {stall} ms, leaders {leaders:?}, lostAcked {}, pause: {}",
        s(&br, "/status/result/lostAcked"),
        s(&br, "/status/faults/1/message")
    );
    ensure!(
        stall >= ELECTION_STALL_MS,
        "publish stall {stall} ms, shorter than a leader election: {effect}"
    );
    ensure!(
        s(&br, "/status/result/lostAcked").as_u64() == Some(0),
        "lostAcked {}",
        s(&br, "/status/result/lostAcked")
    );
    Ok(())
}

/// The pause: SIGSTOP to the leader of the moment, resumed by the agent 6 s later, the server
/// never restarted for it, and the leadership moved off it.
async fn check_pause(
    ctx: &TestContext,
    br: &kube::api::DynamicObject,
    leaders: &[String],
) -> Result<()> {
    let f = s(br, "/status/faults/1");
    let pod = f["pod"].as_str().context("pause record names no pod")?;
    ensure!(f["signal"]["signal"] == "SIGSTOP", "pause record: {f}");
    let time = |k: &str| {
        f["signal"][k]
            .as_str()
            .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
    };
    let (sent, resume) = (time("sentTime"), time("resumeTime"));
    let paused = resume.zip(sent).map(|(r, s)| (r - s).get_seconds());
    ensure!(paused == Some(6), "paused for {paused:?} s: {f}");
    let at = leaders.iter().position(|l| l == pod);
    ensure!(
        at.is_some_and(|i| leaders[i + 1..].iter().any(|l| l != pod)),
        "leadership never moved off the paused {pod}: {leaders:?}"
    );
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let restarts = (pods.get(pod).await?.status)
        .and_then(|s| s.container_statuses)
        .and_then(|cs| cs.into_iter().find(|c| c.name == "nats"))
        .map(|c| c.restart_count);
    let crashed = s(br, "/status/faults/0/pod") == pod;
    ensure!(
        restarts == Some(i32::from(crashed)),
        "the paused {pod} restarted {restarts:?} times (crashed before: {crashed})"
    );
    Ok(())
}

/// The run's stream leader as the servers report it, each change once, in order.
async fn watch_leaders(
    client: kube::Client,
    ns: String,
    done: tokio::sync::watch::Receiver<bool>,
) -> Result<Vec<String>> {
    let mut leaders: Vec<String> = Vec::new();
    while !*done.borrow() {
        for pod in ["jsc-0", "jsc-1", "jsc-2"] {
            let Ok(body) =
                msgbench_e2e::probe::pod_get(&client, &ns, pod, 8222, "/jsz?streams=true").await
            else {
                continue; // the crashed server, restarting
            };
            let jsz: Value = serde_json::from_str(&body).unwrap_or_default();
            let details = jsz["account_details"].as_array().into_iter().flatten();
            let streams = details.flat_map(|a| a["stream_detail"].as_array().into_iter().flatten());
            for st in streams {
                let ours = st["name"].as_str().is_some_and(|n| n.starts_with("crash_"));
                // Only a server's own claim to lead counts (a follower's view may lag).
                if ours
                    && st["cluster"]["leader"].as_str() == Some(pod)
                    && leaders.last().map(String::as_str) != Some(pod)
                {
                    leaders.push(pod.to_string());
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    Ok(leaders)
}
