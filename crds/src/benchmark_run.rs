//! BenchmarkRun: runner pods drive a workload against a target and the merged result, verdict
//! and comparison land in status (see `benchmark_run_status`).
use kube::core::{Message, Rule};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::benchmark_run_status::*;
use crate::common::{Placement, Resources};
pub use crate::endpoint::{
    CaSource, Endpoint, EndpointAuth, EndpointAuthMode, EndpointMonitoring, EndpointTls,
};
pub use crate::fault::*;
pub use crate::run_failure_reason::{RunFailureReason, UnknownFailureReason};
pub use crate::stop_when::*;
pub use crate::variant::*;
use crate::workload::Workload;

/// A benchmark: `runners.count` bench-runner pods start together behind a barrier, run the
/// workload `trials` times against the target, and the operator merges their histograms into
/// `status.result`, evaluates `thresholds` and compares with `baselineRef`. A changed spec starts
/// a fresh run; the previous result moves to `status.history`.
#[derive(CustomResource, KubeSchema, Clone, Debug, Deserialize, Serialize, PartialEq)]
#[kube(
    group = "msgbench.dev",
    version = "v1alpha1",
    kind = "BenchmarkRun",
    namespaced,
    shortname = "br",
    category = "msgbench",
    status = "BenchmarkRunStatus",
    derive = "PartialEq",
    doc = "A messaging benchmark run by msgbench bench-runner pods, with results and a verdict in status.",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Target", type_ = "string", json_path = ".status.targetName"),
    printcolumn(name = "Msgs/s", type_ = "number", json_path = ".status.headline.deliveryRate"),
    printcolumn(name = "P99", type_ = "string", json_path = ".status.headline.p99"),
    printcolumn(name = "Reason", type_ = "string", json_path = ".status.verdict.reason", priority = "1"),
    printcolumn(name = "Compare", type_ = "string", json_path = ".status.headline.comparison"),
    printcolumn(name = "Rounds", type_ = "integer", json_path = ".status.stop.rounds", priority = "1"),
    printcolumn(name = "Stop", type_ = "string", json_path = ".status.stop.reason", priority = "1"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    validation = Rule::new("!has(self.spec.baselineRef) || self.spec.baselineRef.name != self.metadata.name").message("spec.baselineRef.name: a run cannot be its own baseline").field_path(".spec.baselineRef.name"),
    validation = crate::names::name_rule(MAX_RUN_NAME)
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = result_size_rule())]
#[x_kube(validation = Rule::new("has(self.target.serverRef) != has(self.target.endpoint)").message("target: set exactly one of target.serverRef and target.endpoint").field_path(".target"))]
#[x_kube(validation = Rule::new(
    "!has(self.target.serverRef) || \
     (self.target.serverRef.kind == 'JetStreamCluster' && self.workload.protocol in ['nats', 'jetstream']) || \
     (self.target.serverRef.kind == 'MqttBroker' && self.workload.protocol == 'mqtt') || \
     (self.target.serverRef.kind == 'PubSubServer' && self.workload.protocol in ['socketio', 'websocket', 'pusher'])"
).message("workload.protocol: must match target.serverRef.kind (JetStreamCluster: nats|jetstream, MqttBroker: mqtt, PubSubServer: socketio|websocket|pusher)").field_path(".workload.protocol"))]
#[x_kube(validation = Rule::new("!has(self.target.endpoint) || self.target.endpoint.protocol == self.workload.protocol").message("target.endpoint.protocol: must equal workload.protocol").field_path(".target.endpoint.protocol"))]
#[x_kube(validation = Rule::new(
    "[has(self.workload.durationSeconds), has(self.workload.messagesPerPublisher), has(self.workload.sessions), has(self.workload.stages), has(self.workload.connections)].filter(x, x).size() == 1"
).message("workload: set exactly one of durationSeconds, messagesPerPublisher, sessions, stages, connections").field_path(".workload"))]
#[x_kube(validation = Rule::new("!has(self.workload.connections) || !has(self.workload.connections.steps) || self.workload.connections.steps <= self.workload.connections.count").message("workload.connections.steps: must be at most workload.connections.count (each step opens at least one)").field_path(".workload.connections.steps"))]
#[x_kube(validation = Rule::new("!has(self.variants) || size(self.variants) >= 2").message("variants: list at least 2 variants to compare (or none)").field_path(".variants"))]
#[x_kube(validation = Rule::new("!has(self.variants) || self.variants.all(v, self.variants.filter(w, w.name == v.name).size() == 1)").message("variants: names must be unique").field_path(".variants"))]
#[x_kube(validation = Rule::new("!has(self.baselineVariant) || (has(self.variants) && self.variants.exists(v, v.name == self.baselineVariant))").message("baselineVariant: must name one of variants[].name").field_path(".baselineVariant"))]
#[x_kube(validation = Rule::new("!has(self.thresholds) || self.thresholds.all(t, !has(t.variants) || (has(self.variants) && t.variants.all(n, self.variants.exists(v, v.name == n))))").message("thresholds[].variants: each must name one of variants[].name").field_path(".thresholds"))]
#[x_kube(validation = Rule::new("!has(self.variants) || !has(self.baselineRef)").message("baselineRef: a run with variants compares within itself; use one of baselineRef and variants").field_path(".baselineRef"))]
#[x_kube(validation = variant_kind_rule())]
#[x_kube(validation = Rule::new("!has(self.variants) || self.variants.all(v, !has(v.workload) || !has(v.workload.protocol) || v.workload.protocol == self.workload.protocol || has(v.target))").message("variants[].workload.protocol: a variant that changes protocol needs its own target (variants[].target), resolved for that protocol").field_path(".variants"))]
#[x_kube(validation = variant_endpoint_rule())]
// Server usage is sampled from spec.target only: a variant's monitoring would be ignored.
#[x_kube(validation = Rule::new("!has(self.variants) || self.variants.all(v, !has(v.target) || !has(v.target.endpoint) || !has(v.target.endpoint.monitoring))").message("variants[].target.endpoint.monitoring: server usage is sampled from spec.target only; set monitoring on spec.target.endpoint").field_path(".variants"))]
#[x_kube(validation = variant_sections_rule())]
#[x_kube(validation = Rule::new(
    "!has(self.faults) || (has(self.target.serverRef) && self.target.serverRef.kind != 'PubSubServer' && \
     (!has(self.variants) || self.variants.all(v, !has(v.target) || \
       (has(v.target.serverRef) && v.target.serverRef.kind != 'PubSubServer'))))"
).message("faults: only with a serverRef target of kind JetStreamCluster or MqttBroker (variant targets too): faults act only on pods the target server owns, never on an endpoint").field_path(".faults"))]
#[x_kube(validation = Rule::new(
    "!has(self.faults) || (has(self.workload.durationSeconds) && \
     self.faults.all(f, f.afterSeconds < self.workload.durationSeconds))"
).message("faults[].afterSeconds: faults need workload.durationSeconds, and each afterSeconds must be below it (a fault falls inside the measured phase)").field_path(".faults"))]
#[x_kube(validation = Rule::new(
    "!has(self.faults) || self.workload.protocol == 'jetstream' || self.faults.all(f, f.pod != 'streamLeader')"
).message("faults[].pod: streamLeader needs workload.protocol jetstream").field_path(".faults"))]
#[x_kube(validation = fault_records_rule())]
#[x_kube(validation = Rule::new(
    "!has(self.stopWhen) || (has(self.stopWhen.minRounds) ? self.stopWhen.minRounds : 3) <= (has(self.trials) ? self.trials : 1)"
).message("stopWhen.minRounds: must be at most trials (trials is the most rounds a run with stopWhen takes; minRounds defaults to 3)").field_path(".stopWhen.minRounds"))]
pub struct BenchmarkRunSpec {
    /// What to benchmark: a msgbench server in this namespace or any endpoint.
    pub target: Target,
    /// What each runner does (shared with the bench-runner's standalone config).
    pub workload: Workload,
    /// The runner pods.
    #[serde(default)]
    pub runners: Runners,
    /// Repetitions of the workload; with 2 or more, status reports means and 95 % confidence
    /// intervals. With `variants`: rounds, each running every variant once. With `stopWhen`:
    /// the most rounds that run.
    #[serde(default = "default_trials")]
    #[schemars(range(min = 1, max = 20))]
    pub trials: i32,
    /// End the run before `trials` rounds once the answer is decisive: the 95 % interval of
    /// `figure` (with variants, every variant's paired ratio to the baseline variant) within
    /// ±`intervalWithinPercent` of its estimate, checked between rounds from `minRounds` on.
    /// `status.stop` records the rounds that ran and why it stopped (IntervalReached, or
    /// MaxRounds when the interval was not reached). Not `workload.stages.stopWhen`, which ends a
    /// step or ramp load at its breaking stage within each trial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_when: Option<RunStopWhen>,
    /// Seconds to pause between trials so queues and caches settle.
    #[serde(default = "default_settle")]
    #[schemars(range(min = 0, max = 600))]
    pub settle_seconds: i32,
    /// Pass/fail rules evaluated on the merged result; each is reported in status.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub thresholds: Vec<Threshold>,
    /// A finished BenchmarkRun in this namespace to compare with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_ref: Option<BaselineRef>,
    /// Let other runs load this run's targets at the same time (a scenario that wants
    /// contention). By default a run has its targets to itself: it waits (WaitingForTarget,
    /// reason TargetInUse, naming the run in the way) until every run applied before it that
    /// uses one of its targets is done. Two runs run together only when both set this; each
    /// then says so (condition TargetReady, reason TargetShared) and its figures include the
    /// other's load on the server.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub share_target: bool,
    /// Seconds the target may take to become Ready before the run fails with TargetNotReady.
    #[serde(default = "default_target_timeout")]
    #[schemars(range(min = 1, max = 3600))]
    pub target_ready_timeout_seconds: i32,
    /// Seconds all runners have to connect and report ready at the start barrier before the run
    /// fails with BarrierTimeout (RunnersUnschedulable, with the scheduler's reason, when a
    /// runner pod could not be placed).
    #[serde(default = "default_barrier_timeout")]
    #[schemars(range(min = 1, max = 1800))]
    pub barrier_timeout_seconds: i32,
    /// Seconds each runner keeps retrying a target that refuses connections or does not
    /// resolve yet (a Service whose endpoint is not programmed, a server restarting), with
    /// backoff, before the start barrier; then the run fails with TargetUnreachable. Never
    /// retried inside the measured window: disconnects there are counted in the result.
    #[serde(default = "default_connect_timeout")]
    #[schemars(range(min = 1, max = 600))]
    pub connect_timeout_seconds: i32,
    /// Upper bound on the whole run, from acceptance to verdict; exceeded → DeadlineExceeded.
    /// Unset: derived from the workload's length, trials and timeouts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 10, max = 172800))]
    pub active_deadline_seconds: Option<i64>,
    /// Seconds after the run finishes before its runner pods and Job are deleted (results stay).
    /// Unset: kept until the BenchmarkRun is deleted. Failed runs keep pods until then for
    /// debugging.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 2592000))]
    pub ttl_seconds_after_finished: Option<i32>,
    /// Seconds after the run finishes before the BenchmarkRun itself is deleted (its trend
    /// series on the operator's /metrics stay). Unset: the operator's default (the chart's
    /// `retention.deleteAfterSeconds`), and without one the run stays until the history limit
    /// of its benchmark removes it. The annotation `msgbench.dev/retain: "true"` keeps a run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 31536000))]
    pub delete_after_seconds: Option<i64>,
    /// Variants compared within this run (2 to 6), e.g. stream replicas 1 vs 2. Each of the
    /// `trials` rounds runs every variant once, in a randomised order, on the same runner pods;
    /// status compares each variant with `baselineVariant` from the paired rounds, so drift
    /// between rounds cancels out. Empty: a single-variant run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 6))]
    pub variants: Vec<Variant>,
    /// The variant the others are compared against. Unset: the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 32))]
    pub baseline_variant: Option<String>,
    /// Faults injected into the target's own server pods while the load runs (at most 4), the
    /// same in every trial, variant and round; each execution and what it did to delivery is
    /// recorded in `status.faults`. Needs a `serverRef` target and `workload.durationSeconds`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 4))]
    pub faults: Vec<Fault>,
}

