//! The size of `BenchmarkRun.status`: the largest status admission allows, a large realistic
//! run and the demo's run, each serialised as the API server stores it. Every status write
//! re-sends the whole object to every watcher, and etcd refuses objects past 1.5 MiB, so the
//! worst case must stay under [`STATUS_BOUND_BYTES`]. Figures: `cargo test -p
//! msgbench-operator-core status_size -- --nocapture`.
//!
//! The bound: 1.375 MiB leaves 128 KiB of etcd's 1.5 MiB (`--max-request-bytes`) for the
//! object's metadata (managedFields, a `kubectl apply` annotation) and spec, a few KiB each in
//! practice. Most of the worst case is the six variants' merged histograms (each up to
//! [`MAX_STATUS_HISTOGRAM_CHARS`]); the rest (fault records, stage rows, environment,
//! thresholds) is about 400 KiB. A realistic large run and the demo's run stay under
//! [`STATUS_TARGET_BYTES`]; the worst case gets there only once the bulk (histograms,
//! timelines, stage rows) moves to a child object (docs/status-size.md).
use crate::run::{timing, variant_results};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, MicroTime, Time};
use msgbench_crds::benchmark_run::*;
use msgbench_crds::common::Sysctl;
use msgbench_crds::server_usage::{MemoryFit, MemoryPoint, MAX_MEMORY_POINTS, MAX_SERVER_PODS};
use msgbench_crds::workload::MAX_STAGES;
use runner_api::agent::RawResultLine;
use runner_api::coarse::CoarseLatency;
use runner_api::histo::{Histo, MAX_MICROS};
use runner_api::result::{TimelinePoint, MAX_TIMELINE_POINTS};
use std::collections::BTreeMap;

/// The bound the status of any admitted run stays under (see the module's docs).
const STATUS_BOUND_BYTES: usize = 1_441_792;
/// What a realistic large run (6 variants x 10 rounds, a 10-minute soak, 60 fault records)
/// stays under.
const STATUS_TARGET_BYTES: usize = 256 * 1024;

fn time(s: i64) -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(1_800_000_000 + s).unwrap())
}

fn bytes(v: &impl serde::Serialize) -> usize {
    serde_json::to_vec(v).unwrap().len()
}

fn kib(n: usize) -> String {
    format!("{n} B ({:.1} KiB)", n as f64 / 1024.0)
}

/// A deterministic xorshift, so every figure is the same on every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Standard normal (Box-Muller).
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.unit().max(1e-12), self.unit());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

/// A figure with 6 decimals (the code rounds most figures to 1 to 3, ratios to 6).
fn long(x: f64) -> f64 {
    x + 0.123_456
}

fn encoded(h: &Histo) -> String {
    serde_json::to_value(h)
        .unwrap()
        .as_str()
        .unwrap()
        .to_string()
}

/// The largest histogram msgbench can write: every one of its buckets (1 µs .. 60 s, 3
/// significant digits) holds a different, large count, so neither the varints nor deflate
/// shrink it.
fn widest_histogram() -> String {
    let mut h = Histo::default();
    let mut rng = Rng(7);
    let mut v = 1;
    while v <= MAX_MICROS {
        h.0.record_n(v, rng.next() >> 16).unwrap();
        v = h.0.next_non_equivalent(v);
    }
    encoded(&h)
}

/// Latencies as a loaded server gives them: log-normal around `median_us`, and with `tail` a
/// share spread log-uniformly up to 30 s (a fault's stall).
fn latencies(rng: &mut Rng, n: usize, median_us: f64, sigma: f64, tail: f64) -> Vec<u64> {
    (0..n)
        .map(|_| {
            if rng.unit() < tail {
                (1e3 * (3e4f64).powf(rng.unit())) as u64
            } else {
                (median_us * (sigma * rng.normal()).exp()) as u64
            }
        })
        .collect()
}

fn latency_summary() -> LatencySummary {
    LatencySummary {
        count: 123_456_789_012,
        min_ms: long(0.0),
        p50_ms: long(1.0),
        p90_ms: long(2.0),
        p95_ms: long(3.0),
        p99_ms: long(4.0),
        p999_ms: long(5.0),
        max_ms: long(60_000.0),
        mean_ms: long(1.0),
        stddev_ms: long(1.0),
    }
}

fn segment(name: String) -> SegmentResult {
    SegmentResult {
        name,
        offered: Some(long(1e6)),
        published: 123_456_789_012,
        received: 123_456_789_012,
        publish_rate: long(1e6),
        receive_rate: long(1e6),
        delivery_rate: Some(long(1e6)),
        latency: Some(latency_summary()),
        publish_ack_latency: Some(latency_summary()),
        generator_saturated: true,
    }
}

