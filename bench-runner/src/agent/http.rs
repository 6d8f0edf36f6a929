//! The agent's control endpoint. `/ready` is open (the kubelet probes it); everything else
//! needs a credential the operator signed for this run (`runner_api::control_auth`) as
//! `Authorization: Bearer …` when the agent has a verifier, so only the operator can release
//! the load or read results.
use super::AgentState;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use runner_api::agent::{AgentProgress, AgentResults, RawJson, ResultsAck, StartRequest};
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub fn router(state: Arc<AgentState>) -> Router {
    let guarded = Router::new()
        .route("/start", post(start))
        .route("/progress", get(progress))
        .route("/results", get(results))
        .route("/results/ack", post(ack))
        .route_layer(middleware::from_fn_with_state(state.clone(), authorize));
    Router::new()
        .route("/ready", get(ready))
        .merge(guarded)
        .with_state(state)
}

async fn authorize(State(s): State<Arc<AgentState>>, req: Request, next: Next) -> Response {
    let Some(auth) = s.auth.as_ref() else {
        return next.run(req).await;
    };
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    match presented.map(|p| auth.check(p, now)) {
        Some(Ok(())) => next.run(req).await,
        Some(Err(e)) => (StatusCode::FORBIDDEN, format!("{e}\n")).into_response(),
        None => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "this endpoint needs the operator's credential for this run\n",
        )
            .into_response(),
    }
}

async fn ready(State(s): State<Arc<AgentState>>) -> (StatusCode, &'static str) {
    if s.ready.load(Ordering::SeqCst) {
        (StatusCode::OK, "ready\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "connecting\n")
    }
}

async fn start(
    State(s): State<Arc<AgentState>>,
    Json(req): Json<StartRequest>,
) -> (StatusCode, Json<StartRequest>) {
    let at = s.release(req.trial.max(1), req.start_at_unix_ms);
    (
        StatusCode::OK,
        Json(StartRequest {
            start_at_unix_ms: at,
            trial: req.trial.max(1),
        }),
    )
}

async fn progress(State(s): State<Arc<AgentState>>) -> Json<AgentProgress> {
    Json(s.progress())
}

async fn results(State(s): State<Arc<AgentState>>) -> Json<AgentResults<RawJson>> {
    Json(s.results())
}

async fn ack(State(s): State<Arc<AgentState>>, Json(a): Json<ResultsAck>) -> StatusCode {
    if s.acknowledge(a.records) {
        StatusCode::OK
    } else {
        StatusCode::CONFLICT
    }
}

/// Serves the agent endpoints on `addr` until the process exits; returns the bound address.
pub async fn serve(
    addr: std::net::SocketAddr,
    state: Arc<AgentState>,
) -> anyhow::Result<std::net::SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tracing::info!(addr = %bound, auth = state.auth.is_some(), "agent listening");
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router(state)).await {
            tracing::error!(error = %e, "agent HTTP server stopped");
        }
    });
    Ok(bound)
}