/// Longest BenchmarkRun name: its Job is `<name>-g<generation>` and the Job's pods carry it in
/// a label and, with their index, as hostname (63 characters each), so it is never truncated
/// (two runs whose names share a long prefix would otherwise get the same Job).
pub const MAX_RUN_NAME: usize = 52;

/// Most result records x phases one run may produce (runners x trials x variants, each with
/// the measured part, the warm-up, and every session or stage). The operator holds every
/// record (about 4 KB of JSON per phase) until all runners are in, then merges them one by
/// one; this bound keeps that inside its memory limit (see operator/tests/results_memory.rs).
pub const MAX_RESULT_PHASE_RECORDS: i64 = 2560;

/// A variant's protocol in CEL: its own `workload.protocol`, else the run's.
const VARIANT_PROTOCOL: &str =
    "(has(v.workload) && has(v.workload.protocol) ? v.workload.protocol : self.workload.protocol)";

fn variant_kind_rule() -> Rule {
    let p = VARIANT_PROTOCOL;
    Rule::new(format!(
        "!has(self.variants) || self.variants.all(v, !has(v.target) || !has(v.target.serverRef) || \
         (v.target.serverRef.kind == 'JetStreamCluster' && {p} in ['nats', 'jetstream']) || \
         (v.target.serverRef.kind == 'MqttBroker' && {p} == 'mqtt') || \
         (v.target.serverRef.kind == 'PubSubServer' && {p} in ['socketio', 'websocket', 'pusher']))"
    ))
    .message(
        "variants[].target.serverRef.kind: must match the variant's protocol (its \
         workload.protocol, else spec.workload.protocol) like target.serverRef",
    )
    .field_path(".variants")
}

