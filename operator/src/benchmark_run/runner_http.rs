//! Talks to runner agents on their pod IPs: release the start barrier, read progress, collect
//! results and confirm them. Every call presents the run's token (the agent refuses others).
use bench_runner::agent::{AgentProgress, AgentResults, ResultsAck, StartRequest};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::time::Duration;

/// Largest body read from an agent (a 120-trial run's records are a few MB).
const MAX_BODY_BYTES: usize = 64 << 20;

/// The agent's control address on a pod IP; `None` for an address that is not an IP.
pub fn agent_addr(ip: &str, port: u16) -> Option<SocketAddr> {
    Some(SocketAddr::new(ip.parse().ok()?, port))
}

async fn call(
    addr: SocketAddr,
    token: &str,
    method: &str,
    path: &str,
    body: Option<String>,
) -> anyhow::Result<Bytes> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    let driver = tokio::spawn(conn);
    let req = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header(hyper::header::HOST, addr.to_string())
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .header(hyper::header::AUTHORIZATION, format!("Bearer {token}"))
        .body(Full::new(Bytes::from(body.unwrap_or_default())))?;
    let resp = sender.send_request(req).await?;
    let status = resp.status();
    let bytes = http_body_util::Limited::new(resp.into_body(), MAX_BODY_BYTES)
        .collect()
        .await
        .map_err(|e| anyhow::anyhow!("{method} {path} on {addr}: body: {e}"))?
        .to_bytes();
    driver.abort();
    anyhow::ensure!(status.is_success(), "{method} {path} on {addr}: {status}");
    Ok(bytes)
}

/// POST /start for `trial`; returns the start time the agent keeps (the first one it got for
/// that trial, so resending is safe and a differing answer shows an earlier release).
pub async fn start(
    addr: SocketAddr,
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
        call(addr, token, "POST", "/start", Some(body)),
    )
    .await??;
    Ok(serde_json::from_slice::<StartRequest>(&b)?.start_at_unix_ms)
}

/// GET /progress, best effort.
pub async fn progress(addr: SocketAddr, token: &str) -> Option<AgentProgress> {
    let b = tokio::time::timeout(
        Duration::from_secs(2),
        call(addr, token, "GET", "/progress", None),
    )
    .await
    .ok()?
    .ok()?;
    serde_json::from_slice(&b).ok()
}

/// GET /results: the agent's records so far.
pub async fn results(addr: SocketAddr, token: &str) -> anyhow::Result<AgentResults> {
    let b = tokio::time::timeout(
        Duration::from_secs(20),
        call(addr, token, "GET", "/results", None),
    )
    .await
    .map_err(|_| anyhow::anyhow!("GET /results on {addr}: no answer within 20s"))??;
    Ok(serde_json::from_slice(&b)?)
}

/// POST /results/ack: the operator stored `records` records; the agent may exit.
pub async fn ack(addr: SocketAddr, token: &str, records: u32) -> anyhow::Result<()> {
    let body = serde_json::to_string(&ResultsAck { records })?;
    tokio::time::timeout(
        Duration::from_secs(3),
        call(addr, token, "POST", "/results/ack", Some(body)),
    )
    .await??;
    Ok(())
}
