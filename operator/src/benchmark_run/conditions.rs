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
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use msgbench_crds::benchmark_run::Outcome;

pub const TARGET_READY: &str = "TargetReady";
pub const RUNNERS_READY: &str = "RunnersReady";
pub const COMPLETE: &str = "Complete";
pub const SUCCEEDED: &str = "Succeeded";
pub const RECONCILING: &str = "Reconciling";
pub const STALLED: &str = "Stalled";

/// A condition's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    True,
    False,
    Unknown,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::True => "True",
            Status::False => "False",
            Status::Unknown => "Unknown",
        }
    }
}

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
    let message = crate::status_text::plain(message);
    let status = status.as_str();
    match conds.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status != status {
                c.last_transition_time = now.clone();
            }
            c.status = status.into();
            c.reason = reason.into();
            c.message = message;
            c.observed_generation = generation;
        }
        None => conds.push(Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message,
            observed_generation: generation,
            last_transition_time: now.clone(),
        }),
    }
}

pub fn get<'a>(conds: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conds.iter().find(|c| c.type_ == type_)
}

/// A new spec generation was accepted: every condition says "not there yet". Complete's
/// transition time is the run's acceptance time (the deadlines count from it).
pub fn accept(conds: &mut Vec<Condition>, generation: Option<i64>, now: &Time) {
    use Status::*;
    let msg = "accepted";
    for c in [TARGET_READY, RUNNERS_READY, SUCCEEDED] {
        set(conds, c, Unknown, "Pending", msg, generation, now);
    }
    set(conds, COMPLETE, False, "Pending", msg, generation, now);
    set(
        conds,
        RECONCILING,
        True,
        "InProgress",
        "the run is in progress (see status.phase)",
        generation,
        now,
    );
    set(conds, STALLED, False, "Pending", msg, generation, now);
}

/// The run ended with `outcome`; `reason` is `Succeeded` or the failure's (ThresholdsNotMet,
/// TargetNotFound, …). Complete becomes True either way.
pub fn finish(
    conds: &mut Vec<Condition>,
    outcome: Outcome,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: &Time,
) {
    use Status::*;
    let passed = outcome == Outcome::Passed;
    set(conds, COMPLETE, True, reason, message, generation, now);
    let (succeeded, stalled) = if passed { (True, False) } else { (False, True) };
    set(
        conds, SUCCEEDED, succeeded, reason, message, generation, now,
    );
    set(conds, STALLED, stalled, reason, message, generation, now);
    let ended = if passed {
        "the run passed"
    } else {
        "the run failed; a spec change starts a new one"
    };
    set(conds, RECONCILING, False, reason, ended, generation, now);
}

#[cfg(test)]
mod tests {
    use super::*;

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
            Outcome::Passed,
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
        finish(
            &mut c,
            Outcome::Failed,
            "TargetNotFound",
            msg,
            Some(2),
            &t(16),
        );
        assert_eq!(status_of(&c, COMPLETE), ("True", "TargetNotFound"));
        assert_eq!(status_of(&c, SUCCEEDED), ("False", "TargetNotFound"));
        assert_eq!(status_of(&c, STALLED), ("True", "TargetNotFound"));
        assert_eq!(status_of(&c, RECONCILING).0, "False");
        assert_eq!(get(&c, COMPLETE).unwrap().message, msg);
        assert_eq!(get(&c, SUCCEEDED).unwrap().last_transition_time, t(16));
    }

    #[test]
    fn every_ended_run_has_a_true_condition_and_is_not_reconciling() {
        for outcome in [Outcome::Passed, Outcome::Failed] {
            let mut c = Vec::new();
            accept(&mut c, Some(1), &t(1));
            finish(&mut c, outcome, "Whatever", "", Some(1), &t(2));
            assert!(c.iter().any(|c| c.status == "True"), "{outcome:?}");
            assert_eq!(status_of(&c, COMPLETE).0, "True", "{outcome:?}");
            assert_eq!(status_of(&c, RECONCILING).0, "False", "{outcome:?}");
        }
    }

    #[test]
    fn a_new_generation_after_a_failure_starts_over() {
        let mut c = Vec::new();
        accept(&mut c, Some(1), &t(1));
        finish(
            &mut c,
            Outcome::Failed,
            "ThresholdsNotMet",
            "x",
            Some(1),
            &t(2),
        );
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
        finish(
            &mut c,
            Outcome::Failed,
            "BarrierTimeout",
            log,
            Some(1),
            &t(1),
        );
        assert_eq!(
            get(&c, SUCCEEDED).unwrap().message,
            "runner pod r-0: exit code 1 (Error): ERROR barrier | timed out"
        );
    }
}