fn variant_endpoint_rule() -> Rule {
    Rule::new(format!(
        "!has(self.variants) || self.variants.all(v, !has(v.target) || !has(v.target.endpoint) || \
         v.target.endpoint.protocol == {VARIANT_PROTOCOL})"
    ))
    .message(
        "variants[].target.endpoint.protocol: must equal the variant's protocol (its \
         workload.protocol, else spec.workload.protocol)",
    )
    .field_path(".variants")
}

/// A protocol section belongs to the variant's protocol; a variant that changes protocol
/// starts from that protocol's defaults (`Workload::with_override`).
fn variant_sections_rule() -> Rule {
    let p = VARIANT_PROTOCOL;
    Rule::new(format!(
        "!has(self.variants) || self.variants.all(v, !has(v.workload) || \
         ((!has(v.workload.jetstream) || {p} == 'jetstream') && \
          (!has(v.workload.mqtt) || {p} == 'mqtt') && \
          (!has(v.workload.socketio) || {p} == 'socketio') && \
          (!has(v.workload.websocket) || {p} == 'websocket')))"
    ))
    .message(
        "variants[].workload: a protocol section (jetstream, mqtt, socketio, websocket) must \
         match the variant's protocol (its workload.protocol, else spec.workload.protocol)",
    )
    .field_path(".variants")
}