fn timeline_sample(second: u32) -> TimelineSample {
    TimelineSample {
        second,
        seconds: 1,
        publish_rate: 1_234_567.8,
        receive_rate: 1_234_567.8,
        ack_rate: 1_234_567.8,
        p50_ms: Some(long(1.0)),
        p99_ms: Some(long(100.0)),
    }
}

fn pod_name(i: usize) -> String {
    format!("{}-{i}", "p".repeat(58))
}

fn server_usage(pods: usize) -> ServerUsage {
    ServerUsage {
        cpu_cores_mean: Some(long(1.0)),
        cpu_cores_max: Some(long(1.0)),
        cpu_unavailable: None,
        memory_bytes_max: u64::MAX,
        memory_bytes_baseline: Some(u64::MAX),
        memory_bytes_per_connection: Some(long(1.0)),
        memory_per_connection_fit: Some(MemoryFit {
            points: 64,
            levels: 64,
            slope: Some(long(1.0)),
            slope_std_error: Some(long(1.0)),
            ci95_low: Some(long(1.0)),
            ci95_high: Some(long(1.0)),
            r_squared: Some(long(0.0)),
            intercept_bytes: Some(long(1.0)),
            min_r_squared: 0.9,
            unavailable: None,
        }),
        memory_points: vec![
            MemoryPoint {
                connections: 1_000_000,
                memory_bytes: 12_345_678_901
            };
            MAX_MEMORY_POINTS
        ],
        memory_point_stride: Some(1024),
        samples: 100_000,
        source: "pubsub-server /health".into(),
        unavailable: None,
        pods: (0..pods)
            .map(|i| PodUsage {
                pod: pod_name(i),
                samples: 100_000,
                cpu_cores_mean: Some(long(1.0)),
                cpu_cores_max: Some(long(1.0)),
                memory_bytes_baseline: Some(u64::MAX),
                memory_bytes_max: u64::MAX,
                connections_baseline: Some(u64::MAX),
                connections_max: Some(u64::MAX),
                cpu_core_seconds: long(1e5),
                sampled_seconds: long(1e5),
                last_sample_ms: Some(i64::MAX),
                last_cpu_seconds: Some(long(1e5)),
            })
            .collect(),
    }
}

/// The most a result can carry, with `timeline` points, `rows` stage rows and `histogram`.
fn full_result(timeline: usize, rows: usize, histogram: &str) -> RunResult {
    RunResult {
        published: 123_456_789_012,
        received: 123_456_789_012,
        expected: 123_456_789_012,
        publish_rate: long(1e6),
        receive_rate: long(1e6),
        delivery_rate: Some(long(1e6)),
        delivered_ratio: long(0.0),
        duplicates: 123_456_789,
        out_of_order: 123_456_789,
        foreign: 123_456_789,
        errors: 123_456_789,
        duration_seconds: long(86_400.0),
        latency: Some(latency_summary()),
        publish_ack_latency: Some(latency_summary()),
        lost_acked: Some(123_456_789),
        lost_acked_deliveries: Some(123_456_789),
        publish_stall_ms: Some(long(1e4)),
        publish_stall_started_at: Some(MicroTime(
            k8s_openapi::jiff::Timestamp::from_millisecond(1_800_000_000_123).unwrap(),
        )),
        warmup: Some(segment("warmup".into())),
        sessions: vec![],
        stages: (0..rows).map(|i| segment(format!("stage-{i}"))).collect(),
        generator_saturated: true,
        max_generator_lag_ms: Some(long(1e4)),
        closed_loop: false,
        connections: Some(ConnectionsResult {
            attempted: 1_000_000,
            connected: 1_000_000,
            failed: 1_000_000,
            connect_rate: long(1e4),
            connect_seconds: long(1e3),
            connect_time: Some(latency_summary()),
            errors: ["refused", "timeout", "reset", "tls", "dns", "other"]
                .into_iter()
                .map(|k| (k.to_string(), 123_456_789))
                .collect::<BTreeMap<_, _>>(),
        }),
        breaking_stage: Some("stage-31".into()),
        rest: (0..8)
            .map(|i| RestResult {
                path: format!("/{}{i}", "r".repeat(60)),
                requests: 123_456_789,
                errors: 123_456_789,
                latency: Some(latency_summary()),
            })
            .collect(),
        server_usage: Some(server_usage(MAX_SERVER_PODS)),
        timeline: (0..timeline as u32).map(timeline_sample).collect(),
        faults: Some(FaultSummary {
            executed: 60,
            recovered: 60,
            longest_recovery_seconds: Some(long(10.0)),
            mean_recovery_seconds: Some(long(10.0)),
            restart_back_offs: 60,
            down_past_drain: 60,
            p99_peak_ms: Some(long(1e3)),
        }),
        histogram: Some(histogram.to_string()),
    }
}

