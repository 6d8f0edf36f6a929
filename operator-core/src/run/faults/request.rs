//! What the operator asks a server pod's fault agent for a recorded fault, and what it can
//! answer. The same record always gives the same request (same key), so asking again after a
//! lost answer never signals twice; an agent that lost its reports (restarted) refuses a
//! repeated ask instead of acting again, and the fault is then unknown, never "not done".
use super::policy;
use crate::run::decide::EffectOutcome;
use crate::run::model::AgentAnswer;
use kube::ResourceExt;
use msgbench_crds::benchmark_run::{BenchmarkRun, FaultAction, FaultInjection, FaultRecord};
use runner_api::fault_agent::{AgentAction, FaultRequest};

/// What an answer settles, pure. `repeat`: the choice was in status before this pass, so an
/// earlier ask may have reached the agent (it follows that status write at once); then nothing
/// but a report is "not done" any more: the fault is unknown. `None`: nothing settled yet.
pub fn outcome(
    index: usize,
    injection: &FaultInjection,
    answer: AgentAnswer,
    repeat: bool,
) -> Option<EffectOutcome> {
    let injection = injection.clone();
    match answer {
        AgentAnswer::Done(report) => Some(EffectOutcome::FaultSignalled {
            index,
            injection,
            report,
        }),
        AgentAnswer::Refused(why) if !repeat => Some(EffectOutcome::FaultNotDone { index, why }),
        AgentAnswer::Refused(answer) | AgentAnswer::NoReport(answer) => {
            Some(EffectOutcome::FaultUnknown {
                index,
                injection,
                answer,
            })
        }
        AgentAnswer::Unknown(_) => None,
    }
}

/// The agent's request for `rec` (the same on every pass but for `repeat`: an earlier ask may
/// have reached an agent, so one without a report must not act).
pub fn request(br: &BenchmarkRun, rec: &FaultRecord, repeat: bool) -> FaultRequest {
    let fault = br.spec.faults.get(rec.fault as usize);
    let duration_ms = (fault.and_then(|f| f.duration_seconds)).map(|s| s.max(0) as u64 * 1000);
    let action = match rec.action {
        Some(FaultAction::Pause) => AgentAction::Pause,
        Some(FaultAction::Partition) => AgentAction::Partition,
        Some(FaultAction::PowerLoss) => AgentAction::PowerLoss,
        _ => AgentAction::Crash,
    };
    FaultRequest {
        key: policy::agent_key(&br.uid().unwrap_or_default(), rec),
        action,
        not_after_unix_ms: policy::not_after_ms(rec),
        duration_ms: duration_ms
            .filter(|_| matches!(action, AgentAction::Pause | AgentAction::Partition)),
        partition_from: (action == AgentAction::Partition)
            .then(|| fault.and_then(|f| f.partition_from).unwrap_or_default()),
        repeat,
    }
}