fn result_size_rule() -> Rule {
    Rule::new(format!(
        "(has(self.runners) && has(self.runners.count) ? self.runners.count : 1) * \
         (has(self.trials) ? self.trials : 1) * \
         (has(self.variants) ? size(self.variants) : 1) * \
         (1 + (has(self.workload.warmupSeconds) && self.workload.warmupSeconds > 0 ? 1 : 0) + \
          (has(self.workload.sessions) ? size(self.workload.sessions) : 0) + \
          (has(self.workload.stages) ? self.workload.stages.count : 0)) <= {MAX_RESULT_PHASE_RECORDS}"
    ))
    .message(Message::Message(format!(
        "runners.count: runners.count x trials x variants x phases (1 + warm-up + sessions + \
         stages.count) must be at most {MAX_RESULT_PHASE_RECORDS}, the results one run may hold"
    )))
    .field_path(".runners.count")
}

fn fault_records_rule() -> Rule {
    Rule::new(format!(
        "!has(self.faults) || size(self.faults) * (has(self.trials) ? self.trials : 1) * \
         (has(self.variants) ? size(self.variants) : 1) <= {MAX_FAULT_RECORDS}"
    ))
    .message(Message::Message(format!(
        "faults: faults x trials x variants must be at most {MAX_FAULT_RECORDS}, the fault \
         executions one run records"
    )))
    .field_path(".faults")
}

impl BenchmarkRunSpec {
    /// Phases each result record reports: the measured part, the warm-up, each session or stage.
    pub fn result_phases(&self) -> i64 {
        let w = &self.workload;
        1 + i64::from(w.warmup_seconds > 0)
            + w.sessions.as_ref().map_or(0, |s| s.len() as i64)
            + w.stages.as_ref().map_or(0, |s| i64::from(s.count))
    }

    /// Result records the run produces: one per runner, trial and variant.
    pub fn result_records(&self) -> i64 {
        i64::from(self.runners.count.max(1))
            * i64::from(self.trials.max(1))
            * self.variants.len().max(1) as i64
    }

