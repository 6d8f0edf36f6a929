//! The largest status admission allows, part by part: every bounded list full, strings at
//! their limits, histograms as wide as msgbench can write them.
use crate::run::results::server_restarts::MAX_REASON;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, MicroTime, Time};
use msgbench_crds::benchmark_run::*;
use msgbench_crds::common::Sysctl;
use msgbench_crds::server_usage::{
    MemoryFit, MemoryPoint, ServerReadError, MAX_MEMORY_POINTS, MAX_READ_ERROR, MAX_READ_ERRORS,
    MAX_SERVER_PODS, MAX_SERVER_VERSION,
};
use msgbench_crds::workload::MAX_STAGES;
use runner_api::histo::{Histo, MAX_MICROS};
use std::collections::BTreeMap;
pub(super) fn time(s: i64) -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(1_800_000_000 + s).unwrap())
}

pub(super) fn bytes(v: &impl serde::Serialize) -> usize {
    serde_json::to_vec(v).unwrap().len()
}

pub(super) fn kib(n: usize) -> String {
    format!("{n} B ({:.1} KiB)", n as f64 / 1024.0)
}

/// A deterministic xorshift, so every figure is the same on every run.
pub(super) struct Rng(pub(super) u64);
impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub(super) fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Standard normal (Box-Muller).
    pub(super) fn normal(&mut self) -> f64 {
        let (u, v) = (self.unit().max(1e-12), self.unit());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

/// A figure with 6 decimals (the code rounds most figures to 1 to 3, ratios to 6).
pub(super) fn long(x: f64) -> f64 {
    x + 0.123_456
}

pub(super) fn encoded(h: &Histo) -> String {
    serde_json::to_value(h)
        .unwrap()
        .as_str()
        .unwrap()
        .to_string()
}

/// The largest histogram msgbench can write: every one of its buckets (1 µs .. 60 s, 3
/// significant digits) holds a different, large count, so neither the varints nor deflate
/// shrink it.
pub(super) fn widest_histogram() -> String {
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
pub(super) fn latencies(
    rng: &mut Rng,
    n: usize,
    median_us: f64,
    sigma: f64,
    tail: f64,
) -> Vec<u64> {
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

pub(super) fn latency_summary() -> LatencySummary {
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

pub(super) fn segment(name: String) -> SegmentResult {
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

pub(super) fn timeline_sample(second: u32) -> TimelineSample {
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

/// A server usage row's name at its longest: an endpoint's monitoring URL (at most 128
/// characters) without `http://`.
fn server_name(i: usize) -> String {
    let tail = format!("-{i}.h.n.svc.cluster.local:65535");
    format!("{}{tail}", "p".repeat(121 - tail.len()))
}

pub(super) fn pod_name(i: usize) -> String {
    format!("{}-{i}", "p".repeat(58))
}

/// The largest count the API server admits: it holds integers as int64, and one past that is
/// refused as "must be of type integer" (one digit fewer than `u64::MAX`).
const BIGGEST: u64 = i64::MAX as u64;

pub(super) fn server_usage(pods: usize) -> ServerUsage {
    ServerUsage {
        cpu_cores_mean: Some(long(1.0)),
        cpu_cores_max: Some(long(1.0)),
        cpu_unavailable: None,
        memory_bytes_max: Some(BIGGEST),
        memory_bytes_baseline: Some(BIGGEST),
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
                pod: server_name(i),
                version: Some("v".repeat(MAX_SERVER_VERSION + 3)),
                samples: 100_000,
                cpu_cores_mean: Some(long(1.0)),
                cpu_cores_max: Some(long(1.0)),
                memory_bytes_baseline: Some(BIGGEST),
                memory_bytes_max: BIGGEST,
                connections_baseline: Some(BIGGEST),
                connections_max: Some(BIGGEST),
                cpu_core_seconds: long(1e5),
                sampled_seconds: long(1e5),
                last_sample_ms: Some(i64::MAX),
                last_cpu_seconds: Some(long(1e5)),
            })
            .collect(),
        // The longest an error is kept (`read_errors::record` bounds it).
        read_errors: (0..pods.min(MAX_READ_ERRORS))
            .map(|i| ServerReadError {
                pod: server_name(i),
                failures: u32::MAX,
                error: "e".repeat(MAX_READ_ERROR + 3),
                last_failed_ms: Some(i64::MAX),
            })
            .collect(),
    }
}

/// The most a result can carry, with `timeline` points, `rows` stage rows and `histogram`.
pub(super) fn full_result(timeline: usize, rows: usize, histogram: &str) -> RunResult {
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
        // The reason comes only without the figure (and its `from`), and weighs more.
        acked_not_kept: None,
        acked_not_kept_from: None,
        acked_not_kept_unavailable: Some(
            "x".repeat(runner_api::kept::MAX_STATUS_UNAVAILABLE_CHARS),
        ),
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

pub(super) fn headline() -> Headline {
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

pub(super) fn estimate() -> Estimate {
    Estimate {
        mean: long(1e6),
        ci95_low: long(1e6),
        ci95_high: long(1e6),
    }
}

pub(super) fn statistics() -> TrialStatistics {
    TrialStatistics {
        trials: 20,
        receive_rate: estimate(),
        delivery_rate: Some(estimate()),
        p50_ms: estimate(),
        p99_ms: estimate(),
    }
}

pub(super) fn trial(t: i32) -> TrialFigures {
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
pub(super) fn fault_record(i: usize, variant: Option<String>) -> FaultRecord {
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
        // A power loss adds one small integer to a crash's shape: not the largest.
        power_loss: None,
        restart: None,
        stream_leader: Some(FaultStreamLeader {
            before: Some(pod_name(0)),
            after: Some(pod_name(1)),
            after_time: Some(time(7)),
        }),
        effect: Some(largest_effect()),
        report_lost: None,
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
            // Exclusive with the two above in a real status; here for the upper bound.
            exit_unavailable: Some(crate::run::faults::restart::EXIT_UNAVAILABLE.into()),
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
        ..base.clone()
    };
    // A crash whose agent report was lost, confirmed by the kubelet: no signal, the answer at
    // its limit and the evidence in words.
    let evidence = "the server container exited (code 137) at 2026-01-01T00:00:00Z (kubelet; \
                    restart count 2147483647)";
    let lost = FaultRecord {
        signal: None,
        message: Some(format!(
            "{}; report lost, confirmed: reportLost",
            base.message.as_deref().unwrap_or_default()
        )),
        report_lost: Some(FaultReportLost {
            asked_time: time(1),
            answer: "a".repeat(crate::run::faults::unknown::MAX_ANSWER_CHARS),
            confirmed: Some(evidence.into()),
            unconfirmed: None,
        }),
        ..crash.clone()
    };
    [crash, partition, lost]
        .into_iter()
        .max_by_key(bytes)
        .expect("three shapes")
}

/// A fault's effect with every figure present and at its widest.
fn largest_effect() -> FaultEffect {
    FaultEffect {
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
    }
}

pub(super) fn observed_pod(i: usize) -> ObservedPod {
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
        ..ObservedPod::default()
    }
}

/// A server pod as the restart check reads it: uid, restart count and the longest reason.
pub(super) fn observed_server_pod(i: usize) -> ObservedPod {
    ObservedPod {
        uid: Some(format!("{:08}-0000-0000-0000-000000000000", i)),
        restarts: Some(i32::MAX),
        last_termination: Some(termination()),
        ..observed_pod(i)
    }
}

fn termination() -> String {
    format!("{} (exit {})", "r".repeat(MAX_REASON), i32::MIN)
}

pub(super) fn condition(i: usize) -> Condition {
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
pub(super) fn frame(variants: &[String], rounds: usize) -> BenchmarkRunStatus {
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
            published: BIGGEST,
            received: BIGGEST,
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
            reason: RunFailureReason::ThresholdsNotMet.as_str().into(),
            message: Some("m".repeat(1024)),
        }),
        environment: Some(ObservedEnvironment {
            server_pods: (0..16).map(observed_server_pod).collect(),
            runner_pods: (0..64).map(observed_pod).collect(),
            server_pods_at_start: (0..16).map(observed_server_pod).collect(),
            server_restarts: (0..16)
                .map(|i| ServerRestart {
                    pod: pod_name(i),
                    change: "restarted".into(),
                    restarts: i32::MAX,
                    last_termination: Some(termination()),
                })
                .collect(),
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
                phase: Some(Phase::Failed),
                verdict: Some(Verdict {
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
        stop: Some(StopStatus {
            rounds: 20,
            max_rounds: 20,
            figure: StopFigure::DeliveryRate,
            target_percent: long(100.0),
            interval_percent: Some(long(1e6)),
            reason: Some(StopReason::IntervalReached),
            message: "m".repeat(1024),
        }),
    }
}

/// Variant names at the schema's longest (32 characters).
pub(super) fn variant_names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{}{i}", "v".repeat(31))).collect()
}

/// The largest status of a variants run with `rounds` rounds and `rows` stage rows per result,
/// each result with `timeline` points and `histogram`.
pub(super) fn worst_case(
    histogram: &str,
    timeline: usize,
    rounds: usize,
    rows: usize,
) -> BenchmarkRunStatus {
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
pub(super) fn worst_single(
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
pub(super) fn rows_admitted(records: usize) -> usize {
    (MAX_RESULT_PHASE_RECORDS as usize / records)
        .saturating_sub(2)
        .min(MAX_STAGES as usize)
}

/// The largest status admission allows over every number of rounds (fewer rounds leave room
/// for more stage rows), with `histogram` as every result's.
pub(super) fn largest_admitted(histogram: &str) -> (usize, BenchmarkRunStatus) {
    largest(admitted(histogram))
}

/// Every candidate for the largest status: with six variants or none, 1 to 20 rounds or trials.
pub(super) fn admitted(histogram: &str) -> impl Iterator<Item = BenchmarkRunStatus> + '_ {
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

pub(super) fn largest(
    statuses: impl Iterator<Item = BenchmarkRunStatus>,
) -> (usize, BenchmarkRunStatus) {
    statuses
        .map(|st| (bytes(&st), st))
        .max_by_key(|(n, _)| *n)
        .unwrap()
}

/// Bytes of each part of a status, largest first, for the report.
pub(super) fn parts(st: &BenchmarkRunStatus) -> Vec<(String, usize)> {
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
/// docs/src/measurements/status-size.md): every result's histogram, timeline and stage and session rows.
pub(super) fn without_bulk(mut st: BenchmarkRunStatus) -> BenchmarkRunStatus {
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

pub(super) fn print(title: &str, st: &BenchmarkRunStatus) -> usize {
    let n = bytes(st);
    println!("{title}: status {}", kib(n));
    for (k, b) in parts(st) {
        println!("    {k:<32} {}", kib(b));
    }
    n
}
