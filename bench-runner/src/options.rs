//! How a run is started: its options, the start gate runners wait at, and who sets up state
//! shared by the runners of one run. Apart from the engine so drivers and the connection
//! workload depend on these, not on the engine that depends on them.
use crate::connect;
use crate::recorder::Shared;
use futures::future::BoxFuture;
use std::sync::Arc;
use std::time::Duration;

/// Where runners wait until all are ready (the in-cluster barrier plugs in here).
pub trait StartGate: Send + Sync {
    /// Called once every connection is up; returns when the run may start.
    fn wait(&self) -> BoxFuture<'_, anyhow::Result<()>>;
    /// Called just before `wait` with the live per-task counters (for progress reports).
    fn observe(&self, _stats: &[Shared]) {}
}

#[derive(Clone)]
pub struct RunOptions {
    pub runner_id: u16,
    /// Runners of the run (ids 1 to `runners`): deliveries naming another runner are errors and
    /// get no sequence tracker. Default: any id a payload carries (standalone ids are random).
    pub runners: u16,
    /// Written into every payload header; deliveries carrying another tag are another run's
    /// (or another client's) and counted apart as foreign. Standalone runs use 0.
    pub run_tag: u16,
    pub progress: bool,
    pub gate: Option<Arc<dyn StartGate>>,
    pub setup: SharedSetup,
    /// How long connections made before the gate retry a target that is not reachable yet
    /// (see [`crate::connect`]); default 30 s.
    pub connect_timeout: Duration,
    /// Credentials for the target (see [`runner_api::target::Credentials`]), from the
    /// environment.
    pub credentials: Option<runner_api::target::Credentials>,
    /// The CA a TLS target is verified with, the client certificate presented to it and the
    /// name its certificate must carry.
    pub tls: crate::tls::TlsFiles,
    /// Where a WebSocket or Socket.IO target takes the token (default `Authorization: Bearer`).
    pub token_placement: Option<runner_api::target::TokenPlacement>,
    /// The agent's live `/metrics` series for this trial (`None`: standalone, nothing served).
    pub live: Option<crate::live_metrics::TrialSeries>,
    /// Which client code sends core NATS and MQTT 3.1.1 QoS 0/1 (see [`ClientPath`]).
    pub client: ClientPath,
}

/// The client code behind core NATS publish/subscribe and MQTT 3.1.1 QoS 0/1 publishers: the
/// batched hand-written wire path, or the libraries (async-nats, rumqttc) the other paths use.
/// A runner option, not a workload field: it changes how the load is generated, not what is
/// measured, and exists so `make bench` can compare the two on the same workload.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ClientPath {
    #[default]
    Wire,
    Library,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            runner_id: 0,
            runners: crate::payload::MAX_RUNNER,
            run_tag: 0,
            progress: false,
            gate: None,
            setup: SharedSetup::default(),
            connect_timeout: connect::DEFAULT_CONNECT_TIMEOUT,
            credentials: None,
            tls: Default::default(),
            token_placement: None,
            live: None,
            client: ClientPath::default(),
        }
    }
}

/// Who sets up server-side state shared by the runners of one run (a JetStream stream):
/// one runner recreates it, so the others never delete it under each other.
#[derive(Clone, Debug, Default)]
pub enum SharedSetup {
    /// The only runner: sets up and cleans up.
    #[default]
    Alone,
    /// Runner 1 of a run: sets up (tagged with `token`, unique per trial) and cleans up.
    Leader { token: String },
    /// Any other runner: waits up to `wait` for the leader's setup tagged `token`; never changes it.
    Follower { token: String, wait: Duration },
}
