//! The workload: what a bench-runner does. Shared by `BenchmarkRun.spec.workload` and the
//! runner's standalone config file, so one type means one set of rules.
//!
//! Durations are whole seconds in fields whose names end in `Seconds`: integers keep every
//! bound expressible in the CRD schema (no string parsing at admission).
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Smallest payload: the 16-byte header (runner, publisher, sequence, intended send time).
pub const MIN_PAYLOAD_BYTES: u32 = 16;
/// Largest payload: NATS' default `max_payload` (1 MiB).
pub const MAX_PAYLOAD_BYTES: u32 = 1_048_576;
/// Most stages a stepped workload may have (the schema says the same).
pub const MAX_STAGES: u32 = 32;

/// One benchmark workload. Exactly one of `durationSeconds`, `messagesPerPublisher`,
/// `sessions`, `stages` or `connections` says how long it runs.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Workload {
    /// Protocol spoken to the target.
    pub protocol: Protocol,
    /// Publishing clients (one connection each) in this runner.
    #[serde(default = "one")]
    #[schemars(range(min = 0, max = 10000))]
    pub publishers: u32,
    /// Subscribing clients (one connection each) in this runner.
    #[serde(default = "one")]
    #[schemars(range(min = 0, max = 10000))]
    pub subscribers: u32,
    /// Distinct topics (subjects, MQTT topics, Socket.IO rooms). Publisher i publishes to topic
    /// i mod topics; subscriber j subscribes to topic j mod topics (or to all, see the protocol
    /// sections).
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 10000))]
    pub topics: u32,
    /// Prefix of topic names: `<prefix>.<n>` for NATS, `<prefix>/<n>` for MQTT, `<prefix>-<n>`
    /// for Socket.IO rooms and Pusher channels.
    #[serde(default = "default_topic_prefix")]
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[A-Za-z0-9_-]+$"))]
    pub topic_prefix: String,
    /// Payload size in bytes, including the 16-byte measurement header.
    #[serde(default = "default_payload")]
    #[schemars(range(min = 16, max = 1048576))]
    pub payload_bytes: u32,
    /// Messages per second each publisher sends on a fixed schedule (open loop; latency is
    /// measured from the intended send time). Absent = unlimited: closed loop, each publisher
    /// sends as fast as it can, and the result is flagged `closedLoop`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10000000))]
    pub rate_per_publisher: Option<u32>,
    /// Messages a publisher sends together: WebSocket frames share one flush, MQTT/NATS
    /// messages one write, HTTP publishes go out at once. Open loop: the schedule releases
    /// them in bursts of this many, every message of a burst with the burst's intended send
    /// time, so the rate is unchanged and a burst's wait counts in its latency. Closed loop:
    /// messages per send instead of the protocol's default. Absent: 1 in open loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub publish_batch: Option<u32>,
    /// Measured phase length in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 86400))]
    pub duration_seconds: Option<u32>,
    /// Messages each publisher sends in the measured phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000000000))]
    pub messages_per_publisher: Option<u64>,
    /// Load at the same rate before measuring, excluded from the results and reported apart.
    #[serde(default)]
    #[schemars(range(min = 0, max = 3600))]
    pub warmup_seconds: u32,
    /// Consecutive bursts, each reported on its own (steady-state method: e.g. 10k, 10k, 100k,
    /// 1M messages with pauses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 32))]
    pub sessions: Option<Vec<Session>>,
    /// Step load: each stage reported on its own, stopping at the first stage that breaks the
    /// `stopWhen` thresholds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stages: Option<Stages>,
    /// Connection workload instead of messaging: open `count` connections as fast as allowed
    /// (connections/s, connect-time percentiles), then hold them idle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections: Option<ConnectionWorkload>,
    /// Seconds subscribers keep receiving after the last publish before the run ends.
    #[serde(default = "default_drain")]
    #[schemars(range(min = 0, max = 300))]
    pub drain_seconds: u32,
    /// NATS core options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nats: Option<NatsOptions>,
    /// JetStream options (stream, publish mode, consumer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jetstream: Option<JetStreamOptions>,
    /// MQTT options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mqtt: Option<MqttOptions>,
    /// Socket.IO options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socketio: Option<SocketIoOptions>,
    /// Plain WebSocket options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub websocket: Option<WebSocketOptions>,
}

