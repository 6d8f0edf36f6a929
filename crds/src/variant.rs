//! `spec.variants`: named variants of one BenchmarkRun, run interleaved (every variant once per
//! round, in a randomised order) so that drift between rounds hits every variant alike and the
//! comparison can pair them round by round.
//!
//! A variant overrides a few workload fields (the usual comparison dimensions) and/or the
//! target. The override is typed, not a free-form patch, so admission checks every value.
use crate::benchmark_run::Target;
use crate::workload::{
    JetStreamConsumer, JetStreamOptions, JetStreamPublish, MqttOptions, MqttVersion, Protocol,
    SocketIoOptions, StreamStorage, WebSocketMode, WebSocketOptions, Workload,
};
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Most variants one run compares (each round runs every variant once).
pub const MAX_VARIANTS: usize = 6;

/// One named variant.
#[derive(Clone, Debug, KubeSchema, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.target) || has(self.target.serverRef) != has(self.target.endpoint)").message("variants[].target: set exactly one of serverRef and endpoint").field_path(".target"))]
pub struct Variant {
    /// Name shown in status and comparisons, e.g. `r1`, `r2`, `pinned`.
    #[schemars(
        length(min = 1, max = 32),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub name: String,
    /// Workload fields this variant changes; unset fields keep `spec.workload`'s values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<WorkloadOverride>,
    /// Another target for this variant (e.g. the pinned twin of a server, or a second image);
    /// unset: `spec.target`. It must serve the variant's protocol (`workload.protocol` here,
    /// else `spec.workload.protocol`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Target>,
}

/// Workload fields a variant may change. The run's length (duration, messages, sessions,
/// stages) is shared by every variant so that rounds compare like with like.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkloadOverride {
    /// Another protocol for this variant, e.g. `pusher` for sockudo against the reference
    /// server's `websocket`, with its own `target`. The protocol sections of `spec.workload`
    /// (jetstream, mqtt, socketio, websocket) do not carry over: it starts from the new
    /// protocol's defaults plus this override's own section.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<Protocol>,
    /// Publishing clients per runner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 10000))]
    pub publishers: Option<u32>,
    /// Subscribing clients per runner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 10000))]
    pub subscribers: Option<u32>,
    /// Distinct topics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10000))]
    pub topics: Option<u32>,
    /// Payload size in bytes (16-byte header included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 16, max = 1048576))]
    pub payload_bytes: Option<u32>,
    /// Messages per second per publisher (open loop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10000000))]
    pub rate_per_publisher: Option<u32>,
    /// Messages a publisher sends together (see `workload.publishBatch`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub publish_batch: Option<u32>,
    /// JetStream fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jetstream: Option<JetStreamOverride>,
    /// MQTT fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mqtt: Option<MqttOverride>,
    /// Socket.IO fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socketio: Option<SocketIoOverride>,
    /// WebSocket fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub websocket: Option<WebSocketOverride>,
}

/// JetStream fields a variant may change (see `workload.jetstream`).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JetStreamOverride {
    /// Stream replicas (1, 2, 3…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 5))]
    pub replicas: Option<u32>,
    /// Stream storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<StreamStorage>,
    /// Publish mode, sync or async.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish: Option<JetStreamPublish>,
    /// Async publish: ack window per publisher.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100000))]
    pub max_in_flight: Option<u32>,
    /// Async publish in batches: publish this many, then wait for all their acks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100000))]
    pub ack_batch: Option<u32>,
    /// Consumer kind: push, pull or ordered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer: Option<JetStreamConsumer>,
    /// Pull consumer: messages per fetch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100000))]
    pub pull_batch: Option<u32>,
}

/// MQTT fields a variant may change (see `workload.mqtt`).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MqttOverride {
    /// Protocol version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<MqttVersion>,
    /// Quality of service (0, 1 or 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 2))]
    pub qos: Option<u8>,
    /// Client in-flight window for QoS 1/2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub max_in_flight: Option<u16>,
}

/// Socket.IO fields a variant may change (see `workload.socketio`).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SocketIoOverride {
    /// Subscribers join the `__all__` room instead of topic rooms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all_room: Option<bool>,
}

/// WebSocket fields a variant may change (see `workload.websocket`).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WebSocketOverride {
    /// Echo or broadcast.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<WebSocketMode>,
}

fn set<T: Copy>(dst: &mut T, src: Option<T>) {
    if let Some(v) = src {
        *dst = v;
    }
}

