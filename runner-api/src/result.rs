//! The versioned, mergeable result. Raw counters and histograms are the truth; every derived
//! figure (rates, percentiles, delivered ratio) is recomputed from them by `finalize`, so
//! `merge(parts)` gives exactly what one process measuring everything would report.
use crate::coarse::CoarseLatency;
use crate::histo::{Histo, LatencyPercentiles};
pub use msgbench_crds::benchmark_run::AckedNotKeptFrom;
use msgbench_crds::workload::Workload;
use serde::{Deserialize, Serialize};
use std::borrow::Borrow;
use std::collections::BTreeMap;

pub const FORMAT: &str = "msgbench.dev/bench-result/v1";

/// How deliveries are expected: fan-out to subscribers of a topic, or one reply per message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Delivery {
    #[default]
    FanOut,
    RoundTrip,
}

/// One segment of a trial (warm-up, the whole measured part, a session or a stage): raw,
/// mergeable figures. Records carry them as `phases` (the wire name; "phase" in the API means
/// the run's lifecycle).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SegmentStats {
    pub name: String,
    /// Open-loop rate per publisher in this phase (None = closed loop).
    pub rate_per_publisher: Option<u32>,
    pub publishers: u32,
    /// Ramped stage: the rate per publisher (dimension rate) or publishers (dimension
    /// connections) reached at its end, rising linearly from the values above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramp_to: Option<u32>,
    /// Messages the schedule called for, and messages actually published.
    pub scheduled: u64,
    pub published: u64,
    /// Published messages per topic, and subscribers per topic (summed over runners).
    pub published_by_topic: Vec<u64>,
    pub subscribers_by_topic: Vec<u64>,
    pub delivery: Delivery,
    /// Every delivery, including duplicates and deliveries of other runners' messages.
    pub received: u64,
    pub duplicates: u64,
    pub out_of_order: u64,
    /// Deliveries of messages another runner sent: counted, never used for latency.
    pub received_remote: u64,
    /// Deliveries that carry another run's tag (another run, trial or client publishing on
    /// this run's subjects): counted here only, never in `received`, duplicates or latency.
    #[serde(default)]
    pub foreign: u64,
    pub errors: BTreeMap<String, u64>,
    /// Longest publisher time in the phase and longest receive span, seconds.
    pub publish_seconds: f64,
    pub receive_seconds: f64,
    /// First send of the phase → its last delivery, seconds (the end-to-end window: what
    /// `nats-bench` spans with its aggregate Pub/Sub figure). Longest over runners.
    #[serde(default)]
    pub delivery_seconds: f64,
    /// End-to-end latency from the intended send time (same-process messages only).
    pub latency: Histo,
    /// Publish acknowledgement latency from the intended send time (JetStream ack, MQTT
    /// PUBACK/PUBCOMP, HTTP publish response).
    pub ack_latency: Histo,
    /// Actual − intended send time.
    pub send_lag: Histo,
    /// Messages whose publish the server acknowledged (JetStream ack, MQTT PUBACK/PUBCOMP,
    /// HTTP publish 2xx) but which an own-runner subscriber that should have received them
    /// (fan-out: every own subscriber of the topic) never received by the end of the run's
    /// drain; counted once per message. Each runner checks only its own publishers against its
    /// own subscribers, so with several runners a message lost only to another runner's
    /// subscribers is not counted; exact for one runner. Summed over runners, trials and
    /// phases. `None` where publishes are not acknowledged (core NATS, MQTT QoS 0, WebSocket):
    /// unavailable, not 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_acked: Option<u64>,
    /// As `lost_acked`, counted per (message, subscriber): a message missed by two own
    /// subscribers counts 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_acked_deliveries: Option<u64>,
    /// JetStream only: acknowledged messages (publish acked by JetStream) that the benchmark
    /// stream no longer held when this runner read it back after the drain (durability, where
    /// `lost_acked` is delivery). Each runner counts its own publishers' messages of the phase.
    /// `None` for other protocols, and when the read-back could not complete
    /// (`acked_not_kept_unavailable` says why): unavailable, not 0. See [`crate::kept`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acked_not_kept: Option<u64>,
    /// How `acked_not_kept` was decided: the stream read back, or found gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acked_not_kept_from: Option<AckedNotKeptFrom>,
    /// Why `acked_not_kept` is `None` in a JetStream run (the read-back did not complete).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acked_not_kept_unavailable: Option<String>,
    /// Longest publish stall of any one publisher (the longest one over publishers, runners
    /// and phases). `None` where publishes are not acknowledged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish_stall: Option<PublishStall>,
    pub summary: PhaseSummary,
}

