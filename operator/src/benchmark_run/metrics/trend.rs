//! Trends across runs: each finished run's headline figures as Prometheus series labelled by a
//! stable benchmark name, not the object's, so a benchmark run nightly (a new object each time,
//! often from `generateName`) is one series whose history Prometheus keeps after the run objects
//! are deleted. Unlike the per-run gauges (`metrics.rs`), these are not pruned with the run: the
//! latest finished run of each benchmark stays exported until a newer one finishes.
//!
//! The name: the run's `msgbench.dev/benchmark` label, else its `generateName` without the
//! trailing `-`; a run with neither has no trend (its object name is not stable).
use super::{registered, Figure};
use kube::ResourceExt;
use msgbench_crds::benchmark_run::{BenchmarkRun, BenchmarkRunStatus, Phase, RunResult};
use prometheus::{GaugeVec, Registry};
use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

pub use msgbench_operator_core::run::retention::{benchmark_name, BENCHMARK_LABEL};
/// Most (namespace, benchmark, variant) series kept: the oldest finished go first.
const MAX_SERIES: usize = 512;

/// One finished run's figures for one variant ("" without variants).
#[derive(Clone, Debug, PartialEq)]
pub struct TrendPoint {
    pub variant: String,
    /// Absent where the run had no end-to-end window: no sample, never 0.
    pub delivery_rate: Option<f64>,
    pub receive_rate: f64,
    pub p99_seconds: Option<f64>,
    pub passed: bool,
    pub finished_seconds: f64,
}

/// The points a finished run contributes: none before it has finished with results.
pub fn points(status: &BenchmarkRunStatus) -> Vec<TrendPoint> {
    let finished = matches!(status.phase, Some(Phase::Succeeded | Phase::Failed));
    let Some(done) = status.completion_time.as_ref().filter(|_| finished) else {
        return Vec::new();
    };
    let finished_seconds = done.0.as_millisecond() as f64 / 1000.0;
    let passed = status.phase == Some(Phase::Succeeded);
    let point = |variant: &str, r: &RunResult| TrendPoint {
        variant: variant.to_string(),
        delivery_rate: r.delivery_rate,
        receive_rate: r.receive_rate,
        p99_seconds: r.latency.as_ref().map(|l| l.p99_ms / 1000.0),
        passed,
        finished_seconds,
    };
    let run = status.result.iter().map(|r| point("", r));
    let variants =
        (status.variants.iter()).filter_map(|v| v.result.as_ref().map(|r| point(&v.name, r)));
    run.chain(variants).collect()
}

struct TrendGauges {
    delivery_rate: Figure,
    receive_rate: Figure,
    p99: Figure,
    passed: GaugeVec,
    finished: GaugeVec,
}

impl TrendGauges {
    fn figures(&self) -> [&Figure; 3] {
        [&self.delivery_rate, &self.receive_rate, &self.p99]
    }

    #[cfg(test)]
    fn all(&self) -> Vec<&GaugeVec> {
        let figures = self.figures().into_iter().flat_map(Figure::families);
        figures.chain([&self.passed, &self.finished]).collect()
    }
}

/// The labels of a benchmark's trend series.
const LABELS: [&str; 3] = ["namespace", "benchmark", "variant"];

static TREND_GAUGES: OnceLock<Option<TrendGauges>> = OnceLock::new();
/// (namespace, benchmark, variant) -> finish time of the run exported for it.
static LATEST: Mutex<BTreeMap<SeriesKey, f64>> = Mutex::new(BTreeMap::new());

