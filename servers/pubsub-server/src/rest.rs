//! Read endpoints. Everything but /health and /metrics is rendered once per CACHE_TTL_SECONDS
//! per distinct query (moka coalesces concurrent misses), so dashboards polling under load cost
//! one SQLite query per TTL, not one per request. Pages are bounded: `limit` ≤ 1000 and about
//! `store::MAX_PAGE_BYTES` of payloads.
//!
//! The cache key is built from the parsed parameters an endpoint uses, never from the raw
//! query: unknown parameters are ignored (as HTTP caches and cache-busters like `_=<time>`
//! expect) instead of rejected, so they can neither split the cache into one entry per request
//! nor break clients that add them; `limit=0100` and `limit=100` are the same page. The cache
//! is bounded in bytes (key + rendered body), a quarter of MEMORY_BUDGET_BYTES.
use std::collections::{BTreeMap, HashMap};

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{json, Value};

use crate::app::{SharedApp, MAX_TOPIC_LEN};
use crate::store::StoredMessage;

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

/// An empty value (`?before=`, as forms send) counts as absent.
fn num<T: std::str::FromStr>(q: &HashMap<String, String>, k: &str) -> Result<Option<T>, ()> {
    q.get(k)
        .filter(|v| !v.is_empty())
        .map(|v| v.parse::<T>().map_err(|_| ()))
        .transpose()
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
    F: FnOnce(&SharedApp) -> anyhow::Result<Vec<u8>> + Send + 'static,
{
    let render = {
        let app = app.clone();
        async move {
            let v = tokio::task::spawn_blocking(move || load(&app)).await;
            match v {
                Ok(Ok(v)) => Ok(Bytes::from(v)),
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

#[derive(Serialize)]
struct MessagePage {
    items: Vec<StoredMessage>,
    next_before: Option<u64>,
    limit: u32,
}

pub async fn messages(State(app): State<SharedApp>, Query(q): Params) -> Response {
    let p = match page(&q) {
        Ok(p) => p,
        Err(r) => return r.into_response(),
    };
    let topic = q.get("topic").filter(|t| !t.is_empty()).cloned();
    if topic.as_ref().is_some_and(|t| t.len() > MAX_TOPIC_LEN) {
        return bad("topic", "must be at most 256 bytes");
    }
    let key = format!(
        "/messages?limit={}&before={:?}&topic={topic:?}",
        p.limit, p.before
    );
    cached(&app, key, move |app| {
        let (items, more) = app.store.messages(topic.as_deref(), p.before, p.limit)?;
        let full = items.len() == p.limit as usize;
        let next_before = (full || more).then(|| items.last().map(|m| m.id)).flatten();
        let page = MessagePage {
            items,
            next_before,
            limit: p.limit,
        };
        Ok(serde_json::to_vec(&page)?)
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
    let key = format!(
        "/consumptions?limit={}&before={:?}&message_id={message_id:?}",
        p.limit, p.before
    );
    cached(&app, key, move |app| {
        let (total, items) = app.store.consumptions(message_id, p.before, p.limit)?;
        let next = (items.len() == p.limit as usize)
            .then(|| items.last().map(|c| c.seq))
            .flatten();
        let page = json!({ "total": total, "items": items, "next_before": next, "limit": p.limit });
        Ok(serde_json::to_vec(&page)?)
    })
    .await
}

pub async fn clients(State(app): State<SharedApp>, Query(q): Params) -> Response {
    let p = match page(&q) {
        Ok(p) => p,
        Err(r) => return r.into_response(),
    };
    cached(&app, format!("/clients?limit={}", p.limit), move |app| {
        let clients = app.clients.lock().expect("clients mutex");
        let mut items: Vec<Value> = clients
            .iter()
            .map(|(id, c)| json!({ "id": id, "connected_at": c.connected_at_ms, "topics": c.topics }))
            .collect();
        let total = items.len();
        drop(clients);
        items.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
        items.truncate(p.limit as usize);
        Ok(serde_json::to_vec(&json!({ "total": total, "items": items }))?)
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
        let graph =
            json!({ "publishers": publishers, "topics": topics, "untracked_publishes": untracked });
        Ok(serde_json::to_vec(&graph)?)
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
        "next_id": app.ids.peek(),
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
