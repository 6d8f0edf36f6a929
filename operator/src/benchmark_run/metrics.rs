//! Gauges of each run's latest result on the operator's `/metrics`.
use msgbench_crds::benchmark_run::{Outcome, RunResult, Verdict};
use prometheus::{GaugeVec, Opts, Registry};
use std::sync::OnceLock;

struct Gauges {
    receive_rate: GaugeVec,
    publish_rate: GaugeVec,
    delivered_ratio: GaugeVec,
    p50: GaugeVec,
    p99: GaugeVec,
    passed: GaugeVec,
}

static GAUGES: OnceLock<Option<Gauges>> = OnceLock::new();

fn gauges(registry: &Registry) -> Option<&'static Gauges> {
    GAUGES
        .get_or_init(|| {
            let g = |name: &str, help: &str| -> Option<GaugeVec> {
                let v =
                    GaugeVec::new(Opts::new(name, help), &["namespace", "benchmarkrun"]).ok()?;
                registry.register(Box::new(v.clone())).ok()?;
                Some(v)
            };
            Some(Gauges {
                receive_rate: g(
                    "benchmark_receive_rate",
                    "Latest merged receive rate, messages/s",
                )?,
                publish_rate: g(
                    "benchmark_publish_rate",
                    "Latest merged publish rate, messages/s",
                )?,
                delivered_ratio: g("benchmark_delivered_ratio", "Latest received/expected")?,
                p50: g(
                    "benchmark_latency_p50_seconds",
                    "Latest merged end-to-end p50 latency",
                )?,
                p99: g(
                    "benchmark_latency_p99_seconds",
                    "Latest merged end-to-end p99 latency",
                )?,
                passed: g(
                    "benchmark_passed",
                    "1 when the latest verdict is Passed, else 0",
                )?,
            })
        })
        .as_ref()
}

pub fn observe(registry: &Registry, ns: &str, name: &str, r: &RunResult, v: Option<&Verdict>) {
    let Some(g) = gauges(registry) else {
        return;
    };
    let l = [ns, name];
    g.receive_rate.with_label_values(&l).set(r.receive_rate);
    g.publish_rate.with_label_values(&l).set(r.publish_rate);
    g.delivered_ratio
        .with_label_values(&l)
        .set(r.delivered_ratio);
    if let Some(lat) = &r.latency {
        g.p50.with_label_values(&l).set(lat.p50_ms / 1000.0);
        g.p99.with_label_values(&l).set(lat.p99_ms / 1000.0);
    }
    let passed = v.is_some_and(|v| v.outcome == Outcome::Passed);
    g.passed
        .with_label_values(&l)
        .set(if passed { 1.0 } else { 0.0 });
}
