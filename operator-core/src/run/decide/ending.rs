//! How a run ends (`fail`, `pass`) and the time arithmetic every phase shares.
use crate::run::conditions as cond;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use msgbench_crds::benchmark_run::{BenchmarkRunStatus, Phase, RunFailureReason, Verdict};

/// When this generation was accepted: Complete's transition time (deadlines count from it).
pub(super) fn accepted_at(st: &BenchmarkRunStatus, now: &Time) -> Time {
    cond::get(&st.conditions, cond::COMPLETE)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| now.clone())
}

pub(crate) fn seconds_between(from: &Time, to: &Time) -> i64 {
    (to.0.as_second() - from.0.as_second()).max(0)
}

/// Ends the run as Failed with `reason`.
pub fn fail(
    st: &mut BenchmarkRunStatus,
    reason: RunFailureReason,
    message: &str,
    generation: i64,
    now: &Time,
) {
    end(st, Phase::Failed, reason.as_str(), message, generation, now);
    // A target the runners found unreachable or that refused them was not ready after all:
    // TargetReady must not stay True beside that verdict (kstatus readers and `kubectl wait`
    // look at the condition, not the verdict).
    if cond::is_about_the_target(reason) {
        let message = crate::status_text::plain(message);
        let gen = Some(generation);
        let status = cond::Status::False;
        cond::set(
            &mut st.conditions,
            cond::TARGET_READY,
            status,
            reason.as_str(),
            &message,
            gen,
            now,
        );
    }
}

/// Ends the run as Passed.
pub fn pass(st: &mut BenchmarkRunStatus, message: &str, generation: i64, now: &Time) {
    end(st, Phase::Succeeded, "Succeeded", message, generation, now);
}

/// The terminal `phase` (Succeeded or Failed), completion time, verdict and the terminal
/// conditions (see `conditions`).
fn end(
    st: &mut BenchmarkRunStatus,
    phase: Phase,
    reason: &str,
    message: &str,
    generation: i64,
    now: &Time,
) {
    let message = crate::status_text::plain(message);
    st.phase = Some(phase);
    st.completion_time = Some(now.clone());
    st.verdict = Some(Verdict {
        reason: reason.into(),
        message: Some(message.clone()),
    });
    cond::finish(
        &mut st.conditions,
        phase,
        reason,
        &message,
        Some(generation),
        now,
    );
}