/// Protocol spoken to the target.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// NATS core publish/subscribe or request/reply (`nats://`).
    Nats,
    /// NATS JetStream (`nats://`).
    Jetstream,
    /// MQTT 3.1.1 or 5 (`mqtt://`).
    Mqtt,
    /// Publish by HTTP POST, receive over Socket.IO (`http://`).
    Socketio,
    /// Plain WebSocket echo or broadcast (`ws://`).
    Websocket,
    /// Pusher Channels (e.g. sockudo): publish by the app's signed HTTP events API, receive
    /// over WebSocket (`ws://`). Needs the app's credentials (id, key, secret).
    Pusher,
}

/// One burst of a sessions workload.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Session {
    /// Messages each publisher sends in this session.
    #[schemars(range(min = 1, max = 1000000000))]
    pub messages: u64,
    /// Idle seconds after this session (subscribers keep receiving).
    #[serde(default)]
    #[schemars(range(min = 0, max = 3600))]
    pub pause_after_seconds: u32,
}

/// Stepped or ramped load: stage k starts at `start + k * step` of `dimension` and lasts
/// `stageSeconds`; with `shape: ramp` it rises linearly to `start + (k + 1) * step` within the
/// stage.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Stages {
    /// What grows from stage to stage.
    pub dimension: StageDimension,
    /// `step` holds each stage's value for the whole stage; `ramp` rises linearly within it.
    #[serde(default)]
    pub shape: StageShape,
    /// Value in the first stage (messages/s per publisher, or publishers).
    #[schemars(range(min = 1, max = 10000000))]
    pub start: u32,
    /// Added at each following stage.
    #[serde(default)]
    #[schemars(range(min = 0, max = 10000000))]
    pub step: u32,
    /// Number of stages (at most 32: each stage keeps its own latency histograms in the
    /// results the operator merges).
    #[schemars(range(min = 1, max = 32))]
    pub count: u32,
    /// Length of each stage.
    #[schemars(range(min = 1, max = 3600))]
    pub stage_seconds: u32,
    /// Stop after the first stage that breaks any of these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_when: Option<StopWhen>,
}

/// What a stage changes.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum StageDimension {
    /// `ratePerPublisher` (open loop at each stage's rate).
    Rate,
    /// Number of publishers (connections), each at `ratePerPublisher`.
    Connections,
}

/// How the value moves within a stage.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum StageShape {
    /// Constant within each stage, a jump between stages.
    #[default]
    Step,
    /// Linear rise from the stage's value to the next stage's (no jumps).
    Ramp,
}

/// Breaking-point thresholds for stages.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StopWhen {
    /// Stop when delivered/expected falls below this (0..1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub delivered_ratio_below: Option<f64>,
    /// Stop when the stage's p99 end-to-end latency exceeds this many microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 60000000))]
    pub p99_micros_above: Option<u64>,
}

/// Open `count` connections, then hold them idle; in `steps` levels when memory per connection
/// is wanted (the operator fits the server's memory against its connection count).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConnectionWorkload {
    /// Connections to open.
    #[schemars(range(min = 1, max = 100000))]
    pub count: u32,
    /// Open the connections in this many equal steps (count/steps more each), holding every
    /// level but the last for `stepHoldSeconds`, so the server's memory can be sampled at
    /// each level. 1 = all at once.
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 20))]
    pub steps: u32,
    /// Seconds each level but the last is held (the last holds `holdSeconds`). The operator
    /// samples the server about every 3 s, so 6 or more gives at least 2 samples per level.
    #[serde(default = "default_step_hold")]
    #[schemars(range(min = 1, max = 3600))]
    pub step_hold_seconds: u32,
    /// Upper bound on new connections per second; absent = as fast as the target accepts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000000))]
    pub max_per_second: Option<u32>,
    /// Connection attempts in flight at once.
    #[serde(default = "default_connect_concurrency")]
    #[schemars(range(min = 1, max = 10000))]
    pub concurrency: u32,
    /// Seconds to hold all connections idle after opening them (0 = close at once).
    #[serde(default)]
    #[schemars(range(min = 0, max = 86400))]
    pub hold_seconds: u32,
}

/// NATS core options.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NatsOptions {
    /// Publishers send requests and subscribers reply (queue group); latency is the round trip.
    #[serde(default)]
    pub request_reply: bool,
}

