//! BenchmarkRun conditions. Pure: the caller passes the clock.
//!
//! A finished run always has a condition that is True, so a machine waiting for the end never
//! waits out its timeout:
//!
//! | condition   | while running          | passed            | failed                       |
//! |-------------|------------------------|-------------------|------------------------------|
//! | Complete    | False                  | True, `Succeeded` | True, the failure's reason   |
//! | Succeeded   | Unknown                | True              | False, the failure's reason  |
//! | Reconciling | True                   | False             | False                        |
//! | Stalled     | False                  | False             | True, the failure's reason   |
//!
//! Why this shape: `kubectl wait --for=condition=X` only ends early when X becomes True, and it
//! takes one `--for`. With Job-style `Complete` (success only) plus `Failed`, a gate needs two
//! waits in parallel. Here `Complete` means "ended, either way" (the reason says how), so the CI
//! gate is `wait --for=condition=Complete` then `wait --for=condition=Succeeded --timeout=0`
//! (checks once), which fails within seconds of a failed run. `Succeeded` stays the verdict
//! (Knative/Tekton style: Unknown until known). `Reconciling`/`Stalled` are what kstatus (Flux,
//! kpt, cli-utils) reads for custom resources: in progress while running, Failed after a failed
//! run (Stalled: nothing more happens until the spec changes), Current after a passed one — the
//! same as kstatus judges a Job. TargetReady and RunnersReady report the stages before the load.
//!
//! The types, statuses and the setter are `msgbench_crds::conditions` (one vocabulary for every
//! kind); this module keeps the run's rules (what accepting and finishing a run set).
use crate::status_text::set_condition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use msgbench_crds::benchmark_run::Phase;
use msgbench_crds::conditions::{self as vocab, ConditionUpdate};
pub use msgbench_crds::conditions::{
    get, ConditionStatus as Status, COMPLETE, NAMES_SHARED, RECONCILING, RUNNERS_READY, STALLED,
    STREAMS_DELETED, SUCCEEDED, TARGET_READY,
};

/// `comparison.reason` while the baseline has no verdict yet (a finished run looks again).
pub const BASELINE_NOT_FINISHED: &str = "BaselineNotFinished";

/// Sets a condition; the transition time moves only when the status flips. The message is made
/// plain text (no escapes or control characters, bounded).
pub fn set(
    conds: &mut Vec<Condition>,
    type_: &str,
    status: Status,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: &Time,
) {
    let update = ConditionUpdate::new(type_, status, reason, message);
    set_condition(conds, update, generation, now);
}

/// A new spec generation was accepted: every condition says "not there yet". Complete's
/// transition time is the run's acceptance time (the deadlines count from it).
pub fn accept(conds: &mut Vec<Condition>, generation: Option<i64>, now: &Time) {
    use Status::*;
    let msg = "accepted";
    let in_progress = "the run is in progress (see status.phase)";
    for u in [
        vocab::target_ready(Unknown, "Pending", msg),
        vocab::runners_ready(Unknown, "Pending", msg),
        vocab::succeeded(Unknown, "Pending", msg),
        vocab::complete(False, "Pending", msg),
        vocab::reconciling(True, "InProgress", in_progress),
        vocab::stalled(False, "Pending", msg),
    ] {
        set_condition(conds, u, generation, now);
    }
}

/// The run ended in `phase` (Succeeded: passed, else failed); `reason` is `Succeeded` or the
/// failure's (a `RunFailureReason`). Complete becomes True either way.
pub fn finish(
    conds: &mut Vec<Condition>,
    phase: Phase,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: &Time,
) {
    use Status::*;
    let passed = phase == Phase::Succeeded;
    let (succeeded, stalled) = if passed { (True, False) } else { (False, True) };
    let ended = if passed {
        "the run passed"
    } else {
        "the run failed; a spec change starts a new one"
    };
    for u in [
        vocab::complete(True, reason, message),
        vocab::succeeded(succeeded, reason, message),
        vocab::stalled(stalled, reason, message),
        vocab::reconciling(False, reason, ended),
    ] {
        set_condition(conds, u, generation, now);
    }
}

