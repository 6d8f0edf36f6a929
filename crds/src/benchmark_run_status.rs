//! BenchmarkRun status: phase and progress while running, the merged result, per-trial figures
//! with confidence intervals, threshold outcomes, the baseline comparison, the environment
//! actually observed, and a bounded history of earlier spec generations.
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, MicroTime, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::benchmark_run::{Metric, Severity, ThresholdOp};
use crate::common::Sysctl;
use crate::fault::{FaultRecord, FaultSummary};
pub use crate::variant_status::*;

/// Most history entries kept in status.
pub const MAX_HISTORY: usize = 10;

/// Longest merged histogram kept in a result (base64 characters). The widest histogram
/// msgbench can write (every bucket of 1 µs .. 60 s at 3 significant digits holding a distinct
/// count of up to 2^48) encodes to about 150 K characters, so no real histogram is ever left
/// out; the schema's limit is this, so six variants' histograms cannot take the status past
/// etcd's object limit (operator-core `run::results::status_size`).
pub const MAX_STATUS_HISTOGRAM_CHARS: usize = 163_840;

/// Most timeline points one status carries over all its results: a run's single result has
/// them all (one a second up to 600 s), a run with variants shares them out
/// ([`timeline_points_per_result`]), so the timelines weigh the same whatever the variants.
pub const MAX_STATUS_TIMELINE_POINTS: usize = 600;

/// Timeline points each of `results` results may have: 600 with one, 300 each with two, 100
/// each with six.
pub fn timeline_points_per_result(results: usize) -> usize {
    (MAX_STATUS_TIMELINE_POINTS / results.max(1)).max(1)
}

/// Observed state of a BenchmarkRun. Written only by the operator.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BenchmarkRunStatus {
    /// Where the run is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// Spec generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Complete is True once the run ended, passed or failed (its reason says how); Succeeded
    /// is the verdict (True, or False with the reason); Reconciling (True while running) and
    /// Stalled (True after a failure) are for kstatus-based tools; TargetReady and RunnersReady
    /// report the stages before the load (TargetReady False with TargetInUse while another run
    /// has the target; True with TargetShared under spec.shareTarget). CI gate: `kubectl wait
    /// --for=condition=Complete`, then `kubectl wait --for=condition=Succeeded --timeout=0`.
    /// Reasons such as TargetNotFound, BarrierTimeout, RunnerFailed, RunnersStartedApart,
    /// BaselineCycle, DeadlineExceeded, ResultsLost, ResultsTooLarge, ThresholdsNotMet,
    /// FaultsNotAllowed, FaultsNotInjected, FaultsUnconfirmed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub conditions: Vec<Condition>,
    /// `<Kind>/<name>` of the server, or the endpoint URL (printer column).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_name: Option<String>,
    /// When runners were released from the start barrier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When the verdict was reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// Runner Job of the current generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_name: Option<String>,
    /// Live progress while running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
    /// Figures shown by `kubectl get`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headline: Option<Headline>,
    /// Result merged over all runners and trials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<RunResult>,
    /// Headline figures of each trial, in execution order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 20))]
    pub trials: Vec<TrialFigures>,
    /// Mean and 95 % confidence interval over trials (2 or more trials).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statistics: Option<TrialStatistics>,
    /// Outcome of each threshold (with variants: per variant).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 96))]
    pub thresholds: Vec<ThresholdResult>,
    /// This run against `spec.baselineRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<BaselineComparison>,
    /// Why the run ended as it did (reason and detail); `phase` says whether it passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// Environment observed during the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<ObservedEnvironment>,
    /// Server CPU/memory sampled so far; moved into `result.serverUsage` when results merge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_usage: Option<ServerUsage>,
    /// Earlier generations' outcomes, newest first, at most 10.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_HISTORY))]
    pub history: Vec<HistoryEntry>,
    /// With `spec.variants`: the order the variants ran in, one entry per round (recorded
    /// before the runners start).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 20))]
    pub schedule: Vec<ScheduledRound>,
    /// With `spec.variants`: each variant's merged result and per-round figures.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 6))]
    pub variants: Vec<VariantResult>,
    /// With `spec.variants`: every variant against the baseline variant, paired by round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant_comparison: Option<VariantComparison>,
    /// With `spec.stopWhen`: the last check of the interval, and once decided, the rounds
    /// that ran and why no more did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<crate::stop_when::StopStatus>,
    /// Every fault execution of `spec.faults`: when it was due, when and on which pod it was
    /// carried out, and what it did to delivery.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 60))]
    pub faults: Vec<FaultRecord>,
}