    /// The admission rule on the size of the results, for runs stored before it existed.
    pub fn result_size_violation(&self) -> Option<String> {
        let (records, phases) = (self.result_records(), self.result_phases());
        (records * phases > MAX_RESULT_PHASE_RECORDS).then(|| {
            format!(
                "runners.count: runners.count x trials x variants x phases = {records} x {phases} \
                 = {} is over {MAX_RESULT_PHASE_RECORDS}, the results one run may hold",
                records * phases
            )
        })
    }
}

fn default_trials() -> i32 {
    1
}
fn default_settle() -> i32 {
    5
}
fn default_target_timeout() -> i32 {
    300
}
fn default_barrier_timeout() -> i32 {
    120
}
fn default_connect_timeout() -> i32 {
    30
}

/// The system under test: exactly one of `serverRef` and `endpoint`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    /// A msgbench server in the run's namespace; the run waits for it to be Ready and records
    /// its observed tuning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_ref: Option<ServerRef>,
    /// Any reachable server, e.g. one not managed by msgbench.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<Endpoint>,
}

/// Reference to a msgbench server CR in the same namespace.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ServerRef {
    /// Kind of the server.
    pub kind: ServerKind,
    /// Name of the server.
    #[schemars(
        length(min = 1, max = 63),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub name: String,
}

/// msgbench server kinds a run can target.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub enum ServerKind {
    /// A JetStreamCluster (protocols nats, jetstream).
    JetStreamCluster,
    /// An MqttBroker (protocol mqtt).
    MqttBroker,
    /// A PubSubServer (protocols socketio, websocket, pusher).
    PubSubServer,
}

/// The bench-runner pods.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Runners {
    /// Runner pods; each runs the whole workload (publishers, subscribers, rates are per runner).
    #[serde(default = "default_runner_count")]
    #[schemars(range(min = 1, max = 64))]
    pub count: i32,
    /// bench-runner image. Unset: the operator's default (the chart's `images.benchRunner`,
    /// under `images.registry`); `status.environment.runnerPods` shows what each pod ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub image: Option<String>,
    /// Pull secrets, service account, priority class, labels and annotations of the runner
    /// pods, added to the operator's defaults (the chart's `runnerPods`). Runner pods opt out
    /// of sidecar injection by the common service meshes (Istio, Linkerd, Kuma, Consul, OSM)
    /// unless a label or annotation here says otherwise: a proxy in the path changes the
    /// latency being measured and sits in front of the runner's control port.
    #[serde(default, skip_serializing_if = "crate::pod_customization::is_empty")]
    pub pod: crate::pod_customization::PodCustomization,
    /// CPU and memory per runner pod. A CPU limit below the load the workload needs shows up as
    /// `generatorSaturated` in the result.
    #[serde(default)]
    pub resources: Resources,
    /// Node selection of runner pods. Anti-affinity here spreads runners over nodes.
    #[serde(default)]
    pub placement: Placement,
    /// Keep runners off the target's server nodes (preferred, so single-node clusters still
    /// run; `status.environment.sharedNodes` says when they could not be kept apart).
    #[serde(default = "default_true")]
    pub avoid_server_nodes: bool,
    /// After its last trial, how long a runner keeps its results for the operator to collect
    /// over the runner's authenticated control endpoint. It exits as soon as the operator
    /// confirms; after this bound it exits anyway and the operator reads the checksummed copy
    /// in its log. 0 = log only.
    #[serde(default = "default_results_hold_seconds")]
    #[schemars(range(min = 0, max = 3600))]
    pub results_hold_seconds: i32,
    /// How much the runners log (to stderr; results never depend on it). `trace` logs every
    /// batch sent: for debugging a generator, not for measuring.
    #[serde(default)]
    pub log_level: RunnerLogLevel,
}

/// Runner diagnostics level.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum RunnerLogLevel {
    Error,
    Warn,
    #[default]
    Info,
    Debug,
    Trace,
}

impl RunnerLogLevel {
    /// The `RUST_LOG` value.
    pub fn as_filter(self) -> &'static str {
        match self {
            Self::Error => "error",
            Self::Warn => "warn",
            Self::Info => "info",
            Self::Debug => "debug",
            Self::Trace => "trace",
        }
    }
}

