//! Talks to runner agents on their pod IPs: release the start barrier, read progress, collect
//! results and confirm them. Every call presents a credential signed for the run and for that
//! very request (the agent refuses others, and any credential a second time). Each call takes
//! the agent's address (pod IP and port, see [`agent_addr`]; the port is `AGENT_PORT` outside
//! tests), so tests can run fake agents on any local port.
use crate::access::control_key::RequestSigner;
use crate::access::pod_http::{self, Options};
use crate::runtime::merge_budget::Reservation;
use runner_api::agent::{
    AgentProgress, AgentResults, RawJson, ResultsAck, StartRequest, StopRequest,
};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// Largest control answer read from an agent (results have their own bound, see `results`):
/// `/progress` is a dozen numbers (~300 bytes), `/start` and `/stop` echo one or two, so an
/// agent answering more is broken or hostile, and each runner of each run is polled.
pub const MAX_BODY_BYTES: usize = 16 << 10;

/// The agent's control endpoint on a runner pod's IP; `None` when `pod_ip` is not an IP.
pub fn agent_addr(pod_ip: &str, port: u16) -> Option<SocketAddr> {
    let ip: IpAddr = pod_ip.parse().ok()?;
    Some(SocketAddr::new(ip, port))
}

fn options(control: RequestSigner<'_>, timeout_secs: u64) -> Options<'_> {
    Options::new(Duration::from_secs(timeout_secs), MAX_BODY_BYTES).signed(control)
}

/// POST /start for `trial`; returns the start time the agent keeps (the first one it got for
/// that trial, so resending is safe and a differing answer shows an earlier release).
pub async fn start(
    addr: SocketAddr,
    control: RequestSigner<'_>,
    trial: u32,
    start_at_unix_ms: u64,
) -> anyhow::Result<u64> {
    let req = StartRequest {
        start_at_unix_ms,
        trial,
    };
    let reply = pod_http::post_json(addr, "/start", &req, options(control, 3)).await?;
    Ok(reply.json::<StartRequest>()?.start_at_unix_ms)
}

/// POST /stop: run no trial after `after_trial`; returns the stop the agent keeps (its first,
/// so resending is safe). A 409 means it had already released a later trial.
pub async fn stop(
    addr: SocketAddr,
    control: RequestSigner<'_>,
    after_trial: u32,
) -> anyhow::Result<u32> {
    let req = StopRequest { after_trial };
    let reply = pod_http::post_json(addr, "/stop", &req, options(control, 3)).await?;
    Ok(reply.json::<StopRequest>()?.after_trial)
}

/// GET /progress, best effort.
pub async fn progress(addr: SocketAddr, control: RequestSigner<'_>) -> Option<AgentProgress> {
    let reply = pod_http::get(addr, "/progress", options(control, 2)).await;
    reply.ok()?.json().ok()
}

/// GET /results: the agent's records so far, read as at most `max_bytes` held in `held` (the
/// operator's memory budget; records stay JSON text until merged).
pub async fn results(
    addr: SocketAddr,
    control: RequestSigner<'_>,
    max_bytes: usize,
    held: &mut Reservation,
) -> Result<AgentResults<RawJson>, pod_http::Error> {
    let opts = Options::new(Duration::from_secs(20), max_bytes).signed(control);
    let reply = pod_http::get_reserved(addr, "/results", opts, held).await?;
    reply.json()
}

/// POST /results/ack: the operator stored `records` records; the agent may exit.
pub async fn ack(addr: SocketAddr, control: RequestSigner<'_>, records: u32) -> anyhow::Result<()> {
    let body = ResultsAck { records };
    pod_http::post_json(addr, "/results/ack", &body, options(control, 3)).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::{header, HeaderMap, StatusCode};
    use axum::routing::{get, post};
    use axum::{Json, Router};
    use runner_api::agent::AGENT_PORT;
    use runner_api::control_auth::{ControlSigner, ControlVerifier};

    const SCOPE: &str = "run-uid";

    fn signer() -> ControlSigner {
        ControlSigner::from_seed([6; 32])
    }

    /// Whether `h` carries a credential the run's agent accepts for `method path`, once.
    fn authorized(v: &ControlVerifier, h: &HeaderMap, method: &str, path: &str) -> bool {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let credential =
            (h.get(header::AUTHORIZATION)).and_then(|v| v.to_str().ok()?.strip_prefix("Bearer "));
        credential.is_some_and(|c| v.check(c, method, path, now).is_ok())
    }

    /// A fake agent on 127.0.0.1 and any port: keeps the first start time, checks credentials
    /// as a real agent does (this run, this request, once), answers `/progress` with `pad`
    /// extra bytes.
    async fn fake_agent(pad: usize) -> SocketAddr {
        let v = ControlVerifier::new(&signer().public_keys(), SCOPE).unwrap();
        let (v1, v2, v3) = (v.clone(), v.clone(), v);
        let app = Router::new()
            .route(
                "/start",
                post(
                    move |h: HeaderMap, Json(r): Json<StartRequest>| async move {
                        if !authorized(&v1, &h, "POST", "/start") {
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
                    match (authorized(&v2, &h, "POST", "/results/ack"), a.records) {
                        (false, _) => StatusCode::FORBIDDEN,
                        (true, 3) => StatusCode::OK,
                        (true, _) => StatusCode::CONFLICT,
                    }
                }),
            )
            .route(
                "/progress",
                get(move |h: HeaderMap| async move {
                    if !authorized(&v3, &h, "GET", "/progress") {
                        return Err(StatusCode::FORBIDDEN);
                    }
                    let mut p = serde_json::to_value(AgentProgress::default()).unwrap();
                    p["pad"] = "x".repeat(pad).into();
                    Ok(Json(p))
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        addr
    }

    #[tokio::test]
    async fn calls_reach_an_agent_at_any_address_each_with_its_own_credential() {
        let addr = fake_agent(0).await;
        let key = signer();
        let run = RequestSigner::new(&key, SCOPE);
        assert_eq!(start(addr, run, 2, 5_000).await.unwrap(), 1_000);
        // Resending signs anew: the agent takes it (it would refuse a replayed credential).
        assert_eq!(start(addr, run, 2, 5_000).await.unwrap(), 1_000);
        let other = RequestSigner::new(&key, "other-run");
        let refused = start(addr, other, 2, 5_000).await.unwrap_err();
        assert!(refused.to_string().contains("403 Forbidden"), "{refused}");
        ack(addr, run, 3).await.unwrap();
        let conflict = ack(addr, run, 4).await.unwrap_err().to_string();
        assert_eq!(
            conflict,
            format!("POST http://{addr}/results/ack: 409 Conflict")
        );
        assert!(progress(addr, run).await.is_some());
    }

    /// A real `/progress` answer is a few hundred bytes, far below the cap; one over it is
    /// not read.
    #[tokio::test]
    async fn a_progress_answer_over_16_kib_is_refused() {
        let real = serde_json::to_vec(&AgentProgress {
            trial: u32::MAX,
            published: u64::MAX,
            received: u64::MAX,
            waiting_for: u32::MAX,
            stopped_after: u32::MAX,
            trial_start_unix_ms: u64::MAX,
            ..AgentProgress::default()
        })
        .unwrap();
        assert!(real.len() < 1024, "{} bytes", real.len());
        let key = signer();
        let run = RequestSigner::new(&key, SCOPE);
        assert!(progress(fake_agent(1000).await, run).await.is_some());
        assert_eq!(progress(fake_agent(MAX_BODY_BYTES).await, run).await, None);
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
