//! Prometheus metrics. Every bounded queue has a depth gauge and a drop counter, so the
//! slow-subscriber and persistence policies are visible instead of silent.
use prometheus::{
    Encoder, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
    TextEncoder,
};

pub struct Metrics {
    pub registry: Registry,
    pub published: IntCounter,
    pub publish_rejected: IntCounterVec,
    pub publish_seconds: Histogram,
    pub subscriber_dropped: IntCounterVec,
    pub consumed: IntCounter,
    pub socketio_clients: IntGauge,
    pub subscriptions: IntGauge,
    pub persist_queue_depth: IntGauge,
    pub persist_written: IntCounterVec,
    pub persist_dropped: IntCounterVec,
    pub persist_batch: Histogram,
    pub ws_clients: IntGauge,
    pub ws_messages: IntCounter,
    pub ws_dropped: IntCounter,
    pub persist_failed: IntCounterVec,
    pub evicted_messages: IntCounterVec,
    pub evicted_bytes: IntCounterVec,
    pub kept_message_bytes: IntGauge,
    pub connections: IntGauge,
    pub connections_rejected: IntCounter,
    pub auth_refused: IntCounter,
    pub tls_handshake_failed: IntCounter,
}

fn reg<T: prometheus::core::Collector + Clone + 'static>(r: &Registry, c: T) -> T {
    r.register(Box::new(c.clone()))
        .expect("metric names are unique");
    c
}

impl Metrics {
    pub fn new() -> Self {
        let r = Registry::new_custom(Some("pubsub".into()), None).expect("valid prefix");
        let counter = |n: &str, h: &str| reg(&r, IntCounter::new(n, h).unwrap());
        let gauge = |n: &str, h: &str| reg(&r, IntGauge::new(n, h).unwrap());
        let counter_vec =
            |n: &str, h: &str, l: &[&str]| reg(&r, IntCounterVec::new(Opts::new(n, h), l).unwrap());
        Metrics {
            published: counter("published_total", "Messages accepted by POST /publish"),
            publish_rejected: counter_vec(
                "publish_rejected_total",
                "POST /publish requests rejected, by field",
                &["field"],
            ),
            publish_seconds: reg(
                &r,
                Histogram::with_opts(
                    HistogramOpts::new("publish_duration_seconds", "POST /publish handling time")
                        .buckets(prometheus::exponential_buckets(5e-6, 2.0, 16).unwrap()),
                )
                .unwrap(),
            ),
            subscriber_dropped: counter_vec(
                "subscriber_dropped_total",
                "Messages not delivered to a Socket.IO subscriber, by reason (buffer_full = slow subscriber)",
                &["reason"],
            ),
            consumed: counter("consumed_total", "`consumed` acknowledgements received"),
            socketio_clients: gauge("socketio_clients", "Connected Socket.IO clients"),
            subscriptions: gauge("subscriptions", "Topic subscriptions held by connected clients"),
            persist_queue_depth: gauge(
                "persist_queue_depth",
                "Records waiting for the SQLite writer",
            ),
            persist_written: counter_vec(
                "persist_written_total",
                "Records written to SQLite, by kind",
                &["kind"],
            ),
            persist_dropped: counter_vec(
                "persist_dropped_total",
                "Records not persisted because the writer queue was full (records or bytes), by kind",
                &["kind"],
            ),
            persist_batch: reg(
                &r,
                Histogram::with_opts(
                    HistogramOpts::new("persist_batch_size", "Records per SQLite transaction")
                        .buckets(prometheus::exponential_buckets(1.0, 4.0, 9).unwrap()),
                )
                .unwrap(),
            ),
            ws_clients: gauge("ws_clients", "Connected plain WebSocket (/ws) clients"),
            ws_messages: counter("ws_messages_total", "Messages received on /ws"),
            ws_dropped: counter(
                "ws_dropped_total",
                "Broadcast messages skipped by lagging /ws clients",
            ),
            persist_failed: counter_vec(
                "persist_failed_total",
                "Records that could not be written to SQLite after retries, by kind",
                &["kind"],
            ),
            evicted_messages: counter_vec(
                "evicted_messages_total",
                "Stored messages removed oldest first, by reason (retain = RETAIN_MESSAGES, budget = bytes)",
                &["reason"],
            ),
            evicted_bytes: counter_vec(
                "evicted_bytes_total",
                "Bytes of the evicted messages (text plus per-row overhead), by reason",
                &["reason"],
            ),
            kept_message_bytes: gauge(
                "kept_message_bytes",
                "Bytes of the stored messages (text plus per-row overhead)",
            ),
            connections: gauge("connections", "Open client connections (all kinds)"),
            connections_rejected: counter(
                "connections_rejected_total",
                "Connections refused with a 503 because MAX_CONNECTIONS were open",
            ),
            auth_refused: counter(
                "auth_refused_total",
                "Requests refused with a 401: AUTH_TOKEN is set and they carried no valid token",
            ),
            tls_handshake_failed: counter(
                "tls_handshake_failed_total",
                "TLS handshakes that failed or timed out (that connection is closed, no other)",
            ),
            registry: r,
        }
    }

    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut buf)
            .expect("text encoding cannot fail");
        String::from_utf8(buf).expect("prometheus text is UTF-8")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
