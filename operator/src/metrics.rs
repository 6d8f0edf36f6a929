//! Prometheus metrics for `/metrics`: reconcile count, duration and errors per kind.

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};
use std::time::Instant;

#[derive(Clone)]
pub struct Metrics {
    pub registry: Registry,
    reconciles: IntCounterVec,
    failures: IntCounterVec,
    duration: HistogramVec,
    writes: IntCounterVec,
    status_writes: IntCounterVec,
}

impl Default for Metrics {
    fn default() -> Self {
        let registry = Registry::new_custom(Some("msgbench".into()), None).expect("static prefix");
        let reconciles = IntCounterVec::new(
            Opts::new("reconcile_total", "Reconciliations started, by kind"),
            &["kind"],
        )
        .expect("static metric");
        let failures = IntCounterVec::new(
            Opts::new(
                "reconcile_errors_total",
                "Reconciliations that failed, by kind and error",
            ),
            &["kind", "error"],
        )
        .expect("static metric");
        let duration = HistogramVec::new(
            HistogramOpts::new("reconcile_duration_seconds", "Reconcile duration, by kind")
                .buckets(vec![
                    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                ]),
            &["kind"],
        )
        .expect("static metric");
        let writes = IntCounterVec::new(
            Opts::new(
                "child_writes_total",
                "Server-side applies and deletes of child objects, by kind and verb",
            ),
            &["kind", "verb"],
        )
        .expect("static metric");
        let status_writes = IntCounterVec::new(
            Opts::new(
                "status_writes_total",
                "Status writes of the kinds' own objects, by kind",
            ),
            &["kind"],
        )
        .expect("static metric");
        for c in [&reconciles, &failures, &writes, &status_writes] {
            registry
                .register(Box::new(c.clone()))
                .expect("unique metric");
        }
        registry
            .register(Box::new(duration.clone()))
            .expect("unique metric");
        Self {
            registry,
            reconciles,
            failures,
            duration,
            writes,
            status_writes,
        }
    }
}

impl Metrics {
    pub fn reconcile_started(&self, kind: &str) -> ReconcileTimer {
        self.reconciles.with_label_values(&[kind]).inc();
        ReconcileTimer {
            hist: self.duration.with_label_values(&[kind]),
            start: Instant::now(),
        }
    }

    pub fn reconcile_failed(&self, kind: &str, error: &str) {
        self.failures.with_label_values(&[kind, error]).inc();
    }

    pub fn child_written(&self, kind: &str, verb: &str) {
        self.writes.with_label_values(&[kind, verb]).inc();
    }

    pub fn status_written(&self, kind: &str) {
        self.status_writes.with_label_values(&[kind]).inc();
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        prometheus::TextEncoder::new()
            .encode_utf8(&self.registry.gather(), &mut out)
            .expect("text encoding of gathered metrics");
        out
    }
}

/// Observes the reconcile duration when dropped, so early returns are counted too.
pub struct ReconcileTimer {
    hist: prometheus::Histogram,
    start: Instant,
}

impl Drop for ReconcileTimer {
    fn drop(&mut self) {
        self.hist.observe(self.start.elapsed().as_secs_f64());
    }
}
