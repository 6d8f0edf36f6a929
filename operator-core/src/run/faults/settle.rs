//! Settles recorded choices from the pods as read this pass: the outcome of a deletion or an
//! ask whose own report never reached status (a status write lost, a leader change).
use super::policy::{mark_executed, unsettled_injection, LATE_LIMIT_MS};
use super::unknown;
use crate::run::model::FaultPodSeen;
use crate::run::timing::millis;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use msgbench_crds::benchmark_run::{BenchmarkRun, FaultAction, FaultRecord};

/// Settles records whose injection was written to status but whose outcome was not (a status
/// write lost after the delete, or a leader change in between), from the named pod as `seen`:
/// gone, replaced (another uid) or terminating: carried out at the recorded time; still there
/// and late: not done; still there in time: left for `act` to delete that same pod. A fault
/// by agent was asked right after its choice was written, so it may have been carried out: its
/// agent's report settles it, else it becomes unknown (`fault_unknown::settle_asked`).
pub fn settle_injections(
    br: &BenchmarkRun,
    faults: &mut [FaultRecord],
    seen: &[FaultPodSeen],
    now: &Time,
) {
    for rec in faults.iter_mut() {
        let Some(inj) = unsettled_injection(rec).cloned() else {
            continue;
        };
        let Some(pod) = seen.iter().find(|p| p.pod == inj.pod) else {
            continue; // not looked at this pass
        };
        if rec.action.is_some_and(FaultAction::needs_agent) {
            unknown::settle_asked(br, rec, &inj, pod, now);
            continue;
        }
        if pod.uid.as_deref() != Some(inj.pod_uid.as_str()) || pod.deleting {
            mark_executed(br, rec, &inj, &inj.started_time);
            continue;
        }
        let planned = rec.planned_time.as_ref().map_or(0, millis);
        let late = millis(now).saturating_sub(planned);
        if late > LATE_LIMIT_MS {
            rec.message = Some(format!(
                "not done: pod {} was chosen but is still there {late} ms after the fault was \
                 due (more than {LATE_LIMIT_MS} ms late)",
                inj.pod
            ));
            rec.injecting = None;
        }
    }
}