impl Default for Runners {
    fn default() -> Self {
        Self {
            count: default_runner_count(),
            image: None,
            pod: Default::default(),
            resources: Resources::default(),
            placement: Placement::default(),
            avoid_server_nodes: true,
            results_hold_seconds: default_results_hold_seconds(),
            log_level: RunnerLogLevel::default(),
        }
    }
}

fn default_results_hold_seconds() -> i32 {
    120
}

fn default_runner_count() -> i32 {
    1
}
fn default_true() -> bool {
    true
}

/// A pass/fail rule on one merged metric: the run fails (severity fail) or warns when
/// `observed <op> value` does not hold.
#[derive(Clone, Debug, KubeSchema, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self.metric != 'deliveredRatio' || self.value <= 1.0").message("thresholds[].value: deliveredRatio is a fraction between 0 and 1").field_path(".value"))]
pub struct Threshold {
    /// Metric of the merged result.
    pub metric: Metric,
    /// Comparison that must hold: observed `op` value.
    pub op: ThresholdOp,
    /// Bound, in the metric's unit (messages/s, milliseconds, fraction or count).
    #[schemars(range(min = 0.0, max = 1.0e12))]
    pub value: f64,
    /// `fail` (default) fails the run with ThresholdsNotMet; `warn` only reports.
    #[serde(default)]
    pub severity: Severity,
    /// With variants: test only these variants' results (e.g. `lostAcked le 0` for the variant
    /// that syncs every write, not for the one whose loss the run measures). Empty: every
    /// variant.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 6), inner(length(min = 1, max = 32)))]
    pub variants: Vec<String>,
}

/// Metrics thresholds can test. Rates in messages/s, latencies in milliseconds.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum Metric {
    /// Messages/s published (sum over runners).
    PublishRate,
    /// Messages/s received (sum over subscribers) over the receive window, a subscriber's
    /// first → last delivery (`result.receiveRate`).
    ReceiveRate,
    /// Unique deliveries/s over the end-to-end window, first send → last delivery
    /// (`result.deliveryRate`); unavailable, so failing, where the result has no such window.
    DeliveryRate,
    /// Received / expected deliveries (0–1).
    DeliveredRatio,
    /// End-to-end latency percentiles and maximum (ms).
    LatencyP50Ms,
    /// 90th percentile end-to-end latency (ms).
    LatencyP90Ms,
    /// 95th percentile end-to-end latency (ms).
    LatencyP95Ms,
    /// 99th percentile end-to-end latency (ms).
    LatencyP99Ms,
    /// 99.9th percentile end-to-end latency (ms).
    LatencyP999Ms,
    /// Maximum end-to-end latency (ms).
    LatencyMaxMs,
    /// 99th percentile publish-acknowledgement latency (ms; JetStream, MQTT QoS ≥ 1, HTTP publish).
    PublishAckP99Ms,
    /// Errors counted by the runners.
    Errors,
    /// Duplicate deliveries.
    Duplicates,
    /// Deliveries out of publish order per publisher.
    OutOfOrder,
    /// Acknowledged publishes an own-runner subscriber never received (`lostAcked`; only where
    /// publishes are acknowledged, otherwise unavailable and the threshold fails).
    LostAcked,
    /// Acknowledged publishes the stream no longer held when read back after the drain
    /// (`ackedNotKept`; JetStream only, otherwise unavailable and the threshold fails, as it
    /// does when the read-back could not complete).
    AckedNotKept,
    /// Longest publish stall (ms; only where publishes are acknowledged).
    PublishStallMs,
    /// Connections opened per second (connection workloads).
    ConnectRate,
    /// 99th percentile time to open a connection (ms; connection workloads).
    ConnectP99Ms,
    /// Longest time from a fault (`spec.faults`) until delivery was back to 95 % of its level
    /// before (s, 1 s resolution); unavailable, so failing, when a fault never recovered.
    RecoverySeconds,
}

/// Threshold comparison.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum ThresholdOp {
    /// observed < value
    Lt,
    /// observed <= value
    Le,
    /// observed > value
    Gt,
    /// observed >= value
    Ge,
}

/// Threshold severity.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum Severity {
    /// Reported only.
    Warn,
    /// Fails the run (ThresholdsNotMet).
    #[default]
    Fail,
}

/// Another BenchmarkRun in the same namespace to compare with.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BaselineRef {
    /// Name of the baseline BenchmarkRun; its latest successful result is used.
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = crate::names::DNS_SUBDOMAIN_PATTERN)
    )]
    pub name: String,
}
