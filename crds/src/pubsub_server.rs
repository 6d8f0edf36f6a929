//! PubSubServer: the HTTP-publish + Socket.IO/WebSocket delivery server (reference image by default).
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{pinning_rules, Placement, Resources, ServerStatus, Tuning};

/// A pub/sub server: `POST /publish` over HTTP, delivery over Socket.IO or plain WebSocket.
/// One replica: rooms live in the server's memory.
#[derive(CustomResource, KubeSchema, Clone, Debug, Deserialize, Serialize, PartialEq)]
#[kube(
    group = "msgbench.dev",
    version = "v1alpha1",
    kind = "PubSubServer",
    namespaced,
    shortname = "pss",
    category = "msgbench",
    status = "ServerStatus",
    derive = "PartialEq",
    doc = "A performance-tuned HTTP-publish / Socket.IO pub/sub server provisioned by msgbench.",
    printcolumn(name = "Protocol", type_ = "string", json_path = ".spec.protocol"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Replicas",
        type_ = "integer",
        json_path = ".status.readyReplicas"
    ),
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
#[x_kube(validation = Rule::new("self.protocol == 'websocket' || !has(self.wsMode)").message("wsMode: only valid with protocol websocket").field_path(".wsMode"))]
#[x_kube(validation = Rule::new("(self.protocol == 'pusher') == has(self.pusher)").message("pusher: required with protocol pusher, and only valid with it").field_path(".pusher"))]
#[x_kube(validation = pinning_rules()[0].clone())]
#[x_kube(validation = pinning_rules()[1].clone())]
#[x_kube(validation = pinning_rules()[2].clone())]
pub struct PubSubServerSpec {
    /// Server image; it must honour the PORT, EMIT_MODE, DATABASE_FILE, CACHE_TTL_SECONDS,
    /// WORKER_THREADS and WS_MODE environment variables. With protocol pusher the default is
    /// sockudo (configured by sockudo's own variables: PORT, SOCKUDO_DEFAULT_APP_*, ...).
    /// Unset: the operator's default (the chart's `images.pubsubServer`, or `images.sockudo`
    /// with protocol pusher, under `images.registry`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub image: Option<String>,
    /// Pull secrets, service account, priority class, labels and annotations of the server
    /// pod, added to the operator's defaults (the chart's `serverPods`).
    #[serde(default, skip_serializing_if = "crate::pod_customization::is_empty")]
    pub pod: crate::pod_customization::PodCustomization,
    /// Delivery protocol the benchmark speaks: `socketio` (default), plain `websocket` (`/ws`),
    /// or `pusher` (Pusher Channels, served by sockudo; emitMode, database and cacheTtlSeconds
    /// do not apply).
    #[serde(default)]
    pub protocol: PubSubProtocol,
    /// The Pusher app (protocol pusher only): a Secret in this namespace with keys `appId`,
    /// `key` and `secret`. The server and the benchmark runners read it through secretKeyRef.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pusher: Option<PusherApp>,
    /// Fan-out to a room's subscribers concurrently (`parallel`, default) or one after another.
    #[serde(default)]
    pub emit_mode: EmitMode,
    /// Message store: `memory` (`:memory:`, default) or `file` (an emptyDir file).
    #[serde(default)]
    pub database: DatabaseMode,
    /// Seconds the server caches lookups (0 disables the cache).
    #[serde(default = "default_cache_ttl")]
    #[schemars(range(min = 0, max = 3600))]
    pub cache_ttl_seconds: i32,
    /// HTTP, Socket.IO, WebSocket and metrics port (unprivileged).
    #[serde(default = "default_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub port: i32,
    /// Plain WebSocket behaviour: `echo` each frame back or `broadcast` it to every client.
    /// Only with protocol websocket; unset: echo.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ws_mode: Option<WsMode>,
    /// Server log level (RUST_LOG).
    #[serde(default)]
    pub log_level: LogLevel,
    /// CPU and memory of the server pod. The CPU limit sets WORKER_THREADS unless
    /// `tuning.threads` overrides it.
    #[serde(default)]
    pub resources: Resources,
    /// Performance tuning of the server pod.
    #[serde(default)]
    pub tuning: Tuning,
    /// Node selection of the server pod.
    #[serde(default)]
    pub placement: Placement,
}

fn default_cache_ttl() -> i32 {
    2
}
fn default_port() -> i32 {
    8080
}

/// Delivery protocol.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum PubSubProtocol {
    /// Socket.IO (Engine.IO v4 over WebSocket) at `/socket.io/`.
    #[default]
    Socketio,
    /// Plain WebSocket at `/ws`.
    Websocket,
    /// Pusher Channels (sockudo): WebSocket at `/app/{key}`, signed HTTP events API.
    Pusher,
}

/// Keys of the Pusher app Secret.
pub const PUSHER_SECRET_KEYS: [&str; 3] = ["appId", "key", "secret"];

/// A Pusher app's credentials, by Secret.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PusherApp {
    /// Secret with keys `appId`, `key` and `secret` (never copied into the spec, a ConfigMap,
    /// status or logs).
    #[schemars(length(min = 1, max = 253))]
    pub secret_name: String,
}

/// Fan-out strategy (EMIT_MODE).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum EmitMode {
    /// Emit to all subscribers concurrently.
    #[default]
    Parallel,
    /// Emit to subscribers one after another.
    Sequential,
}

/// Message store (DATABASE_FILE).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum DatabaseMode {
    /// In-memory database.
    #[default]
    Memory,
    /// Database file on an emptyDir volume.
    File,
}

/// Plain WebSocket mode (WS_MODE).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum WsMode {
    /// Send each frame back to its sender.
    #[default]
    Echo,
    /// Send each frame to every connected client.
    Broadcast,
}

/// Log verbosity.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    /// Errors only.
    Error,
    /// Warnings and errors.
    Warn,
    /// Normal operation (default).
    #[default]
    Info,
    /// Verbose.
    Debug,
}
