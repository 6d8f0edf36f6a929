//! Read endpoints. Everything but /health and /metrics is rendered once per CACHE_TTL_SECONDS
//! per distinct query (moka coalesces concurrent misses), so dashboards polling under load cost
//! one SQLite query per TTL, not one per request. Pages are bounded: `limit` ≤ 1000.
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use crate::app::SharedApp;

const MAX_LIMIT: u32 = 1000;
const DEFAULT_LIMIT: u32 = 100;

type Params = Query<HashMap<String, String>>;

/// A rejected query parameter: 400 `{"error": "<field>: <rule>"}`.
struct Bad(&'static str, &'static str);

impl IntoResponse for Bad {
    fn into_response(self) -> Response {
        let body = json!({ "error": format!("{}: {}", self.0, self.1) });
        (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
    }
}

fn bad(field: &'static str, rule: &'static str) -> Response {
    Bad(field, rule).into_response()
}

fn json_bytes(b: Bytes) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], b).into_response()
}

fn num<T: std::str::FromStr>(q: &HashMap<String, String>, k: &str) -> Result<Option<T>, ()> {
    q.get(k).map(|v| v.parse::<T>().map_err(|_| ())).transpose()
}

struct Page {
    limit: u32,
    before: Option<u64>,
}

fn page(q: &HashMap<String, String>) -> Result<Page, Bad> {
    let limit = num::<u32>(q, "limit")
        .ok()
        .map(|l| l.unwrap_or(DEFAULT_LIMIT))
        .filter(|l| (1..=MAX_LIMIT).contains(l))
        .ok_or(Bad("limit", "must be an integer from 1 to 1000"))?;
    let before =
        num::<u64>(q, "before").map_err(|_| Bad("before", "must be a non-negative integer"))?;
    Ok(Page { limit, before })
}

/// Serves `key` from the cache or renders it with `load` (a blocking closure for SQLite).
async fn cached<F>(app: &SharedApp, key: String, load: F) -> Response
where
    F: FnOnce(&SharedApp) -> anyhow::Result<Value> + Send + 'static,
{
    let render = {
        let app = app.clone();
        async move {
            let v = tokio::task::spawn_blocking(move || load(&app)).await;
            match v {
                Ok(Ok(v)) => Ok(Bytes::from(serde_json::to_vec(&v).expect("json"))),
                Ok(Err(e)) => Err(e.to_string()),
                Err(e) => Err(e.to_string()),
            }
        }
    };
    let res = if app.cfg.cache_ttl.is_zero() {
        render.await
    } else {
        app.cache
            .try_get_with(key, render)
            .await
            .map_err(|e| e.to_string())
    };
    match res {
        Ok(b) => json_bytes(b),
        Err(e) => {
            tracing::error!(error = %e, "read endpoint failed");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                axum::Json(json!({ "error": e })),
            )
                .into_response()
        }
    }
}

fn key(path: &str, q: &HashMap<String, String>) -> String {
    let sorted: BTreeMap<_, _> = q.iter().collect();
    format!("{path}?{sorted:?}")
}

pub async fn messages(State(app): State<SharedApp>, Query(q): Params) -> Response {
    let p = match page(&q) {
        Ok(p) => p,
        Err(r) => return r.into_response(),
    };
    let topic = q.get("topic").cloned();
    cached(&app, key("/messages", &q), move |app| {
        let items = app.store.messages(topic.as_deref(), p.before, p.limit)?;
        let next = (items.len() == p.limit as usize)
            .then(|| items.last().map(|m| m.id))
            .flatten();
        Ok(json!({ "items": items, "next_before": next, "limit": p.limit }))
    })
    .await
}