/// Lifecycle of a run.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub enum Phase {
    /// Accepted, nothing started yet.
    Pending,
    /// Waiting for the target server to be Ready.
    WaitingForTarget,
    /// Runner pods starting; waiting at the start barrier.
    Starting,
    /// Load running.
    Running,
    /// Merging runner results.
    Merging,
    /// Finished and passed: it completed and every fail-severity threshold held.
    Succeeded,
    /// Finished and failed: it did not complete or a fail-severity threshold did not hold
    /// (see verdict.reason).
    Failed,
}

/// Progress while running.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    /// Current trial, 1-based.
    pub trial: i32,
    /// Trials in total.
    pub trials: i32,
    /// Seconds since the barrier released the runners.
    pub elapsed_seconds: i64,
    /// Expected total seconds, when the workload's length is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_seconds: Option<i64>,
    /// Messages published so far (all runners).
    pub published: u64,
    /// Messages received so far (all runners).
    pub received: u64,
    /// Runners that reached the start barrier.
    pub runners_ready: i32,
}

/// Figures for printer columns and a quick read.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Headline {
    /// Messages/s delivered end to end (`result.deliveryRate`, mean over trials): the
    /// `Msgs/s` printer column. Absent where no trial has the figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_rate: Option<f64>,
    /// Messages/s received over the subscribers' own window (`result.receiveRate`, mean over
    /// trials).
    pub receive_rate: f64,
    /// 99th percentile end-to-end latency, formatted with its unit (e.g. `3.6ms`).
    pub p99: String,
    /// With variants: each variant's throughput against the baseline variant from the paired
    /// rounds, e.g. `r2/r1 0.62× ±0.08`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<String>,
}

/// How `ackedNotKept` was decided. Ordered: merging keeps the later (a stream gone in one
/// trial is what the merged result says).
#[derive(
    Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq, PartialOrd, Ord,
)]
#[serde(rename_all = "camelCase")]
pub enum AckedNotKeptFrom {
    /// The stream was read back: the acknowledged messages it no longer held.
    ReadBack,
    /// The stream was not found (JetStream 404, stream not found) from first to last try of
    /// the bounded read-back, once the servers answered: every acknowledged message counts.
    StreamGone,
}

