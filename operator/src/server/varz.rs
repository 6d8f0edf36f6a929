//! nats-server `/varz` on the pod IP: the CPU count and GOMAXPROCS the server really uses.

use crate::access::pod_http::{self, Options};
use msgbench_operator_core::server::status::ServerReport;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// Short: the report is optional. The body is a few kB of JSON.
const OPTIONS: Options<'static> = Options::new(Duration::from_secs(2), 1 << 20);

#[derive(serde::Deserialize)]
struct Varz {
    cores: Option<u32>,
    gomaxprocs: Option<u16>,
}

/// Best effort with a short timeout: a missing report only leaves the fields unset.
pub async fn fetch(pod_ip: &str, port: u16) -> Option<ServerReport> {
    let Ok(ip) = pod_ip.parse::<IpAddr>() else {
        tracing::debug!(%pod_ip, "varz: not an IP address");
        return None;
    };
    let read = pod_http::get(SocketAddr::new(ip, port), "/varz", OPTIONS).await;
    match read.and_then(|r| r.json::<Varz>()) {
        Ok(v) => Some(ServerReport {
            cores: v.cores,
            threads: v.gomaxprocs,
        }),
        Err(e) => {
            tracing::debug!(%pod_ip, error = %e, "varz not readable");
            None
        }
    }
}
