//! Fixture builders: runs with real encoded histograms (recorded, never hand-written base64)
//! and deterministic pseudo-random latencies, so the committed fixtures can be regenerated
//! byte for byte (tests/fixtures_fresh.rs checks they are).
#![allow(dead_code)]
use msgbench_crds::benchmark_run::*;
use runner_api::histo::Histo;
use runner_api::result::RunnerResult;
use runner_api::status_form::{format_ms, latency};
use std::path::PathBuf;

pub const TIMELINE_SECONDS: u32 = 20;
/// Second of r2's timeline with no deliveries (a gap in its p99 line).
pub const R2_GAP_SECOND: u32 = 7;

pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// A small LCG: the same latencies on every machine.
pub struct Lcg(u64);
impl Lcg {
    pub fn next_unit(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    /// A latency in µs with median `median_us` and a tail (p99 about 4 × the median).
    pub fn latency_us(&mut self, median_us: f64) -> u64 {
        let exp1 = -self.next_unit().max(1e-12).ln();
        (median_us * (0.35 * (exp1 - std::f64::consts::LN_2)).exp()) as u64
    }
}

/// A merged result over `rounds`: `count` samples around `median_us`, rates and a timeline.
fn result(seed: u64, count: usize, median_us: f64, rate: f64, gap: Option<u32>) -> RunResult {
    let mut rng = Lcg(seed);
    let mut h = Histo::default();
    (0..count).for_each(|_| h.record(rng.latency_us(median_us)));
    let timeline = (0..TIMELINE_SECONDS)
        .map(|s| {
            let empty = gap == Some(s);
            let wobble = 1.0 + 0.05 * (f64::from(s) * 0.9).sin();
            let round3 = |ms: f64| (ms * 1000.0).round() / 1000.0;
            let p50 = round3(median_us * wobble / 1000.0);
            TimelineSample {
                second: s,
                seconds: 1,
                publish_rate: rate,
                receive_rate: if empty {
                    0.0
                } else {
                    (rate * wobble * 10.0).round() / 10.0
                },
                p50_ms: (!empty).then_some(p50),
                p99_ms: (!empty).then_some(round3(p50 * 4.2 * wobble)),
                ..Default::default()
            }
        })
        .collect();
    RunResult {
        published: count as u64,
        received: count as u64,
        expected: count as u64,
        publish_rate: rate,
        receive_rate: rate - 0.1,
        // The end-to-end window is a little longer than the receive window.
        delivery_rate: Some(rate - 0.3),
        delivered_ratio: 1.0,
        duration_seconds: f64::from(TIMELINE_SECONDS),
        latency: latency(h.summary().as_ref()),
        timeline,
        histogram: serde_json::to_value(&h)
            .unwrap()
            .as_str()
            .map(str::to_string),
        ..Default::default()
    }
}

/// A round's delivery rate from its receive rate (end-to-end window 0.1 % longer).
fn delivery(receive_rate: f64) -> f64 {
    (receive_rate / 1.001 * 10.0).round() / 10.0
}

fn trials(rates: &[f64], p99s: &[f64], order: &[i32]) -> Vec<TrialFigures> {
    (0..rates.len())
        .map(|i| TrialFigures {
            trial: i as i32 + 1,
            position: Some(order[i]),
            receive_rate: rates[i],
            delivery_rate: Some(delivery(rates[i])),
            publish_rate: rates[i] + 0.5,
            p50_ms: p99s[i] / 4.0,
            p99_ms: p99s[i],
            delivered_ratio: 1.0,
            ..Default::default()
        })
        .collect()
}

/// Mean of `x` and the half width of its 95 % interval (t with n − 1 = 2 degrees of freedom).
fn mean_ci(x: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let sd = (x.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    (mean, 4.302_652_729_911_275 * sd / n.sqrt())
}

/// Geometric mean of the per-round ratios with its interval, and the mean difference with its.
fn paired(v: &[f64], b: &[f64]) -> (PairedEstimate, PairedEstimate) {
    let logs: Vec<f64> = v.iter().zip(b).map(|(v, b)| (v / b).ln()).collect();
    let diffs: Vec<f64> = v.iter().zip(b).map(|(v, b)| v - b).collect();
    let ((m, h), (d, dh)) = (mean_ci(&logs), mean_ci(&diffs));
    let ratio = PairedEstimate {
        estimate: m.exp(),
        ci95_low: Some((m - h).exp()),
        ci95_high: Some((m + h).exp()),
    };
    let difference = PairedEstimate {
        estimate: d,
        ci95_low: Some(d - dh),
        ci95_high: Some(d + dh),
    };
    (ratio, difference)
}

fn figure(name: &str, v: &[f64], b: &[f64], higher_better: bool) -> PairedFigure {
    let (ratio, difference) = paired(v, b);
    let mean = |x: &[f64]| x.iter().sum::<f64>() / x.len() as f64;
    let (lo, hi) = (ratio.ci95_low.unwrap(), ratio.ci95_high.unwrap());
    let verdict = match (lo > 1.0, hi < 1.0, higher_better) {
        (true, _, true) | (_, true, false) => ComparisonVerdict::Better,
        (true, _, false) | (_, true, true) => ComparisonVerdict::Worse,
        _ => ComparisonVerdict::NoSignificantDifference,
    };
    PairedFigure {
        variant: "r2".into(),
        figure: name.into(),
        baseline: mean(b),
        current: mean(v),
        ratio,
        difference,
        verdict,
    }
}

fn variant(name: &str, r: RunResult, t: Vec<TrialFigures>) -> VariantResult {
    let p99 = r.latency.as_ref().unwrap().p99_ms;
    VariantResult {
        name: name.into(),
        target: format!("JetStreamCluster/js-{name}"),
        headline: Headline {
            delivery_rate: r.delivery_rate,
            receive_rate: r.receive_rate,
            p99: format_ms(p99),
            comparison: None,
        },
        result: Some(r),
        trials: t,
        statistics: None,
    }
}

const SPEC: &str = "
target: {serverRef: {kind: JetStreamCluster, name: js3}}
workload: {protocol: jetstream, publishers: 2, subscribers: 1, topics: 1, payloadBytes: 128,
  ratePerPublisher: 500, durationSeconds: 20, jetstream: {stream: demo, replicas: 1}}
runners: {count: 1}
trials: 3
";

fn benchmark_run(name: &str, spec: &str, status: BenchmarkRunStatus) -> BenchmarkRun {
    let spec: BenchmarkRunSpec = serde_norway::from_str(spec).unwrap();
    let mut br = BenchmarkRun::new(name, spec);
    br.metadata.namespace = Some("msgbench-demo".into());
    br.status = Some(status);
    br
}

/// Two variants, r1 (baseline) and r2, over 3 rounds.
pub fn variants_run() -> BenchmarkRun {
    let (r1, r2) = (
        result(1, 3000, 2_000.0, 999.9, None),
        result(2, 3000, 3_100.0, 640.2, Some(R2_GAP_SECOND)),
    );
    let (rates1, rates2) = ([1000.1, 998.4, 1001.7], [640.5, 655.0, 625.3]);
    let (p991, p992) = ([8.1, 8.6, 7.9], [13.2, 12.4, 14.0]);
    let (t1, t2) = (
        trials(&rates1, &p991, &[1, 2, 1]),
        trials(&rates2, &p992, &[2, 1, 2]),
    );
    let pub1: Vec<f64> = rates1.iter().map(|r| r + 0.5).collect();
    let pub2: Vec<f64> = rates2.iter().map(|r| r + 0.5).collect();
    let (p501, p502): (Vec<f64>, Vec<f64>) =
        (p991.map(|p| p / 4.0).into(), p992.map(|p| p / 4.0).into());
    let (del1, del2) = (rates1.map(delivery), rates2.map(delivery));
    let figures = vec![
        figure("deliveryRate", &del2, &del1, true),
        figure("receiveRate", &rates2, &rates1, true),
        figure("publishRate", &pub2, &pub1, true),
        figure("p50Ms", &p502, &p501, false),
        figure("p99Ms", &p992, &p991, false),
    ];
    let schedule = [["r1", "r2"], ["r2", "r1"], ["r1", "r2"]];
    let status = BenchmarkRunStatus {
        phase: Some(Phase::Succeeded),
        verdict: Some(Verdict {
            reason: "Completed".into(),
            message: None,
        }),
        headline: Some(Headline {
            delivery_rate: r1.delivery_rate,
            receive_rate: r1.receive_rate,
            p99: format_ms(r1.latency.as_ref().unwrap().p99_ms),
            comparison: Some("r2/r1 0.64× ±0.04".into()),
        }),
        schedule: (schedule.iter().enumerate())
            .map(|(i, o)| ScheduledRound {
                round: i as i32 + 1,
                order: o.map(String::from).into(),
            })
            .collect(),
        variants: vec![variant("r1", r1, t1), variant("r2", r2, t2)],
        variant_comparison: Some(VariantComparison {
            baseline: "r1".into(),
            rounds: 3,
            method: "paired by round; Student t over rounds".into(),
            figures,
        }),
        ..Default::default()
    };
    let spec = format!(
        "{SPEC}variants: [{{name: r1}}, {{name: r2, workload: {{jetstream: {{replicas: 2}}}}}}]\n"
    );
    benchmark_run("js-r1-vs-r2", &spec, status)
}

/// One target, 3 trials, no variants.
pub fn plain_run() -> BenchmarkRun {
    let mut r = result(3, 2500, 900.0, 1000.0, None);
    // A warm-up and two sessions: the report's sessions table.
    let row = |name: &str, n: u64, seed: u64, acks: bool| {
        let mut h = Histo::default();
        let mut rng = Lcg(seed);
        (0..n).for_each(|_| h.record(rng.latency_us(900.0)));
        SegmentResult {
            name: name.into(),
            offered: Some(1000.0),
            published: n,
            received: n,
            publish_rate: 1000.0,
            receive_rate: 999.5,
            delivery_rate: Some(999.2),
            latency: latency(h.summary().as_ref()),
            publish_ack_latency: acks.then(|| latency(h.summary().as_ref())).flatten(),
            generator_saturated: false,
        }
    };
    r.warmup = Some(row("warmup", 500, 5, true));
    r.sessions = vec![
        row("session-1", 1000, 6, true),
        row("session-2", 1000, 7, false),
    ];
    let t = trials(&[999.0, 1000.2, 1000.5], &[3.4, 3.9, 3.6], &[1, 1, 1]);
    let status = BenchmarkRunStatus {
        phase: Some(Phase::Succeeded),
        target_name: Some("JetStreamCluster/js3".into()),
        headline: Some(Headline {
            delivery_rate: r.delivery_rate,
            receive_rate: r.receive_rate,
            p99: format_ms(r.latency.as_ref().unwrap().p99_ms),
            comparison: None,
        }),
        result: Some(r),
        trials: t
            .into_iter()
            .map(|t| TrialFigures {
                position: None,
                ..t
            })
            .collect(),
        ..Default::default()
    };
    benchmark_run("nats-plain", SPEC, status)
}

/// What `bench-runner run --output` writes: one runner, with a 20-second timeline.
pub fn runner_result() -> RunnerResult {
    let mut rng = Lcg(4);
    let latencies: Vec<u64> = (0..2000).map(|_| rng.latency_us(1_500.0)).collect();
    let mut r = runner_api::testing::record(1, 1, &latencies, 2000, 1_700_000_000_000).result;
    r.timeline = (0..TIMELINE_SECONDS)
        .map(|s| runner_api::testing::timeline_point(s, &latencies[s as usize * 100..][..100]))
        .collect();
    r
}

pub fn variants_yaml() -> String {
    serde_norway::to_string(&variants_run()).unwrap()
}
pub fn plain_yaml() -> String {
    serde_norway::to_string(&plain_run()).unwrap()
}
pub fn runner_json() -> String {
    serde_json::to_string_pretty(&runner_result()).unwrap() + "\n"
}