fn trend_gauges(registry: &Registry) -> Option<&'static TrendGauges> {
    TREND_GAUGES
        .get_or_init(|| {
            let g = |name: &str, help: &str| registered(registry, name, help, &LABELS);
            let rate = |name: &str, old: &str, help: &str| {
                let current = g(name, help)?;
                Figure::new(registry, &current, None, (old, help), &LABELS)
            };
            let latency = registered(
                registry,
                "benchmark_trend_latency_seconds",
                "Latest finished run of the benchmark: end-to-end latency at the quantile",
                &[LABELS[0], LABELS[1], LABELS[2], "quantile"],
            )?;
            Some(TrendGauges {
                delivery_rate: rate(
                    "benchmark_trend_delivery_rate_messages_per_second",
                    "benchmark_trend_delivery_rate",
                    "Latest finished run of the benchmark: unique deliveries/s end to end",
                )?,
                receive_rate: rate(
                    "benchmark_trend_receive_rate_messages_per_second",
                    "benchmark_trend_receive_rate",
                    "Latest finished run of the benchmark: receive rate, messages/s",
                )?,
                p99: Figure::new(
                    registry,
                    &latency,
                    Some("0.99"),
                    (
                        "benchmark_trend_latency_p99_seconds",
                        "Latest finished run of the benchmark: end-to-end p99 latency",
                    ),
                    &LABELS,
                )?,
                passed: g(
                    "benchmark_trend_passed",
                    "Latest finished run of the benchmark: 1 when it passed (phase Succeeded)",
                )?,
                finished: g(
                    "benchmark_trend_finished_timestamp_seconds",
                    "When the benchmark's latest finished run finished (Unix seconds)",
                )?,
            })
        })
        .as_ref()
}

/// Removes every benchmark's trend series (see `metrics::forget_all`).
pub fn forget_all() {
    if let Some(g) = TREND_GAUGES.get().and_then(Option::as_ref) {
        g.figures().iter().for_each(|f| f.reset());
        [&g.passed, &g.finished].iter().for_each(|v| v.reset());
    }
    if let Ok(mut latest) = LATEST.lock() {
        latest.clear();
    }
}

/// Exports the run's points under its benchmark name, unless a run of that benchmark that
/// finished later is already exported (an old run reconciled after a restart changes nothing).
pub fn observe_run(registry: &Registry, br: &BenchmarkRun, status: &BenchmarkRunStatus) {
    let (Some(name), Some(ns)) = (benchmark_name(br), br.namespace()) else {
        return;
    };
    let Some(g) = trend_gauges(registry) else {
        return;
    };
    let Ok(mut latest) = LATEST.lock() else {
        return;
    };
    for p in points(status) {
        let key = (ns.clone(), name.clone(), p.variant.clone());
        if latest.get(&key).is_some_and(|&t| t > p.finished_seconds) {
            continue;
        }
        let l = [ns.as_str(), name.as_str(), p.variant.as_str()];
        match p.delivery_rate {
            Some(d) => g.delivery_rate.set(&l, d),
            // No sample rather than a stale or zero one.
            None => g.delivery_rate.remove(&l),
        }
        g.receive_rate.set(&l, p.receive_rate);
        match p.p99_seconds {
            Some(s) => g.p99.set(&l, s),
            None => g.p99.remove(&l),
        }
        g.passed
            .with_label_values(&l)
            .set(f64::from(u8::from(p.passed)));
        g.finished.with_label_values(&l).set(p.finished_seconds);
        latest.insert(key, p.finished_seconds);
    }
    evict_oldest(g, &mut latest);
}

type SeriesKey = (String, String, String);

/// Keeps at most [`MAX_SERIES`] series sets, dropping the ones whose run finished longest ago.
fn evict_oldest(g: &TrendGauges, latest: &mut BTreeMap<SeriesKey, f64>) {
    for k in beyond_capacity(latest, MAX_SERIES) {
        let l = [k.0.as_str(), &k.1, &k.2];
        g.figures().iter().for_each(|f| f.remove(&l));
        for v in [&g.passed, &g.finished] {
            let _ = v.remove_label_values(&l);
        }
        latest.remove(&k);
    }
}

/// The keys to drop so that `max` remain: those whose run finished longest ago.
fn beyond_capacity(latest: &BTreeMap<SeriesKey, f64>, max: usize) -> Vec<SeriesKey> {
    let mut by_age: Vec<(&SeriesKey, &f64)> = latest.iter().collect();
    by_age.sort_by(|a, b| a.1.total_cmp(b.1));
    let extra = latest.len().saturating_sub(max);
    by_age
        .into_iter()
        .take(extra)
        .map(|(k, _)| k.clone())
        .collect()
}

#[cfg(test)]
mod tests;