fn headline() -> Headline {
    Headline {
        delivery_rate: Some(long(1e6)),
        receive_rate: long(1e6),
        p99: "12.34ms".into(),
        comparison: Some(
            (0..5)
                .map(|i| format!("v{i}/base 0.62× ±0.08"))
                .collect::<Vec<_>>()
                .join(", "),
        ),
    }
}

fn estimate() -> Estimate {
    Estimate {
        mean: long(1e6),
        ci95_low: long(1e6),
        ci95_high: long(1e6),
    }
}

fn statistics() -> TrialStatistics {
    TrialStatistics {
        trials: 20,
        receive_rate: estimate(),
        delivery_rate: Some(estimate()),
        p50_ms: estimate(),
        p99_ms: estimate(),
    }
}

fn trial(t: i32) -> TrialFigures {
    TrialFigures {
        trial: t,
        position: Some(6),
        start_time: Some(time(t.into())),
        receive_rate: long(1e6),
        delivery_rate: Some(long(1e6)),
        publish_rate: long(1e6),
        p50_ms: long(1.0),
        p99_ms: long(10.0),
        delivered_ratio: long(0.0),
        generator_saturated: true,
    }
}

/// A fault record as large as one gets: the larger of the two shapes the code fills (a crash:
/// the agent's signal and the kubelet's restart; a partition: the agent's rules), both with the
/// stream leaders and the effect.
fn fault_record(i: usize, variant: Option<String>) -> FaultRecord {
    let base = FaultRecord {
        fault: (i % 4) as i32,
        trial: i as i32 + 1,
        round: Some(20),
        variant,
        server: format!("JetStreamCluster/{}", "s".repeat(52)),
        action: Some(FaultAction::Crash),
        planned_time: Some(time(i as i64)),
        executed_time: Some(time(i as i64)),
        offset_seconds: Some(long(10.0)),
        pod: Some(pod_name(i)),
        message: Some(
            "the current stream leader of benchmark stream bench-stream-0123456789 \
             (2 of 3 servers agreed, read from /jsz)"
                .into(),
        ),
        signal: None,
        partition: None,
        restart: None,
        stream_leader: Some(FaultStreamLeader {
            before: Some(pod_name(0)),
            after: Some(pod_name(1)),
            after_time: Some(time(7)),
        }),
        effect: Some(FaultEffect {
            before_receive_rate: long(1e6),
            lowest_receive_rate: long(0.0),
            recovery_seconds: Some(long(10.0)),
            recovery: "back to 95 % of the delivery rate before the fault 12 s after it, \
                       after 9 s with no deliveries"
                .into(),
            p99_peak_ms: Some(long(1e3)),
            p99_before_ms: Some(long(1.0)),
            duplicates: 123_456_789,
            out_of_order: 123_456_789,
            trial_lost_acked: Some(123_456_789),
            trial_publish_stall_ms: Some(long(1e4)),
            publish_stall_from_fault_seconds: Some(long(1.0)),
        }),
        injecting: None,
    };
    let crash = FaultRecord {
        signal: Some(FaultSignal {
            signal: "SIGKILL".into(),
            process: "nats-server".into(),
            pid: 12345,
            sent_time: time(1),
            resume_time: None,
        }),
        restart: Some(FaultRestart {
            exit_code: Some(137),
            exited_time: Some(time(5)),
            running_time: Some(time(6)),
            down_seconds: Some(12),
            back_off: true,
            down_past_drain: true,
        }),
        ..base.clone()
    };
    let partition = FaultRecord {
        action: Some(FaultAction::Partition),
        partition: Some(FaultPartition {
            ports: vec![4222, 6222],
            rules: "table inet msgbench-fault { chain input { type filter hook input priority \
                    -300; policy accept; tcp dport { 4222, 6222 } drop; } chain output { type \
                    filter hook output priority -300; policy accept; tcp sport { 4222, 6222 } \
                    drop; tcp dport 6222 drop; } }"
                .into(),
            applied_time: time(3),
            heal_time: time(4),
        }),
        ..base
    };
    if bytes(&crash) > bytes(&partition) {
        crash
    } else {
        partition
    }
}

fn observed_pod(i: usize) -> ObservedPod {
    ObservedPod {
        name: pod_name(i),
        node: Some(format!("{}-{i}", "node".repeat(15))),
        qos_class: Some("Guaranteed".into()),
        cpus: Some("0-3,8-11".into()),
        image: Some(format!("ghcr.io/msgbench/{}:v0.1.0", "i".repeat(40))),
        image_id: Some(format!(
            "ghcr.io/msgbench/{}@sha256:{}",
            "i".repeat(40),
            "f".repeat(64)
        )),
    }
}

