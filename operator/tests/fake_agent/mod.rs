//! A fake runner agent on loopback for the operator's sequence tests: it records what the
//! operator told it (starts, stops, reads, acks) and answers from its state, the way
//! bench-runner's agent does (a start is kept once chosen; a stop cuts its trial count). Like
//! the real agent it checks every request's credential (for run [`RUN_UID`], signed by
//! [`operator_key`], for that method and path, once) and refuses, and records, any other.
#![allow(dead_code)] // each test binary uses its own part

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use runner_api::agent::{
    AgentProgress, AgentResults, ResultLine, ResultsAck, StartRequest, StopRequest,
};
use runner_api::control_auth::{ControlSigner, ControlVerifier};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// What a fake agent was told and what it answers.
#[derive(Default)]
pub struct Agent {
    pub progress: AgentProgress,
    /// The trials it runs in all (`AgentResults::trials`): the plan's until a stop.
    pub trials: u32,
    /// Trial → the first start time it got (later ones are kept like a real agent does).
    pub starts: BTreeMap<u32, u64>,
    pub start_calls: usize,
    /// `POST /stop`s, by their `afterTrial`.
    pub stops: Vec<u32>,
    /// `/progress` requests.
    pub progress_calls: usize,
    /// Requests whose credential was accepted (each good for that request only).
    pub accepted: usize,
    /// Requests refused, with the reason: a test expects none.
    pub refused: Vec<String>,
    /// `GET /results` requests.
    pub results_reads: usize,
    pub records: Vec<ResultLine>,
    pub acked: Option<u32>,
}

pub type Shared = Arc<Mutex<Agent>>;

async fn start(State(a): State<Shared>, Json(r): Json<StartRequest>) -> Json<StartRequest> {
    let mut a = a.lock().unwrap();
    a.start_calls += 1;
    let kept = *a.starts.entry(r.trial).or_insert(r.start_at_unix_ms);
    Json(StartRequest {
        start_at_unix_ms: kept,
        trial: r.trial,
    })
}

async fn stop(State(a): State<Shared>, Json(r): Json<StopRequest>) -> Json<StopRequest> {
    let mut a = a.lock().unwrap();
    a.stops.push(r.after_trial);
    a.trials = a.trials.min(r.after_trial);
    Json(r)
}

async fn progress(State(a): State<Shared>) -> Json<AgentProgress> {
    let mut a = a.lock().unwrap();
    a.progress_calls += 1;
    Json(a.progress.clone())
}

async fn results(State(a): State<Shared>) -> Json<AgentResults> {
    let mut a = a.lock().unwrap();
    a.results_reads += 1;
    Json(AgentResults {
        runner_id: a.records.first().map_or(0, |r| r.runner_id),
        trials: a.trials,
        finished: a.progress.finished,
        records: a.records.clone(),
    })
}

async fn ack(State(a): State<Shared>, Json(r): Json<ResultsAck>) {
    a.lock().unwrap().acked = Some(r.records);
}

/// The uid of the run the fake agents belong to.
pub const RUN_UID: &str = "run-uid";

/// The operator's key in these tests: give it to the context (`ctx.control`).
pub fn operator_key() -> ControlSigner {
    ControlSigner::from_seed([7; 32])
}

/// The credential check of the real agent, recording what it refused.
async fn authorize(
    State((a, v)): State<(Shared, ControlVerifier)>,
    req: Request,
    next: Next,
) -> Response {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let credential =
        (req.headers().get("authorization")).and_then(|h| h.to_str().ok()?.strip_prefix("Bearer "));
    let path = req.uri().path_and_query().map_or("/", |p| p.as_str());
    let checked = match credential {
        Some(c) => v
            .check(c, req.method().as_str(), path, now)
            .map_err(|e| e.to_string()),
        None => Err("no credential".into()),
    };
    match checked {
        Ok(()) => {
            a.lock().unwrap().accepted += 1;
            next.run(req).await
        }
        Err(why) => {
            let why = format!("{} {path}: {why}", req.method());
            a.lock().unwrap().refused.push(why.clone());
            (StatusCode::FORBIDDEN, why).into_response()
        }
    }
}

/// An agent of a run of `trials` trials on `ip:port` (0: any port); returns its state and port.
pub async fn agent_app(ip: &str, port: u16, trials: u32) -> (Shared, u16) {
    let state: Shared = Arc::new(Mutex::new(Agent {
        trials,
        ..Agent::default()
    }));
    let verifier = ControlVerifier::new(&operator_key().public_keys(), RUN_UID).unwrap();
    let guard = middleware::from_fn_with_state((state.clone(), verifier), authorize);
    let app = Router::new()
        .route("/start", post(start))
        .route("/stop", post(stop))
        .route("/progress", get(progress))
        .route("/results", get(results))
        .route("/results/ack", post(ack))
        .route_layer(guard)
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind((ip, port)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (state, port)
}
