//! Gauges of each run's latest result on the operator's `/metrics`, one series per variant of a
//! run with `spec.variants` (label `variant`, empty for a run without). Runs that no longer
//! exist are pruned (`prune`, driven by the controller's store), so deleted runs leave no series.
//!
//! Only the most recently finished runs are exported ([`MAX_RUN_SERIES`]): finished runs stay
//! for months, and a series per run kept them all in memory and in every scrape (1,000
//! finished runs: 7,000 series, 14 MiB per scrape; heaptrack, `bench/operator run history`).
//! Prometheus keeps what it scraped; the trend series (`trend.rs`) carry each benchmark on.
//!
//! Names follow Prometheus' conventions: a unit suffix (`_messages_per_second`, `_seconds`)
//! and quantiles as a `quantile` label. The names before them (`benchmark_delivery_rate`,
//! `benchmark_latency_p99_seconds`, ...) are exported beside them for one minor version, their
//! HELP saying which name replaces them ([`Figure`]).
pub mod trend;

use msgbench_crds::benchmark_run::{BenchmarkRunStatus, Phase, RunResult};
use prometheus::core::Collector;
use prometheus::{GaugeVec, Opts, Registry};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, OnceLock};

/// Most (namespace, run, variant) series sets exported at once; the earliest finished go.
pub const MAX_RUN_SERIES: usize = 200;

struct Gauges {
    delivery_rate: Figure,
    receive_rate: Figure,
    publish_rate: Figure,
    delivered_ratio: GaugeVec,
    p50: Figure,
    p99: Figure,
    passed: GaugeVec,
}

/// One figure under its current name (with its `quantile`, if any) and, deprecated, under the
/// name it had before (without the quantile label), both set and removed together.
pub(super) struct Figure {
    current: GaugeVec,
    quantile: Option<&'static str>,
    deprecated: GaugeVec,
}

impl Figure {
    /// `current` (registered once, shared by the quantiles of one family) and the old family
    /// `old` registered here with a HELP that names the replacement.
    pub(super) fn new(
        registry: &Registry,
        current: &GaugeVec,
        quantile: Option<&'static str>,
        (old, help): (&str, &str),
        labels: &[&str],
    ) -> Option<Figure> {
        let new_name = format!("{EXPOSED_PREFIX}{}", fq_name(current));
        let instead = match quantile {
            Some(q) => format!("{new_name}{{quantile=\"{q}\"}}"),
            None => new_name,
        };
        let help =
            format!("Deprecated, removed after the next minor release: use {instead}. {help}");
        Some(Figure {
            current: current.clone(),
            quantile,
            deprecated: registered(registry, old, &help, labels)?,
        })
    }

    pub(super) fn set(&self, labels: &[&str], v: f64) {
        self.current.with_label_values(&self.labels(labels)).set(v);
        self.deprecated.with_label_values(labels).set(v);
    }

    /// Absent series (e.g. no latency yet) are fine to skip.
    pub(super) fn remove(&self, labels: &[&str]) {
        let _ = self.current.remove_label_values(&self.labels(labels));
        let _ = self.deprecated.remove_label_values(labels);
    }

    pub(super) fn reset(&self) {
        self.current.reset();
        self.deprecated.reset();
    }

    /// The current series' value.
    #[cfg(test)]
    pub(super) fn get(&self, labels: &[&str]) -> f64 {
        self.current.with_label_values(&self.labels(labels)).get()
    }

    fn labels<'a>(&self, labels: &[&'a str]) -> Vec<&'a str> {
        labels.iter().copied().chain(self.quantile).collect()
    }

    /// Both families, for gathering (a shared current family may come twice).
    pub(super) fn families(&self) -> [&GaugeVec; 2] {
        [&self.current, &self.deprecated]
    }
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
    fn figures(&self) -> [&Figure; 5] {
        let s = self;
        [
            &s.delivery_rate,
            &s.receive_rate,
            &s.publish_rate,
            &s.p50,
            &s.p99,
        ]
    }

    /// Every family once (p50 and p99 share `benchmark_latency_seconds`).
    fn all(&self) -> Vec<&GaugeVec> {
        let mut out: Vec<&GaugeVec> = vec![&self.delivered_ratio, &self.passed];
        for f in self.figures() {
            for v in f.families() {
                if !out.iter().any(|o| fq_name(o) == fq_name(v)) {
                    out.push(v);
                }
            }
        }
        out
    }
}

/// The labels of a run's series.
const LABELS: [&str; 3] = ["namespace", "benchmarkrun", "variant"];

/// The prefix the operator's registry gives every family (`runtime::metrics`): deprecation
/// notes name the series as a scrape shows it.
const EXPOSED_PREFIX: &str = "msgbench_";

fn fq_name(v: &GaugeVec) -> String {
    v.desc()
        .first()
        .map_or(String::new(), |d| d.fq_name.clone())
}