fn condition(i: usize) -> Condition {
    Condition {
        last_transition_time: time(i as i64),
        message: "m".repeat(512),
        observed_generation: Some(i64::MAX),
        reason: RunFailureReason::ThresholdsNotMet.as_str().into(),
        status: "False".into(),
        type_: "Succeeded".into(),
    }
}

/// Everything but the results: what any run may carry around them.
fn frame(variants: &[String], rounds: usize) -> BenchmarkRunStatus {
    BenchmarkRunStatus {
        phase: Some(Phase::Failed),
        observed_generation: Some(i64::MAX),
        conditions: (0..8).map(condition).collect(),
        target_name: Some(format!("wss://{}.example.com:443/app", "h".repeat(200))),
        start_time: Some(time(0)),
        completion_time: Some(time(1)),
        job_name: Some(format!("{}-g9999", "r".repeat(52))),
        progress: Some(Progress {
            trial: 120,
            trials: 120,
            elapsed_seconds: 172_800,
            expected_seconds: Some(172_800),
            published: u64::MAX,
            received: u64::MAX,
            runners_ready: 64,
        }),
        headline: Some(headline()),
        result: None,
        trials: vec![],
        statistics: None,
        thresholds: (0..96)
            .map(|i| ThresholdResult {
                metric: Metric::DeliveryRate,
                op: ThresholdOp::Ge,
                value: long(1e6),
                observed: Some(long(1e6)),
                passed: false,
                severity: Severity::Fail,
                variant: variants.get(i % variants.len().max(1)).cloned(),
            })
            .collect(),
        comparison: None,
        verdict: Some(Verdict {
            outcome: Outcome::Failed,
            reason: RunFailureReason::ThresholdsNotMet.as_str().into(),
            message: Some("m".repeat(1024)),
        }),
        environment: Some(ObservedEnvironment {
            server_pods: (0..16).map(observed_pod).collect(),
            runner_pods: (0..64).map(observed_pod).collect(),
            shared_nodes: true,
            sysctls: (0..16)
                .map(|i| Sysctl {
                    name: format!("net.ipv4.{}{i}", "n".repeat(100)),
                    value: "4096 87380 6291456".into(),
                })
                .collect(),
        }),
        server_usage: None,
        history: (0..MAX_HISTORY as i64)
            .map(|g| HistoryEntry {
                generation: g,
                completion_time: Some(time(g)),
                verdict: Some(Verdict {
                    outcome: Outcome::Failed,
                    reason: RunFailureReason::ThresholdsNotMet.as_str().into(),
                    message: Some("m".repeat(256)),
                }),
                headline: Some(headline()),
                statistics: Some(statistics()),
            })
            .collect(),
        schedule: (0..rounds as i32)
            .map(|r| ScheduledRound {
                round: r + 1,
                order: variants.to_vec(),
            })
            .collect(),
        variants: vec![],
        variant_comparison: None,
        faults: vec![],
    }
}

/// Variant names at the schema's longest (32 characters).
fn variant_names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{}{i}", "v".repeat(31))).collect()
}

/// The largest status of a variants run with `rounds` rounds and `rows` stage rows per result,
/// each result with `timeline` points and `histogram`.
fn worst_case(histogram: &str, timeline: usize, rounds: usize, rows: usize) -> BenchmarkRunStatus {
    let names = variant_names(MAX_VARIANTS);
    let mut st = frame(&names, rounds);
    // With variants the server usage stays here (`server_usage::attach` moves it only into a
    // run's single result).
    st.server_usage = Some(server_usage(MAX_SERVER_PODS));
    st.variants = names
        .iter()
        .map(|n| VariantResult {
            name: n.clone(),
            target: format!("JetStreamCluster/{}", "s".repeat(52)),
            headline: headline(),
            result: Some(RunResult {
                server_usage: None,
                ..full_result(timeline, rows, histogram)
            }),
            trials: (1..=rounds as i32).map(trial).collect(),
            statistics: Some(statistics()),
        })
        .collect();
    st.variant_comparison = Some(VariantComparison {
        baseline: names[0].clone(),
        rounds: rounds as i32,
        method: "paired by round: geometric mean of per-round ratios and mean of per-round \
                 differences, 95 % Student t intervals over rounds"
            .into(),
        figures: (0..40)
            .map(|i| PairedFigure {
                variant: names[1 + i % (names.len() - 1)].clone(),
                figure: "deliveryRate".into(),
                baseline: long(1e6),
                current: long(1e6),
                ratio: PairedEstimate {
                    estimate: long(1.0),
                    ci95_low: Some(long(1.0)),
                    ci95_high: Some(long(1.0)),
                },
                difference: PairedEstimate {
                    estimate: long(1.0),
                    ci95_low: Some(long(1.0)),
                    ci95_high: Some(long(1.0)),
                },
                verdict: ComparisonVerdict::NoSignificantDifference,
            })
            .collect(),
    });
    st.faults = (0..MAX_FAULT_RECORDS as usize)
        .map(|i| fault_record(i, Some(names[i % names.len()].clone())))
        .collect();
    st
}

