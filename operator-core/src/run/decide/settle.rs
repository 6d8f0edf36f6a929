//! Settle: folds what act reported (`EffectOutcome`s) into the status to write, pure, so act
//! reports and never decides.
use super::barrier::check_echoes;
use super::decision::EffectOutcome;
use super::ending::fail;
use crate::run::faults::{policy, unknown};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use msgbench_crds::benchmark_run::{
    BenchmarkRun, BenchmarkRunStatus, FaultRecord, RunFailureReason,
};

/// Pure: the status after what act reported. Runners that keep a start other than the one
/// just sent were released apart earlier: the run ends (unanswered sends are resent). A
/// fault's record takes what was done, or why nothing was.
pub fn settle(
    br: &BenchmarkRun,
    st: &mut BenchmarkRunStatus,
    outcomes: &[EffectOutcome],
    generation: i64,
    now: &Time,
) {
    for o in outcomes {
        if let EffectOutcome::Released {
            trial,
            at_unix_ms,
            echoes,
        } = o
        {
            if let Some(msg) = check_echoes(*trial, *at_unix_ms, echoes) {
                fail(
                    st,
                    RunFailureReason::RunnersStartedApart,
                    &msg,
                    generation,
                    now,
                );
            }
        } else {
            settle_fault(br, &mut st.faults, o);
        }
    }
}

fn settle_fault(br: &BenchmarkRun, faults: &mut [FaultRecord], o: &EffectOutcome) {
    use EffectOutcome::*;
    let Some(rec) = o.fault().and_then(|i| faults.get_mut(i)) else {
        return;
    };
    match o {
        FaultNotDone { why, .. } => {
            rec.message = Some(format!("not done: {why}"));
            rec.injecting = None;
        }
        FaultSignalled {
            injection, report, ..
        } => policy::mark_signalled(br, rec, injection, report),
        FaultDeleted { injection, at, .. } => policy::mark_executed(br, rec, injection, at),
        FaultUnknown {
            injection, answer, ..
        } => unknown::mark_unknown(rec, injection, answer),
        Released { .. } => {}
    }
}
