//! JetStreamCluster: a tuned NATS server cluster with JetStream enabled.
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{
    pinning_rules, quantity_schema, Placement, Quantity, Resources, ServerStatus, Tuning,
};

/// A NATS JetStream cluster of 1–5 servers, routed through a headless Service, with monitoring on
/// 8222 and the requested tuning.
#[derive(CustomResource, KubeSchema, Clone, Debug, Deserialize, Serialize, PartialEq)]
#[kube(
    group = "msgbench.dev",
    version = "v1alpha1",
    kind = "JetStreamCluster",
    namespaced,
    shortname = "jsc",
    category = "msgbench",
    status = "ServerStatus",
    derive = "PartialEq",
    doc = "A performance-tuned NATS JetStream cluster provisioned by msgbench.",
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
#[x_kube(validation = pinning_rules()[0].clone())]
#[x_kube(validation = pinning_rules()[1].clone())]
#[x_kube(validation = pinning_rules()[2].clone())]
#[x_kube(validation = Rule::new("!has(self.faultInjection) || !self.faultInjection.powerLoss || !has(self.jetstream) || !has(self.jetstream.storage) || self.jetstream.storage.type == 'file'").message("faultInjection.powerLoss: needs jetstream.storage.type file (memory storage has nothing to lose to a power cut)").field_path(".faultInjection.powerLoss"))]
pub struct JetStreamClusterSpec {
    /// Number of nats-server pods (1–5). Streams with replicas R need at least R servers.
    #[serde(default = "default_replicas")]
    #[schemars(range(min = 1, max = 5))]
    pub replicas: i32,
    /// nats-server image; the operator runs it with `--config /etc/nats/nats.conf`. Unset: the
    /// operator's default (the chart's `images.nats`, under `images.registry`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub image: Option<String>,
    /// Pull secrets, service account, priority class, labels and annotations of the server
    /// pods, added to the operator's defaults (the chart's `serverPods`).
    #[serde(default, skip_serializing_if = "crate::pod_customization::is_empty")]
    pub pod: crate::pod_customization::PodCustomization,
    /// CPU and memory per server pod.
    #[serde(default)]
    pub resources: Resources,
    /// JetStream storage and limits.
    #[serde(default)]
    pub jetstream: JetStreamConfig,
    /// Performance tuning of the server pods.
    #[serde(default)]
    pub tuning: Tuning,
    /// Node selection and spreading of the server pods.
    #[serde(default)]
    pub placement: Placement,
    /// Client authentication from a Secret; unset means no auth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<NatsAuth>,
    /// TLS for clients (the client port only; routes and monitoring stay plain): the servers'
    /// certificate from a Secret; clients must use TLS. Unset: plain NATS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<NatsTls>,
    /// A fault agent in every server pod, for BenchmarkRun faults with `action: crash`, `pause`,
    /// (with `network`) `partition` and (with `powerLoss`) `powerLoss`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault_injection: Option<crate::fault::FaultAgentSpec>,
}

/// The servers' TLS certificate, taken from a Secret in the same namespace.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NatsTls {
    /// Secret in cert-manager's layout (type `kubernetes.io/tls`): `tls.crt` and `tls.key`
    /// for the servers, `ca.crt` for the clients to verify them (benchmark runners mount only
    /// `ca.crt`). The certificate must name the client URL's host, `<name>.<namespace>.svc`.
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = crate::names::DNS_SUBDOMAIN_PATTERN)
    )]
    pub secret_name: String,
}

fn default_replicas() -> i32 {
    1
}

/// JetStream store configuration.
#[derive(Clone, Debug, Default, Deserialize, Serialize, KubeSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self.storage.type == 'file' || !has(self.storage.storageClassName)").message("jetstream.storage.storageClassName: only valid with storage.type file").field_path(".storage.storageClassName"))]
pub struct JetStreamConfig {
    /// Where the server keeps stream data.
    #[serde(default)]
    pub storage: JetStreamStorage,
    /// JetStream `max_memory_store`: memory for memory-backed streams. Unset: the server's
    /// default (75% of the container memory it sees).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "quantity_schema")]
    pub max_memory_store: Option<Quantity>,
    /// JetStream `max_file_store`. Unset: the volume size for file storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "quantity_schema")]
    pub max_file_store: Option<Quantity>,
    /// JetStream `sync_interval`: how often file-backed stream data is flushed to disk
    /// (fsync). `always`: after every write, so an acknowledged message survives even a power
    /// cut of every server at once; a duration (`500ms`, `10s`, `2m`, `1h`): at most that late.
    /// Unset: the server's default, 2 minutes. What it buys a process crash (`crash` fault)
    /// cannot show: written but unsynced data is in the kernel's page cache, which outlives the
    /// process; an OS crash or a power cut loses it, which the `powerLoss` fault shows
    /// (`faultInjection.powerLoss`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 8),
        regex(pattern = r"^(always|[1-9][0-9]{0,5}(ms|s|m|h))$")
    )]
    pub sync_interval: Option<String>,
}

/// The JetStream store volume. Immutable: StatefulSet volume claim templates cannot change.
#[derive(Clone, Debug, Deserialize, Serialize, KubeSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self == oldSelf").message("jetstream.storage is immutable (StatefulSet volume claims cannot change); delete and recreate the JetStreamCluster"))]
pub struct JetStreamStorage {
    /// `file` (a PersistentVolumeClaim per server, the default) or `memory` (no volume; the
    /// store lives in RAM).
    #[serde(default, rename = "type")]
    pub type_: StorageType,
    /// Volume size per server for file storage.
    #[serde(default = "default_storage_size")]
    #[schemars(schema_with = "quantity_schema")]
    pub size: Quantity,
    /// StorageClass of the volume; unset uses the cluster default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub storage_class_name: Option<String>,
}

impl Default for JetStreamStorage {
    fn default() -> Self {
        Self {
            type_: StorageType::default(),
            size: default_storage_size(),
            storage_class_name: None,
        }
    }
}

fn default_storage_size() -> Quantity {
    Quantity("1Gi".into())
}

/// JetStream store type.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum StorageType {
    /// Data on a PersistentVolumeClaim.
    #[default]
    File,
    /// Data in RAM only.
    Memory,
}

/// Client authentication taken from a Secret in the same namespace.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NatsAuth {
    /// Secret name. For `token` it holds key `token`; for `userPassword` keys `username` and
    /// `password`; for `nkey` keys `nkey` (the user's public key, `U…`, for the servers) and
    /// `seed` (its seed, `SU…`, for clients: the benchmark runners).
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = crate::names::DNS_SUBDOMAIN_PATTERN)
    )]
    pub secret_name: String,
    /// How clients authenticate.
    #[serde(default)]
    pub mode: NatsAuthMode,
}

/// NATS client authentication mode.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum NatsAuthMode {
    /// A shared token.
    #[default]
    Token,
    /// One user name and password.
    UserPassword,
    /// One NKey user: clients sign the server's nonce with the seed (no secret on the wire).
    Nkey,
}
