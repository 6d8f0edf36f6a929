//! What one reconcile pass read, as plain data: `decide`'s whole input besides the run itself.
//! Observe (in the operator) fills it; tests build it by hand. Nothing here reads or writes.
use super::fault_restart::FaultRestartSeen;
use super::fault_unknown::FaultEvidenceSeen;
use super::faults::{FaultLeaderSeen, FaultPodSeen};
use super::server_usage::UsageRead;
use super::target_auth::{TargetSecret, TlsSource};
use super::target_lock::RunOnTarget;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use msgbench_crds::benchmark_run::{ObservedEnvironment, ObservedPod, Outcome, TrialFigures};
use runner_api::agent::{AgentProgress, RawResultLine};
use std::collections::BTreeMap;

/// Everything one reconcile read. Plain data: tests build it by hand.
#[derive(Clone, Debug)]
pub struct Observed {
    /// The one clock reading of this pass.
    pub now: Time,
    /// `spec.target` first, then every variant's own target (only while preparing).
    pub targets: Vec<TargetSeen>,
    /// `spec.baselineRef`'s run, when the phase needs it.
    pub baseline: Option<BaselineSeen>,
    /// The namespace's other runs that use one of this run's targets (while preparing).
    pub on_target: Vec<RunOnTarget>,
    pub job: Option<Job>,
    pub runner_pods: Vec<Pod>,
    /// What each running agent said on `/progress` (agents that did not answer are absent).
    pub agents: Vec<AgentSeen>,
    /// Every runner's records, once every runner is done.
    pub results: Option<Gathered>,
    /// The records of the rounds so far, read while every runner waits at a round boundary
    /// where a `spec.stopWhen` check is due (`stop_when::check_due`).
    pub interim: Option<Gathered>,
    /// A sample of the target's server pods, when one was due.
    pub server_usage: Option<UsageRead>,
    /// The run's servers, for the environment report (read with the results).
    pub server_pods: Vec<ObservedPod>,
    /// This operator may delete server pods for `spec.faults` (its `--allow-faults`).
    pub faults_allowed: bool,
    /// What this operator puts into runner pods a spec leaves open (image, pod additions).
    pub operands: std::sync::Arc<crate::operands::OperandDefaults>,
    /// The pods of faults recorded as being injected whose outcome is not recorded yet.
    pub fault_pods: Vec<FaultPodSeen>,
    /// Stream leaders read after their faults were over.
    pub fault_leaders: Vec<FaultLeaderSeen>,
    /// Crashed server containers whose restart is still to be recorded, as the kubelet reports them.
    pub fault_restarts: Vec<FaultRestartSeen>,
    /// The Job deleting the run's streams (`stream_sweep`), when the run holds the finalizer.
    pub stream_sweep: Option<crate::run::stream_sweep::SweepSeen>,
    /// Evidence for faults whose agent report was lost (`fault_unknown`).
    pub fault_evidence: Vec<FaultEvidenceSeen>,
}

impl Observed {
    /// Nothing read yet, at `now`.
    pub fn at(now: Time) -> Self {
        Observed {
            now,
            targets: Vec::new(),
            baseline: None,
            on_target: Vec::new(),
            job: None,
            runner_pods: Vec::new(),
            agents: Vec::new(),
            results: None,
            interim: None,
            server_usage: None,
            server_pods: Vec::new(),
            faults_allowed: false,
            operands: Default::default(),
            fault_pods: Vec::new(),
            fault_leaders: Vec::new(),
            fault_restarts: Vec::new(),
            stream_sweep: None,
            fault_evidence: Vec::new(),
        }
    }
}

/// A target as resolved this pass.
#[derive(Clone, Debug, PartialEq)]
pub struct TargetSeen {
    /// `None`: `spec.target`; else the variant whose own target this is.
    pub variant: Option<String>,
    /// `Err`: the referenced server does not exist (the message says which).
    pub resolved: std::result::Result<Resolved, String>,
    /// The target is Ready but its Service lists no ready endpoint yet: why.
    pub unreachable: Option<String>,
}

/// The baseline run as seen now.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BaselineSeen {
    pub name: String,
    /// `None`: there is no run of that name.
    pub state: Option<BaselineState>,
    /// Following baselineRef from the baseline: the names of runs still without a verdict,
    /// the baseline first (a cycle through this run means nobody would ever start).
    pub waiting_chain: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct BaselineState {
    pub outcome: Option<Outcome>,
    pub trials: Vec<TrialFigures>,
    pub observed_generation: Option<i64>,
}

/// One running agent's answer.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentSeen {
    pub pod: String,
    pub ip: String,
    pub progress: AgentProgress,
}

/// What reading every runner's records gave.
#[derive(Clone, Debug, PartialEq)]
pub enum Gathered {
    /// Every record of every runner, intact.
    Complete(Vec<RawResultLine>),
    /// A holding runner did not answer (it may just have exited): try again shortly.
    NotYet(String),
    /// Some record cannot be had: the message names runner, pod and trial.
    Lost(String),
    /// A runner offered more than the run may bring into the operator's memory.
    TooLarge(String),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Resolved {
    pub url: String,
    /// `<Kind>/<name>` or the endpoint URL.
    pub display: String,
    /// Why the target is not Ready yet.
    pub not_ready: Option<String>,
    pub server_labels: Option<BTreeMap<String, String>>,
    pub environment: Option<ObservedEnvironment>,
    /// The Secret clients authenticate with (a JetStreamCluster's or an MqttBroker's
    /// `spec.auth`, a pusher PubSubServer's app).
    pub auth: Option<TargetSecret>,
    /// How a TLS target is verified (a JetStreamCluster's `spec.tls`, an endpoint's `tls`).
    pub tls: Option<TlsSource>,
    /// Why the server, as specified, cannot serve this run's protocol (e.g. a pusher server
    /// for protocol websocket): not something waiting fixes, so the run fails at once with
    /// reason TargetUnfit.
    pub unfit: Option<String>,
    /// The server's pods carry a fault agent (`spec.faultInjection.enabled`, allowed by the
    /// operator's install): `crash`, `pause` (and with `network`, `partition`) faults can be
    /// carried out.
    pub fault_agent: Option<FaultAgentSeen>,
    /// Why the server has no agent although its spec asks for one: the operator's install does
    /// not allow it (the server's Degraded message, `fault_policy`).
    pub fault_agent_refused: Option<String>,
}

/// The target's fault agent, as its spec asks and the operator's install allows.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FaultAgentSeen {
    /// It may partition the server (`spec.faultInjection.network`).
    pub network: bool,
    /// The server has peers to be cut off from (a JetStreamCluster; MQTT brokers are
    /// independent).
    pub peers: bool,
}
