//! CPU headroom on the node: a pinned pod needs a whole free allocatable CPU, and pods left over
//! from other work (a demo, a benchmark, a terminating namespace) would keep it Pending.
use crate::wait;
use anyhow::{bail, Context, Result};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use kube::Client;
use std::time::Duration;

/// CPU quantity in millicores ("1", "1.5", "250m").
pub fn millicores(q: &str) -> Result<i64> {
    let q = q.trim();
    if let Some(m) = q.strip_suffix('m') {
        return m.parse().with_context(|| format!("bad CPU quantity {q:?}"));
    }
    let cores: f64 = q
        .parse()
        .with_context(|| format!("bad CPU quantity {q:?}"))?;
    Ok((cores * 1000.0).round() as i64)
}

/// (free millicores, pods holding CPU requests) on the node with the most free allocatable CPU.
pub async fn free_cpu(client: &Client) -> Result<(i64, Vec<String>)> {
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    let pods = Api::<Pod>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    let mut best: Option<(i64, Vec<String>)> = None;
    for node in nodes {
        let name = node.metadata.name.clone().unwrap_or_default();
        let allocatable = node
            .status
            .as_ref()
            .and_then(|s| s.allocatable.as_ref())
            .and_then(|a| a.get("cpu"))
            .map(|q| millicores(&q.0))
            .transpose()?
            .unwrap_or(0);
        let mut used = 0;
        let mut holders = Vec::new();
        for pod in &pods {
            let spec = pod.spec.as_ref();
            let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
            if spec.and_then(|s| s.node_name.as_deref()) != Some(name.as_str())
                || matches!(phase, Some("Succeeded" | "Failed"))
            {
                continue;
            }
            let req = pod_cpu_request(pod)?;
            if req > 0 {
                used += req;
                holders.push(format!(
                    "{}/{} ({req}m)",
                    pod.metadata.namespace.as_deref().unwrap_or("?"),
                    pod.metadata.name.as_deref().unwrap_or("?")
                ));
            }
        }
        let free = allocatable - used;
        if best.as_ref().is_none_or(|(f, _)| free > *f) {
            best = Some((free, holders));
        }
    }
    best.context("the cluster has no nodes")
}

/// What the kubelet's admission counts: the containers' sum or the largest init container.
pub fn pod_cpu_request(pod: &Pod) -> Result<i64> {
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(0);
    };
    let cpu = |c: &k8s_openapi::api::core::v1::Container| -> Result<i64> {
        match c
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref()?.get("cpu"))
        {
            Some(q) => millicores(&q.0),
            None => Ok(0),
        }
    };
    let mut sum = 0;
    for c in &spec.containers {
        sum += cpu(c)?;
    }
    let mut init = 0;
    for c in spec.init_containers.iter().flatten() {
        init = init.max(cpu(c)?);
    }
    Ok(sum.max(init))
}

/// Wait until some node has `millis` of unrequested allocatable CPU; the error names the holders.
pub async fn wait_for_free_cpu(client: &Client, millis: i64, timeout: Duration) -> Result<()> {
    let outcome = wait::poll(
        timeout,
        Duration::from_secs(2),
        &format!("{millis}m CPU free on a node"),
        || {
            let client = client.clone();
            async move { Ok((free_cpu(&client).await?.0 >= millis).then_some(())) }
        },
    )
    .await;
    if outcome.is_err() {
        let (free, holders) = free_cpu(client).await?;
        bail!(
            "only {free}m CPU free after {timeout:?}, {millis}m needed; CPU requested by: {}",
            holders.join(", ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn millicores_parses_kubernetes_cpu_quantities() {
        assert_eq!(super::millicores("1").unwrap(), 1000);
        assert_eq!(super::millicores("250m").unwrap(), 250);
        assert_eq!(super::millicores("1.5").unwrap(), 1500);
        assert!(super::millicores("lots").is_err());
    }
}
