//! Shared server state: configuration, the Socket.IO handle, persistence, metrics, and the
//! small in-memory views (connected clients, publisher→topic graph) the REST endpoints read.
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use socketioxide::SocketIo;
use tokio::sync::{broadcast, watch};

use crate::config::Config;
use crate::metrics::Metrics;
use crate::store::Store;

/// Caps on the in-memory views so a client cannot grow them without bound.
pub const MAX_TOPIC_LEN: usize = 256;
pub const MAX_PUBLISHER_LEN: usize = 256;
pub const MAX_TOPICS_PER_CLIENT: usize = 1024;
pub const MAX_GRAPH_EDGES: usize = 10_000;

pub struct ClientInfo {
    pub connected_at_ms: i64,
    pub topics: BTreeSet<String>,
}

/// publisher (or "" for anonymous) → topic → messages published.
#[derive(Default)]
pub struct PublishGraph {
    pub edges: HashMap<String, HashMap<String, u64>>,
    pub edge_count: usize,
    /// Publishes not recorded because MAX_GRAPH_EDGES was reached.
    pub untracked: u64,
}

impl PublishGraph {
    pub fn record(&mut self, publisher: Option<&str>, topic: &str) {
        let by_topic = self
            .edges
            .entry(publisher.unwrap_or("").to_owned())
            .or_default();
        if let Some(n) = by_topic.get_mut(topic) {
            *n += 1;
        } else if self.edge_count < MAX_GRAPH_EDGES {
            by_topic.insert(topic.to_owned(), 1);
            self.edge_count += 1;
        } else {
            self.untracked += 1;
        }
    }
}

pub struct Runtime {
    pub worker_threads: usize,
    pub cpus_allowed: usize,
    pub cpu_limit: Option<f64>,
}

pub struct App {
    pub cfg: Config,
    pub io: SocketIo,
    pub store: Store,
    pub metrics: Arc<Metrics>,
    pub ids: crate::ids::Ids,
    pub started: Instant,
    pub runtime: Runtime,
    pub clients: Mutex<HashMap<String, ClientInfo>>,
    pub graph: Mutex<PublishGraph>,
    /// Rendered JSON of the read endpoints for CACHE_TTL_SECONDS, bounded in bytes.
    pub cache: PageCache,
    /// /ws broadcast mode fan-out (bounded: lagging receivers skip, counted).
    pub ws_tx: broadcast::Sender<axum::extract::ws::Message>,
    /// Flips to true on SIGTERM; long-lived connections watch it and close.
    pub shutdown: watch::Receiver<bool>,
}

pub type SharedApp = Arc<App>;

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Rendered JSON of the read endpoints, keyed by path and normalised parameters.
pub type PageCache = moka::future::Cache<String, Bytes>;

/// Bounded in bytes, not entries: a thousand 2 MiB pages would not fit a small container.
pub fn page_cache(budget: u64, ttl: Duration) -> PageCache {
    moka::future::Cache::builder()
        .max_capacity(budget)
        .weigher(|k: &String, v: &Bytes| u32::try_from(k.len() + v.len()).unwrap_or(u32::MAX))
        .time_to_live(ttl.max(Duration::from_millis(1)))
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graph_counts_edges_and_stops_growing_at_the_cap() {
        let mut g = PublishGraph::default();
        g.record(Some("p"), "a");
        g.record(Some("p"), "a");
        g.record(None, "b");
        assert_eq!(g.edges["p"]["a"], 2);
        assert_eq!(g.edges[""]["b"], 1);
        for i in 0..MAX_GRAPH_EDGES + 5 {
            g.record(Some("q"), &format!("t{i}"));
        }
        assert_eq!(g.edge_count, MAX_GRAPH_EDGES);
        assert_eq!(g.untracked, 7);
    }
}