/// JetStream options.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JetStreamOptions {
    /// Stream name (subjects: `<topicPrefix>.>`).
    #[serde(default = "default_stream")]
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[A-Za-z0-9_-]+$"))]
    pub stream: String,
    /// Create the stream (deleting a stale one of the same name) or use an existing one.
    #[serde(default = "default_true")]
    pub create_stream: bool,
    /// Stream replicas when created.
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 5))]
    pub replicas: u32,
    /// Stream storage when created.
    #[serde(default)]
    pub storage: StreamStorage,
    /// Publish mode.
    #[serde(default)]
    pub publish: JetStreamPublish,
    /// Async publish: acks outstanding per publisher before it waits (sliding ack window).
    #[serde(default = "default_in_flight")]
    #[schemars(range(min = 1, max = 100000))]
    pub max_in_flight: u32,
    /// Async publish in batches instead of a sliding window: publish this many, then wait for
    /// all their acks before the next batch (e.g. 200 or 5000). Replaces `maxInFlight`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100000))]
    pub ack_batch: Option<u32>,
    /// Consumer kind used by subscribers.
    #[serde(default)]
    pub consumer: JetStreamConsumer,
    /// Pull consumer: messages per fetch.
    #[serde(default = "default_pull_batch")]
    #[schemars(range(min = 1, max = 100000))]
    pub pull_batch: u32,
}

// Not the JetStreamCluster's store volume (`jetstream_cluster::JetStreamStorage`).
/// Stream storage.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum StreamStorage {
    /// Memory storage.
    Memory,
    /// File storage.
    #[default]
    File,
}

/// JetStream publish mode.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum JetStreamPublish {
    /// Wait for each ack before the next publish.
    Sync,
    /// Keep up to `maxInFlight` acks outstanding.
    #[default]
    Async,
}

/// JetStream consumer kind.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum JetStreamConsumer {
    /// Push consumer delivering to an inbox.
    #[default]
    Push,
    /// Pull consumer fetching `pullBatch` at a time.
    Pull,
    /// Ordered push consumer (no acks, flow control).
    Ordered,
}

/// MQTT options.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MqttOptions {
    /// Protocol version.
    #[serde(default)]
    pub version: MqttVersion,
    /// Quality of service for publishes and subscriptions (0, 1 or 2).
    #[serde(default)]
    #[schemars(range(min = 0, max = 2))]
    pub qos: u8,
    /// Subscribers subscribe to `<topicPrefix>/#` instead of their own topic.
    #[serde(default)]
    pub wildcard: bool,
    /// Keep-alive seconds.
    #[serde(default = "default_keepalive")]
    #[schemars(range(min = 5, max = 3600))]
    pub keep_alive_seconds: u16,
    /// Client-side in-flight window for QoS 1/2.
    #[serde(default = "default_mqtt_inflight")]
    #[schemars(range(min = 1, max = 65535))]
    pub max_in_flight: u16,
}

/// MQTT protocol version.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub enum MqttVersion {
    /// MQTT 3.1.1.
    #[default]
    #[serde(rename = "3.1.1")]
    V311,
    /// MQTT 5.
    #[serde(rename = "5")]
    V5,
}

/// Socket.IO options.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SocketIoOptions {
    /// Subscribers join the `__all__` wildcard room instead of their topic room.
    #[serde(default)]
    pub all_room: bool,
    /// Also sample the latency of REST endpoints during the measured run (reported apart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rest: Option<RestSampling>,
}

/// REST endpoints sampled at a low rate while the load runs, each into its own histogram.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RestSampling {
    /// Paths to GET, e.g. `/health`, `/messages?limit=50`.
    #[schemars(
        length(min = 1, max = 8),
        inner(
            length(min = 1, max = 256),
            regex(pattern = r"^/[A-Za-z0-9/._~%?&=+-]*$")
        )
    )]
    pub paths: Vec<String>,
    /// Requests per second per path (open loop; latency from the intended time).
    #[serde(default = "default_rest_rate")]
    #[schemars(range(min = 1, max = 50))]
    pub rate_per_second: u32,
}

fn default_rest_rate() -> u32 {
    2
}

/// Plain WebSocket options.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WebSocketOptions {
    /// Echo round trips on each publisher connection, or broadcast fan-out to subscribers.
    #[serde(default)]
    pub mode: WebSocketMode,
    /// Request path.
    #[serde(default = "default_ws_path")]
    #[schemars(length(min = 1, max = 256), regex(pattern = r"^/[A-Za-z0-9/._-]*$"))]
    pub path: String,
}

