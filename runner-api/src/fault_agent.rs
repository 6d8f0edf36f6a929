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

/// What the agent does to the server process.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum AgentAction {
    /// SIGKILL: no handler runs, no shutdown.
    Crash,
    /// SIGSTOP, then SIGCONT after `pauseMs`.
    Pause,
}

/// `POST /faults`. Idempotent by `key`: a request repeated after an unanswered one gets the
/// first one's report and never signals twice.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FaultRequest {
    /// The run's fault execution (`<run uid>/<fault>/<trial>`).
    pub key: String,
    pub action: AgentAction,
    /// Past this time (the agent's clock) a fault not yet done is refused: a late fault measures
    /// something else.
    pub not_after_unix_ms: u64,
    /// With `pause`: how long the process stays stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_ms: Option<u64>,
}

/// What the agent did.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FaultReport {
    pub key: String,
    pub action: AgentAction,
    /// The signal's name, e.g. `SIGKILL`.
    pub signal: String,
    /// The process signalled: its name and pid in the pod's process namespace.
    pub process: String,
    pub pid: i32,
    /// When the signal was sent.
    pub sent_unix_ms: u64,
    /// With `pause`: when SIGCONT is sent (the agent sends it even if nobody asks again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_unix_ms: Option<u64>,
}

/// Longest pause the agent accepts (the CRD's bound on `durationSeconds`).
pub const MAX_PAUSE_MS: u64 = 300_000;
