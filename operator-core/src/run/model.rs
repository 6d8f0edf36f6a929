//! What one reconcile pass read, as plain data: `decide`'s whole input besides the run itself.
//! Observe (in the operator) fills it; tests build it by hand. Nothing here reads or writes.
use crate::run::results::server_usage::UsageRead;
use crate::run::target::target_auth::{TargetSecret, TlsSource};
use crate::run::target::target_lock::RunOnTarget;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use msgbench_crds::benchmark_run::{ObservedEnvironment, ObservedPod, Phase, TrialFigures};
use runner_api::agent::{AgentProgress, RawResultLine};
use runner_api::fault_agent::{AgentState, FaultReport};
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
    /// The pods due faults not chosen yet may act on (`faults::policy::choose`).
    pub fault_targets: Vec<FaultTargetSeen>,
    /// The pods of faults recorded as being injected whose outcome is not recorded yet.
    pub fault_pods: Vec<FaultPodSeen>,
    /// Stream leaders read after their faults were over.
    pub fault_leaders: Vec<FaultLeaderSeen>,
    /// Crashed server containers whose restart is still to be recorded, as the kubelet reports them.
    pub fault_restarts: Vec<FaultRestartSeen>,
    /// The Job deleting the run's streams (`stream_sweep`), when the run holds the finalizer.
    pub stream_sweep: Option<SweepSeen>,
    /// Evidence for faults whose agent report was lost (`faults::unknown`).
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
            fault_targets: Vec::new(),
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
    /// Its phase once it has ended (Succeeded or Failed); `None` while it has not.
    pub ended: Option<Phase>,
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
    /// The server's store is under the lazy file system (`spec.faultInjection.powerLoss`).
    pub power_loss: bool,
    /// The server has peers to be cut off from (a JetStreamCluster; MQTT brokers are
    /// independent).
    pub peers: bool,
}

/// What the agent answered.
#[derive(Clone, Debug, PartialEq)]
pub enum AgentAnswer {
    Done(FaultReport),
    /// It will not (too late, no such process, pod replaced). After a first ask: the fault was
    /// not carried out. After a repeat: an earlier ask may have been, so it is unknown.
    Refused(String),
    /// A repeated ask of a key the agent has no report of (`NO_REPORT_STATUS`): it did nothing
    /// now, and the earlier ask may have been carried out by an agent that restarted since.
    NoReport(String),
    /// No answer to trust: the next pass asks again.
    Unknown(String),
}

/// The server a due fault acts on, read in the pass that chooses its pod (nothing is touched
/// before the choice is in status).
#[derive(Clone, Debug, PartialEq)]
pub struct FaultTargetSeen {
    pub fault: i32,
    pub trial: i32,
    /// The server's own running pods as (name, uid); `Err`: why there are none to choose from.
    pub pods: Result<Vec<(String, Option<String>)>, String>,
    /// JetStream: the benchmark stream's leader as most servers name it, or why none is known.
    pub leader: Option<Result<String, String>>,
}

/// A pod named by a recorded injection, as read this pass.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultPodSeen {
    pub pod: String,
    /// `None`: no pod of that name exists.
    pub uid: Option<String>,
    /// It has a deletion timestamp (a graceful delete in progress).
    pub deleting: bool,
    /// A `crash`, `pause` or `partition`: the fault agent's answer to the repeated ask (`None`:
    /// not asked, e.g. a deletion).
    pub answer: Option<AgentAnswer>,
}

/// A fault's stream leader as read once the fault was over.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultLeaderSeen {
    pub fault: i32,
    pub trial: i32,
    pub leader: String,
}

/// The server container of a crashed pod as read this pass.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultRestartSeen {
    pub fault: i32,
    pub trial: i32,
    pub status: ContainerStatus,
}

/// What was read this pass for an unknown fault.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultEvidenceSeen {
    pub fault: i32,
    pub trial: i32,
    pub evidence: Evidence,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Evidence {
    /// `crash`: the pod of the recorded name as it is now: its uid (`None`: no such pod) and its
    /// server container's status.
    Server {
        uid: Option<String>,
        status: Option<Box<ContainerStatus>>,
    },
    /// `pause`, `partition`: the agent's `GET /faults/state`, or why it could not be read.
    Agent(Result<AgentState, String>),
}

/// The sweep Job as observed.
#[derive(Clone, Debug, PartialEq)]
pub enum SweepSeen {
    Running,
    /// It ended: whether every stream was deleted, and what its containers said.
    Ended {
        deleted: bool,
        message: String,
    },
}