impl Workload {
    /// This workload with a variant's overrides applied (a section the base lacks starts from
    /// its defaults).
    pub fn with_override(&self, o: &WorkloadOverride) -> Workload {
        let mut w = self.clone();
        if let Some(p) = o.protocol.filter(|p| *p != w.protocol) {
            w.protocol = p;
            (w.nats, w.jetstream, w.mqtt, w.socketio, w.websocket) = (None, None, None, None, None);
        }
        set(&mut w.publishers, o.publishers);
        set(&mut w.subscribers, o.subscribers);
        set(&mut w.topics, o.topics);
        set(&mut w.payload_bytes, o.payload_bytes);
        if o.rate_per_publisher.is_some() {
            w.rate_per_publisher = o.rate_per_publisher;
        }
        if o.publish_batch.is_some() {
            w.publish_batch = o.publish_batch;
        }
        if let Some(j) = &o.jetstream {
            let d = w.jetstream.get_or_insert_with(JetStreamOptions::default);
            set(&mut d.replicas, j.replicas);
            set(&mut d.storage, j.storage);
            set(&mut d.publish, j.publish);
            set(&mut d.max_in_flight, j.max_in_flight);
            if j.ack_batch.is_some() {
                d.ack_batch = j.ack_batch;
            }
            set(&mut d.consumer, j.consumer);
            set(&mut d.pull_batch, j.pull_batch);
        }
        if let Some(m) = &o.mqtt {
            let d = w.mqtt.get_or_insert_with(MqttOptions::default);
            set(&mut d.version, m.version);
            set(&mut d.qos, m.qos);
            set(&mut d.max_in_flight, m.max_in_flight);
        }
        if let Some(s) = &o.socketio {
            let d = w.socketio.get_or_insert_with(SocketIoOptions::default);
            set(&mut d.all_room, s.all_room);
        }
        if let Some(s) = &o.websocket {
            let d = w.websocket.get_or_insert_with(WebSocketOptions::default);
            set(&mut d.mode, s.mode);
        }
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Workload {
        serde_norway::from_str(
            "protocol: jetstream\ndurationSeconds: 10\nratePerPublisher: 500\n\
             jetstream: {replicas: 1, publish: async, maxInFlight: 200, consumer: push}\n",
        )
        .unwrap()
    }

    #[test]
    fn an_override_changes_only_the_fields_it_sets() {
        let o: WorkloadOverride = serde_norway::from_str("jetstream: {replicas: 2}").unwrap();
        let w = base().with_override(&o);
        let js = w.jetstream.as_ref().unwrap();
        assert_eq!(js.replicas, 2);
        assert_eq!(js.max_in_flight, 200);
        assert_eq!(js.publish, JetStreamPublish::Async);
        assert_eq!(w.rate_per_publisher, Some(500));
        assert_eq!(w.duration_seconds, Some(10));
        // The base is untouched and an empty override is the identity.
        assert_eq!(base().jetstream.unwrap().replicas, 1);
        assert_eq!(base().with_override(&WorkloadOverride::default()), base());
    }

    #[test]
    fn a_section_the_base_lacks_starts_from_its_defaults() {
        let mut b = base();
        b.protocol = crate::workload::Protocol::Mqtt;
        b.jetstream = None;
        let o: WorkloadOverride =
            serde_norway::from_str("mqtt: {qos: 1}\npayloadBytes: 1024").unwrap();
        let w = b.with_override(&o);
        let m = w.mqtt.unwrap();
        assert_eq!(
            (m.qos, m.max_in_flight),
            (1, MqttOptions::default().max_in_flight)
        );
        assert_eq!(w.payload_bytes, 1024);
        let o: WorkloadOverride = serde_norway::from_str("publishBatch: 25").unwrap();
        assert_eq!(b.with_override(&o).publish_batch, Some(25));
    }

    /// The jetstream section belongs to jetstream: a variant that switches protocol gets the
    /// new protocol's defaults, so its merged workload is valid without undoing the base.
    #[test]
    fn a_protocol_override_drops_the_base_protocol_sections() {
        let o: WorkloadOverride = serde_norway::from_str("protocol: nats").unwrap();
        let w = base().with_override(&o);
        assert_eq!((w.protocol, w.jetstream.is_none()), (Protocol::Nats, true));
        assert!(w.violations().is_empty(), "{:?}", w.violations());
        assert_eq!(w.rate_per_publisher, Some(500));
        // The same protocol again changes nothing.
        let o: WorkloadOverride = serde_norway::from_str("protocol: jetstream").unwrap();
        assert_eq!(base().with_override(&o), base());
    }

    #[test]
    fn unknown_override_fields_are_rejected() {
        let e = serde_norway::from_str::<WorkloadOverride>("durationSeconds: 5").unwrap_err();
        assert!(e.to_string().contains("durationSeconds"), "{e}");
    }
}
