//! Live Prometheus metrics of an agent while it runs, on `GET /metrics` of their own port
//! ([`runner_api::agent::METRICS_PORT`]), so a dashboard can follow a run before its result
//! exists. The result stays the record: these series are coarse and for watching only.
//!
//! Measurement is not disturbed: the hot path only does atomic adds on handles resolved once per
//! trial ([`TrialSeries`]); the server is a task on the runner's own runtime and reads them when
//! scraped. Labels are per trial (`trial`, `variant`, `round`: at most 120 of each per runner);
//! the run, namespace and pod come from the scrape (the chart's PodMonitor relabels them), so
//! nothing here is per message, publisher or topic.
use axum::extract::State;
use axum::routing::get;
use axum::Router;
use prometheus::{
    Counter, CounterVec, Gauge, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter,
    IntCounterVec, Opts, Registry,
};
use std::sync::Arc;

/// Messages handed to the server.
pub const SENT: &str = "msgbench_runner_messages_sent_total";
/// Deliveries (duplicates and other runners' messages included, as the result's `received`).
pub const RECEIVED: &str = "msgbench_runner_messages_received_total";
/// Errors the result counts, of every kind (send, connection, bad payloads).
pub const ERRORS: &str = "msgbench_runner_errors_total";
/// Sum of every sent message's lag behind its intended send time: divided by the rate of
/// [`SENT`], the mean lag over any window.
pub const SEND_LAG_SUM: &str = "msgbench_runner_send_lag_seconds_total";
/// The lag of the oldest message of the latest batch any publisher sent (0 once a trial ends).
pub const GENERATOR_LAG: &str = "msgbench_runner_generator_lag_seconds";
/// End-to-end latency of this runner's own messages, from the same samples as the HdrHistogram.
pub const LATENCY: &str = "msgbench_runner_latency_seconds";

const LABELS: [&str; 3] = ["trial", "variant", "round"];
/// Coarse on purpose: percentiles come from the HdrHistogram in the result.
const LATENCY_BUCKETS: [f64; 10] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0];

/// The registry of one runner process and its families.
pub struct LiveMetrics {
    registry: Registry,
    sent: IntCounterVec,
    received: IntCounterVec,
    errors: IntCounterVec,
    lag_sum: CounterVec,
    lag: GaugeVec,
    latency: HistogramVec,
}

impl Default for LiveMetrics {
    fn default() -> Self {
        let counter = |name: &str, help: &str| {
            IntCounterVec::new(Opts::new(name, help), &LABELS).expect("static metric")
        };
        let m = LiveMetrics {
            registry: Registry::new(),
            sent: counter(SENT, "Messages this runner handed to the server"),
            received: counter(RECEIVED, "Deliveries this runner received"),
            errors: counter(ERRORS, "Errors this runner counted, of every kind"),
            lag_sum: CounterVec::new(
                Opts::new(SEND_LAG_SUM, "Sum of sent messages' lag behind schedule"),
                &LABELS,
            )
            .expect("static metric"),
            lag: GaugeVec::new(
                Opts::new(GENERATOR_LAG, "Lag of the latest batch behind schedule"),
                &LABELS,
            )
            .expect("static metric"),
            latency: HistogramVec::new(
                HistogramOpts::new(LATENCY, "End-to-end latency of own messages (coarse)")
                    .buckets(LATENCY_BUCKETS.to_vec()),
                &LABELS,
            )
            .expect("static metric"),
        };
        m.register_all();
        m
    }
}

impl LiveMetrics {
    fn register_all(&self) {
        let r = &self.registry;
        for c in [&self.sent, &self.received, &self.errors] {
            r.register(Box::new(c.clone())).expect("unique metric");
        }
        r.register(Box::new(self.lag_sum.clone()))
            .expect("unique metric");
        r.register(Box::new(self.lag.clone()))
            .expect("unique metric");
        r.register(Box::new(self.latency.clone()))
            .expect("unique metric");
        // The runner's CPU and memory beside its load (saturation shows there first).
        #[cfg(target_os = "linux")]
        r.register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        ))
        .expect("one process collector");
    }

    /// The series of one trial (`variant` empty without variants), each present from now on at 0.
    pub fn trial(&self, trial: u32, variant: &str, round: u32) -> TrialSeries {
        let (trial, round) = (trial.to_string(), round.to_string());
        let l = [trial.as_str(), variant, round.as_str()];
        TrialSeries {
            sent: self.sent.with_label_values(&l),
            received: self.received.with_label_values(&l),
            errors: self.errors.with_label_values(&l),
            lag_sum: self.lag_sum.with_label_values(&l),
            lag: self.lag.with_label_values(&l),
            latency: self.latency.with_label_values(&l),
        }
    }

    /// Everything `/metrics` serves (the operator's dashboard test checks its queries here).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The text exposition of everything registered.
    pub fn render(&self) -> String {
        let mut out = String::new();
        prometheus::TextEncoder::new()
            .encode_utf8(&self.registry.gather(), &mut out)
            .expect("text encoding of gathered metrics");
        out
    }
}

