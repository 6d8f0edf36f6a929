//! What a fault did to a JetStreamCluster, seen from outside the operator: the servers' own logs
//! followed live, the stream's leader as each server claims it, a container's restarts, the
//! fault agent's nftables table as this host's `nft` sees it in the pod's network namespace, and
//! an independent client's figures against the run's.
use crate::kinds::Kind;
use crate::natsprobe::ProbeReport;
use crate::partition::nft_table_in_server_pod;
use crate::runs::field as s;
use crate::{wait, TestContext};
use anyhow::{ensure, Context, Result};
use futures::{AsyncBufReadExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::DynamicObject;
use kube::api::{Api, LogParams};
use serde_json::Value;
use std::time::Duration;

/// Server pods whose nats container restarted between `before` and now, other than `faulted`
/// (the pod a crash hit), each with why its last container ended (e.g. `OOMKilled`, exit 137):
/// an unplanned restart turns one fault into two, so what the fault did cannot be judged.
pub async fn unplanned_restarts(
    ctx: &TestContext,
    before: &[Pod],
    faulted: Option<&str>,
) -> Result<Vec<String>> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let mut out = Vec::new();
    for was in before {
        let name = kube::ResourceExt::name_any(was);
        if Some(name.as_str()) == faulted {
            continue;
        }
        let now = pods.get(&name).await?;
        if restarts(&now) != restarts(was) {
            let last = (now.status.as_ref())
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.name == "nats"))
                .and_then(|c| c.last_state.as_ref()?.terminated.as_ref())
                .map(|t| {
                    format!(
                        "{} (exit {})",
                        t.reason.as_deref().unwrap_or("?"),
                        t.exit_code
                    )
                });
            out.push(format!(
                "{name}: {}",
                last.unwrap_or_else(|| "no last state".into())
            ));
        }
    }
    Ok(out)
}

/// Restarts of `pod`'s nats container.
pub fn restarts(p: &Pod) -> Option<i32> {
    (p.status.as_ref())
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == "nats"))
        .map(|c| c.restart_count)
}

/// The log of `pod`'s nats container as it is written, until it ends (the container died) or
/// the task is stopped. Followed live because a crashed container's log may be gone by the time
/// the run ends (the kubelet does not always keep the dead container).
pub async fn follow_log(client: kube::Client, ns: String, pod: &'static str) -> Result<String> {
    let params = LogParams {
        container: Some("nats".into()),
        follow: true,
        ..LogParams::default()
    };
    let mut lines = Api::<Pod>::namespaced(client, &ns)
        .log_stream(pod, &params)
        .await?
        .lines();
    let mut text = String::new();
    while let Some(Ok(line)) = lines.next().await {
        text.push_str(&line);
        text.push('\n');
    }
    Ok(text)
}

