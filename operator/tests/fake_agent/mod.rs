//! A fake runner agent on loopback for the operator's sequence tests: it records what the
//! operator told it (starts, stops, reads, acks, credentials) and answers from its state, the
//! way bench-runner's agent does (a start is kept once chosen; a stop cuts its trial count).
#![allow(dead_code)] // each test binary uses its own part

use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::{get, post};
use axum::{Json, Router};
use runner_api::agent::{
    AgentProgress, AgentResults, ResultLine, ResultsAck, StartRequest, StopRequest,
};
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
    /// `/progress` requests (each carries a credential for the run).
    pub progress_calls: usize,
    /// The `Authorization` header of the last `/progress` request.
    pub last_auth: Option<String>,
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

async fn progress(State(a): State<Shared>, headers: HeaderMap) -> Json<AgentProgress> {
    let mut a = a.lock().unwrap();
    a.progress_calls += 1;
    a.last_auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
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

/// An agent of a run of `trials` trials on `ip:port` (0: any port); returns its state and port.
pub async fn agent_app(ip: &str, port: u16, trials: u32) -> (Shared, u16) {
    let state: Shared = Arc::new(Mutex::new(Agent {
        trials,
        ..Agent::default()
    }));
    let app = Router::new()
        .route("/start", post(start))
        .route("/stop", post(stop))
        .route("/progress", get(progress))
        .route("/results", get(results))
        .route("/results/ack", post(ack))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind((ip, port)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (state, port)
}