/// One trial's handles: each update is an atomic add or store, no lock, no lookup.
#[derive(Clone)]
pub struct TrialSeries {
    sent: IntCounter,
    received: IntCounter,
    errors: IntCounter,
    lag_sum: Counter,
    lag: Gauge,
    latency: Histogram,
}

/// For `TaskStats`' derived Debug: the values live in the registry.
impl std::fmt::Debug for TrialSeries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrialSeries").finish_non_exhaustive()
    }
}

impl TrialSeries {
    pub fn sent(&self, n: u64) {
        self.sent.inc_by(n);
    }

    pub fn received(&self) {
        self.received.inc();
    }

    pub fn error(&self) {
        self.errors.inc();
    }

    /// The lags (µs) of one batch just sent.
    pub fn lags_us(&self, lags: &[u64]) {
        let Some(&max) = lags.iter().max() else {
            return;
        };
        self.lag_sum.inc_by(lags.iter().sum::<u64>() as f64 / 1e6);
        self.lag.set(max as f64 / 1e6);
    }

    pub fn latency_us(&self, us: u64) {
        self.latency.observe(us as f64 / 1e6);
    }

    /// The trial ended: no publisher is behind any more.
    pub fn finished(&self) {
        self.lag.set(0.0);
    }
}

pub fn router(metrics: Arc<LiveMetrics>) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .with_state(metrics)
}

async fn scrape(State(m): State<Arc<LiveMetrics>>) -> ([(&'static str, &'static str); 1], String) {
    ([("content-type", "text/plain; version=0.0.4")], m.render())
}

/// Serves `/metrics` on `addr` (open: counts only, nothing that controls the run) on the
/// current runtime until the process exits; returns the bound address.
pub async fn serve(
    addr: std::net::SocketAddr,
    metrics: Arc<LiveMetrics>,
) -> anyhow::Result<std::net::SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tracing::info!(addr = %bound, "metrics listening");
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router(metrics)).await {
            tracing::error!(error = %e, "metrics HTTP server stopped");
        }
    });
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use http_body_util::{BodyExt, Empty};
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;

    async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
        let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
        let uri = format!("http://{addr}{path}").parse().unwrap();
        let res = client.get(uri).await.expect("GET");
        let status = res.status().as_u16();
        let body = res.into_body().collect().await.expect("body").to_bytes();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    /// A few samples recorded through a trial's handles show on the served endpoint, under
    /// the trial's labels, beside the process collector's series.
    #[tokio::test]
    async fn the_endpoint_serves_every_series_after_a_few_samples() {
        let m = Arc::new(LiveMetrics::default());
        let t = m.trial(2, "js-r3", 1);
        t.sent(5);
        t.received();
        t.received();
        t.error();
        t.lags_us(&[3_000, 1_000]);
        t.lags_us(&[]);
        t.latency_us(1_500);
        t.latency_us(40_000);
        let addr = serve("127.0.0.1:0".parse().unwrap(), m.clone())
            .await
            .unwrap();
        let (status, body) = get(addr, "/metrics").await;
        assert_eq!(status, 200, "{body}");
        let l = r#"{round="1",trial="2",variant="js-r3"}"#;
        let b = |le: &str| format!(r#"{{round="1",trial="2",variant="js-r3",le="{le}"}}"#);
        for line in [
            format!("{SENT}{l} 5"),
            format!("{RECEIVED}{l} 2"),
            format!("{ERRORS}{l} 1"),
            format!("{SEND_LAG_SUM}{l} 0.004"),
            format!("{GENERATOR_LAG}{l} 0.003"),
            format!("{LATENCY}_count{l} 2"),
            format!("{LATENCY}_bucket{} 0", b("0.001")),
            format!("{LATENCY}_bucket{} 1", b("0.0025")),
            format!("{LATENCY}_bucket{} 2", b("0.05")),
            format!("{LATENCY}_bucket{} 2", b("+Inf")),
        ] {
            assert!(body.lines().any(|x| x == line), "{line} missing:\n{body}");
        }
        #[cfg(target_os = "linux")]
        for name in ["process_cpu_seconds_total", "process_resident_memory_bytes"] {
            assert!(
                body.contains(&format!("\n{name} ")),
                "{name} missing:\n{body}"
            );
        }
        t.finished();
        let (_, body) = get(addr, "/metrics").await;
        assert!(body.contains(&format!("{GENERATOR_LAG}{l} 0\n")), "{body}");
    }

    /// A trial's series exist at 0 before its first message, so `rate()` has a baseline.
    #[test]
    fn a_trials_series_start_at_zero() {
        let m = LiveMetrics::default();
        m.trial(1, "", 1);
        let text = m.render();
        let line = format!(r#"{SENT}{{round="1",trial="1",variant=""}} 0"#);
        assert!(text.lines().any(|x| x == line), "{line} missing:\n{text}");
    }
}
