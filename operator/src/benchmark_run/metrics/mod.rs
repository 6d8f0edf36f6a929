//! Gauges of each run's latest result on the operator's `/metrics`, one series per variant of a
//! run with `spec.variants` (label `variant`, empty for a run without). Runs that no longer
//! exist are pruned (`prune`, driven by the controller's store), so deleted runs leave no series.
//!
//! Only the most recently finished runs are exported ([`MAX_RUN_SERIES`]): finished runs stay
//! for months, and a series per run kept them all in memory and in every scrape (1,000
//! finished runs: 7,000 series, 14 MiB per scrape; heaptrack, `bench/operator run history`).
//! Prometheus keeps what it scraped; the trend series (`trend.rs`) carry each benchmark on.
pub mod trend;

use msgbench_crds::benchmark_run::{BenchmarkRunStatus, Outcome, RunResult, Verdict};
use prometheus::core::Collector;
use prometheus::{GaugeVec, Opts, Registry};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, OnceLock};

/// Most (namespace, run, variant) series sets exported at once; the earliest finished go.
pub const MAX_RUN_SERIES: usize = 200;

struct Gauges {
    delivery_rate: GaugeVec,
    receive_rate: GaugeVec,
    publish_rate: GaugeVec,
    delivered_ratio: GaugeVec,
    p50: GaugeVec,
    p99: GaugeVec,
    passed: GaugeVec,
}

static GAUGES: OnceLock<Option<Gauges>> = OnceLock::new();
/// Every series set exported.
static EXPORTED: Mutex<Exported> = Mutex::new(Exported::new(MAX_RUN_SERIES));

/// (namespace, name, variant) of a series set.
type SeriesKey = (String, String, String);

/// The series sets exported, each with its run's completion (Unix seconds; `i64::MAX` for a
/// run not finished yet), at most `cap` of them: the latest finished are kept.
pub struct Exported {
    cap: usize,
    finished: BTreeMap<SeriesKey, i64>,
}

/// What [`Exported::admit`] decided for a series set.
#[derive(Debug, PartialEq)]
pub enum Admission {
    /// Export it; these (earlier finished) sets leave to make room.
    Export { evicted: Vec<SeriesKey> },
    /// Finished before every exported set, with no room left: not exported.
    TooOld,
}

impl Exported {
    pub const fn new(cap: usize) -> Exported {
        Exported {
            cap,
            finished: BTreeMap::new(),
        }
    }

    pub fn admit(&mut self, key: SeriesKey, finished: i64) -> Admission {
        if !self.finished.contains_key(&key) && self.finished.len() >= self.cap {
            let earliest = self.finished.values().min().copied().unwrap_or(i64::MAX);
            if finished <= earliest {
                return Admission::TooOld;
            }
        }
        self.finished.insert(key.clone(), finished);
        let mut evicted = Vec::new();
        while self.finished.len() > self.cap {
            let Some(oldest) = (self.finished.iter())
                .filter(|(k, _)| **k != key)
                .min_by_key(|(_, t)| **t)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            self.finished.remove(&oldest);
            evicted.push(oldest);
        }
        Admission::Export { evicted }
    }

    fn keys(&self) -> impl Iterator<Item = &SeriesKey> {
        self.finished.keys()
    }

    fn remove(&mut self, key: &SeriesKey) {
        self.finished.remove(key);
    }
}