/// WebSocket benchmark mode.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum WebSocketMode {
    /// Each publisher measures the round trip of its own messages.
    #[default]
    Echo,
    /// Publishers' messages are fanned out by the server to every subscriber.
    Broadcast,
}

fn one() -> u32 {
    1
}
fn default_true() -> bool {
    true
}
fn default_topic_prefix() -> String {
    "msgbench".into()
}
fn default_payload() -> u32 {
    128
}
fn default_drain() -> u32 {
    2
}
fn default_connect_concurrency() -> u32 {
    64
}
fn default_step_hold() -> u32 {
    10
}
fn default_stream() -> String {
    "MSGBENCH".into()
}
fn default_in_flight() -> u32 {
    200
}
fn default_pull_batch() -> u32 {
    500
}
fn default_keepalive() -> u16 {
    30
}
fn default_mqtt_inflight() -> u16 {
    100
}
fn default_ws_path() -> String {
    "/ws".into()
}

impl Default for JetStreamOptions {
    fn default() -> Self {
        serde_json::from_str("{}").expect("all fields have defaults")
    }
}
impl Default for MqttOptions {
    fn default() -> Self {
        serde_json::from_str("{}").expect("all fields have defaults")
    }
}
impl Default for WebSocketOptions {
    fn default() -> Self {
        serde_json::from_str("{}").expect("all fields have defaults")
    }
}

/// A rule a workload breaks: the field (JSON path) and the rule, for error messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Field path, e.g. `workload.payloadBytes`.
    pub field: String,
    /// What is required.
    pub rule: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.rule)
    }
}

impl ConnectionWorkload {
    /// Connections open at the end of each step: `count` split as evenly as whole numbers
    /// allow, the last level always `count`.
    pub fn levels(&self) -> Vec<u32> {
        let steps = u64::from(self.steps.clamp(1, self.count.max(1)));
        let count = u64::from(self.count);
        (1..=steps)
            .map(|k| (count * k).div_ceil(steps) as u32)
            .collect()
    }
}

impl Workload {
    /// Every rule the schema cannot express on its own (cross-field rules), plus the bounds, so
    /// a standalone runner rejects what admission would. Empty = valid.
    pub fn violations(&self) -> Vec<Violation> {
        let mut v = Vec::new();
        let mut bad = |field: &str, rule: &str| {
            v.push(Violation {
                field: format!("workload.{field}"),
                rule: rule.into(),
            })
        };
        self.payload_violations(&mut bad);
        self.count_violations(&mut bad);
        self.length_violations(&mut bad);
        self.stage_violations(&mut bad);
        self.connection_violations(&mut bad);
        self.protocol_violations(&mut bad);
        v
    }

    /// The payload's size, and the Socket.IO REST side traffic.
    fn payload_violations(&self, bad: &mut impl FnMut(&str, &str)) {
        if !(MIN_PAYLOAD_BYTES..=MAX_PAYLOAD_BYTES).contains(&self.payload_bytes) {
            bad("payloadBytes", "must be between 16 and 1048576");
        }
        if matches!(self.protocol, Protocol::Socketio | Protocol::Pusher) && self.payload_bytes < 24
        {
            bad(
                "payloadBytes",
                "must be at least 24 for socketio and pusher (text-encoded header)",
            );
        }
        if let Some(r) = self.socketio.as_ref().and_then(|o| o.rest.as_ref()) {
            if r.paths.is_empty() || r.paths.len() > 8 {
                bad("socketio.rest.paths", "must list 1 to 8 paths");
            }
            if r.paths.iter().any(|p| !p.starts_with('/') || p.len() > 256) {
                bad(
                    "socketio.rest.paths",
                    "each path must start with / and be at most 256 bytes",
                );
            }
            if !(1..=50).contains(&r.rate_per_second) {
                bad("socketio.rest.ratePerSecond", "must be between 1 and 50");
            }
        }
    }

