//! The report's view of a run: one series per variant (or one for a run without variants),
//! with the figures each chart and table reads. Nothing here averages percentiles: latency
//! curves come from the merged histograms, per-second latency from status as written.
use anyhow::{bail, Context, Result};
use msgbench_crds::benchmark_run::{
    BenchmarkRun, BenchmarkRunStatus, Headline, RunResult, TimelineSample, TrialFigures,
};
use msgbench_crds::workload::Workload;
use runner_api::histo::Histo;

/// A run as read from the cluster or a file. Only status figures and names are kept: the
/// spec may name Secrets and nothing from it beyond the workload's shape is shown.
#[derive(Clone, Debug)]
pub struct Run {
    pub name: String,
    /// Where it was read from, e.g. `namespace demo` or `bench-runner result file`.
    pub origin: String,
    /// Protocol, publishers, subscribers, rate, duration: the shape, never credentials.
    pub workload: Option<String>,
    /// `metadata.generation`: the spec generation a status must describe to be current
    /// (absent for a bench-runner result).
    pub generation: Option<i64>,
    pub status: BenchmarkRunStatus,
}

/// One line per chart: a variant, or the whole run without variants.
#[derive(Clone, Debug)]
pub struct Series<'a> {
    pub name: &'a str,
    pub target: String,
    pub headline: Option<&'a Headline>,
    pub result: Option<&'a RunResult>,
    pub trials: &'a [TrialFigures],
}

impl Run {
    pub fn from_benchmark_run(br: BenchmarkRun) -> Run {
        let name = br.metadata.name.clone().unwrap_or_else(|| "unnamed".into());
        let origin = match &br.metadata.namespace {
            Some(ns) => format!("namespace {ns}"),
            None => "file".into(),
        };
        Run {
            name,
            origin,
            workload: Some(workload_shape(&br.spec.workload)),
            generation: br.metadata.generation,
            status: br.status.unwrap_or_default(),
        }
    }

    pub fn has_variants(&self) -> bool {
        !self.status.variants.is_empty()
    }

    pub fn phase(&self) -> String {
        self.status
            .phase
            .map_or("unknown".into(), |p| format!("{p:?}"))
    }

    /// A clear error rather than empty charts while a run has no merged result.
    pub fn require_results(&self) -> Result<()> {
        let any =
            self.status.result.is_some() || self.status.variants.iter().any(|v| v.result.is_some());
        if !any {
            bail!(
                "BenchmarkRun {} has no results yet (phase {})",
                self.name,
                self.phase()
            );
        }
        Ok(())
    }

    pub fn series(&self) -> Vec<Series<'_>> {
        let s = &self.status;
        if self.has_variants() {
            return s
                .variants
                .iter()
                .map(|v| Series {
                    name: &v.name,
                    target: redact(&v.target),
                    headline: Some(&v.headline),
                    result: v.result.as_ref(),
                    trials: &v.trials,
                })
                .collect();
        }
        vec![Series {
            name: &self.name,
            target: redact(s.target_name.as_deref().unwrap_or("unknown")),
            headline: s.headline.as_ref(),
            result: s.result.as_ref(),
            trials: &s.trials,
        }]
    }
}

/// The workload's shape in one line (no URLs, no Secret contents: the workload holds neither).
pub fn workload_shape(w: &Workload) -> String {
    let rate = w
        .rate_per_publisher
        .map_or("closed loop".into(), |r| format!("{r} msg/s per publisher"));
    let duration = w
        .duration_seconds
        .map_or(String::new(), |d| format!(", {d} s"));
    format!(
        "{:?}: {} publishers, {} subscribers, {} topics, {} B payload, {rate}{duration}",
        w.protocol, w.publishers, w.subscribers, w.topics, w.payload_bytes
    )
}

/// An endpoint URL without its user-info, should one carry credentials.
pub fn redact(target: &str) -> String {
    match (target.find("://"), target.find('@')) {
        (Some(scheme), Some(at)) if at > scheme && !target[scheme + 3..at].contains('/') => {
            format!("{}://***@{}", &target[..scheme], &target[at + 1..])
        }
        _ => target.to_string(),
    }
}

/// Step between percentile points, in decades of 1/(1−q).
pub const PERCENTILE_STEP: f64 = 0.05;

/// The latency distribution from a merged histogram: (log10(1/(1−q)), ms) from q = 0 up to
/// the level one sample reaches (1 − 1/count), where the curve ends at the maximum.
pub fn percentile_curve(histogram: &str) -> Result<Vec<(f64, f64)>> {
    let h = Histo::decode(histogram).context("status histogram")?;
    if h.is_empty() {
        return Ok(vec![]);
    }
    let h = &h.0;
    let top = (h.len() as f64).log10();
    let ms = |us: u64| us as f64 / 1000.0;
    let mut points: Vec<(f64, f64)> = (0..)
        .map(|i| f64::from(i) * PERCENTILE_STEP)
        .take_while(|x| *x < top)
        .map(|x| (x, ms(h.value_at_quantile(1.0 - 10f64.powf(-x)))))
        .collect();
    points.push((top, ms(h.max())));
    Ok(points)
}

/// Decades the percentile axis spans: the level the largest histogram reaches, at least 2 (99 %).
pub fn percentile_decades(curves: &[(String, Vec<(f64, f64)>)]) -> u32 {
    let top = curves
        .iter()
        .flat_map(|(_, c)| c.last().map(|p| p.0))
        .fold(0.0, f64::max);
    (top.ceil() as u32).max(2)
}

/// Receive rate per timeline window, at the window's start second.
pub fn receive_rates(t: &[TimelineSample]) -> Vec<(f64, f64)> {
    t.iter()
        .map(|s| (f64::from(s.second), s.receive_rate))
        .collect()
}

/// p99 per window, split where a window had no deliveries (no p99): a gap, never a 0.
pub fn p99_segments(t: &[TimelineSample]) -> Vec<Vec<(f64, f64)>> {
    let mut out: Vec<Vec<(f64, f64)>> = vec![];
    let mut current = vec![];
    for s in t {
        match s.p99_ms {
            Some(ms) => current.push((f64::from(s.second), ms)),
            None if !current.is_empty() => out.push(std::mem::take(&mut current)),
            None => {}
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}