pub async fn consumptions(State(app): State<SharedApp>, Query(q): Params) -> Response {
    let p = match page(&q) {
        Ok(p) => p,
        Err(r) => return r.into_response(),
    };
    let message_id = match num::<u64>(&q, "message_id") {
        Ok(m) => m,
        Err(()) => return bad("message_id", "must be a non-negative integer"),
    };
    cached(&app, key("/consumptions", &q), move |app| {
        let (total, items) = app.store.consumptions(message_id, p.before, p.limit)?;
        let next = (items.len() == p.limit as usize)
            .then(|| items.last().map(|c| c.seq))
            .flatten();
        Ok(json!({ "total": total, "items": items, "next_before": next, "limit": p.limit }))
    })
    .await
}

pub async fn clients(State(app): State<SharedApp>, Query(q): Params) -> Response {
    let p = match page(&q) {
        Ok(p) => p,
        Err(r) => return r.into_response(),
    };
    cached(&app, key("/clients", &q), move |app| {
        let clients = app.clients.lock().expect("clients mutex");
        let mut items: Vec<Value> = clients
            .iter()
            .map(|(id, c)| json!({ "id": id, "connected_at": c.connected_at_ms, "topics": c.topics }))
            .collect();
        let total = items.len();
        drop(clients);
        items.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
        items.truncate(p.limit as usize);
        Ok(json!({ "total": total, "items": items }))
    })
    .await
}

/// publishers → topics (with counts) → current subscribers.
pub async fn graph(State(app): State<SharedApp>) -> Response {
    cached(&app, "/graph/state".into(), |app| {
        let g = app.graph.lock().expect("graph mutex");
        let publishers: Vec<Value> = g
            .edges
            .iter()
            .map(|(p, topics)| {
                let id = if p.is_empty() {
                    Value::Null
                } else {
                    Value::from(p.as_str())
                };
                json!({ "publisher": id, "topics": topics })
            })
            .collect();
        let untracked = g.untracked;
        let mut topics: BTreeMap<String, Vec<String>> = g
            .edges
            .values()
            .flat_map(|t| t.keys())
            .map(|t| (t.clone(), Vec::new()))
            .collect();
        drop(g);
        for (id, c) in app.clients.lock().expect("clients mutex").iter() {
            for t in &c.topics {
                topics.entry(t.clone()).or_default().push(id.clone());
            }
        }
        let topics: Vec<Value> = topics
            .into_iter()
            .map(|(t, mut subs)| {
                subs.sort();
                json!({ "topic": t, "subscribers": subs })
            })
            .collect();
        Ok(json!({ "publishers": publishers, "topics": topics, "untracked_publishes": untracked }))
    })
    .await
}

/// User + system CPU seconds of this process (all threads), from /proc/self/stat fields 14-15
/// (clock ticks; USER_HZ is 100 on Linux). Operators sample it to derive CPU cores used.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which may contain spaces but ends with the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
    kb.trim()
        .trim_end_matches("kB")
        .trim()
        .parse::<u64>()
        .ok()
        .map(|k| k * 1024)
}

/// Live, never cached: probes and operators read it. 503 while shutting down.
pub async fn health(State(app): State<SharedApp>) -> Response {
    let stopping = *app.shutdown.borrow();
    let body = json!({
        "status": if stopping { "shutting_down" } else { "ok" },
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_seconds": app.started.elapsed().as_secs_f64(),
        "rss_bytes": rss_bytes(),
        "cpu_seconds": cpu_seconds(),
        "worker_threads": app.runtime.worker_threads,
        "cpus_allowed": app.runtime.cpus_allowed,
        "cpu_limit": app.runtime.cpu_limit,
        "emit_mode": app.cfg.emit_mode,
        "ws_mode": app.cfg.ws_mode,
        "database_file": app.cfg.database_file,
        "cache_ttl_seconds": app.cfg.cache_ttl.as_secs(),
        "clients": app.metrics.socketio_clients.get(),
        "published": app.metrics.published.get(),
        "next_id": app.next_id.load(Ordering::Relaxed),
    });
    let code = if stopping {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    (code, axum::Json(body)).into_response()
}

pub async fn metrics(State(app): State<SharedApp>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        app.metrics.render(),
    )
        .into_response()
}
