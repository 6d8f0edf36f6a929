//! HTTP to pods and Services through the API server's proxy: the test process never needs a route
//! to pod IPs (kind's are not routed to this host's own namespace), and all traffic stays inside
//! the cluster.
use anyhow::{Context, Result};
use kube::Client;

/// GET `path` on `pod:port` through the pod proxy; returns the body.
pub async fn pod_get(
    client: &Client,
    ns: &str,
    pod: &str,
    port: u16,
    path: &str,
) -> Result<String> {
    let uri = format!(
        "/api/v1/namespaces/{ns}/pods/{pod}:{port}/proxy/{}",
        path.trim_start_matches('/')
    );
    get(client, &uri).await
}

/// GET `path` on `service:port` through the service proxy.
pub async fn service_get(
    client: &Client,
    ns: &str,
    svc: &str,
    port: u16,
    path: &str,
) -> Result<String> {
    let uri = format!(
        "/api/v1/namespaces/{ns}/services/{svc}:{port}/proxy/{}",
        path.trim_start_matches('/')
    );
    get(client, &uri).await
}

/// POST a JSON body to `path` on `service:port` through the service proxy.
pub async fn service_post_json(
    client: &Client,
    ns: &str,
    svc: &str,
    port: u16,
    path: &str,
    body: &serde_json::Value,
) -> Result<String> {
    let uri = format!(
        "/api/v1/namespaces/{ns}/services/{svc}:{port}/proxy/{}",
        path.trim_start_matches('/')
    );
    let req = http::Request::post(&uri)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(body)?)
        .context("building proxy request")?;
    client
        .request_text(req)
        .await
        .with_context(|| format!("POST {uri}"))
}

async fn get(client: &Client, uri: &str) -> Result<String> {
    let req = http::Request::get(uri)
        .body(Vec::new())
        .context("building proxy request")?;
    client
        .request_text(req)
        .await
        .with_context(|| format!("GET {uri}"))
}

/// `/metrics` of every running operator pod, concatenated (only the leader reconciles, so
/// only its scrape carries the run gauges).
pub async fn operator_metrics(client: &Client) -> Result<String> {
    use crate::chart::{self, OPERATOR_SELECTOR};
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, ListParams};
    let pods = Api::<Pod>::namespaced(client.clone(), chart::namespace())
        .list(&ListParams::default().labels(OPERATOR_SELECTOR))
        .await?;
    let mut out = String::new();
    for pod in pods.items {
        let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
        if running && pod.metadata.deletion_timestamp.is_none() {
            let name = pod.metadata.name.unwrap_or_default();
            out += &pod_get(client, chart::namespace(), &name, 8080, "/metrics").await?;
        }
    }
    Ok(out)
}