/// Failure reasons that say the target was not there, not ready, unfit or refused the runners:
/// a run failed with one also ends with TargetReady False, that reason and message.
pub fn is_about_the_target(reason: msgbench_crds::RunFailureReason) -> bool {
    use msgbench_crds::RunFailureReason::*;
    matches!(
        reason,
        TargetNotFound
            | TargetNotReady
            | TargetUnfit
            | TargetUnreachable
            | TargetAuthFailed
            | TargetTLSFailed
            | TargetProtocolRefused
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use msgbench_crds::RunFailureReason;

    fn t(s: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(s).unwrap())
    }

    fn status_of<'a>(c: &'a [Condition], type_: &str) -> (&'a str, &'a str) {
        let c = get(c, type_).unwrap_or_else(|| panic!("no {type_}"));
        (c.status.as_str(), c.reason.as_str())
    }

    #[test]
    fn transition_time_moves_only_on_a_flip() {
        let mut c = Vec::new();
        set(
            &mut c,
            SUCCEEDED,
            Status::Unknown,
            "Pending",
            "",
            Some(1),
            &t(10),
        );
        set(
            &mut c,
            SUCCEEDED,
            Status::Unknown,
            "Running",
            "",
            Some(1),
            &t(20),
        );
        assert_eq!(c[0].last_transition_time, t(10));
        assert_eq!(c[0].reason, "Running");
        set(
            &mut c,
            SUCCEEDED,
            Status::True,
            "Succeeded",
            "",
            Some(1),
            &t(30),
        );
        assert_eq!(c[0].last_transition_time, t(30));
        assert_eq!(c[0].status, "True");
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn an_accepted_run_is_in_progress_and_nothing_is_true_but_reconciling() {
        let mut c = Vec::new();
        accept(&mut c, Some(1), &t(10));
        assert_eq!(c.len(), 6);
        assert_eq!(status_of(&c, COMPLETE), ("False", "Pending"));
        assert_eq!(status_of(&c, SUCCEEDED), ("Unknown", "Pending"));
        assert_eq!(status_of(&c, STALLED), ("False", "Pending"));
        assert_eq!(status_of(&c, RECONCILING).0, "True");
        let trues: Vec<_> = c.iter().filter(|c| c.status == "True").collect();
        assert_eq!(trues.len(), 1, "only Reconciling");
        assert!(c.iter().all(|c| c.observed_generation == Some(1)));
    }

    #[test]
    fn a_passed_run_is_complete_and_succeeded() {
        let mut c = Vec::new();
        accept(&mut c, Some(1), &t(10));
        finish(
            &mut c,
            Phase::Succeeded,
            "Succeeded",
            "1000 received",
            Some(1),
            &t(40),
        );
        assert_eq!(status_of(&c, COMPLETE), ("True", "Succeeded"));
        assert_eq!(status_of(&c, SUCCEEDED), ("True", "Succeeded"));
        assert_eq!(status_of(&c, RECONCILING).0, "False");
        assert_eq!(status_of(&c, STALLED).0, "False");
        assert_eq!(get(&c, COMPLETE).unwrap().last_transition_time, t(40));
        // Stalled did not flip: its transition time stays at acceptance.
        assert_eq!(get(&c, STALLED).unwrap().last_transition_time, t(10));
    }

    #[test]
    fn a_failed_run_is_complete_not_succeeded_and_stalled() {
        let mut c = Vec::new();
        accept(&mut c, Some(2), &t(10));
        let msg = "JetStreamCluster js missing; still missing after 5s";
        let reason = RunFailureReason::TargetNotFound.as_str();
        finish(&mut c, Phase::Failed, reason, msg, Some(2), &t(16));
        assert_eq!(status_of(&c, COMPLETE), ("True", reason));
        assert_eq!(status_of(&c, SUCCEEDED), ("False", reason));
        assert_eq!(status_of(&c, STALLED), ("True", reason));
        assert_eq!(status_of(&c, RECONCILING).0, "False");
        assert_eq!(get(&c, COMPLETE).unwrap().message, msg);
        assert_eq!(get(&c, SUCCEEDED).unwrap().last_transition_time, t(16));
    }

    #[test]
    fn every_ended_run_has_a_true_condition_and_is_not_reconciling() {
        let failed = RunFailureReason::RunnerFailed.as_str();
        for (phase, reason) in [(Phase::Succeeded, "Succeeded"), (Phase::Failed, failed)] {
            let mut c = Vec::new();
            accept(&mut c, Some(1), &t(1));
            finish(&mut c, phase, reason, "", Some(1), &t(2));
            assert!(c.iter().any(|c| c.status == "True"), "{phase:?}");
            assert_eq!(status_of(&c, COMPLETE).0, "True", "{phase:?}");
            assert_eq!(status_of(&c, RECONCILING).0, "False", "{phase:?}");
        }
    }

    #[test]
    fn a_new_generation_after_a_failure_starts_over() {
        let mut c = Vec::new();
        accept(&mut c, Some(1), &t(1));
        let reason = RunFailureReason::ThresholdsNotMet.as_str();
        finish(&mut c, Phase::Failed, reason, "x", Some(1), &t(2));
        accept(&mut c, Some(2), &t(3));
        assert_eq!(status_of(&c, COMPLETE), ("False", "Pending"));
        assert_eq!(status_of(&c, STALLED), ("False", "Pending"));
        assert_eq!(status_of(&c, SUCCEEDED), ("Unknown", "Pending"));
        assert_eq!(get(&c, COMPLETE).unwrap().last_transition_time, t(3));
        assert!(c.iter().all(|c| c.observed_generation == Some(2)));
    }

    #[test]
    fn messages_are_plain_text() {
        let mut c = Vec::new();
        let log =
            "runner pod r-0: exit code 1 (Error): \u{1b}[31mERROR\u{1b}[0m barrier\ntimed out";
        let reason = RunFailureReason::BarrierTimeout.as_str();
        finish(&mut c, Phase::Failed, reason, log, Some(1), &t(1));
        assert_eq!(
            get(&c, SUCCEEDED).unwrap().message,
            "runner pod r-0: exit code 1 (Error): ERROR barrier | timed out"
        );
    }
}