/// The longest interval during which a publisher had at least one publish outstanding (sent,
/// neither acknowledged nor failed yet) and received no acknowledgement. An interval still
/// open when the publisher finished (its final wait for acks ended) counts up to then.
/// Zero (started at 0) when nothing was ever outstanding.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PublishStall {
    pub micros: u64,
    /// When it began, milliseconds since the Unix epoch (the runner's wall clock).
    pub started_unix_ms: u64,
}

impl PublishStall {
    /// The longer of the two; on a tie the earlier one, so merging does not depend on order.
    pub fn longest(self, o: PublishStall) -> PublishStall {
        if (o.micros, std::cmp::Reverse(o.started_unix_ms))
            > (self.micros, std::cmp::Reverse(self.started_unix_ms))
        {
            o
        } else {
            self
        }
    }
}

/// Sums two optional counts: unavailable only when both are.
impl SegmentStats {
    /// Merges `o`'s read-back figures (`ackedNotKept`) into these: summed, unless a read-back
    /// that could not complete (its reason kept) makes the merged figure unavailable.
    fn merge_kept(&mut self, o: &SegmentStats) {
        self.acked_not_kept_unavailable = crate::kept::join_reasons(
            self.acked_not_kept_unavailable.take(),
            o.acked_not_kept_unavailable.as_deref(),
        );
        self.acked_not_kept = match self.acked_not_kept_unavailable {
            Some(_) => None,
            None => add_opt(self.acked_not_kept, o.acked_not_kept),
        };
        self.acked_not_kept_from = self.acked_not_kept_from.max(o.acked_not_kept_from);
    }
}

pub(crate) fn add_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.saturating_add(y)),
        (x, y) => x.or(y),
    }
}

/// Derived figures, recomputed from the raw ones.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PhaseSummary {
    pub expected: u64,
    pub delivered_unique: u64,
    pub delivered_ratio: f64,
    pub publish_rate: f64,
    /// Deliveries per second from a subscriber's first delivery to its last (nats-bench's
    /// "Sub stats" window): a subscriber that fell behind and drains a backlog shows a rate
    /// above what the system delivered.
    pub receive_rate: f64,
    /// Unique deliveries per second over the end-to-end window (first send → last delivery).
    #[serde(default)]
    pub delivery_rate: f64,
    pub errors: u64,
    pub latency: Option<LatencyPercentiles>,
    pub ack_latency: Option<LatencyPercentiles>,
    pub send_lag: Option<LatencyPercentiles>,
}

impl SegmentStats {
    pub fn new(name: &str, topics: u32, delivery: Delivery) -> Self {
        SegmentStats {
            name: name.into(),
            published_by_topic: vec![0; topics as usize],
            subscribers_by_topic: vec![0; topics as usize],
            delivery,
            ..Default::default()
        }
    }

