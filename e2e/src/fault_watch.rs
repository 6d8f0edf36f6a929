//! What a fault did to a JetStreamCluster, seen from outside the operator: the servers' own logs
//! followed live, the stream's leader as each server claims it, a container's restarts.
use anyhow::Result;
use futures::{AsyncBufReadExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, LogParams};
use serde_json::Value;
use std::time::Duration;

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
