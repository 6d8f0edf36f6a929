//! Talks to runner agents on their pod IPs: release the start barrier, read progress, collect
//! results and confirm them. Every call presents the run's token (the agent refuses others).
//! Each call takes the agent's address (pod IP and port, see [`agent_addr`]; the port is
//! `AGENT_PORT` outside tests), so tests can run fake agents on any local port.
use crate::access::pod_http::{self, Options};
use crate::runtime::merge_budget::Reservation;
use runner_api::agent::{
    AgentProgress, AgentResults, RawJson, ResultsAck, StartRequest, StopRequest,
};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// Largest control answer read from an agent (results have their own bound, see `results`).
const MAX_BODY_BYTES: usize = 1 << 20;

/// The agent's control endpoint on a runner pod's IP; `None` when `pod_ip` is not an IP.
pub fn agent_addr(pod_ip: &str, port: u16) -> Option<SocketAddr> {
    let ip: IpAddr = pod_ip.parse().ok()?;
    Some(SocketAddr::new(ip, port))
}

fn options(token: &str, timeout_secs: u64) -> Options<'_> {
    Options::new(Duration::from_secs(timeout_secs), MAX_BODY_BYTES).bearer(token)
}

/// POST /start for `trial`; returns the start time the agent keeps (the first one it got for
/// that trial, so resending is safe and a differing answer shows an earlier release).
pub async fn start(
    addr: SocketAddr,
    token: &str,
    trial: u32,
    start_at_unix_ms: u64,
) -> anyhow::Result<u64> {
    let req = StartRequest {
        start_at_unix_ms,
        trial,
    };
    let reply = pod_http::post_json(addr, "/start", &req, options(token, 3)).await?;
    Ok(reply.json::<StartRequest>()?.start_at_unix_ms)
}

/// POST /stop: run no trial after `after_trial`; returns the stop the agent keeps (its first,
/// so resending is safe). A 409 means it had already released a later trial.
pub async fn stop(addr: SocketAddr, token: &str, after_trial: u32) -> anyhow::Result<u32> {
    let req = StopRequest { after_trial };
    let reply = pod_http::post_json(addr, "/stop", &req, options(token, 3)).await?;
    Ok(reply.json::<StopRequest>()?.after_trial)
}

/// GET /progress, best effort.
pub async fn progress(addr: SocketAddr, token: &str) -> Option<AgentProgress> {
    let reply = pod_http::get(addr, "/progress", options(token, 2)).await;
    reply.ok()?.json().ok()
}

/// GET /results: the agent's records so far, read as at most `max_bytes` held in `held` (the
/// operator's memory budget; records stay JSON text until merged).
pub async fn results(
    addr: SocketAddr,
    token: &str,
    max_bytes: usize,
    held: &mut Reservation,
) -> Result<AgentResults<RawJson>, pod_http::Error> {
    let opts = Options::new(Duration::from_secs(20), max_bytes).bearer(token);
    let reply = pod_http::get_reserved(addr, "/results", opts, held).await?;
    reply.json()
}

/// POST /results/ack: the operator stored `records` records; the agent may exit.
pub async fn ack(addr: SocketAddr, token: &str, records: u32) -> anyhow::Result<()> {
    let body = ResultsAck { records };
    pod_http::post_json(addr, "/results/ack", &body, options(token, 3)).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::{header, HeaderMap, StatusCode};
    use axum::routing::post;
    use axum::{Json, Router};
    use runner_api::agent::AGENT_PORT;

    /// A fake agent on 127.0.0.1 and any port: keeps the first start time, takes one token.
    async fn fake_agent() -> SocketAddr {
        let authorized = |h: &HeaderMap| {
            h.get(header::AUTHORIZATION)
                .is_some_and(|v| v == "Bearer t0k")
        };
        let app = Router::new()
            .route(
                "/start",
                post(
                    move |h: HeaderMap, Json(r): Json<StartRequest>| async move {
                        if !authorized(&h) {
                            return Err(StatusCode::FORBIDDEN);
                        }
                        Ok(Json(StartRequest {
                            start_at_unix_ms: 1_000,
                            trial: r.trial,
                        }))
                    },
                ),
            )
            .route(
                "/results/ack",
                post(move |h: HeaderMap, Json(a): Json<ResultsAck>| async move {
                    match (authorized(&h), a.records) {
                        (false, _) => StatusCode::FORBIDDEN,
                        (true, 3) => StatusCode::OK,
                        (true, _) => StatusCode::CONFLICT,
                    }
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        addr
    }

    #[tokio::test]
    async fn calls_reach_an_agent_at_any_address_with_the_token() {
        let addr = fake_agent().await;
        assert_eq!(start(addr, "t0k", 2, 5_000).await.unwrap(), 1_000);
        let refused = start(addr, "other", 2, 5_000).await.unwrap_err();
        assert!(refused.to_string().contains("403 Forbidden"), "{refused}");
        ack(addr, "t0k", 3).await.unwrap();
        let conflict = ack(addr, "t0k", 4).await.unwrap_err().to_string();
        assert_eq!(
            conflict,
            format!("POST http://{addr}/results/ack: 409 Conflict")
        );
        assert_eq!(progress(addr, "t0k").await, None, "no /progress here");
    }

    #[test]
    fn a_pod_ip_becomes_the_agent_port() {
        let a = agent_addr("10.1.2.3", AGENT_PORT).unwrap();
        assert_eq!(
            (a.ip().to_string(), a.port()),
            ("10.1.2.3".into(), AGENT_PORT)
        );
        assert_eq!(
            agent_addr("fd00::7", AGENT_PORT).unwrap().port(),
            AGENT_PORT
        );
        assert_eq!(agent_addr("runner-0", AGENT_PORT), None);
    }
}