    /// Adds `o`'s raw figures into `self` (same phase of another publisher, subscriber or runner).
    pub fn add(&mut self, o: &SegmentStats) {
        if self.rate_per_publisher.is_none() {
            self.rate_per_publisher = o.rate_per_publisher;
        }
        if self.ramp_to.is_none() {
            self.ramp_to = o.ramp_to;
        }
        // Saturating: counters come from other processes and are not trusted to fit.
        self.publishers = self.publishers.saturating_add(o.publishers);
        self.scheduled = self.scheduled.saturating_add(o.scheduled);
        self.published = self.published.saturating_add(o.published);
        add_vec(&mut self.published_by_topic, &o.published_by_topic);
        add_vec(&mut self.subscribers_by_topic, &o.subscribers_by_topic);
        self.received = self.received.saturating_add(o.received);
        self.duplicates = self.duplicates.saturating_add(o.duplicates);
        self.out_of_order = self.out_of_order.saturating_add(o.out_of_order);
        self.received_remote = self.received_remote.saturating_add(o.received_remote);
        self.foreign = self.foreign.saturating_add(o.foreign);
        add_errors(&mut self.errors, &o.errors);
        self.publish_seconds = self.publish_seconds.max(o.publish_seconds);
        self.receive_seconds = self.receive_seconds.max(o.receive_seconds);
        self.delivery_seconds = self.delivery_seconds.max(o.delivery_seconds);
        self.latency.add(&o.latency);
        self.ack_latency.add(&o.ack_latency);
        self.send_lag.add(&o.send_lag);
        self.lost_acked = add_opt(self.lost_acked, o.lost_acked);
        self.lost_acked_deliveries = add_opt(self.lost_acked_deliveries, o.lost_acked_deliveries);
        self.merge_kept(o);
        self.publish_stall = match (self.publish_stall, o.publish_stall) {
            (Some(a), Some(b)) => Some(a.longest(b)),
            (a, b) => a.or(b),
        };
    }

    pub fn error(&mut self, kind: &str) {
        let n = self.errors.entry(kind.to_string()).or_default();
        *n = n.saturating_add(1);
    }

    pub fn finalize(&mut self) {
        let expected = match self.delivery {
            Delivery::RoundTrip => self.published,
            Delivery::FanOut => self
                .published_by_topic
                .iter()
                .zip(&self.subscribers_by_topic)
                .map(|(p, s)| p.saturating_mul(*s))
                .fold(0, u64::saturating_add),
        };
        // More duplicates than deliveries only comes from an inconsistent record.
        let unique = self.received.saturating_sub(self.duplicates);
        let rate = |n: u64, s: f64| if s > 0.0 { round1(n as f64 / s) } else { 0.0 };
        self.summary = PhaseSummary {
            expected,
            delivered_unique: unique,
            delivered_ratio: if expected > 0 {
                round6(unique as f64 / expected as f64)
            } else {
                0.0
            },
            publish_rate: rate(self.published, self.publish_seconds),
            receive_rate: rate(self.received, self.receive_seconds),
            delivery_rate: rate(unique, self.delivery_seconds),
            errors: self.errors.values().fold(0, |a, b| a.saturating_add(*b)),
            latency: self.latency.summary(),
            ack_latency: self.ack_latency.summary(),
            send_lag: self.send_lag.summary(),
        };
    }
}

fn add_vec(a: &mut Vec<u64>, b: &[u64]) {
    if a.len() < b.len() {
        a.resize(b.len(), 0);
    }
    for (x, y) in a.iter_mut().zip(b) {
        *x = x.saturating_add(*y);
    }
}

fn add_errors(a: &mut BTreeMap<String, u64>, b: &BTreeMap<String, u64>) {
    for (k, v) in b {
        let n = a.entry(k.clone()).or_default();
        *n = n.saturating_add(*v);
    }
}
fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}
fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// Messages counted from `second` (since the start of the measured part) for `seconds`
/// seconds: one point a second, coarser for long runs so a record never holds more than
/// [`MAX_TIMELINE_POINTS`] of them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TimelinePoint {
    pub second: u32,
    #[serde(default = "one_second")]
    pub seconds: u32,
    pub published: u64,
    pub received: u64,
    /// Publishes acknowledged in this window (0 where publishes are not acknowledged; older
    /// records lack it).
    #[serde(default)]
    pub acked: u64,
    /// Deliveries in this window that repeated a sequence already delivered to the same
    /// subscriber (older records lack it).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub duplicates: u64,
    /// Deliveries in this window that arrived below the highest sequence already delivered
    /// to the same subscriber (not duplicates; older records lack it).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub out_of_order: u64,
    /// End-to-end latency of this window's own-runner deliveries (as `measured.latency`).
    #[serde(default, skip_serializing_if = "CoarseLatency::is_empty")]
    pub latency: CoarseLatency,
}

