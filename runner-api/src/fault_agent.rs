//! The contract between the operator and the fault agent, the container that a server kind with
//! `spec.faultInjection.enabled` runs in each server pod (sharing the pod's process namespace).
//! The operator asks it to signal the server process; it answers with what it did, by its own
//! clock. Requests carry a credential signed for the server object's uid
//! (`control_auth`, scope [`SERVER_UID_ENV`]).
use serde::{Deserialize, Serialize};

/// The agent's control port.
pub const FAULT_AGENT_PORT: u16 = 9091;
/// The agent container's variable: the uid of the server object, the credentials' scope.
pub const SERVER_UID_ENV: &str = "MSGBENCH_SERVER_UID";
/// Name of the agent container in a server pod.
pub const CONTAINER: &str = "fault-agent";

pub use msgbench_crds::benchmark_run::PartitionFrom;

/// What the agent does to the server.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum AgentAction {
    /// SIGKILL: no handler runs, no shutdown.
    Crash,
    /// SIGSTOP, then SIGCONT after `durationMs`.
    Pause,
    /// Drop the server's traffic on its peer and/or client ports, then heal after `durationMs`.
    Partition,
    /// Tell the lazy file system under the server's store ([`LAZYFS_CONTROL_SOCKET`]) to
    /// freeze, discard what was not fsynced and SIGKILL the server: a power loss.
    PowerLoss,
}

/// The directory the server container (msgbench-lazyfs) and the agent share with
/// `spec.faultInjection.powerLoss`: the lazy file system's control socket lives here.
pub const LAZYFS_CONTROL_DIR: &str = "/run/msgbench-lazyfs";
/// The lazy file system's control socket (its one-line protocol: `status`, `power-loss`).
pub const LAZYFS_CONTROL_SOCKET: &str = "/run/msgbench-lazyfs/control.sock";

/// `POST /faults`. Idempotent by `key`: a request repeated after an unanswered one gets the
/// first one's report and never acts twice (after an agent restart, `repeat` keeps it so).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FaultRequest {
    /// The run's fault execution (`<run uid>/<fault>/<trial>`).
    pub key: String,
    pub action: AgentAction,
    /// Past this time (the agent's clock) a fault not yet done is refused: a late fault measures
    /// something else.
    pub not_after_unix_ms: u64,
    /// With `pause` and `partition`: how long it lasts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// With `partition`: whose traffic (the agent knows its server's ports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_from: Option<PartitionFrom>,
    /// An earlier ask with this key may have reached an agent (the operator recorded it): an
    /// agent without a report for the key then does nothing and answers [`NO_REPORT_STATUS`],
    /// since it cannot tell "never asked" from "acted, then restarted" (its reports live in
    /// its memory) and acting again could carry the fault out twice.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub repeat: bool,
}

/// The agent's status code for a repeated ask whose key it has no report of (410 Gone): it did
/// nothing, and the report, if there was one, is lost.
pub const NO_REPORT_STATUS: u16 = 410;

/// `GET /faults/state`: what the agent sees of the faults that leave a trace, so the operator
/// can confirm a fault whose report was lost. Same credential as `POST /faults`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AgentState {
    /// When this agent started (its clock): reports of asks before it are lost.
    pub started_unix_ms: u64,
    /// Its nftables table (a partition) is in place now. `None`: this agent does not cut the
    /// network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_table: Option<bool>,
    /// When this agent, starting, removed a partition table an earlier agent left in place:
    /// that partition was applied and was cut short by the restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leftover_partition_removed_unix_ms: Option<u64>,
    /// The server process is stopped now (`T` in `/proc/<pid>/stat`: a pause in progress).
    /// `None`: no single server process was found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_stopped: Option<bool>,
    /// When this agent, starting, found the server process stopped and resumed it (SIGCONT):
    /// an earlier agent had paused it and lost its resume timer with its restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leftover_pause_resumed_unix_ms: Option<u64>,
}

/// What the agent did.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FaultReport {
    pub key: String,
    pub action: AgentAction,
    /// With `crash`, `pause` and `powerLoss`: the signal sent (with `powerLoss`, by the lazy
    /// file system's wrapper, to the server it started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<SignalSent>,
    /// With `partition`: the rules applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<RulesApplied>,
    /// With `powerLoss`: what the lazy file system discarded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_loss: Option<PowerLossDone>,
    /// When it was done (the signal sent, the rules in place).
    pub at_unix_ms: u64,
    /// With `pause` and `partition`: when it is undone (SIGCONT, the rules removed). The agent
    /// undoes it on its own timer, even if nobody asks again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_unix_ms: Option<u64>,
}

/// A signal the agent sent.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SignalSent {
    /// The signal's name, e.g. `SIGKILL`.
    pub signal: String,
    /// The process signalled: its name and pid in the pod's process namespace.
    pub process: String,
    pub pid: i32,
}

/// What the lazy file system reported for a power loss.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PowerLossDone {
    /// Written but not fsynced at the freeze, thrown away.
    pub discarded_bytes: u64,
}

/// The network rules the agent applied for a partition.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RulesApplied {
    /// TCP ports whose packets are dropped, in and out, source or destination.
    pub ports: Vec<u16>,
    /// The nftables ruleset, as given to `nft -f`.
    pub rules: String,
}

/// Longest pause or partition the agent accepts (the CRD's bound on `durationSeconds`).
pub const MAX_DURATION_MS: u64 = 300_000;