    /// Rates and counts of publishers, subscribers and topics.
    fn count_violations(&self, bad: &mut impl FnMut(&str, &str)) {
        if self.rate_per_publisher == Some(0) {
            bad(
                "ratePerPublisher",
                "must be at least 1 (omit it for unlimited)",
            );
        }
        if !(1..=10_000).contains(&self.topics) {
            bad("topics", "must be between 1 and 10000");
        }
        if self.publishers > 10_000 || self.subscribers > 10_000 {
            bad(
                "publishers",
                "publishers and subscribers must be at most 10000",
            );
        }
    }

    /// How long the workload runs: exactly one of the five lengths, each in bounds.
    fn length_violations(&self, bad: &mut impl FnMut(&str, &str)) {
        let lengths = [
            self.duration_seconds.is_some(),
            self.messages_per_publisher.is_some(),
            self.sessions.is_some(),
            self.stages.is_some(),
            self.connections.is_some(),
        ];
        match lengths.iter().filter(|x| **x).count() {
        1 => {}
        0 => bad(
            "durationSeconds",
            "one of durationSeconds, messagesPerPublisher, sessions, stages, connections is required",
        ),
        _ => bad(
            "durationSeconds",
            "only one of durationSeconds, messagesPerPublisher, sessions, stages, connections may be set",
        ),
    }
        if matches!(self.duration_seconds, Some(d) if !(1..=86_400).contains(&d)) {
            bad("durationSeconds", "must be between 1 and 86400");
        }
        if self.messages_per_publisher == Some(0) {
            bad("messagesPerPublisher", "must be at least 1");
        }
        if self.warmup_seconds > 3600 {
            bad("warmupSeconds", "must be at most 3600");
        }
        if let Some(s) = &self.sessions {
            if s.is_empty() || s.len() > 32 {
                bad("sessions", "must have 1 to 32 entries");
            }
            if s.iter().any(|s| s.messages == 0) {
                bad("sessions[].messages", "must be at least 1");
            }
        }
    }

    /// Stages: in bounds, and a last stage within the publisher and rate limits.
    fn stage_violations(&self, bad: &mut impl FnMut(&str, &str)) {
        if let Some(st) = &self.stages {
            if st.count == 0 || st.count > MAX_STAGES {
                bad("stages.count", "must be between 1 and 32");
            }
            if st.start == 0 {
                bad("stages.start", "must be at least 1");
            }
            if st.stage_seconds == 0 {
                bad("stages.stageSeconds", "must be at least 1");
            }
            // A ramp ends its last stage one step above that stage's start.
            let steps = match st.shape {
                StageShape::Step => st.count.saturating_sub(1),
                StageShape::Ramp => st.count,
            };
            if st.dimension == StageDimension::Connections
                && u64::from(st.start) + u64::from(st.step) * u64::from(steps) > 10_000
            {
                bad("stages", "the last stage would exceed 10000 publishers");
            }
            if st.dimension == StageDimension::Rate
                && u64::from(st.start) + u64::from(st.step) * u64::from(steps) > 10_000_000
            {
                bad(
                    "stages",
                    "the last stage would exceed 10000000 messages/s per publisher",
                );
            }
        }
    }

    /// A connection workload's bounds; a messaging workload needs a publisher.
    fn connection_violations(&self, bad: &mut impl FnMut(&str, &str)) {
        if let Some(c) = &self.connections {
            if c.count == 0 || c.count > 100_000 {
                bad("connections.count", "must be between 1 and 100000");
            }
            if c.concurrency == 0 {
                bad("connections.concurrency", "must be at least 1");
            }
            if c.max_per_second == Some(0) {
                bad(
                    "connections.maxPerSecond",
                    "must be at least 1 (omit it for no limit)",
                );
            }
            if !(1..=20).contains(&c.steps) {
                bad("connections.steps", "must be between 1 and 20");
            } else if c.steps > c.count {
                bad(
                    "connections.steps",
                    "must be at most connections.count (each step opens at least one)",
                );
            }
            if !(1..=3600).contains(&c.step_hold_seconds) {
                bad("connections.stepHoldSeconds", "must be between 1 and 3600");
            }
        }
        let messaging = self.connections.is_none();
        if messaging && self.publishers == 0 {
            bad("publishers", "must be at least 1 for a messaging workload");
        }
    }