impl TimelinePoint {
    /// Adds another window's counts and latencies (the same second of another runner or trial,
    /// or the next second of a widened window).
    pub fn add(&mut self, o: &TimelinePoint) {
        self.published = self.published.saturating_add(o.published);
        self.received = self.received.saturating_add(o.received);
        self.acked = self.acked.saturating_add(o.acked);
        self.duplicates = self.duplicates.saturating_add(o.duplicates);
        self.out_of_order = self.out_of_order.saturating_add(o.out_of_order);
        self.latency.add(&o.latency);
    }
}

fn one_second() -> u32 {
    1
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Most timeline points in one record (a day-long run gets 144-second points).
pub const MAX_TIMELINE_POINTS: usize = 600;

/// Per-second counts of one runner, indexed by second since the measured start.
#[derive(Clone, Debug, Default)]
pub struct PerSecond {
    pub published: Vec<u64>,
    pub received: Vec<u64>,
    pub acked: Vec<u64>,
    pub duplicates: Vec<u64>,
    pub out_of_order: Vec<u64>,
    pub latency: Vec<CoarseLatency>,
}

/// Per-second counts and latencies as timeline points, summed into equal buckets of whole
/// seconds when there are more than [`MAX_TIMELINE_POINTS`] seconds.
pub fn timeline_points(per: &PerSecond) -> Vec<TimelinePoint> {
    let PerSecond {
        published,
        received,
        acked,
        duplicates,
        out_of_order,
        latency,
    } = per;
    let n = [published, received, acked, duplicates, out_of_order]
        .iter()
        .map(|v| v.len())
        .chain([latency.len()])
        .max()
        .unwrap_or(0);
    let width = n.div_ceil(MAX_TIMELINE_POINTS).max(1);
    let sum = |v: &[u64], from: usize| v.iter().skip(from).take(width).sum::<u64>();
    (0..n)
        .step_by(width)
        .map(|from| TimelinePoint {
            second: from as u32,
            seconds: width.min(n - from) as u32,
            published: sum(published, from),
            received: sum(received, from),
            acked: sum(acked, from),
            duplicates: sum(duplicates, from),
            out_of_order: sum(out_of_order, from),
            latency: latency.iter().skip(from).take(width).fold(
                CoarseLatency::default(),
                |mut a, l| {
                    a.add(l);
                    a
                },
            ),
        })
        .collect()
}

/// Adds `more` into `into`, both sorted by second: points of the same second merge, others are
/// kept (linear, so merging many long timelines stays cheap).
pub fn merge_timelines(into: &mut Vec<TimelinePoint>, more: &[TimelinePoint]) {
    let mut out = Vec::with_capacity(into.len().max(more.len()));
    let (mut a, mut b) = (
        std::mem::take(into).into_iter().peekable(),
        more.iter().peekable(),
    );
    loop {
        match (a.peek(), b.peek()) {
            (Some(x), Some(y)) if x.second == y.second => {
                let mut x = a.next().expect("peeked");
                x.add(b.next().expect("peeked"));
                out.push(x);
            }
            (Some(x), Some(y)) if x.second < y.second => out.push(a.next().expect("peeked")),
            (_, Some(_)) => out.push(b.next().expect("peeked").clone()),
            (Some(_), None) => out.push(a.next().expect("peeked")),
            (None, None) => break,
        }
    }
    *into = out;
}

/// Connection workload figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionStats {
    pub attempted: u64,
    pub connected: u64,
    pub failed: u64,
    /// Longest time to open all connections (seconds), max over runners.
    pub connect_seconds: f64,
    pub held_seconds: f64,
    pub connect_time: Histo,
    pub errors: BTreeMap<String, u64>,
    pub connections_per_second: f64,
    pub connect_time_summary: Option<LatencyPercentiles>,
}