/// A merged result. Counts are sums over runners; latencies come from the merged histogram.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RunResult {
    /// Messages published in the measured phase.
    pub published: u64,
    /// Messages received in the measured phase (all subscribers).
    pub received: u64,
    /// Messages every subscriber should have received.
    pub expected: u64,
    /// Published messages per second.
    pub publish_rate: f64,
    /// Received messages per second over the receive window: each subscriber's first → last
    /// delivery, the longest one. A subscriber that fell behind and then drains a backlog
    /// shrinks its window, so this can exceed what the server delivered.
    pub receive_rate: f64,
    /// Unique deliveries (received − duplicates) per second over the end-to-end window: first
    /// send → last delivery (per runner, the longest over runners; phases and trials add up).
    /// The like-for-like throughput. Absent, not 0, where there is no such window (nothing
    /// published, or a record without it); 0 when messages were sent and none arrived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_rate: Option<f64>,
    /// received / expected.
    pub delivered_ratio: f64,
    /// Messages received more than once.
    pub duplicates: u64,
    /// Messages received out of a publisher's order.
    pub out_of_order: u64,
    /// Deliveries of messages this run did not send (another run or client publishing on this
    /// run's subjects, told apart by the run tag in every payload): never counted in
    /// `received`, duplicates or latency. Above 0, the server carried load this run did not
    /// generate, so its rates and latency are not this workload's alone.
    #[serde(default)]
    pub foreign: u64,
    /// Errors (publish failures, disconnects, timeouts).
    pub errors: u64,
    /// Measured-phase seconds.
    pub duration_seconds: f64,
    /// End-to-end latency from the intended send time (open loop; one clock per sample).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencySummary>,
    /// Publish-to-acknowledgement latency, where the protocol acknowledges.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish_ack_latency: Option<LatencySummary>,
    /// Messages whose publish the server acknowledged (JetStream ack, MQTT PUBACK/PUBCOMP,
    /// HTTP publish 2xx) but that an own-runner subscriber of their topic never received by the
    /// end of the run's drain; a message missed by several subscribers counts once.
    /// Each runner checks its own publishers against its own subscribers only (exact with one
    /// runner). Summed over runners and trials. Absent where publishes are not acknowledged
    /// (core NATS, MQTT QoS 0, WebSocket): unavailable, not 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_acked: Option<u64>,
    /// As `lostAcked`, counted per (message, subscriber) that missed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_acked_deliveries: Option<u64>,
    /// JetStream only: acknowledged messages (publish acknowledged by JetStream) that the
    /// benchmark stream no longer held when read back after the run's drain. Durability, where
    /// `lostAcked` is delivery: a message delivered live and then lost from the servers' disks
    /// (a power loss) counts here and not there. Each runner reads back its own publishers'
    /// messages of the measured phases; summed over runners and trials. `ackedNotKeptFrom` says
    /// how it was decided. Absent (unavailable, not 0) for other protocols, and when a runner's
    /// read-back could not complete (`ackedNotKeptUnavailable` says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acked_not_kept: Option<u64>,
    /// How `ackedNotKept` was decided (`streamGone` if any runner or trial found the stream
    /// gone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acked_not_kept_from: Option<AckedNotKeptFrom>,
    /// Why `ackedNotKept` is absent although the run is a JetStream one (a read-back that did
    /// not complete; the runner's reason, cut to 80 characters: its log has it whole).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 80))]
    pub acked_not_kept_unavailable: Option<String>,
    /// Longest interval (ms) during which one publisher was publishing and nothing was
    /// acknowledged: from its last ack (or its first publish after an idle spell) to its next
    /// ack. Failed publishes (ack timeouts, "no responders" during an election) do not end it.
    /// The longest over publishers, runners and trials. Absent where publishes are not
    /// acknowledged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish_stall_ms: Option<f64>,
    /// When the longest publish stall began (the runner's wall clock; RFC 3339 with
    /// microseconds, millisecond precision), to line it up with a fault injected at a known
    /// time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish_stall_started_at: Option<MicroTime>,
    /// Warm-up figures, excluded from everything above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<SegmentResult>,
    /// Per-session rows of a sessions workload.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub sessions: Vec<SegmentResult>,
    /// Per-stage rows of a step-load workload (at most `workload.stages.count`, 32).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub stages: Vec<SegmentResult>,
    /// A runner could not keep its schedule (lag past the limit): the figures measure the
    /// generator, not only the server.
    pub generator_saturated: bool,
    /// Largest send lag behind schedule seen by any runner, milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_generator_lag_ms: Option<f64>,
    /// No rate was set: closed loop, latency is service time and may hide queueing.
    #[serde(default)]
    pub closed_loop: bool,
    /// Connections opened and held (connection workloads, and every run's connect phase).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections: Option<ConnectionsResult>,
    /// A step or ramp run stopped at `stopWhen`: the first stage that broke it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breaking_stage: Option<String>,
    /// Sampled REST endpoint latency (Socket.IO `rest`), one row per path.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub rest: Vec<RestResult>,
    /// Server resource use during the measured phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_usage: Option<ServerUsage>,
    /// The measured phase second by second, merged over runners; with several trials or
    /// rounds, second `s` of each is merged into one point. At most 600 points in the whole
    /// status: a run without variants has 600 (coarser, equal windows for runs past 600 s), a
    /// run with variants 600 ÷ variants per variant (e.g. 100 each with 6: 6-second windows
    /// for a 600 s soak); widened windows add up counts exactly and take their percentiles
    /// from the merged coarse histograms. Kept for reports and dashboards after the runners
    /// are gone; fault effects are read from each trial's own per-second timeline instead.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 600))]
    pub timeline: Vec<TimelineSample>,
    /// With `spec.faults`: how delivery recovered from this result's faults (each one is in
    /// `status.faults`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub faults: Option<FaultSummary>,
    /// The merged end-to-end latency histogram (HdrHistogram V2 + deflate, base64), so
    /// percentiles can be recomputed. At most 163840 characters (no histogram msgbench writes
    /// reaches it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_STATUS_HISTOGRAM_CHARS))]
    pub histogram: Option<String>,
}