/// The largest status of a run without variants: one result with everything, trials and the
/// baseline comparison.
fn worst_single(
    histogram: &str,
    timeline: usize,
    trials: usize,
    rows: usize,
) -> BenchmarkRunStatus {
    let mut st = frame(&[], trials);
    st.schedule = vec![];
    st.result = Some(full_result(timeline, rows, histogram));
    st.trials = (1..=trials as i32).map(trial).collect();
    st.statistics = Some(statistics());
    st.comparison = Some(BaselineComparison {
        baseline: "b".repeat(MAX_RUN_NAME),
        baseline_generation: Some(i64::MAX),
        figures: (0..16)
            .map(|_| FigureComparison {
                figure: "deliveryRate".into(),
                baseline: long(1e6),
                current: long(1e6),
                ratio: long(1.0),
                difference: long(1.0),
                significant: true,
            })
            .collect(),
        reason: Some("BaselineNotFinished".into()),
    });
    st.faults = (0..MAX_FAULT_RECORDS as usize)
        .map(|i| fault_record(i, None))
        .collect();
    st
}

/// Stage (or session) rows a result may have with `records` result records per runner:
/// records x (1 + warm-up + rows) <= MAX_RESULT_PHASE_RECORDS, and at most 32 rows.
fn rows_admitted(records: usize) -> usize {
    (MAX_RESULT_PHASE_RECORDS as usize / records)
        .saturating_sub(2)
        .min(MAX_STAGES as usize)
}

/// The largest status admission allows over every number of rounds (fewer rounds leave room
/// for more stage rows), with `histogram` as every result's.
fn largest_admitted(histogram: &str) -> (usize, BenchmarkRunStatus) {
    largest(admitted(histogram))
}

/// Every candidate for the largest status: with six variants or none, 1 to 20 rounds or trials.
fn admitted(histogram: &str) -> impl Iterator<Item = BenchmarkRunStatus> + '_ {
    let (one, each) = (
        timeline_points_per_result(1),
        timeline_points_per_result(MAX_VARIANTS),
    );
    let variants = (1..=20).map(move |rounds| {
        let rows = rows_admitted(MAX_VARIANTS * rounds);
        worst_case(histogram, each, rounds, rows)
    });
    let single = (1..=20).map(move |t| worst_single(histogram, one, t, rows_admitted(t)));
    variants.chain(single)
}

fn largest(statuses: impl Iterator<Item = BenchmarkRunStatus>) -> (usize, BenchmarkRunStatus) {
    statuses
        .map(|st| (bytes(&st), st))
        .max_by_key(|(n, _)| *n)
        .unwrap()
}

/// Bytes of each part of a status, largest first, for the report.
fn parts(st: &BenchmarkRunStatus) -> Vec<(String, usize)> {
    let v = serde_json::to_value(st).unwrap();
    let mut out: Vec<(String, usize)> = v
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, x)| (k.clone(), bytes(x)))
        .collect();
    let (mut hist, mut timeline, mut stages) = (0, 0, 0);
    for r in st
        .variants
        .iter()
        .filter_map(|v| v.result.as_ref())
        .chain(st.result.as_ref())
    {
        hist += r.histogram.as_ref().map_or(0, |h| h.len() + 2);
        timeline += bytes(&r.timeline);
        stages += bytes(&r.stages) + bytes(&r.sessions);
    }
    out.sort_by_key(|p| std::cmp::Reverse(p.1));
    out.push(("results' histograms".into(), hist));
    out.push(("results' timelines".into(), timeline));
    out.push(("results' stage/session rows".into(), stages));
    out
}

/// `st` without what a child object owned by the run would take (not implemented; see
/// docs/status-size.md): every result's histogram, timeline and stage and session rows.
fn without_bulk(mut st: BenchmarkRunStatus) -> BenchmarkRunStatus {
    let results = (st.variants.iter_mut())
        .filter_map(|v| v.result.as_mut())
        .chain(st.result.as_mut());
    for r in results {
        r.histogram = None;
        r.timeline.clear();
        r.stages.clear();
        r.sessions.clear();
    }
    st
}