impl ConnectionStats {
    pub fn add(&mut self, o: &ConnectionStats) {
        self.attempted = self.attempted.saturating_add(o.attempted);
        self.connected = self.connected.saturating_add(o.connected);
        self.failed = self.failed.saturating_add(o.failed);
        self.connect_seconds = self.connect_seconds.max(o.connect_seconds);
        self.held_seconds = self.held_seconds.max(o.held_seconds);
        self.connect_time.add(&o.connect_time);
        add_errors(&mut self.errors, &o.errors);
    }
    pub fn finalize(&mut self) {
        self.connections_per_second = if self.connect_seconds > 0.0 {
            round1(self.connected as f64 / self.connect_seconds)
        } else {
            0.0
        };
        self.connect_time_summary = self.connect_time.summary();
    }
}

/// Send lag (p99) past which the generator is flagged saturated (the operator applies the same
/// bound to merged figures).
pub const SATURATION_LAG_P99_US: u64 = 10_000;
/// CPU use (fraction of the CPUs available) past which the generator is flagged saturated.
pub const SATURATION_CPU: f64 = 0.90;

/// Whether the generator kept its schedule.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Generator {
    /// No rate given: each publisher sent as fast as it could; latency then includes queueing
    /// behind the previous send and is not comparable with open-loop figures.
    pub closed_loop: bool,
    pub saturated: bool,
    pub reasons: Vec<String>,
    pub cpu_seconds: f64,
    pub wall_seconds: f64,
    /// CPUs available to each runner (summed over runners).
    pub cpus: f64,
    pub cpu_seconds_per_million_messages: f64,
}

/// The whole result of one runner, or of several merged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunnerResult {
    pub format: String,
    pub target: String,
    pub runner_ids: Vec<u16>,
    pub workload: Workload,
    pub generator: Generator,
    pub warmup: Option<SegmentStats>,
    /// Everything after warm-up (all sessions/stages together).
    pub measured: SegmentStats,
    pub sessions: Vec<SegmentStats>,
    pub stages: Vec<SegmentStats>,
    /// Set when stages stopped at a threshold: the first stage that broke it.
    pub breaking_stage: Option<String>,
    pub connections: Option<ConnectionStats>,
    pub timeline: Vec<TimelinePoint>,
    /// Sampled REST endpoint latency (socketio `rest`), one section per path.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rest: Vec<RestLatency>,
}

/// Latency of one REST path sampled during the run (from the intended request time).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RestLatency {
    pub path: String,
    pub requests: u64,
    /// Failed, non-2xx or timed-out requests.
    pub errors: u64,
    pub latency: Histo,
    pub summary: Option<LatencyPercentiles>,
}

#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("no results to merge")]
    Empty,
    #[error("{0}: unsupported result format {1:?} (expected {FORMAT})")]
    Format(String, String),
    #[error("{0}: workload differs from the first result's; only parts of one run merge")]
    Workload(String),
    #[error("{0}: phases differ from the first result's ({1})")]
    Phases(String, String),
}

impl RunnerResult {
    pub fn finalize(&mut self) {
        for p in self.warmup.iter_mut().chain([&mut self.measured]) {
            p.finalize();
        }
        for p in self.sessions.iter_mut().chain(self.stages.iter_mut()) {
            p.finalize();
        }
        if let Some(c) = &mut self.connections {
            c.finalize();
        }
        let g = &mut self.generator;
        let warm = self
            .warmup
            .as_ref()
            .map_or(0, |w| w.published.saturating_add(w.received));
        let msgs = self
            .measured
            .published
            .saturating_add(self.measured.received)
            .saturating_add(warm) as f64;
        g.cpu_seconds_per_million_messages = if msgs > 0.0 {
            (g.cpu_seconds / msgs * 1e6 * 1000.0).round() / 1000.0
        } else {
            0.0
        };
    }