/// One point of the measured phase's timeline: from `second` (since the measured start) for
/// `seconds` seconds.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TimelineSample {
    /// Start, in seconds since the measured phase began.
    pub second: u32,
    /// Width in seconds (1 for runs up to 600 s).
    pub seconds: u32,
    /// Messages sent per second in this window, summed over runners, mean over trials/rounds.
    pub publish_rate: f64,
    /// Messages delivered per second in this window (all subscribers), summed over runners,
    /// mean over trials/rounds.
    pub receive_rate: f64,
    /// Publishes acknowledged per second in this window, summed over runners, mean over
    /// trials/rounds (0, and omitted, where publishes are not acknowledged).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ack_rate: f64,
    /// Median end-to-end latency of the deliveries in this window, from a coarse histogram
    /// (bucket midpoints, within 6 % of the exact value) merged over runners and trials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_ms: Option<f64>,
    /// 99th percentile latency of the deliveries in this window (same coarse histogram).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ms: Option<f64>,
}

/// Latency distribution in milliseconds.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LatencySummary {
    /// Samples.
    pub count: u64,
    /// Minimum.
    #[serde(default)]
    pub min_ms: f64,
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 95th percentile.
    #[serde(default)]
    pub p95_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// 99.9th percentile.
    pub p999_ms: f64,
    /// Maximum.
    pub max_ms: f64,
    /// Mean.
    pub mean_ms: f64,
    /// Standard deviation.
    pub stddev_ms: f64,
}

/// Connections of the run, summed over runners (trials: the first trial's).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionsResult {
    /// Connections attempted.
    pub attempted: u64,
    /// Connections opened.
    pub connected: u64,
    /// Connections that failed (counted in `errors` too).
    pub failed: u64,
    /// Connections opened per second, over the longest time a runner took to open its own.
    pub connect_rate: f64,
    /// Longest time a runner took to open all its connections (seconds).
    pub connect_seconds: f64,
    /// Time from starting a connection to its being usable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_time: Option<LatencySummary>,
    /// Failures by kind (e.g. `refused`, `timeout`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors: BTreeMap<String, u64>,
}

/// Latency of one REST path, sampled during the run from the intended request time.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RestResult {
    /// Path requested.
    pub path: String,
    /// Requests sent.
    pub requests: u64,
    /// Failed, non-2xx or timed-out requests.
    pub errors: u64,
    /// Request latency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencySummary>,
}

/// One row of a segmented workload (warm-up, session, stage).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SegmentResult {
    /// Row name, e.g. `warmup`, `session-2`, `stage-5`.
    pub name: String,
    /// Offered load of the row (messages/s per publisher, or connections), when staged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered: Option<f64>,
    /// Messages published.
    pub published: u64,
    /// Messages received.
    pub received: u64,
    /// Published messages per second (the row's publish window).
    #[serde(default)]
    pub publish_rate: f64,
    /// Received messages per second (the row's receive window).
    pub receive_rate: f64,
    /// Unique deliveries per second over the row's end-to-end window (as `result.deliveryRate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_rate: Option<f64>,
    /// End-to-end latency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencySummary>,
    /// Publish → server acknowledgement latency (JetStream, MQTT QoS ≥ 1, HTTP publish).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish_ack_latency: Option<LatencySummary>,
    /// The runner could not keep the schedule in this row.
    #[serde(default)]
    pub generator_saturated: bool,
}

pub use crate::server_usage::{PodUsage, ServerUsage};

/// Headline figures of one trial.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TrialFigures {
    /// Trial number, 1-based (with variants: the round).
    pub trial: i32,
    /// With variants: this variant's place in its round's order, 1-based.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<i32>,
    /// When the trial started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// Received messages per second (receive window, as `result.receiveRate`).
    pub receive_rate: f64,
    /// Unique deliveries per second end to end (as `result.deliveryRate`; absent where it is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_rate: Option<f64>,
    /// Published messages per second.
    pub publish_rate: f64,
    /// Median end-to-end latency (ms).
    pub p50_ms: f64,
    /// 99th percentile end-to-end latency (ms).
    pub p99_ms: f64,
    /// received / expected.
    pub delivered_ratio: f64,
    /// The generator fell behind in this trial.
    pub generator_saturated: bool,
}

/// Mean and 95 % confidence interval per headline figure.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TrialStatistics {
    /// Trials the statistics cover.
    pub trials: i32,
    /// Received messages per second (receive window).
    pub receive_rate: Estimate,
    /// Unique deliveries per second end to end; absent unless every trial has the figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_rate: Option<Estimate>,
    /// Median end-to-end latency (ms).
    pub p50_ms: Estimate,
    /// 99th percentile end-to-end latency (ms).
    pub p99_ms: Estimate,
}

