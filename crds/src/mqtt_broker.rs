//! MqttBroker: a tuned MQTT broker (mosquitto by default) with optional WebSocket listener.
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{
    pinning_rules, quantity_schema, Placement, Quantity, Resources, ServerStatus, Tuning,
};

/// An MQTT broker. mosquitto and rumqttd do not cluster, so they run one replica.
#[derive(CustomResource, KubeSchema, Clone, Debug, Deserialize, Serialize, PartialEq)]
#[kube(
    group = "msgbench.dev",
    version = "v1alpha1",
    kind = "MqttBroker",
    namespaced,
    shortname = "mqb",
    category = "msgbench",
    status = "ServerStatus",
    derive = "PartialEq",
    doc = "A performance-tuned MQTT broker provisioned by msgbench.",
    printcolumn(name = "Engine", type_ = "string", json_path = ".spec.engine"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(name = "Replicas", type_ = "integer", json_path = ".spec.replicas"),
    printcolumn(
        name = "Pinned",
        type_ = "boolean",
        json_path = ".status.observedTuning.pinningEffective"
    ),
    printcolumn(name = "URL", type_ = "string", json_path = ".status.url"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    validation = crate::names::name_rule(crate::names::MAX_SERVER_NAME)
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self.replicas == 1 || self.engine == 'custom'").message("replicas: engines mosquitto and rumqttd do not cluster; replicas must be 1 (use engine custom for a clustering broker)").field_path(".replicas"))]
#[x_kube(validation = Rule::new("self.engine != 'custom' || has(self.image)").message("image: engine custom needs an image").field_path(".image"))]
#[x_kube(validation = Rule::new("self.engine == 'custom' || !has(self.custom)").message("custom: only valid with engine custom").field_path(".custom"))]
#[x_kube(validation = Rule::new("self.engine == 'mosquitto' || !has(self.auth)").message("auth: only valid with engine mosquitto (the operator writes only mosquitto's password file)").field_path(".auth"))]
#[x_kube(validation = Rule::new("self.engine == 'mosquitto' || !has(self.tls)").message("tls: only valid with engine mosquitto (the operator configures TLS only for mosquitto's listeners)").field_path(".tls"))]
#[x_kube(validation = Rule::new("!has(self.faultInjection) || !self.faultInjection.powerLoss").message("faultInjection.powerLoss: JetStreamCluster only (MqttBroker persistence under the lazy file system is not built yet)").field_path(".faultInjection.powerLoss"))]
#[x_kube(validation = pinning_rules()[0].clone())]
#[x_kube(validation = pinning_rules()[1].clone())]
#[x_kube(validation = pinning_rules()[2].clone())]
pub struct MqttBrokerSpec {
    /// Broker implementation: `mosquitto` (default), `rumqttd` or `custom` (bring an image).
    #[serde(default)]
    pub engine: MqttEngine,
    /// Broker image; required for `custom`. Unset: the operator's default for the engine (the
    /// chart's `images.mosquitto` / `images.rumqttd`, under `images.registry`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub image: Option<String>,
    /// Broker pods. Only `custom` engines may run more than one.
    #[serde(default = "default_replicas")]
    #[schemars(range(min = 1, max = 5))]
    pub replicas: i32,
    /// Command, arguments and config template of a `custom` engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom: Option<CustomEngine>,
    /// Network listeners.
    #[serde(default)]
    pub listeners: Listeners,
    /// Most concurrent client connections; unset: the engine's default (unlimited for mosquitto).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1_000_000))]
    pub max_connections: Option<i32>,
    /// Messages queued per client beyond those in flight (mosquitto `max_queued_messages`,
    /// default 1000). Messages beyond it are dropped, which a benchmark reports as loss.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 10_000_000))]
    pub max_queued_messages: Option<i32>,
    /// QoS 1/2 messages in flight per client (mosquitto `max_inflight_messages`, default 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 65_535))]
    pub max_inflight_messages: Option<i32>,
    /// Persist retained messages and sessions to a volume.
    #[serde(default)]
    pub persistence: Persistence,
    /// Clients must log in with the user name and password of a Secret (engine mosquitto
    /// only). Unset: anonymous clients are allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<MqttAuth>,
    /// TLS for clients (engine mosquitto only): every listener (MQTT, and WebSocket if set)
    /// serves TLS only, with the broker's certificate from a Secret. The status URL becomes
    /// `mqtts://<name>.<namespace>.svc:<mqttPort>`. Unset: plain MQTT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<MqttTls>,
    /// CPU and memory per broker pod.
    #[serde(default)]
    pub resources: Resources,
    /// Performance tuning of the broker pods.
    #[serde(default)]
    pub tuning: Tuning,
    /// Node selection and spreading of the broker pods.
    #[serde(default)]
    pub placement: Placement,
    /// Pull secrets, service account, priority class, labels and annotations of the broker
    /// pods, added to the operator's defaults (the chart's `serverPods`).
    #[serde(default, skip_serializing_if = "crate::pod_customization::is_empty")]
    pub pod: crate::pod_customization::PodCustomization,
    /// A fault agent in every broker pod, for BenchmarkRun faults with `action: crash`, `pause`
    /// and (with `network`) `partition` from clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault_injection: Option<crate::fault::FaultAgentSpec>,
}

fn default_replicas() -> i32 {
    1
}

/// MQTT broker implementation.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum MqttEngine {
    /// Eclipse Mosquitto 2 (single node).
    #[default]
    Mosquitto,
    /// rumqttd (single node).
    Rumqttd,
    /// Any MQTT broker image, configured through `custom`.
    Custom,
}

/// The broker's one user, taken from a Secret in the same namespace.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MqttAuth {
    /// Secret with keys `username` and `password`. The broker pod hashes them into mosquitto's
    /// password file when it starts, and the benchmark runners read them by reference; the
    /// operator never reads the Secret. A changed Secret takes effect when the pod restarts.
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = crate::names::DNS_SUBDOMAIN_PATTERN)
    )]
    pub secret_name: String,
}