    /// Merges parts of one run (one per runner) into the result one process would report.
    /// `names` label the parts in errors.
    pub fn merge(parts: &[(String, RunnerResult)]) -> Result<RunnerResult, MergeError> {
        let mut m = ResultMerger::default();
        for (name, p) in parts {
            m.absorb(name, p.clone())?;
        }
        m.finish()
    }
}

/// Merges parts one at a time, so a caller decoding records one by one holds one merged result
/// and the record at hand, never every record at once (`RunnerResult::merge` is built on it).
#[derive(Default)]
pub struct ResultMerger {
    out: Option<RunnerResult>,
}

impl ResultMerger {
    /// Adds one part; `name` labels it in errors.
    pub fn absorb(&mut self, name: &str, p: RunnerResult) -> Result<(), MergeError> {
        if p.format != FORMAT {
            return Err(MergeError::Format(name.into(), p.format.clone()));
        }
        let Some(out) = &mut self.out else {
            let mut p = p;
            p.timeline.sort_by_key(|t| t.second);
            self.out = Some(p);
            return Ok(());
        };
        let name = &name.to_string();
        {
            if p.workload != out.workload {
                return Err(MergeError::Workload(name.clone()));
            }
            if p.sessions.len() != out.sessions.len() || p.warmup.is_some() != out.warmup.is_some()
            {
                return Err(MergeError::Phases(
                    name.clone(),
                    "sessions or warm-up".into(),
                ));
            }
            out.runner_ids.extend(&p.runner_ids);
            let g = &mut out.generator;
            g.closed_loop |= p.generator.closed_loop;
            g.saturated |= p.generator.saturated;
            g.reasons.extend(p.generator.reasons.iter().cloned());
            g.cpu_seconds += p.generator.cpu_seconds;
            g.wall_seconds = g.wall_seconds.max(p.generator.wall_seconds);
            g.cpus += p.generator.cpus;
            if let (Some(a), Some(b)) = (&mut out.warmup, &p.warmup) {
                a.add(b);
            }
            out.measured.add(&p.measured);
            for (a, b) in out.sessions.iter_mut().zip(&p.sessions) {
                a.add(b);
            }

            // Stages stop early per runner; merge by name, keeping every stage any runner ran.
            for b in &p.stages {
                match out.stages.iter_mut().find(|a| a.name == b.name) {
                    Some(a) => a.add(b),
                    None => out.stages.push(b.clone()),
                }
            }
            if out.breaking_stage.is_none() {
                out.breaking_stage = p.breaking_stage.clone();
            }
            match (&mut out.connections, &p.connections) {
                (Some(a), Some(b)) => a.add(b),
                (None, Some(b)) => out.connections = Some(b.clone()),
                _ => {}
            }
            for b in &p.rest {
                match out.rest.iter_mut().find(|a| a.path == b.path) {
                    Some(a) => {
                        a.requests = a.requests.saturating_add(b.requests);
                        a.errors = a.errors.saturating_add(b.errors);
                        a.latency.add(&b.latency);
                        a.summary = a.latency.summary();
                    }
                    None => out.rest.push(b.clone()),
                }
            }
            // Records are not trusted to be sorted: sort a copy before the linear merge.
            let mut more = p.timeline.clone();
            more.sort_by_key(|t| t.second);
            merge_timelines(&mut out.timeline, &more);
        }
        Ok(())
    }

    /// The merged result, as one process would report it.
    pub fn finish(self) -> Result<RunnerResult, MergeError> {
        let mut out = self.out.ok_or(MergeError::Empty)?;
        // A multi-phase measured part is recomputed from its merged phases, as one process does.
        let phases: Vec<&SegmentStats> = out.sessions.iter().chain(out.stages.iter()).collect();
        if phases.len() > 1 {
            out.measured = aggregate_measured(&phases);
        }
        out.timeline.sort_by_key(|t| t.second);
        out.runner_ids.sort_unstable();
        out.generator.reasons.sort();
        out.finalize();
        Ok(out)
    }
}

