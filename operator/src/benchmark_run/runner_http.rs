//! Talks to runner agents on their pod IPs: release the start barrier, read progress.
use bench_runner::agent::{AgentProgress, StartRequest, AGENT_PORT};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use std::time::Duration;

async fn call(ip: &str, method: &str, path: &str, body: Option<String>) -> anyhow::Result<Bytes> {
    let addr: std::net::IpAddr = ip.parse()?;
    let stream = tokio::net::TcpStream::connect((addr, AGENT_PORT)).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    let driver = tokio::spawn(conn);
    let req = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header(hyper::header::HOST, format!("{ip}:{AGENT_PORT}"))
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body.unwrap_or_default())))?;
    let resp = sender.send_request(req).await?;
    let status = resp.status();
    let bytes = resp.into_body().collect().await?.to_bytes();
    driver.abort();
    anyhow::ensure!(status.is_success(), "{method} {path} on {ip}: {status}");
    Ok(bytes)
}

/// POST /start for `trial`; the agent keeps the first start time it got for a trial, so
/// resending is safe.
pub async fn start(ip: &str, trial: u32, start_at_unix_ms: u64) -> anyhow::Result<()> {
    let body = serde_json::to_string(&StartRequest {
        start_at_unix_ms,
        trial,
    })?;
    tokio::time::timeout(
        Duration::from_secs(3),
        call(ip, "POST", "/start", Some(body)),
    )
    .await??;
    Ok(())
}

/// GET /progress, best effort.
pub async fn progress(ip: &str) -> Option<AgentProgress> {
    let b = tokio::time::timeout(Duration::from_secs(2), call(ip, "GET", "/progress", None))
        .await
        .ok()?
        .ok()?;
    serde_json::from_slice(&b).ok()
}