/// The broker's TLS certificate, taken from a Secret in the same namespace.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MqttTls {
    /// Secret in cert-manager's layout (type `kubernetes.io/tls`): `tls.crt` and `tls.key`
    /// for the broker, `ca.crt` for the clients to verify it (benchmark runners mount only
    /// `ca.crt`). The certificate must name the client URL's host, `<name>.<namespace>.svc`.
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = crate::names::DNS_SUBDOMAIN_PATTERN)
    )]
    pub secret_name: String,
}

/// How to run a custom broker image.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CustomEngine {
    /// Container command; unset keeps the image's entrypoint.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8), inner(length(max = 512)))]
    pub command: Vec<String>,
    /// Container arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), inner(length(max = 512)))]
    pub args: Vec<String>,
    /// Config file content mounted at `configPath`. `${MQTT_PORT}`, `${WEBSOCKET_PORT}` and
    /// `${MAX_CONNECTIONS}` are replaced by the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 65536))]
    pub config_template: Option<String>,
    /// Absolute path the config file is mounted at.
    #[serde(default = "default_config_path")]
    #[schemars(length(min = 2, max = 256), regex(pattern = r"^/[^\x00]*[^/]$"))]
    pub config_path: String,
}

fn default_config_path() -> String {
    "/etc/mqtt/broker.conf".into()
}

/// Broker listeners.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Listeners {
    /// Plain MQTT TCP port.
    #[serde(default = "default_mqtt_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub mqtt_port: i32,
    /// MQTT over WebSocket; unset disables it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub websocket: Option<WebSocketListener>,
}

impl Default for Listeners {
    fn default() -> Self {
        Self {
            mqtt_port: default_mqtt_port(),
            websocket: None,
        }
    }
}

fn default_mqtt_port() -> i32 {
    1883
}

/// MQTT over WebSocket listener.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WebSocketListener {
    /// WebSocket port.
    #[serde(default = "default_ws_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub port: i32,
}

fn default_ws_port() -> i32 {
    8083
}

/// Broker persistence. Immutable: StatefulSet volume claim templates cannot change.
#[derive(Clone, Debug, Deserialize, Serialize, KubeSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self == oldSelf").message("persistence is immutable (StatefulSet volume claims cannot change); delete and recreate the MqttBroker"))]
#[x_kube(validation = Rule::new("self.enabled || !has(self.storageClassName)").message("persistence.storageClassName: only valid with persistence.enabled: true").field_path(".storageClassName"))]
pub struct Persistence {
    /// Keep retained messages and persistent sessions on a volume across restarts.
    #[serde(default)]
    pub enabled: bool,
    /// Volume size.
    #[serde(default = "default_persistence_size")]
    #[schemars(schema_with = "quantity_schema")]
    pub size: Quantity,
    /// StorageClass of the volume; unset uses the cluster default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub storage_class_name: Option<String>,
}

impl Default for Persistence {
    fn default() -> Self {
        Self {
            enabled: false,
            size: default_persistence_size(),
            storage_class_name: None,
        }
    }
}

fn default_persistence_size() -> Quantity {
    Quantity("1Gi".into())
}