impl Gauges {
    fn all(&self) -> [&GaugeVec; 7] {
        [
            &self.delivery_rate,
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
            let g = |name: &str, help: &str| {
                registered(
                    registry,
                    name,
                    help,
                    &["namespace", "benchmarkrun", "variant"],
                )
            };
            Some(Gauges {
                delivery_rate: g(
                    "benchmark_delivery_rate",
                    "Latest merged unique deliveries/s end to end (the like-for-like rate)",
                )?,
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

/// A gauge family registered in `registry`; `None` if it cannot be (a name taken).
pub(super) fn registered(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> Option<GaugeVec> {
    let v = GaugeVec::new(Opts::new(name, help), labels).ok()?;
    registry.register(Box::new(v.clone())).ok()?;
    Some(v)
}

/// The families' series in the text format, leaving out families with no series (tests share
/// the families and run in parallel: one another test just emptied cannot be encoded).
#[cfg(test)]
pub(super) fn render_families(families: &[&GaugeVec]) -> String {
    let families: Vec<_> = (families.iter())
        .flat_map(|v| v.collect())
        .filter(|f| !f.get_metric().is_empty())
        .collect();
    let mut out = String::new();
    prometheus::TextEncoder::new()
        .encode_utf8(&families, &mut out)
        .unwrap();
    out
}

/// Exports the run's merged result, or each variant's, with the run's verdict.
pub fn observe_status(registry: &Registry, ns: &str, name: &str, status: &BenchmarkRunStatus) {
    let v = status.verdict.as_ref();
    let finished = (status.completion_time.as_ref()).map_or(i64::MAX, |t| t.0.as_second());
    if let Some(r) = &status.result {
        observe(registry, ns, name, ("", finished), r, v);
    }
    for variant in &status.variants {
        if let Some(r) = &variant.result {
            observe(registry, ns, name, (&variant.name, finished), r, v);
        }
    }
}

/// Exports one series set: `variant` ("" for the run's own) with the run's completion
/// (Unix seconds, `i64::MAX` while it runs), unless [`MAX_RUN_SERIES`] later ones are exported.
pub fn observe(
    registry: &Registry,
    ns: &str,
    name: &str,
    (variant, finished): (&str, i64),
    r: &RunResult,
    v: Option<&Verdict>,
) {
    let Some(g) = gauges(registry) else {
        return;
    };
    let key = (ns.to_string(), name.to_string(), variant.to_string());
    let Ok(mut exported) = EXPORTED.lock() else {
        return;
    };
    match exported.admit(key, finished) {
        Admission::TooOld => return,
        Admission::Export { evicted } => evicted.iter().for_each(|k| remove_series(g, k)),
    }
    drop(exported);
    let l = [ns, name, variant];
    match r.delivery_rate {
        Some(d) => g.delivery_rate.with_label_values(&l).set(d),
        // No end-to-end window: no sample, never 0.
        None => drop(g.delivery_rate.remove_label_values(&l)),
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
    let gone: Vec<SeriesKey> = exported
        .keys()
        .filter(|(ns, name, _)| !exists(ns, name))
        .cloned()
        .collect();
    for key in &gone {
        remove_series(g, key);
        exported.remove(key);
    }
    let runs: BTreeSet<(&String, &String)> = gone.iter().map(|(ns, n, _)| (ns, n)).collect();
    runs.len()
}

fn remove_series(g: &Gauges, (ns, name, variant): &SeriesKey) {
    for v in g.all() {
        // Absent series (e.g. no latency yet) are fine to skip.
        let _ = v.remove_label_values(&[ns, name, variant]);
    }
}

/// Removes every run's series and the benchmark trends: what a standby exports.
pub fn forget_all() {
    prune(|_, _| false);
    crate::benchmark_run::metrics::trend::forget_all();
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

    /// The gauges' series as scraped (they live in the first registry any test gave them).
    fn render() -> String {
        let g = GAUGES.get().and_then(Option::as_ref).expect("gauges");
        render_families(&g.all())
    }

    /// A run with variants exports each variant's figures (it has no run-wide result).
    #[test]
    fn variant_runs_export_one_series_per_variant() {
        use msgbench_crds::benchmark_run::VariantResult;
        let reg = Registry::new();
        let result = |rate: f64| RunResult {
            receive_rate: rate,
            delivery_rate: Some(rate),
            ..RunResult::default()
        };
        let status = BenchmarkRunStatus {
            variants: [("r1", 200.0), ("r2", 150.0)]
                .map(|(name, rate)| VariantResult {
                    name: name.into(),
                    result: Some(result(rate)),
                    ..VariantResult::default()
                })
                .into(),
            ..BenchmarkRunStatus::default()
        };
        observe_status(&reg, "ns-variants", "js", &status);
        let text = render();
        for (variant, rate) in [("r1", 200), ("r2", 150)] {
            for metric in ["benchmark_receive_rate", "benchmark_delivery_rate"] {
                let line = format!(
                    "{metric}{{benchmarkrun=\"js\",namespace=\"ns-variants\",variant=\"{variant}\"}} {rate}"
                );
                assert!(text.contains(&line), "missing {line} in\n{text}");
            }
        }
    }

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
        let now = i64::MAX;
        observe(&reg, "ns-prune", "kept", ("", now), &r, None);
        observe(&reg, "ns-prune", "deleted", ("", now), &r, None);
        observe(&reg, "ns-prune", "deleted", ("r2", now), &r, None);
        let key = |n: &str| ("ns-prune".to_string(), n.to_string());
        assert!(exported_series().contains(&key("deleted")));
        let pruned = prune(|ns, name| ns != "ns-prune" || name == "kept");
        assert_eq!(pruned, 1);
        let left = exported_series();
        assert!(!left.contains(&key("deleted")), "{left:?}");
        assert!(left.contains(&key("kept")), "{left:?}");
        assert!(
            !render().contains(r#"benchmarkrun="deleted""#),
            "a deleted run's variant series stayed"
        );
        // Idempotent: nothing more to prune.
        assert_eq!(prune(|ns, name| ns != "ns-prune" || name == "kept"), 0);
    }

    fn key(name: &str) -> SeriesKey {
        ("ns".into(), name.into(), String::new())
    }

    /// A long history keeps only the latest finished runs' series, whatever order a relist
    /// brings them in; a run still going is never the one to leave.
    #[test]
    fn only_the_latest_finished_runs_are_exported() {
        let mut e = Exported::new(3);
        for (name, t) in [("b", 20), ("a", 10), ("c", 30)] {
            assert_eq!(e.admit(key(name), t), Admission::Export { evicted: vec![] });
        }
        // Earlier than all three: not exported, nothing leaves.
        assert_eq!(e.admit(key("old"), 5), Admission::TooOld);
        // A later one takes the earliest's place.
        assert_eq!(
            e.admit(key("d"), 40),
            Admission::Export {
                evicted: vec![key("a")]
            }
        );
        // A run still going is exported and stays.
        assert_eq!(
            e.admit(key("live"), i64::MAX),
            Admission::Export {
                evicted: vec![key("b")]
            }
        );
        // Observed again (each pass): stays, nothing moves.
        assert_eq!(e.admit(key("d"), 40), Admission::Export { evicted: vec![] });
        let mut kept: Vec<_> = e.keys().map(|k| k.1.clone()).collect();
        kept.sort();
        assert_eq!(kept, ["c", "d", "live"]);
    }
}