fn print(title: &str, st: &BenchmarkRunStatus) -> usize {
    let n = bytes(st);
    println!("{title}: status {}", kib(n));
    for (k, b) in parts(st) {
        println!("    {k:<32} {}", kib(b));
    }
    n
}

/// One second of latencies for a timeline point (a coarse histogram of `n` samples).
fn timeline_point(second: u32, rng: &mut Rng, rate: u64) -> TimelinePoint {
    let mut latency = CoarseLatency::default();
    for us in latencies(rng, 200, 3_000.0, 0.5, 0.0) {
        latency.record(us);
    }
    TimelinePoint {
        second,
        seconds: 1,
        published: rate + rng.next() % 1000,
        received: rate + rng.next() % 1000,
        acked: rate + rng.next() % 1000,
        latency,
        ..TimelinePoint::default()
    }
}

/// The soak: `variants` variants x `rounds` rounds of a `seconds`-long JetStream workload with
/// `faults_per_trial` kills of the stream leader in each trial.
fn soak_spec(variants: usize, rounds: u32, seconds: u32, faults_per_trial: usize) -> BenchmarkRun {
    let vs: String = (1..=variants)
        .map(|i| format!("    - {{name: r{i}, workload: {{jetstream: {{replicas: 1}}}}}}\n"))
        .collect();
    let fs: String = (0..faults_per_trial)
        .map(|i| {
            format!(
                "    - {{afterSeconds: {}, action: kill, pod: streamLeader}}\n",
                60 + i
            )
        })
        .collect();
    let faults = if fs.is_empty() {
        String::new()
    } else {
        format!("  faults:\n{fs}")
    };
    let y = format!(
        "apiVersion: msgbench.dev/v1alpha1\nkind: BenchmarkRun\n\
         metadata: {{name: js-soak-variants, namespace: bench}}\n\
         spec:\n  target: {{serverRef: {{kind: JetStreamCluster, name: js3}}}}\n  \
         workload: {{protocol: jetstream, durationSeconds: {seconds}, warmupSeconds: 5}}\n  \
         trials: {rounds}\n  thresholds:\n    - {{metric: deliveredRatio, op: ge, value: 0.999, severity: warn}}\n    \
         - {{metric: latencyP99Ms, op: le, value: 50}}\n  variants:\n{vs}{faults}"
    );
    serde_norway::from_str(&y).unwrap()
}

/// The demo's run as `e2e/demo` creates it (config/demo), in namespace `bench`.
fn demo_spec() -> BenchmarkRun {
    let y = include_str!("../../../config/demo/benchmarkrun-js-r1-vs-r2.yaml");
    let mut br: BenchmarkRun = serde_norway::from_str(y).unwrap();
    br.metadata.namespace = Some("bench".into());
    br
}