/// The leader of the streams named `prefix…` as the servers report it, each change once.
pub async fn watch_leaders(
    client: kube::Client,
    ns: String,
    servers: &'static [&'static str],
    prefix: String,
    done: tokio::sync::watch::Receiver<bool>,
) -> Result<Vec<String>> {
    let mut leaders: Vec<String> = Vec::new();
    while !*done.borrow() {
        // All at once, each bounded: a paused server answers nothing until it is resumed.
        let asks = servers.iter().map(|&pod| {
            let get = crate::probe::pod_get(&client, &ns, pod, 8222, "/jsz?streams=true");
            async move { (pod, tokio::time::timeout(Duration::from_secs(1), get).await) }
        });
        for (pod, answer) in futures::future::join_all(asks).await {
            let Ok(Ok(body)) = answer else {
                continue; // a crashed or paused server
            };
            let jsz: Value = serde_json::from_str(&body).unwrap_or_default();
            let details = jsz["account_details"].as_array().into_iter().flatten();
            let streams = details.flat_map(|a| a["stream_detail"].as_array().into_iter().flatten());
            for st in streams {
                let ours = st["name"].as_str().is_some_and(|n| n.starts_with(&prefix));
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

/// The nftables table the fault agent owns (`bench_runner::fault_net::TABLE`).
pub const AGENT_TABLE: &str = "msgbench_fault";

/// How long the independent client publishes: from the stream's creation (before the measured
/// phase) past the fault (6 s in) and the election after it (up to 9 s), and done, drained and
/// read back before the run (24 s) ends and its stream goes.
pub const PROBE_SECONDS: u32 = 17;
/// Tolerances: lost acknowledged messages within 1 % of what the probe had acknowledged (both
/// count their own messages: the same loss shows in both in proportion), the longest publish
/// stall within a second.
pub const LOST_TOLERANCE: f64 = 0.01;
pub const STALL_TOLERANCE_MS: f64 = 1000.0;

/// The run's figures against the independent client's, measured through the same crash of the
/// same stream's leader.
pub fn agrees_with_the_probe(br: &DynamicObject, probe: &ProbeReport) -> Result<()> {
    let run_lost = s(br, "/status/result/lostAcked")
        .as_u64()
        .context("lostAcked")?;
    let run_stall = s(br, "/status/faults/0/effect/trialPublishStallMs")
        .as_f64()
        .context("trialPublishStallMs")?;
    eprintln!(
        "independent client (nats.go) in {}: published {}, acked {}, failed {}, received {}, \
         kept {}, lostAcked {} (run: {run_lost}), longest stall {:.0} ms (run: {run_stall:.0} \
         ms), longest delivery gap {:.0} ms, per second {:?}",
        probe.stream,
        probe.published,
        probe.acked,
        probe.failed,
        probe.received,
        probe.kept,
        probe.lost_acked,
        probe.longest_stall_ms,
        probe.longest_delivery_gap_ms,
        probe.per_second
    );
    ensure!(probe.acked > 0, "the probe had nothing acknowledged");
    let allowed = (probe.acked as f64 * LOST_TOLERANCE).ceil() as u64;
    ensure!(
        run_lost.abs_diff(probe.lost_acked) <= allowed,
        "lostAcked: run {run_lost}, independent client {} (tolerance {allowed})",
        probe.lost_acked
    );
    ensure!(
        (run_stall - probe.longest_stall_ms).abs() <= STALL_TOLERANCE_MS,
        "longest publish stall: run {run_stall:.0} ms, independent client {:.0} ms",
        probe.longest_stall_ms
    );
    Ok(())
}

/// Whether the agent's table was in the partitioned pod's network namespace while the run's
/// record said the partition was in place, and whether it was still there 3 s after the heal
/// time (the host's `nft`, not the agent, is asked).
pub async fn rules_seen_from_the_host(ctx: TestContext, run: &'static str) -> Result<(bool, bool)> {
    let api = Kind::BenchmarkRun.api(&ctx.client, &ctx.ns);
    let placed = |br: &DynamicObject| s(br, "/status/faults/0/partition/healTime").is_string();
    let br = wait::until(
        &api,
        run,
        Duration::from_secs(180),
        "the partition record",
        placed,
    )
    .await?;
    let record = s(&br, "/status/faults/0");
    let pod = record["pod"].as_str().context("no pod")?.to_string();
    let during = nft_table_in_server_pod(&pod, &ctx.ns, AGENT_TABLE)?;
    let heal: k8s_openapi::jiff::Timestamp = (record["partition"]["healTime"].as_str())
        .context("no heal time")?
        .parse()?;
    let wait_for = (heal - k8s_openapi::jiff::Timestamp::now())
        .get_seconds()
        .max(0)
        + 3;
    tokio::time::sleep(Duration::from_secs(wait_for as u64)).await;
    let after = nft_table_in_server_pod(&pod, &ctx.ns, AGENT_TABLE)?;
    Ok((during, after))
}

/// The record's stream leaders (`status.faults[].streamLeader`): before is the pod the fault
/// hit (it was chosen as the leader), and an after was read.
pub fn recorded_leaders(f: &Value, pod: &str) -> Result<(String, String)> {
    let sl = &f["streamLeader"];
    let (before, after) = (sl["before"].as_str(), sl["after"].as_str());
    eprintln!(
        "recorded stream leader around the fault on {pod}: before {before:?}, after {after:?}"
    );
    ensure!(
        before == Some(pod),
        "streamLeader.before should be {pod}: {f}"
    );
    let after = after.with_context(|| format!("no streamLeader.after: {f}"))?;
    Ok((pod.to_string(), after.to_string()))
}

/// The servers' client URLs by pod IP (for the independent client, which runs where they are
/// routed: `Flavour::reaching_pods`).
/// What a graceful nats-server stop prints, and a crash or a power loss never does.
const SHUTDOWN_LINES: [&str; 4] = [
    "Trapped",
    "lame duck",
    "Initiating JetStream Shutdown",
    "Server Exiting",
];

/// `log` (a server's own, followed up to its death) shows it running, then no shutdown at all.
pub fn died_without_shutdown(pod: &str, log: &str) -> Result<()> {
    ensure!(
        log.contains("Server is ready"),
        "{pod}: not the server's log: {log}"
    );
    for line in SHUTDOWN_LINES {
        ensure!(
            !log.contains(line),
            "{pod} logged {line:?}, a graceful stop:\n{}",
            wait::truncate(log, 3000)
        );
    }
    Ok(())
}

pub fn server_urls(pods: &[Pod]) -> Vec<String> {
    (pods.iter())
        .filter_map(|p| p.status.as_ref()?.pod_ip.clone())
        .map(|ip| format!("nats://{ip}:4222"))
        .collect()
}