fn gauges(registry: &Registry) -> Option<&'static Gauges> {
    GAUGES
        .get_or_init(|| {
            let g = |name: &str, help: &str| registered(registry, name, help, &LABELS);
            let rate = |name: &str, old: &str, help: &str| {
                let current = g(name, help)?;
                Figure::new(registry, &current, None, (old, help), &LABELS)
            };
            let with_quantile = [LABELS[0], LABELS[1], LABELS[2], "quantile"];
            let latency = registered(
                registry,
                "benchmark_latency_seconds",
                "Latest merged end-to-end latency at the quantile",
                &with_quantile,
            )?;
            let quantile = |q, old: &str, help: &str| {
                Figure::new(registry, &latency, Some(q), (old, help), &LABELS)
            };
            Some(Gauges {
                delivery_rate: rate(
                    "benchmark_delivery_rate_messages_per_second",
                    "benchmark_delivery_rate",
                    "Latest merged unique deliveries/s end to end (the like-for-like rate)",
                )?,
                receive_rate: rate(
                    "benchmark_receive_rate_messages_per_second",
                    "benchmark_receive_rate",
                    "Latest merged receive rate, messages/s",
                )?,
                publish_rate: rate(
                    "benchmark_publish_rate_messages_per_second",
                    "benchmark_publish_rate",
                    "Latest merged publish rate, messages/s",
                )?,
                delivered_ratio: g("benchmark_delivered_ratio", "Latest received/expected")?,
                p50: quantile(
                    "0.5",
                    "benchmark_latency_p50_seconds",
                    "Latest merged end-to-end p50 latency",
                )?,
                p99: quantile(
                    "0.99",
                    "benchmark_latency_p99_seconds",
                    "Latest merged end-to-end p99 latency",
                )?,
                passed: g(
                    "benchmark_passed",
                    "1 when the run passed (phase Succeeded), else 0",
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

/// Exports the run's merged result, or each variant's, with whether the run passed (its phase
/// is Succeeded).
pub fn observe_status(registry: &Registry, ns: &str, name: &str, status: &BenchmarkRunStatus) {
    let passed = status.phase == Some(Phase::Succeeded);
    let finished = (status.completion_time.as_ref()).map_or(i64::MAX, |t| t.0.as_second());
    if let Some(r) = &status.result {
        observe(registry, ns, name, ("", finished), r, passed);
    }
    for variant in &status.variants {
        if let Some(r) = &variant.result {
            observe(registry, ns, name, (&variant.name, finished), r, passed);
        }
    }
}

/// Exports one series set: `variant` ("" for the run's own) with the run's completion
/// (Unix seconds, `i64::MAX` while it runs) and whether the run passed, unless
/// [`MAX_RUN_SERIES`] later ones are exported.
pub fn observe(
    registry: &Registry,
    ns: &str,
    name: &str,
    (variant, finished): (&str, i64),
    r: &RunResult,
    passed: bool,
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
        Some(d) => g.delivery_rate.set(&l, d),
        // No end-to-end window: no sample, never 0.
        None => g.delivery_rate.remove(&l),
    }
    g.receive_rate.set(&l, r.receive_rate);
    g.publish_rate.set(&l, r.publish_rate);
    g.delivered_ratio
        .with_label_values(&l)
        .set(r.delivered_ratio);
    if let Some(lat) = &r.latency {
        g.p50.set(&l, lat.p50_ms / 1000.0);
        g.p99.set(&l, lat.p99_ms / 1000.0);
    }
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
    let l = [ns.as_str(), name, variant];
    g.figures().iter().for_each(|f| f.remove(&l));
    for v in [&g.delivered_ratio, &g.passed] {
        // Absent series are fine to skip.
        let _ = v.remove_label_values(&l);
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
            for metric in [
                "benchmark_receive_rate_messages_per_second",
                "benchmark_delivery_rate_messages_per_second",
                "benchmark_receive_rate",
                "benchmark_delivery_rate",
            ] {
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
        observe(&reg, "ns-prune", "kept", ("", now), &r, false);
        observe(&reg, "ns-prune", "deleted", ("", now), &r, false);
        observe(&reg, "ns-prune", "deleted", ("r2", now), &r, false);
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

    /// The latency is one family with a `quantile` label; the old per-quantile names stay for
    /// one minor version, their HELP naming the replacement.
    #[test]
    fn latency_quantiles_are_a_label_and_the_old_names_say_they_are_deprecated() {
        let reg = Registry::new();
        let r = RunResult {
            delivery_rate: Some(900.0),
            latency: Some(LatencySummary {
                p50_ms: 1.5,
                p99_ms: 4.0,
                ..LatencySummary::default()
            }),
            ..RunResult::default()
        };
        observe(&reg, "ns-quantiles", "q", ("", i64::MAX), &r, false);
        let text = render();
        let run = r#"benchmarkrun="q",namespace="ns-quantiles""#;
        for line in [
            format!(r#"benchmark_latency_seconds{{{run},quantile="0.5",variant=""}} 0.0015"#),
            format!(r#"benchmark_latency_seconds{{{run},quantile="0.99",variant=""}} 0.004"#),
            format!(r#"benchmark_latency_p99_seconds{{{run},variant=""}} 0.004"#),
            "# HELP benchmark_latency_p99_seconds Deprecated, removed after the next minor \
             release: use msgbench_benchmark_latency_seconds{quantile=\"0.99\"}."
                .to_string(),
            "# HELP benchmark_delivery_rate Deprecated, removed after the next minor release: \
             use msgbench_benchmark_delivery_rate_messages_per_second."
                .to_string(),
        ] {
            assert!(text.contains(&line), "missing {line} in\n{text}");
        }
        assert_eq!(prune(|ns, _| ns != "ns-quantiles"), 1);
        assert!(!render().contains("ns-quantiles"), "pruned with both names");
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