/// `br`'s status built through the operator's own merge (`variant_results::apply`): one
/// runner, every round of every variant, a timeline point for each second of the measured
/// phase (`durationSeconds`; the drain's few points left out), `samples` latencies per record (with `tail` of them spread up to 30 s), and
/// `faults_per_trial` records per trial.
fn realistic(
    br: &BenchmarkRun,
    samples: usize,
    tail: f64,
    faults_per_trial: usize,
) -> BenchmarkRunStatus {
    let names: Vec<String> = br.spec.variants.iter().map(|v| v.name.clone()).collect();
    let variants = names.len();
    let rounds = br.spec.trials.max(1) as u32;
    let seconds = br.spec.workload.duration_seconds.unwrap();
    let mut rng = Rng(42);
    let schedule: Vec<ScheduledRound> = (1..=rounds as i32)
        .map(|r| {
            let mut order = names.clone();
            order.rotate_left(r as usize % variants);
            ScheduledRound { round: r, order }
        })
        .collect();
    let mut lines = Vec::new();
    let mut trial = 0;
    for round in &schedule {
        for name in &round.order {
            trial += 1;
            let lat = latencies(&mut rng, samples, 3_000.0, 0.6, tail);
            let mut l = runner_api::testing::record(
                1,
                trial,
                &lat,
                lat.len() as u64,
                1_800_000_000_000 + u64::from(trial) * 700_000,
            );
            l.variant = Some(name.clone());
            l.round = Some(round.round as u32);
            l.result.timeline = (0..seconds)
                .map(|s| timeline_point(s, &mut rng, 50_000))
                .collect::<Vec<_>>();
            l.result.timeline.truncate(MAX_TIMELINE_POINTS);
            l.result.finalize();
            lines.push(RawResultLine::from_line(&l).unwrap());
        }
    }
    let mut st = BenchmarkRunStatus {
        phase: Some(Phase::Succeeded),
        observed_generation: Some(1),
        target_name: Some("JetStreamCluster/js3".into()),
        start_time: Some(time(0)),
        completion_time: Some(time(3600)),
        job_name: Some("js-soak-variants-g1".into()),
        schedule,
        faults: (0..trial as usize * faults_per_trial)
            .map(|i| {
                let mut f = fault_record(i, Some(names[i % variants].clone()));
                f.server = "JetStreamCluster/js3".into();
                f.pod = Some("js3-1".into());
                f.signal = None;
                f.partition = None;
                f.restart = None;
                f.action = Some(FaultAction::Kill);
                f.stream_leader = Some(FaultStreamLeader {
                    before: Some("js3-1".into()),
                    after: Some("js3-2".into()),
                    after_time: Some(time(9)),
                });
                f
            })
            .collect(),
        conditions: [
            "Complete",
            "Succeeded",
            "Reconciling",
            "Stalled",
            "TargetReady",
        ]
        .iter()
        .map(|t| Condition {
            type_: t.to_string(),
            status: "True".into(),
            reason: "RunSucceeded".into(),
            message: "every runner finished and every threshold held".into(),
            observed_generation: Some(1),
            last_transition_time: time(3600),
        })
        .collect(),
        environment: Some(ObservedEnvironment {
            server_pods: (0..3)
                .map(|i| ObservedPod {
                    name: format!("js3-{i}"),
                    node: Some(format!("kind-worker{i}")),
                    qos_class: Some("Burstable".into()),
                    cpus: Some("0-3".into()),
                    image: Some("nats:2.11-alpine".into()),
                    image_id: Some(format!("docker.io/library/nats@sha256:{}", "a".repeat(64))),
                })
                .collect(),
            runner_pods: vec![ObservedPod {
                name: "js-soak-variants-g1-0-abcde".into(),
                node: Some("kind-worker".into()),
                qos_class: Some("Burstable".into()),
                cpus: Some("0-3".into()),
                image: Some("ghcr.io/msgbench/bench-runner:0.1.0".into()),
                image_id: Some(format!(
                    "ghcr.io/msgbench/bench-runner@sha256:{}",
                    "b".repeat(64)
                )),
            }],
            shared_nodes: false,
            sysctls: vec![],
        }),
        server_usage: Some(ServerUsage {
            memory_points: vec![],
            pods: (0..3)
                .map(|i| PodUsage {
                    pod: format!("js3-{i}"),
                    ..server_usage(1).pods[0].clone()
                })
                .collect(),
            ..server_usage(0)
        }),
        ..BenchmarkRunStatus::default()
    };
    variant_results::apply(br, &mut st, &lines, 1, |n| {
        format!("JetStreamCluster/js3-{n}")
    })
    .unwrap();
    st
}

/// Status writes about each fault of a trial: the pod chosen (written before the deletion), the
/// fault carried out, the stream leader after it, the pod's restart.
const WRITES_PER_FAULT: f64 = 4.0;

/// Status writes a minute while `br` runs, from the code: status is written only when it changes
/// (operator `benchmark_run::reconcile`), and while Running it changes with each server sample
/// (every `server_usage::SAMPLE_EVERY_MS`; `progress` goes with it), at each trial change
/// (`progress.trial` and the trial's planned faults) and [`WRITES_PER_FAULT`] times per fault.
/// An upper bound: passes come every 2 s (`decide::POLL`), so a sample is written 5 to 6 s after
/// the last, and a trial change can share its pass with a sample.
fn writes_per_minute(br: &BenchmarkRun) -> f64 {
    let samples = 60_000.0 / crate::run::server_usage::SAMPLE_EVERY_MS as f64;
    let trials = f64::from(timing::total_trials(br));
    let minutes = timing::expected_run_seconds(br).unwrap() as f64 / 60.0;
    let per_trial = 1.0 + WRITES_PER_FAULT * br.spec.faults.len() as f64;
    samples + trials * per_trial / minutes
}

/// What a watcher receives a minute while the run runs (results land only at the verdict, so
/// this is the same before and after the results shrink), and returns those bytes.
fn print_running(br: &BenchmarkRun, st: &BenchmarkRunStatus, faults: usize) -> usize {
    let running = while_running(st.clone(), faults);
    let object = object_bytes(br, &running);
    let writes = writes_per_minute(br);
    let per_minute = (object as f64 * writes) as usize;
    println!(
        "    while it runs ({faults} fault records so far, no results yet): status {}, object \
         {}; {writes:.1} status writes a minute (a server sample every {} s, {} trials in {} s, \
         {} faults a trial) = {} per watcher per minute",
        kib(bytes(&running)),
        kib(object),
        crate::run::server_usage::SAMPLE_EVERY_MS / 1000,
        timing::total_trials(br),
        timing::expected_run_seconds(br).unwrap(),
        br.spec.faults.len(),
        kib(per_minute)
    );
    per_minute
}

