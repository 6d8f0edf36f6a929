//! What the operator asks a server pod's fault agent for a recorded fault, and what it can
//! answer. The same record always gives the same request (same key), so asking again after a
//! lost answer never signals twice.
use super::faults;
use kube::ResourceExt;
use msgbench_crds::benchmark_run::{BenchmarkRun, FaultAction, FaultRecord};
use runner_api::fault_agent::{AgentAction, FaultReport, FaultRequest};

/// What the agent answered.
#[derive(Clone, Debug, PartialEq)]
pub enum AgentAnswer {
    Done(FaultReport),
    /// It will not (too late, no such process, pod replaced): the fault was not carried out.
    Refused(String),
    /// No answer to trust: the next pass asks again.
    Unknown(String),
}

/// The agent's request for `rec` (the same on every pass).
pub fn request(br: &BenchmarkRun, rec: &FaultRecord) -> FaultRequest {
    let fault = br.spec.faults.get(rec.fault as usize);
    let duration_ms = (fault.and_then(|f| f.duration_seconds)).map(|s| s.max(0) as u64 * 1000);
    let action = match rec.action {
        Some(FaultAction::Pause) => AgentAction::Pause,
        Some(FaultAction::Partition) => AgentAction::Partition,
        _ => AgentAction::Crash,
    };
    FaultRequest {
        key: faults::agent_key(&br.uid().unwrap_or_default(), rec),
        action,
        not_after_unix_ms: faults::not_after_ms(rec),
        duration_ms: duration_ms.filter(|_| action != AgentAction::Crash),
        partition_from: (action == AgentAction::Partition)
            .then(|| fault.and_then(|f| f.partition_from).unwrap_or_default()),
    }
}
