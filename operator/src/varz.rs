//! nats-server `/varz` on the pod IP: the CPU count and GOMAXPROCS the server really uses.

use crate::status::ServerReport;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use std::time::Duration;

#[derive(serde::Deserialize)]
struct Varz {
    cores: Option<u32>,
    gomaxprocs: Option<u16>,
}

/// Best effort with a short timeout: a missing report only leaves the fields unset.
pub async fn fetch(pod_ip: &str, port: u16) -> Option<ServerReport> {
    match tokio::time::timeout(Duration::from_secs(2), get(pod_ip, port)).await {
        Ok(Ok(r)) => Some(r),
        Ok(Err(e)) => {
            tracing::debug!(%pod_ip, error = %e, "varz not readable");
            None
        }
        Err(_) => {
            tracing::debug!(%pod_ip, "varz timed out");
            None
        }
    }
}

async fn get(pod_ip: &str, port: u16) -> anyhow::Result<ServerReport> {
    let ip: std::net::IpAddr = pod_ip.parse()?;
    let stream = tokio::net::TcpStream::connect((ip, port)).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    let driver = tokio::spawn(conn);
    let req = hyper::Request::get("/varz")
        .header(hyper::header::HOST, format!("{pod_ip}:{port}"))
        .body(Empty::<Bytes>::new())?;
    let resp = sender.send_request(req).await?;
    anyhow::ensure!(
        resp.status().is_success(),
        "varz returned {}",
        resp.status()
    );
    let body = resp.into_body().collect().await?.to_bytes();
    driver.abort();
    let v: Varz = serde_json::from_slice(&body)?;
    Ok(ServerReport {
        cores: v.cores,
        threads: v.gomaxprocs,
    })
}
