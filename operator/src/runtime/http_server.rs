//! Operator's own HTTP endpoints on :8080: `/metrics`, `/healthz`, `/readyz`.

use super::context::Readiness;
use super::metrics::Metrics;
use axum::{extract::State, http::StatusCode, routing::get, Router};
use std::sync::Arc;

#[derive(Clone)]
struct AppState {
    metrics: Metrics,
    readiness: Arc<Readiness>,
}

pub fn router(metrics: Metrics, readiness: Arc<Readiness>) -> Router {
    Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(AppState { metrics, readiness })
}

async fn metrics_handler(State(s): State<AppState>) -> ([(&'static str, &'static str); 1], String) {
    (
        [("content-type", "text/plain; version=0.0.4")],
        s.metrics.render(),
    )
}

async fn readyz(State(s): State<AppState>) -> (StatusCode, &'static str) {
    match s.readiness.status() {
        (true, why) => (StatusCode::OK, why),
        (false, why) => (StatusCode::SERVICE_UNAVAILABLE, why),
    }
}
