//! The agent's control endpoint. `/ready` is open (the kubelet probes it); everything else
//! needs a credential the operator signed for this run and this very request
//! (`runner_api::control_auth`) as `Authorization: Bearer …`, so only the operator can release
//! the load or read results, and a credential seen on the wire cannot be used again.
use super::AgentState;
use crate::control_check::{refusal, ControlRequest};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Json, Router};
use runner_api::agent::{
    AgentProgress, AgentResults, RawJson, ResultsAck, StartRequest, StopRequest,
};
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub fn router(state: Arc<AgentState>) -> Router {
    let guarded = Router::new()
        .route("/start", post(start))
        .route("/stop", post(stop))
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
    let control = ControlRequest {
        method: req.method(),
        uri: req.uri(),
        headers: req.headers(),
    };
    match refusal(&s.auth, control, "this run") {
        Some(r) => r,
        None => next.run(req).await,
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

/// 200 with the stop kept; 409 with the latest trial released when that is past `afterTrial`.
async fn stop(
    State(s): State<Arc<AgentState>>,
    Json(req): Json<StopRequest>,
) -> (StatusCode, Json<StopRequest>) {
    match s.stop(req.after_trial.max(1)) {
        Ok(kept) => (StatusCode::OK, Json(StopRequest { after_trial: kept })),
        Err(released) => (
            StatusCode::CONFLICT,
            Json(StopRequest {
                after_trial: released,
            }),
        ),
    }
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
    tracing::info!(addr = %bound, "agent listening");
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router(state)).await {
            tracing::error!(error = %e, "agent HTTP server stopped");
        }
    });
    Ok(bound)
}
