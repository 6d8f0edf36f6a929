//! A server addressed by URL: one msgbench did not deploy, with the credentials and TLS a team's
//! own servers ask for. Secrets are named, never inlined: the runner pods read them by
//! reference, the operator never reads them.
use kube::core::Rule;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::workload::Protocol;

/// A server addressed by URL.
#[derive(Clone, Debug, KubeSchema, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
// Exactly the schemes the runner speaks (bench-runner drivers::for_workload); MQTT over
// WebSocket would be admitted and then fail in the runner pods, so it is refused here.
#[x_kube(validation = Rule::new(
    "(self.protocol in ['nats', 'jetstream'] && (self.url.startsWith('nats://') || self.url.startsWith('tls://'))) || \
     (self.protocol == 'mqtt' && (self.url.startsWith('mqtt://') || self.url.startsWith('tcp://') || self.url.startsWith('mqtts://'))) || \
     (self.protocol == 'socketio' && (self.url.startsWith('http://') || self.url.startsWith('https://'))) || \
     (self.protocol == 'websocket' && (self.url.startsWith('ws://') || self.url.startsWith('http://') || self.url.startsWith('wss://') || self.url.startsWith('https://'))) || \
     (self.protocol == 'pusher' && self.url.startsWith('ws://'))"
).message("endpoint.url: scheme must fit endpoint.protocol (nats|jetstream: nats:// or tls://, mqtt: mqtt://, tcp:// or mqtts://, socketio: http:// or https://, websocket: ws://, wss://, http:// or https://); MQTT over WebSocket is not supported").field_path(".url"))]
// A Pusher app's credentials are required and only a PubSubServer supplies them: a run against
// an endpoint would always fail in the runner pods.
#[x_kube(validation = Rule::new("self.protocol != 'pusher'").message("endpoint.protocol: pusher needs the app's credentials, which only a PubSubServer serverRef supplies (spec.pusher.secretName): target the PubSubServer instead").field_path(".protocol"))]
// TLS settings on a plaintext URL would be ignored: refuse them (NATS upgrades nats:// in the
// protocol, so only it keeps its plain scheme).
#[x_kube(validation = Rule::new(
    "!has(self.tls) || self.url.startsWith('nats://') || self.url.startsWith('tls://') || \
     self.url.startsWith('mqtts://') || self.url.startsWith('wss://') || self.url.startsWith('https://')"
).message("endpoint.tls: the URL is plaintext; use mqtts://, wss:// or https:// (NATS: nats:// or tls://)").field_path(".tls"))]
// The operator reads nats-server /varz and nothing else: monitoring fits NATS targets only.
#[x_kube(validation = Rule::new("!has(self.monitoring) || self.protocol in ['nats', 'jetstream']").message("endpoint.monitoring: only for protocol nats or jetstream (the operator reads nats-server /varz)").field_path(".monitoring"))]
#[x_kube(validation = Rule::new(
    "!has(self.auth) || !(self.auth.mode in ['nkey', 'creds']) || self.protocol in ['nats', 'jetstream']"
).message("endpoint.auth.mode: nkey and creds are NATS credentials (protocol nats or jetstream)").field_path(".auth.mode"))]
#[x_kube(validation = Rule::new(
    "!has(self.auth) || self.auth.mode != 'userPassword' || self.protocol in ['nats', 'jetstream', 'mqtt']"
).message("endpoint.auth.mode: userPassword fits protocols nats, jetstream and mqtt (WebSocket and Socket.IO take a token)").field_path(".auth.mode"))]
#[x_kube(validation = Rule::new(
    "!has(self.auth) || self.auth.mode != 'token' || self.protocol in ['nats', 'jetstream', 'websocket', 'socketio']"
).message("endpoint.auth.mode: token fits protocols nats, jetstream, websocket and socketio (MQTT takes userPassword)").field_path(".auth.mode"))]
#[x_kube(validation = Rule::new(
    "!has(self.auth) || (!has(self.auth.header) && !has(self.auth.query)) || (self.auth.mode == 'token' && self.protocol in ['websocket', 'socketio'])"
).message("endpoint.auth: header and query place a token on a WebSocket or Socket.IO connection (mode token, protocol websocket or socketio)").field_path(".auth"))]
pub struct Endpoint {
    /// Protocol the server speaks; must equal `workload.protocol`.
    pub protocol: Protocol,
    /// Server URL, e.g. `nats://nats.default.svc:4222`, `tls://nats.nats:4222`,
    /// `mqtts://broker.mqtt:8883` or `wss://pubsub.web:443`.
    #[schemars(length(min = 8, max = 512), regex(pattern = r"^[a-z]+://[^\s]+$"))]
    pub url: String,
    /// Credentials the runners connect with, from a Secret in the run's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<EndpointAuth>,
    /// How the runners verify the server (and prove themselves to it). Required for a server
    /// whose certificate a private CA signed; unset on a TLS URL: the public web PKI roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<EndpointTls>,
    /// NATS and JetStream: each server's monitoring port, for its version, CPU and memory in
    /// `serverUsage` as for a JetStreamCluster. Unset: `serverUsage` says unavailable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitoring: Option<EndpointMonitoring>,
}

/// Host names an endpoint's monitoring URL may have: a Service or a pod behind a headless
/// Service (`<name>.<namespace>.svc`, optionally `.cluster.local`), with an optional port and
/// no path. RE2 syntax (CEL `matches`); the operator repeats the check before every read
/// (operator-core `server_usage::endpoint::monitoring_addr`).
pub const MONITORING_URL_PATTERN: &str = r"^http://[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+\.svc(\.cluster\.local)?(:[1-9][0-9]{0,4})?$";