    /// The protocol sections: in bounds, and only the one `protocol` names.
    fn protocol_violations(&self, bad: &mut impl FnMut(&str, &str)) {
        if let Some(m) = &self.mqtt {
            if m.qos > 2 {
                bad("mqtt.qos", "must be 0, 1 or 2");
            }
        }
        if let Some(j) = &self.jetstream {
            if !(1..=5).contains(&j.replicas) {
                bad("jetstream.replicas", "must be between 1 and 5");
            }
            if !(1..=100_000).contains(&j.max_in_flight) {
                bad("jetstream.maxInFlight", "must be between 1 and 100000");
            }
            if let Some(b) = j.ack_batch {
                if !(1..=100_000).contains(&b) {
                    bad("jetstream.ackBatch", "must be between 1 and 100000");
                }
                if j.publish == JetStreamPublish::Sync {
                    bad(
                        "jetstream.ackBatch",
                        "only applies to publish: async (sync waits for every ack)",
                    );
                }
            }
        }
        let sections = [
            (self.nats.is_some(), Protocol::Nats, "nats"),
            (self.jetstream.is_some(), Protocol::Jetstream, "jetstream"),
            (self.mqtt.is_some(), Protocol::Mqtt, "mqtt"),
            (self.socketio.is_some(), Protocol::Socketio, "socketio"),
            (self.websocket.is_some(), Protocol::Websocket, "websocket"),
        ];
        for (set, proto, name) in sections {
            if set && proto != self.protocol {
                bad(name, "section does not match `protocol`");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Workload {
        serde_norway::from_str(yaml).unwrap()
    }

    #[test]
    fn defaults_fill_a_minimal_workload() {
        let w = parse("protocol: nats\ndurationSeconds: 5\n");
        assert_eq!(w.publishers, 1);
        assert_eq!(w.payload_bytes, 128);
        assert!(w.rate_per_publisher.is_none());
        assert!(w.violations().is_empty(), "{:?}", w.violations());
    }

    /// Text payloads carry the 22-character base64 header: socketio and pusher need 24 bytes.
    #[test]
    fn text_protocols_need_room_for_the_text_header() {
        for p in ["socketio", "pusher"] {
            let w = parse(&format!(
                "protocol: {p}\ndurationSeconds: 5\npayloadBytes: 16\n"
            ));
            assert!(
                w.violations()
                    .iter()
                    .any(|v| v.field == "workload.payloadBytes"),
                "{p}"
            );
            let w = parse(&format!(
                "protocol: {p}\ndurationSeconds: 5\npayloadBytes: 24\n"
            ));
            assert!(w.violations().is_empty(), "{p}: {:?}", w.violations());
        }
        assert!(
            parse("protocol: websocket\ndurationSeconds: 5\npayloadBytes: 16\n")
                .violations()
                .is_empty()
        );
    }

    #[test]
    fn socketio_rest_sampling_defaults_and_rules() {
        let w = parse("protocol: socketio\ndurationSeconds: 5\npayloadBytes: 64\nsocketio: {rest: {paths: [/health]}}\n");
        let rest = w.socketio.as_ref().and_then(|o| o.rest.clone()).unwrap();
        assert_eq!(rest.rate_per_second, 2);
        assert!(w.violations().is_empty(), "{:?}", w.violations());
        let w = parse("protocol: socketio\ndurationSeconds: 5\npayloadBytes: 64\nsocketio: {rest: {paths: [health], ratePerSecond: 0}}\n");
        let v: Vec<String> = w.violations().iter().map(|v| v.to_string()).collect();
        assert!(
            v.iter()
                .any(|s| s.starts_with("workload.socketio.rest.paths")),
            "{v:?}"
        );
        assert!(
            v.iter()
                .any(|s| s.starts_with("workload.socketio.rest.ratePerSecond")),
            "{v:?}"
        );
    }

    #[test]
    fn rules_name_the_field() {
        let w = parse("protocol: mqtt\npayloadBytes: 8\nratePerPublisher: 0\nmqtt: {qos: 3}\n");
        let v: Vec<String> = w.violations().iter().map(|v| v.to_string()).collect();
        assert!(
            v.iter().any(|s| s.starts_with("workload.payloadBytes")),
            "{v:?}"
        );
        assert!(
            v.iter().any(|s| s.starts_with("workload.ratePerPublisher")),
            "{v:?}"
        );
        assert!(
            v.iter().any(|s| s.starts_with("workload.mqtt.qos")),
            "{v:?}"
        );
        assert!(
            v.iter().any(|s| s.contains("one of durationSeconds")),
            "{v:?}"
        );
    }

    #[test]
    fn unknown_fields_and_protocols_are_rejected() {
        assert!(
            serde_norway::from_str::<Workload>("protocol: amqp\ndurationSeconds: 1\n").is_err()
        );
        assert!(serde_norway::from_str::<Workload>("protocol: nats\nduration: 1\n").is_err());
    }

    #[test]
    fn mismatched_protocol_section_is_rejected() {
        let w = parse("protocol: nats\ndurationSeconds: 1\nmqtt: {qos: 1}\n");
        assert_eq!(w.violations()[0].field, "workload.mqtt");
    }

    #[test]
    fn stage_shapes_and_ack_batches_are_checked() {
        let w = parse("protocol: nats\nstages: {dimension: connections, shape: ramp, start: 5000, step: 2500, count: 2, stageSeconds: 1}\n");
        assert_eq!(w.stages.as_ref().unwrap().shape, StageShape::Ramp);
        // Step: 5000, 7500 publishers; ramp: up to 10000 at the end of stage 2 (still allowed).
        assert!(w.violations().is_empty(), "{:?}", w.violations());
        let w = parse("protocol: nats\nstages: {dimension: connections, shape: ramp, start: 5000, step: 2501, count: 2, stageSeconds: 1}\n");
        assert_eq!(w.violations()[0].field, "workload.stages");
        let w = parse(
            "protocol: nats\nstages: {dimension: rate, start: 1, count: 1, stageSeconds: 1}\n",
        );
        assert_eq!(w.stages.unwrap().shape, StageShape::Step);
        let w = parse(
            "protocol: jetstream\ndurationSeconds: 1\njetstream: {publish: sync, ackBatch: 200}\n",
        );
        let v: Vec<String> = w.violations().iter().map(|v| v.to_string()).collect();
        assert_eq!(v, ["workload.jetstream.ackBatch: only applies to publish: async (sync waits for every ack)"]);
        let w = parse("protocol: jetstream\ndurationSeconds: 1\njetstream: {ackBatch: 0}\n");
        assert_eq!(w.violations()[0].field, "workload.jetstream.ackBatch");
        let w = parse("protocol: jetstream\ndurationSeconds: 1\njetstream: {ackBatch: 5000}\n");
        assert!(w.violations().is_empty());
    }

    #[test]
    fn connection_steps_split_the_count_and_are_checked() {
        let w = parse("protocol: nats\npublishers: 0\nconnections: {count: 300}\n");
        let c = w.connections.clone().unwrap();
        assert_eq!((c.steps, c.step_hold_seconds), (1, 10));
        assert_eq!(c.levels(), [300]);
        assert!(w.violations().is_empty(), "{:?}", w.violations());
        let w = parse("protocol: nats\npublishers: 0\nconnections: {count: 300, steps: 5, stepHoldSeconds: 8}\n");
        assert_eq!(w.connections.unwrap().levels(), [60, 120, 180, 240, 300]);
        let w = parse("protocol: nats\npublishers: 0\nconnections: {count: 7, steps: 3}\n");
        assert_eq!(w.connections.unwrap().levels(), [3, 5, 7]);
        let v = |yaml: &str| -> Vec<String> {
            parse(yaml)
                .violations()
                .iter()
                .map(|v| v.to_string())
                .collect()
        };
        assert_eq!(
            v("protocol: nats\npublishers: 0\nconnections: {count: 300, steps: 21, stepHoldSeconds: 0}\n"),
            [
                "workload.connections.steps: must be between 1 and 20",
                "workload.connections.stepHoldSeconds: must be between 1 and 3600"
            ]
        );
        assert_eq!(
            v("protocol: nats\npublishers: 0\nconnections: {count: 3, steps: 4}\n"),
            ["workload.connections.steps: must be at most connections.count (each step opens at least one)"]
        );
    }

    #[test]
    fn schema_carries_bounds() {
        let s = serde_json::to_value(schemars::schema_for!(Workload)).unwrap();
        let p = &s["properties"]["payloadBytes"];
        assert_eq!(p["minimum"], 16);
        assert_eq!(p["maximum"], 1048576);
        assert_eq!(s["properties"]["sessions"]["maxItems"], 32);
        let c = &s["$defs"]["ConnectionWorkload"]["properties"];
        assert_eq!(c["steps"]["maximum"], 20);
        assert_eq!(c["stepHoldSeconds"]["minimum"], 1);
    }
}
