//! The one condition vocabulary of every msgbench kind: condition types, a typed status, a
//! constructor per type and the single setter. Controllers state *what* a condition says
//! ([`ConditionUpdate`]); [`set`] owns the bookkeeping (`observedGeneration`,
//! `lastTransitionTime`), so every kind follows the same rules.
//!
//! Server kinds (JetStreamCluster, MqttBroker, PubSubServer) report [`READY`], [`PROGRESSING`],
//! [`DEGRADED`], [`RECONCILING`] and [`STALLED`]. A BenchmarkRun reports [`TARGET_READY`], [`RUNNERS_READY`], [`COMPLETE`],
//! [`SUCCEEDED`], [`RECONCILING`] and [`STALLED`] (see `BenchmarkRunStatus::conditions`), and
//! where they apply [`NAMES_SHARED`] and [`STREAMS_DELETED`].
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use std::fmt;

/// All replicas ready and serving.
pub const READY: &str = "Ready";
/// A rollout or scale is under way.
pub const PROGRESSING: &str = "Progressing";
/// The server cannot become (fully) ready, e.g. SysctlForbidden.
pub const DEGRADED: &str = "Degraded";
/// Degraded reason of a server whose spec breaks a rule admission did not enforce: the word a
/// run that fails for the same cause uses. Server kinds' other reasons are mostly the kubelet's
/// and the scheduler's, passed on verbatim, so they have no closed set of their own.
pub const INVALID_SPEC: &str = crate::RunFailureReason::InvalidSpec.as_str();
/// Degraded reason of a server whose `spec.faultInjection` the operator's install does not
/// allow (chart `faults.enabled`, `faults.network`): it runs, without the fault agent.
pub const FAULT_INJECTION_NOT_ALLOWED: &str = "FaultInjectionNotAllowed";

/// The run's target server exists and is ready.
pub const TARGET_READY: &str = "TargetReady";
/// A run that shares its target (`spec.shareTarget`) also shares names with the runs beside it
/// (an existing stream, a wildcard room, a broadcast): True, reason `NamesShared`, naming them.
pub const NAMES_SHARED: &str = "NamesShared";
/// The run's JetStream streams, deleted by its id after it ended (`Deleted`), or not
/// (`NotDeleted`, `NoTarget`: the message says what may remain); Unknown while deleting.
pub const STREAMS_DELETED: &str = "StreamsDeleted";
/// Every runner reached the start barrier.
pub const RUNNERS_READY: &str = "RunnersReady";
/// The run ended, either way (the reason says how).
pub const COMPLETE: &str = "Complete";
/// The verdict: Unknown until the run ends.
pub const SUCCEEDED: &str = "Succeeded";
/// kstatus (abnormal-true): the controller is still working towards the spec — a run in
/// progress, a server rolling out.
pub const RECONCILING: &str = "Reconciling";
/// kstatus (abnormal-true): the spec cannot be served; nothing more happens until it (or the
/// install) changes — a failed run, a server whose spec the operator or kubelet refuses.
pub const STALLED: &str = "Stalled";

/// A condition's status, as the API spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

impl ConditionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }

    /// The status a stored condition carries; `None` for anything the API does not define.
    pub fn of(condition: &Condition) -> Option<Self> {
        match condition.status.as_str() {
            "True" => Some(ConditionStatus::True),
            "False" => Some(ConditionStatus::False),
            "Unknown" => Some(ConditionStatus::Unknown),
            _ => None,
        }
    }
}

impl From<bool> for ConditionStatus {
    fn from(b: bool) -> Self {
        if b {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        }
    }
}

impl fmt::Display for ConditionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a controller says about one condition; [`set`] adds generation and transition time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConditionUpdate {
    pub type_: String,
    pub status: ConditionStatus,
    /// CamelCase, e.g. `AllReplicasReady`.
    pub reason: String,
    /// Human-readable; the caller keeps it plain text.
    pub message: String,
}

impl ConditionUpdate {
    pub fn new(
        type_: impl Into<String>,
        status: ConditionStatus,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            type_: type_.into(),
            status,
            reason: reason.into(),
            message: message.into(),
        }
    }
}

