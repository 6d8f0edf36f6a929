//! Prometheus metrics for `/metrics`: reconcile count, duration and errors per kind, child and
//! status writes, and the process's own figures: the standard `process_*` series (CPU, RSS,
//! open fds, start time) and the peak RSS (the limit it must stay under).

use prometheus::proto::MetricFamily;
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts, Registry};
use std::time::Instant;

#[derive(Clone)]
pub struct Metrics {
    /// Prefixed `msgbench_`: every family of the operator's own.
    pub registry: Registry,
    /// Unprefixed: the standard process collector, so its series keep the names every
    /// Prometheus dashboard and alert expects (`process_resident_memory_bytes`, not
    /// `msgbench_process_…`; a registry's prefix applies to all it gathers).
    process: Registry,
    reconciles: IntCounterVec,
    failures: IntCounterVec,
    duration: HistogramVec,
    writes: IntCounterVec,
    status_writes: IntCounterVec,
    runs_deleted: IntCounterVec,
    peak_resident: IntGauge,
}

/// The `kind` label of every controller (each kind's `KIND_LABEL`).
pub const RECONCILED_KINDS: [&str; 4] = [
    "jetstreamcluster",
    "mqttbroker",
    "pubsubserver",
    "benchmarkrun",
];

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
        let runs_deleted = IntCounterVec::new(
            Opts::new(
                "benchmarkruns_deleted_total",
                "Finished BenchmarkRuns the retention policy deleted, by reason",
            ),
            &["reason"],
        )
        .expect("static metric");
        for c in [
            &reconciles,
            &failures,
            &writes,
            &status_writes,
            &runs_deleted,
        ] {
            registry
                .register(Box::new(c.clone()))
                .expect("unique metric");
        }
        registry
            .register(Box::new(duration.clone()))
            .expect("unique metric");
        // Every kind's series exists from the start at 0, so a scrape before the first
        // reconcile (a fresh leader with nothing to do) shows them, and rate() has a baseline.
        for kind in RECONCILED_KINDS {
            reconciles.with_label_values(&[kind]);
        }
        // The process collector has no peak: VmHWM stays ours (the memory tests read it).
        let peak_resident = IntGauge::new(
            "process_peak_resident_memory_bytes",
            "Largest resident set size of the operator process since it started (VmHWM)",
        )
        .expect("static metric");
        registry
            .register(Box::new(peak_resident.clone()))
            .expect("unique metric");
        Self {
            registry,
            process: process_registry(),
            reconciles,
            failures,
            duration,
            writes,
            status_writes,
            runs_deleted,
            peak_resident,
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

    pub fn run_deleted(&self, reason: &str) {
        self.runs_deleted.with_label_values(&[reason]).inc();
    }

    /// Every family `/metrics` serves: the operator's own (`msgbench_…`) and the process's.
    pub fn gather(&self) -> Vec<MetricFamily> {
        if let Ok(text) = std::fs::read_to_string("/proc/self/status") {
            if let Some(b) = peak_resident_bytes(&text) {
                self.peak_resident.set(b);
            }
        }
        let mut families = self.registry.gather();
        families.extend(self.process.gather());
        families
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        prometheus::TextEncoder::new()
            .encode_utf8(&self.gather(), &mut out)
            .expect("text encoding of gathered metrics");
        out
    }
}

/// The standard process collector of this process (Linux only: it reads /proc).
fn process_registry() -> Registry {
    let registry = Registry::new();
    #[cfg(target_os = "linux")]
    registry
        .register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        ))
        .expect("one process collector");
    registry
}

/// VmHWM in bytes from the text of `/proc/<pid>/status` (the kernel writes kB).
fn peak_resident_bytes(status: &str) -> Option<i64> {
    let name = "VmHWM:";
    let line = status.lines().find(|l| l.starts_with(name))?;
    let kb: i64 = line[name.len()..]
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    kb.checked_mul(1024)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_resident_bytes_reads_vmhwm_in_bytes() {
        let status = "Name:\tmsgbench-operator\nVmPeak:\t  99999 kB\nVmHWM:\t   21504 kB\n\
                      VmRSS:\t   20480 kB\nThreads:\t8\n";
        assert_eq!(peak_resident_bytes(status), Some(21504 * 1024));
        assert_eq!(peak_resident_bytes("Name:\tx\n"), None);
    }

    /// A fresh operator's scrape already has every kind's reconcile counter, at 0.
    #[test]
    fn every_kinds_reconcile_counter_exists_before_any_reconcile() {
        use msgbench_crds::{JetStreamCluster, MqttBroker, PubSubServer};
        use msgbench_operator_core::server::kind::ManagedServerKind;
        let labels = [
            JetStreamCluster::KIND_LABEL,
            MqttBroker::KIND_LABEL,
            PubSubServer::KIND_LABEL,
            msgbench_operator_core::run::identity::KIND_LABEL,
        ];
        assert_eq!(RECONCILED_KINDS, labels);
        let text = Metrics::default().render();
        for kind in RECONCILED_KINDS {
            let line = format!("msgbench_reconcile_total{{kind=\"{kind}\"}} 0");
            assert!(text.contains(&line), "{line} missing:\n{text}");
        }
    }

    #[test]
    fn the_scrape_carries_this_process_peak_memory() {
        let text = Metrics::default().render();
        let peak = text
            .lines()
            .find_map(|l| l.strip_prefix("msgbench_process_peak_resident_memory_bytes "))
            .expect("peak gauge in the scrape");
        assert!(peak.parse::<i64>().unwrap() > 1 << 20, "{peak}");
    }

    /// The standard process series, unprefixed, beside the operator's own; the old custom
    /// `msgbench_process_resident_memory_bytes` is gone (the standard one replaces it).
    #[cfg(target_os = "linux")]
    #[test]
    fn the_scrape_carries_the_standard_process_series() {
        let text = Metrics::default().render();
        let value = |name: &str| {
            let prefix = format!("{name} ");
            text.lines()
                .find_map(|l| l.strip_prefix(prefix.as_str()))
                .unwrap_or_else(|| panic!("{name} missing:\n{text}"))
                .parse::<f64>()
                .unwrap()
        };
        assert!(value("process_resident_memory_bytes") > f64::from(1 << 20));
        assert!(
            value("process_open_fds") >= 3.0,
            "stdin, stdout, stderr at least"
        );
        assert!(
            value("process_start_time_seconds") > 1.6e9,
            "seconds since the epoch"
        );
        assert!(value("process_cpu_seconds_total") >= 0.0);
        assert!(!text.contains("msgbench_process_resident_memory_bytes"));
        assert!(!text.contains("msgbench_process_cpu_seconds_total"));
    }
}