/// `st` as it stands mid-run: no results (they land at the verdict), `faults` records so far.
fn while_running(mut st: BenchmarkRunStatus, faults: usize) -> BenchmarkRunStatus {
    st.phase = Some(Phase::Running);
    st.completion_time = None;
    st.headline = None;
    st.thresholds.clear();
    st.variants.clear();
    st.variant_comparison = None;
    st.faults.truncate(faults);
    for f in &mut st.faults {
        f.effect = None; // read from the timeline once the run is merged
    }
    st.progress = Some(Progress {
        trial: 30,
        trials: 60,
        elapsed_seconds: 21_000,
        expected_seconds: Some(42_000),
        published: 1_050_000_000,
        received: 1_050_000_000,
        runners_ready: 1,
    });
    st
}

/// The whole object as a watcher receives it: metadata, spec and status.
fn object_bytes(br: &BenchmarkRun, st: &BenchmarkRunStatus) -> usize {
    let mut o = br.clone();
    o.status = Some(st.clone());
    o.metadata.uid = Some("0f6b3a6e-5c3e-4a43-9d1b-7f1f8f1f7f1f".into());
    o.metadata.resource_version = Some("123456789".into());
    o.metadata.generation = Some(1);
    o.metadata.creation_timestamp = Some(time(0));
    bytes(&o)
}

/// Weighs the largest status admission allows (6 variants x up to 20 rounds, their share of
/// the timeline, 60 fault records, every bounded list full, histograms at their limit) and a
/// realistic large and demo-sized run built through the operator's merge, and keeps them under
/// their bounds.
#[test]
fn status_size_stays_under_its_bound() {
    let widest = widest_histogram();
    let mut rng = Rng(1);
    let mut wide = Histo::default();
    for us in latencies(&mut rng, 2_000_000, 3_000.0, 0.6, 0.01) {
        wide.record(us);
    }
    let wide = encoded(&wide);
    println!(
        "histogram (1 µs .. 60 s, 3 digits): every bucket full {} chars; 2 M samples, 1 % tail \
         to 30 s {} chars; status keeps at most {MAX_STATUS_HISTOGRAM_CHARS}",
        widest.len(),
        wide.len()
    );
    assert!(
        widest.len() <= MAX_STATUS_HISTOGRAM_CHARS,
        "the widest histogram msgbench writes must fit in status"
    );
    let cap = "A".repeat(MAX_STATUS_HISTOGRAM_CHARS);
    let (worst, st) = largest_admitted(&cap);
    print(
        "worst case the schema admits (histograms at their limit)",
        &st,
    );
    let (lean, _) = largest(admitted(&cap).map(without_bulk));
    println!(
        "    the largest without histograms, timelines and stage/session rows (what a child \
         object would take): status {}",
        kib(lean)
    );
    let (widest_case, st) = largest_admitted(&widest);
    print("worst case the code fills (widest histograms)", &st);
    let (wide_case, st) = largest_admitted(&wide);
    print("worst case with wide realistic histograms", &st);

    let br = soak_spec(6, 10, 600, 1);
    let st = realistic(&br, 200_000, 0.01, 1);
    let large = print(
        "realistic large: 6 variants x 10 rounds, 600 s soak, 1 fault per trial (60 records)",
        &st,
    );
    println!("    whole object {}", kib(object_bytes(&br, &st)));
    for v in &st.variants {
        let points = v.result.as_ref().map_or(0, |r| r.timeline.len());
        assert_eq!(points, timeline_points_per_result(6), "{}", v.name);
    }
    let soak_running = print_running(&br, &st, 30);
    let br = demo_spec();
    let st = realistic(&br, 200_000, 0.0, 0);
    let demo = print(
        "the demo's run: config/demo/benchmarkrun-js-r1-vs-r2.yaml (2 variants x 4 rounds, 5 s)",
        &st,
    );
    println!("    whole object {}", kib(object_bytes(&br, &st)));
    let demo_running = print_running(&br, &st, 0);
    println!(
        "bound {}, target for realistic runs {}",
        kib(STATUS_BOUND_BYTES),
        kib(STATUS_TARGET_BYTES)
    );
    assert!(worst >= widest_case && widest_case >= wide_case);
    assert!(worst <= STATUS_BOUND_BYTES, "worst case {}", kib(worst));
    assert!(
        large <= STATUS_TARGET_BYTES,
        "realistic large {}",
        kib(large)
    );
    assert!(demo <= STATUS_TARGET_BYTES, "demo {}", kib(demo));
    // What a watcher of runs receives while one runs: under a MiB a minute.
    assert!(soak_running.max(demo_running) < 1 << 20);
}
