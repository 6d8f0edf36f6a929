//! Gauges of each run's latest result on the operator's `/metrics`. Runs that no longer exist
//! are pruned (`prune`, driven by the controller's store), so deleted runs leave no series.
use msgbench_crds::benchmark_run::{Outcome, RunResult, Verdict};
use prometheus::core::Collector;
use prometheus::{GaugeVec, Opts, Registry};
use std::collections::BTreeSet;
use std::sync::{Mutex, OnceLock};

struct Gauges {
    receive_rate: GaugeVec,
    publish_rate: GaugeVec,
    delivered_ratio: GaugeVec,
    p50: GaugeVec,
    p99: GaugeVec,
    passed: GaugeVec,
}

static GAUGES: OnceLock<Option<Gauges>> = OnceLock::new();
/// (namespace, name) of every run with series exported.
static EXPORTED: Mutex<BTreeSet<(String, String)>> = Mutex::new(BTreeSet::new());

impl Gauges {
    fn all(&self) -> [&GaugeVec; 6] {
        [
            &self.receive_rate,
            &self.publish_rate,
            &self.delivered_ratio,
            &self.p50,
            &self.p99,
            &self.passed,
        ]
    }
}

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
    if let Ok(mut e) = EXPORTED.lock() {
        e.insert((ns.to_string(), name.to_string()));
    }
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

/// Removes the series of every exported run for which `exists(namespace, name)` is false.
/// Returns how many runs were pruned.
pub fn prune(exists: impl Fn(&str, &str) -> bool) -> usize {
    let Some(g) = GAUGES.get().and_then(Option::as_ref) else {
        return 0;
    };
    let Ok(mut exported) = EXPORTED.lock() else {
        return 0;
    };
    let gone: Vec<(String, String)> = exported
        .iter()
        .filter(|(ns, name)| !exists(ns, name))
        .cloned()
        .collect();
    for (ns, name) in &gone {
        for v in g.all() {
            // Absent series (e.g. no latency yet) are fine to skip.
            let _ = v.remove_label_values(&[ns, name]);
        }
        exported.remove(&(ns.clone(), name.clone()));
    }
    gone.len()
}

/// (namespace, benchmarkrun) label pairs currently exported by any of the gauges.
pub fn exported_series() -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    let Some(g) = GAUGES.get().and_then(Option::as_ref) else {
        return out;
    };
    for v in g.all() {
        for fam in v.collect() {
            for m in fam.get_metric() {
                let label = |n: &str| {
                    m.get_label()
                        .iter()
                        .find(|l| l.name() == n)
                        .map(|l| l.value().to_string())
                        .unwrap_or_default()
                };
                out.insert((label("namespace"), label("benchmarkrun")));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use msgbench_crds::benchmark_run::LatencySummary;

    #[test]
    fn deleted_runs_lose_their_series_and_others_keep_them() {
        let reg = Registry::new();
        let r = RunResult {
            receive_rate: 100.0,
            latency: Some(LatencySummary {
                p99_ms: 2.0,
                ..LatencySummary::default()
            }),
            ..RunResult::default()
        };
        observe(&reg, "ns-prune", "kept", &r, None);
        observe(&reg, "ns-prune", "deleted", &r, None);
        let key = |n: &str| ("ns-prune".to_string(), n.to_string());
        assert!(exported_series().contains(&key("deleted")));
        let pruned = prune(|ns, name| ns != "ns-prune" || name == "kept");
        assert_eq!(pruned, 1);
        let left = exported_series();
        assert!(!left.contains(&key("deleted")), "{left:?}");
        assert!(left.contains(&key("kept")), "{left:?}");
        // Idempotent: nothing more to prune.
        assert_eq!(prune(|ns, name| ns != "ns-prune" || name == "kept"), 0);
    }
}
