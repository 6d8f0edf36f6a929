//! Talks to runner agents on their pod IPs: release the start barrier, read progress, collect
//! results and confirm them. Every call presents the run's token (the agent refuses others).
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use runner_api::agent::{AgentProgress, AgentResults, ResultsAck, StartRequest, AGENT_PORT};
use std::time::Duration;

/// Largest body read from an agent (a 120-trial run's records are a few MB).
const MAX_BODY_BYTES: usize = 64 << 20;

async fn call(
    ip: &str,
    token: &str,
    method: &str,
    path: &str,
    body: Option<String>,
) -> anyhow::Result<Bytes> {
    let addr: std::net::IpAddr = ip.parse()?;
    let stream = tokio::net::TcpStream::connect((addr, AGENT_PORT)).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    let driver = tokio::spawn(conn);
    let req = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header(hyper::header::HOST, format!("{ip}:{AGENT_PORT}"))
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .header(hyper::header::AUTHORIZATION, format!("Bearer {token}"))
        .body(Full::new(Bytes::from(body.unwrap_or_default())))?;
    let resp = sender.send_request(req).await?;
    let status = resp.status();
    let bytes = http_body_util::Limited::new(resp.into_body(), MAX_BODY_BYTES)
        .collect()
        .await
        .map_err(|e| anyhow::anyhow!("{method} {path} on {ip}: body: {e}"))?
        .to_bytes();
    driver.abort();
    anyhow::ensure!(status.is_success(), "{method} {path} on {ip}: {status}");
    Ok(bytes)
}

/// POST /start for `trial`; returns the start time the agent keeps (the first one it got for
/// that trial, so resending is safe and a differing answer shows an earlier release).
pub async fn start(
    ip: &str,
    token: &str,
    trial: u32,
    start_at_unix_ms: u64,
) -> anyhow::Result<u64> {
    let body = serde_json::to_string(&StartRequest {
        start_at_unix_ms,
        trial,
    })?;
    let b = tokio::time::timeout(
        Duration::from_secs(3),
        call(ip, token, "POST", "/start", Some(body)),
    )
    .await??;
    Ok(serde_json::from_slice::<StartRequest>(&b)?.start_at_unix_ms)
}

/// GET /progress, best effort.
pub async fn progress(ip: &str, token: &str) -> Option<AgentProgress> {
    let b = tokio::time::timeout(
        Duration::from_secs(2),
        call(ip, token, "GET", "/progress", None),
    )
    .await
    .ok()?
    .ok()?;
    serde_json::from_slice(&b).ok()
}

/// GET /results: the agent's records so far.
pub async fn results(ip: &str, token: &str) -> anyhow::Result<AgentResults> {
    let b = tokio::time::timeout(
        Duration::from_secs(20),
        call(ip, token, "GET", "/results", None),
    )
    .await
    .map_err(|_| anyhow::anyhow!("GET /results on {ip}: no answer within 20s"))??;
    Ok(serde_json::from_slice(&b)?)
}

/// POST /results/ack: the operator stored `records` records; the agent may exit.
pub async fn ack(ip: &str, token: &str, records: u32) -> anyhow::Result<()> {
    let body = serde_json::to_string(&ResultsAck { records })?;
    tokio::time::timeout(
        Duration::from_secs(3),
        call(ip, token, "POST", "/results/ack", Some(body)),
    )
    .await??;
    Ok(())
}