/// The monitoring ports of an endpoint's NATS servers.
///
/// Only `http://` base URLs of in-cluster names, and the operator appends `/varz` itself: a
/// run's author (who may not reach other namespaces) cannot make the operator fetch an
/// arbitrary URL, only `GET /varz` of a cluster Service or pod, and of the answer only the
/// figures parsed from it reach status (never the body). `https://` is refused: the operator
/// reads no Secret, so it could not trust a private CA (NATS monitoring is plain HTTP on 8222).
#[derive(Clone, Debug, KubeSchema, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self.urls.all(u, !u.startsWith('https://'))").message("endpoint.monitoring.urls: https:// is not supported: the operator reads NATS monitoring over plain http:// (port 8222) and never reads a Secret for a CA").field_path(".urls"))]
#[x_kube(validation = monitoring_url_rule())]
pub struct EndpointMonitoring {
    /// One base URL per server of the cluster, e.g.
    /// `http://nats-0.nats-headless.team.svc:8222` (pod `nats-0` of the official NATS Helm
    /// chart's release `nats` in namespace `team`): `http://`, a `.svc` or `.svc.cluster.local`
    /// name, an optional port, no path. The operator reads `<url>/varz`.
    #[schemars(length(min = 1, max = 16), inner(length(min = 12, max = 128)))]
    #[x_kube(merge_strategy = kube::core::ListMerge::Set)]
    pub urls: Vec<String>,
}

fn monitoring_url_rule() -> Rule {
    Rule::new(format!(
        "self.urls.all(u, u.startsWith('https://') || u.matches('{}'))",
        MONITORING_URL_PATTERN.replace('\\', "\\\\")
    ))
    .message(
        "endpoint.monitoring.urls: each must be http://<pod or Service>.<namespace>.svc \
         (or .svc.cluster.local) with an optional :port and no path, e.g. \
         http://nats-0.nats-headless.team.svc:8222: the operator reads only <url>/varz of \
         in-cluster names",
    )
    .field_path(".urls")
}

/// Client credentials of an endpoint target.
#[derive(Clone, Debug, KubeSchema, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.header) || !has(self.query)").message("endpoint.auth: header or query, not both").field_path(".query"))]
pub struct EndpointAuth {
    /// Secret in the run's namespace. Its keys by mode: `token`: `token`; `userPassword`:
    /// `username` and `password`; `nkey`: `seed` (the user's seed, `SU…`); `creds`: `creds`
    /// (a NATS credentials file: the user's JWT and seed, as `nats auth user credential` or
    /// `nsc generate creds` write it).
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = crate::names::DNS_SUBDOMAIN_PATTERN)
    )]
    pub secret_name: String,
    /// How the runners authenticate.
    pub mode: EndpointAuthMode,
    /// WebSocket and Socket.IO: the HTTP header that carries the token, verbatim (a token
    /// `Bearer abc` and header `Authorization` send `Authorization: Bearer abc`). Neither this
    /// nor `query`: `Authorization: Bearer <token>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 128),
        regex(pattern = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
    )]
    pub header: Option<String>,
    /// WebSocket and Socket.IO: the query parameter that carries the token instead of a header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128), regex(pattern = r"^[A-Za-z0-9._~-]+$"))]
    pub query: Option<String>,
}

/// How an endpoint's clients authenticate; which fits which protocol is checked at admission.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum EndpointAuthMode {
    /// A shared token: NATS `auth_token`; on WebSocket and Socket.IO a header or query value.
    Token,
    /// A user name and password: NATS and MQTT (CONNECT).
    UserPassword,
    /// An NKey user: the runner signs the server's nonce with the seed (NATS).
    Nkey,
    /// A decentralised (operator-mode) NATS user: its JWT and seed from a credentials file.
    Creds,
}

/// TLS of an endpoint target.
#[derive(Clone, Debug, Default, KubeSchema, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EndpointTls {
    /// The CA certificate (PEM) that signed the server's certificate. Unset: the public web
    /// PKI roots the runner carries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<CaSource>,
    /// A client certificate for servers that verify their clients (mutual TLS): a Secret in
    /// the run's namespace with `tls.crt` and `tls.key` (type `kubernetes.io/tls`, as
    /// cert-manager writes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = crate::names::DNS_SUBDOMAIN_PATTERN)
    )]
    pub client_secret_name: Option<String>,
    /// The name the server's certificate must carry, when it is not the URL's host (a Service
    /// reached by another name, an IP address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^[A-Za-z0-9.:-]+$"))]
    pub server_name: Option<String>,
}

/// Where a CA certificate is: one key of a Secret or of a ConfigMap in the run's namespace.
#[derive(Clone, Debug, KubeSchema, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.secretName) != has(self.configMapName)").message("endpoint.tls.ca: exactly one of secretName and configMapName").field_path(".secretName"))]
pub struct CaSource {
    /// A Secret holding the CA (e.g. cert-manager's, whose `ca.crt` it is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = crate::names::DNS_SUBDOMAIN_PATTERN)
    )]
    pub secret_name: Option<String>,
    /// A ConfigMap holding the CA (e.g. trust-manager's bundle, or `kube-root-ca.crt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = crate::names::DNS_SUBDOMAIN_PATTERN)
    )]
    pub config_map_name: Option<String>,
    /// The key that holds the PEM certificate(s).
    #[serde(default = "default_ca_key")]
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^[-._a-zA-Z0-9]+$"))]
    pub key: String,
}

fn default_ca_key() -> String {
    "ca.crt".into()
}