/// One constructor per condition type, so a caller cannot misspell a type.
macro_rules! constructors {
    ($($(#[$doc:meta])* $name:ident => $type_:ident;)*) => {$(
        $(#[$doc])*
        pub fn $name(
            status: ConditionStatus,
            reason: impl Into<String>,
            message: impl Into<String>,
        ) -> ConditionUpdate {
            ConditionUpdate::new($type_, status, reason, message)
        }
    )*};
}

constructors! {
    /// [`READY`] of a server kind.
    ready => READY;
    /// [`PROGRESSING`] of a server kind.
    progressing => PROGRESSING;
    /// [`DEGRADED`] of a server kind.
    degraded => DEGRADED;
    /// [`TARGET_READY`] of a BenchmarkRun.
    target_ready => TARGET_READY;
    /// [`RUNNERS_READY`] of a BenchmarkRun.
    runners_ready => RUNNERS_READY;
    /// [`COMPLETE`] of a BenchmarkRun.
    complete => COMPLETE;
    /// [`SUCCEEDED`] of a BenchmarkRun.
    succeeded => SUCCEEDED;
    /// [`RECONCILING`] of every kind.
    reconciling => RECONCILING;
    /// [`STALLED`] of every kind.
    stalled => STALLED;
}

/// Upserts `update` into `conditions`. Reason, message and `observedGeneration` always take
/// the new values; `lastTransitionTime` becomes `now` only for a new condition or when the
/// status flips, so it tells when the condition last changed, not when it was last written.
pub fn set(
    conditions: &mut Vec<Condition>,
    update: ConditionUpdate,
    observed_generation: Option<i64>,
    now: &Time,
) {
    let ConditionUpdate {
        type_,
        status,
        reason,
        message,
    } = update;
    let status = status.as_str();
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status != status {
                c.last_transition_time = now.clone();
                c.status = status.into();
            }
            c.reason = reason;
            c.message = message;
            c.observed_generation = observed_generation;
        }
        None => conditions.push(Condition {
            type_,
            status: status.into(),
            reason,
            message,
            observed_generation,
            last_transition_time: now.clone(),
        }),
    }
}

/// The condition of type `type_`, if present.
pub fn get<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ConditionStatus::*;

    fn t(s: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(s).unwrap())
    }

    #[test]
    fn a_new_condition_starts_now_with_the_generation() {
        let mut c = Vec::new();
        set(
            &mut c,
            ready(True, "AllReplicasReady", "1/1"),
            Some(3),
            &t(10),
        );
        assert_eq!(
            c,
            [Condition {
                type_: "Ready".into(),
                status: "True".into(),
                reason: "AllReplicasReady".into(),
                message: "1/1".into(),
                observed_generation: Some(3),
                last_transition_time: t(10),
            }]
        );
    }

    #[test]
    fn transition_time_moves_only_when_the_status_flips() {
        let mut c = Vec::new();
        set(&mut c, succeeded(Unknown, "Pending", "a"), Some(1), &t(10));
        set(&mut c, succeeded(Unknown, "Running", "b"), Some(2), &t(20));
        assert_eq!(c[0].last_transition_time, t(10));
        assert_eq!(
            (c[0].reason.as_str(), c[0].message.as_str()),
            ("Running", "b")
        );
        assert_eq!(c[0].observed_generation, Some(2));
        set(&mut c, succeeded(True, "Succeeded", ""), Some(2), &t(30));
        assert_eq!(c[0].last_transition_time, t(30));
        assert_eq!(ConditionStatus::of(&c[0]), Some(True));
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn other_types_keep_their_place_and_time() {
        let mut c = Vec::new();
        set(&mut c, ready(False, "R", ""), None, &t(1));
        set(&mut c, progressing(True, "P", ""), None, &t(1));
        set(&mut c, degraded(False, "D", ""), None, &t(1));
        set(&mut c, progressing(False, "Stable", ""), None, &t(5));
        let types: Vec<_> = c.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, [READY, PROGRESSING, DEGRADED]);
        assert_eq!(get(&c, READY).unwrap().last_transition_time, t(1));
        assert_eq!(get(&c, PROGRESSING).unwrap().last_transition_time, t(5));
        assert!(get(&c, STALLED).is_none());
    }

    #[test]
    fn constructors_name_their_type() {
        let all = [
            (ready(True, "", ""), READY),
            (progressing(True, "", ""), PROGRESSING),
            (degraded(True, "", ""), DEGRADED),
            (target_ready(True, "", ""), TARGET_READY),
            (runners_ready(True, "", ""), RUNNERS_READY),
            (complete(True, "", ""), COMPLETE),
            (succeeded(True, "", ""), SUCCEEDED),
            (reconciling(True, "", ""), RECONCILING),
            (stalled(True, "", ""), STALLED),
        ];
        for (u, want) in all {
            assert_eq!(u.type_, want);
        }
    }

    #[test]
    fn statuses_use_the_api_spelling() {
        for s in [True, False, Unknown] {
            assert_eq!(s.to_string(), s.as_str());
        }
        assert_eq!(ConditionStatus::from(true), True);
        assert_eq!(ConditionStatus::from(false).as_str(), "False");
    }
}