/// A mean with its 95 % confidence interval (Student t over trials).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Estimate {
    /// Mean over trials.
    pub mean: f64,
    /// Lower bound of the 95 % interval.
    pub ci95_low: f64,
    /// Upper bound of the 95 % interval.
    pub ci95_high: f64,
}

/// Outcome of one threshold.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ThresholdResult {
    /// Metric tested.
    pub metric: Metric,
    /// Comparison.
    pub op: ThresholdOp,
    /// Bound from the spec.
    pub value: f64,
    /// Observed value; absent when the result lacks the metric.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed: Option<f64>,
    /// Whether `observed op value` holds.
    pub passed: bool,
    /// Severity from the spec.
    pub severity: Severity,
    /// With variants: the variant whose result was tested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

/// This run against its baseline.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BaselineComparison {
    /// Baseline BenchmarkRun name.
    pub baseline: String,
    /// Baseline generation compared with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_generation: Option<i64>,
    /// One row per headline figure.
    #[schemars(length(max = 16))]
    pub figures: Vec<FigureComparison>,
    /// Set when no comparison was possible (e.g. BaselineNotFound, BaselineNotFinished).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One figure against the baseline.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FigureComparison {
    /// Figure name, e.g. `deliveryRate`, `receiveRate`, `p50Ms`, `p99Ms`.
    pub figure: String,
    /// Baseline value.
    pub baseline: f64,
    /// This run's value.
    pub current: f64,
    /// current / baseline.
    pub ratio: f64,
    /// current − baseline.
    pub difference: f64,
    /// Whether the difference is significant at 95 % given both runs' trials (Welch t-test);
    /// false with a single trial on either side.
    pub significant: bool,
}

/// Why the run ended as it did. Whether it passed is the phase (Succeeded or Failed) and the
/// Succeeded condition, not the verdict.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    /// CamelCase reason: Succeeded when the run passed, else why it failed, e.g.
    /// ThresholdsNotMet, BarrierTimeout, TargetNotFound.
    pub reason: String,
    /// Human-readable detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Environment observed during the run, so a number can be traced to where it was measured.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ObservedEnvironment {
    /// Server pods as observed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub server_pods: Vec<ObservedPod>,
    /// Runner pods as observed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub runner_pods: Vec<ObservedPod>,
    /// Runners and servers shared at least one node, so they competed for CPU.
    pub shared_nodes: bool,
    /// Sysctls applied on the server pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub sysctls: Vec<Sysctl>,
    /// The server pods as they were when the common start was chosen: what `serverRestarts`
    /// compares with.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub server_pods_at_start: Vec<ObservedPod>,
    /// Server pods that restarted, were replaced or went away during the run without a fault
    /// of this run explaining it (an OOM kill is never explained by a fault). The figures
    /// include that outage: read them with it in mind. Empty: none did.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub server_restarts: Vec<ServerRestart>,
}

/// A server pod that restarted during a run without a fault asking for it.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ServerRestart {
    /// Pod name.
    pub pod: String,
    /// What happened: `restarted` (its container, in place), `replaced` (a new pod of the same
    /// name), `gone` (no longer there) or `new` (not there at the start).
    pub change: String,
    /// Container restarts during the run (in place, or of the replacement since it started).
    pub restarts: i32,
    /// The container's last termination as the kubelet reports it, e.g. `OOMKilled (exit 137)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_termination: Option<String>,
}

/// One pod as observed.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ObservedPod {
    /// Pod name.
    pub name: String,
    /// Node it ran on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// QoS class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qos_class: Option<String>,
    /// CPU set the process saw, e.g. `1` or `2-3`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<String>,
    /// Image of the main container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The image the kubelet pulled for it, by digest (`repo@sha256:…`), once pulled.
    #[serde(default, rename = "imageID", skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    /// Server pods: the pod's uid (a replacement of the same name has another).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// Server pods: the main container's restart count, when above 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarts: Option<i32>,
    /// Server pods: the main container's last termination, e.g. `OOMKilled (exit 137)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_termination: Option<String>,
}

/// An earlier generation's outcome.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEntry {
    /// Spec generation.
    pub generation: i64,
    /// When it finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// How it ended: Succeeded (passed) or Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// Its verdict's reason and detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// Its headline figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headline: Option<Headline>,
    /// Its mean and confidence intervals, when it ran 2 or more trials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statistics: Option<TrialStatistics>,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}