/// The measured part as one phase: sums of the phases after warm-up. Subscriptions are the same
/// in every phase, so they are taken once; times add up (phases run one after another).
pub fn aggregate_measured<P: Borrow<SegmentStats>>(phases: &[P]) -> SegmentStats {
    let Some(first) = phases.first().map(Borrow::borrow) else {
        return SegmentStats::default();
    };
    if phases.len() == 1 {
        let mut p = first.clone();
        p.name = "measured".into();
        return p;
    }
    let mut m = SegmentStats::new(
        "measured",
        first.published_by_topic.len() as u32,
        first.delivery,
    );
    let (mut ps, mut rs, mut ds) = (0.0, 0.0, 0.0);
    for p in phases.iter().map(Borrow::borrow) {
        m.add(p);
        ps += p.publish_seconds;
        rs += p.receive_seconds;
        ds += p.delivery_seconds;
    }
    m.publishers = phases
        .iter()
        .map(|p| p.borrow().publishers)
        .max()
        .unwrap_or(0);
    m.subscribers_by_topic = first.subscribers_by_topic.clone();
    m.publish_seconds = ps;
    m.receive_seconds = rs;
    m.delivery_seconds = ds;
    m.rate_per_publisher = first.rate_per_publisher;
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_timeline_is_summed_into_at_most_600_points_losing_no_message() {
        let pubs: Vec<u64> = (0..86_400).map(|s| s % 7).collect();
        let recv: Vec<u64> = (0..86_399).map(|s| s % 5).collect();
        let acked: Vec<u64> = (0..100).collect();
        let t = timeline_points(&PerSecond {
            published: pubs.clone(),
            received: recv.clone(),
            acked: acked.clone(),
            duplicates: vec![0, 3],
            out_of_order: vec![0; 86_400],
            latency: vec![],
        });
        assert!(t.len() <= MAX_TIMELINE_POINTS, "{}", t.len());
        assert_eq!(t[0].duplicates, 3);
        assert_eq!((t[1].second, t[1].seconds), (144, 144));
        let total = |f: fn(&TimelinePoint) -> u64| t.iter().map(f).sum::<u64>();
        assert_eq!(total(|p| p.published), pubs.iter().sum::<u64>());
        assert_eq!(total(|p| p.received), recv.iter().sum::<u64>());
        assert_eq!(total(|p| p.acked), acked.iter().sum::<u64>());
        // Short runs keep one point a second.
        let short = timeline_points(&PerSecond {
            published: vec![1, 2, 3],
            received: vec![1],
            ..Default::default()
        });
        assert_eq!(short.len(), 3);
        assert!(short.iter().all(|p| p.seconds == 1));
        assert_eq!(short[2].received, 0);
    }

    #[test]
    fn timelines_merge_by_second_adding_counts_and_latency() {
        let point = |second, n, us| crate::testing::timeline_point(second, &vec![us; n as usize]);
        let mut a = vec![point(0, 1, 1_000), point(2, 2, 1_000)];
        merge_timelines(
            &mut a,
            &[point(1, 3, 9_000), point(2, 4, 9_000), point(5, 1, 10)],
        );
        let seconds: Vec<u32> = a.iter().map(|p| p.second).collect();
        assert_eq!(seconds, [0, 1, 2, 5]);
        assert_eq!((a[2].published, a[2].latency.count()), (6, 6));
        let p99 = a[2].latency.quantile_us(0.99).unwrap();
        assert!((p99 / 9_000.0 - 1.0).abs() < 0.06, "{p99}");
    }

    fn stall(micros: u64, started_unix_ms: u64) -> Option<PublishStall> {
        Some(PublishStall {
            micros,
            started_unix_ms,
        })
    }

    #[test]
    fn lost_acked_sums_and_the_longest_stall_keeps_its_start_through_merge() {
        let mut a = SegmentStats::new("m", 1, Delivery::FanOut);
        a.lost_acked = Some(2);
        a.lost_acked_deliveries = Some(3);
        a.publish_stall = stall(40_000, 1_000);
        let mut b = a.clone();
        b.lost_acked = Some(5);
        b.lost_acked_deliveries = Some(5);
        b.publish_stall = stall(90_000, 7_000);
        let mut m = a.clone();
        m.add(&b);
        assert_eq!((m.lost_acked, m.lost_acked_deliveries), (Some(7), Some(8)));
        assert_eq!(m.publish_stall, stall(90_000, 7_000));
        // The other order gives the same; a tie keeps the earlier start.
        let mut n = b.clone();
        n.add(&a);
        assert_eq!(n.publish_stall, m.publish_stall);
        let mut tie = a.clone();
        tie.publish_stall = stall(40_000, 500);
        tie.add(&a);
        assert_eq!(tie.publish_stall, stall(40_000, 500));
        // Phases of one runner aggregate the same way.
        let measured = aggregate_measured(&[a, b]);
        assert_eq!(measured.lost_acked, Some(7));
        assert_eq!(measured.publish_stall, stall(90_000, 7_000));
    }

    #[test]
    fn unavailable_figures_stay_unavailable_through_merge_and_serde() {
        let none = SegmentStats::new("m", 1, Delivery::FanOut);
        let mut m = none.clone();
        m.add(&none);
        m.finalize();
        assert_eq!((m.lost_acked, m.lost_acked_deliveries), (None, None));
        assert_eq!(m.publish_stall, None);
        let json = serde_json::to_value(&m).unwrap();
        assert!(json.get("lostAcked").is_none(), "{json}");
        // Zero is a figure, not unavailable: it survives the round trip.
        let mut zero = none.clone();
        zero.lost_acked = Some(0);
        zero.publish_stall = Some(PublishStall::default());
        let back: SegmentStats =
            serde_json::from_value(serde_json::to_value(&zero).unwrap()).unwrap();
        assert_eq!(
            (back.lost_acked, back.publish_stall),
            (Some(0), zero.publish_stall)
        );
    }

    #[test]
    fn older_timeline_points_without_acked_read_as_zero_and_acked_merges() {
        let old: TimelinePoint =
            serde_json::from_str(r#"{"second":3,"published":5,"received":4}"#).unwrap();
        assert_eq!((old.second, old.acked), (3, 0));
        let mut a = vec![TimelinePoint {
            acked: 2,
            ..old.clone()
        }];
        merge_timelines(&mut a, &[TimelinePoint { acked: 5, ..old }]);
        assert_eq!((a.len(), a[0].acked, a[0].published), (1, 7, 10));
        assert_eq!((old.duplicates, old.out_of_order), (0, 0));
        let json = serde_json::to_value(&a[0]).unwrap();
        assert!(json.get("duplicates").is_none(), "{json}");
        let dups = TimelinePoint {
            duplicates: 2,
            out_of_order: 1,
            ..a[0].clone()
        };
        merge_timelines(&mut a, std::slice::from_ref(&dups));
        merge_timelines(&mut a, &[dups]);
        assert_eq!((a.len(), a[0].duplicates, a[0].out_of_order), (1, 4, 2));
        assert_eq!(a[0].published, 30, "the rest of each point merged too");
    }

    /// Counters from another process are not trusted to be consistent: more duplicates than
    /// deliveries, or products and sums past u64, panicked (debug) or wrapped (release).
    #[test]
    fn inconsistent_or_huge_counters_never_panic() {
        let mut p = SegmentStats::new("measured", 1, Delivery::FanOut);
        p.received = 1;
        p.duplicates = 5;
        p.published = u64::MAX;
        p.published_by_topic = vec![u64::MAX];
        p.subscribers_by_topic = vec![3];
        p.errors.insert("x".into(), u64::MAX);
        p.error("x");
        p.publish_seconds = 1.0;
        let mut q = p.clone();
        q.add(&p);
        q.finalize();
        assert_eq!(q.summary.expected, u64::MAX);
        assert_eq!(q.summary.delivered_unique, 0);
        assert_eq!(q.published, u64::MAX);
        assert_eq!(q.errors["x"], u64::MAX);
    }
}
