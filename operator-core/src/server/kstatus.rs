//! Reconciling and Stalled of a server kind: the two conditions kstatus (cli-utils; Flux's
//! `wait`, kpt, Argo tooling built on it) reads, abnormal-true, next to `status.observedGeneration`.
//!
//! | state                                         | Reconciling           | Stalled                    |
//! |-----------------------------------------------|-----------------------|----------------------------|
//! | rolling out, replicas not all ready           | True (as Progressing) | False                      |
//! | a pod problem the kubelet/scheduler retries   | True                  | False                      |
//! | held after a transient refusal (OutOfcpu)     | True, `RetryPending`  | False                      |
//! | all ready, rolled out                         | False                 | False                      |
//! | spec breaks a rule admission did not enforce  | False                 | True, `InvalidSpec`        |
//! | held after a permanent refusal (SysctlForbidden) | False              | True, the kubelet's reason |
//! | fault agent refused by the install            | as the rollout        | True, `FaultInjectionNotAllowed` |
//!
//! Stalled means "nothing changes until the spec (or the install) does": kstatus says Failed.
//! Pod problems the kubelet or scheduler keeps retrying (image pulls, crash loops, no node)
//! stay Reconciling, as kstatus judges a Deployment: they may clear by themselves.
use crate::fault_policy::FaultRefusal;
use crate::server::hold::Hold;
use crate::server::validate::SpecViolation;

/// One condition's (status, reason, message).
pub type Said = (bool, String, String);

/// What keeps the spec from being served, as the status pass sees it.
pub struct Obstacles<'a> {
    pub violations: &'a [SpecViolation],
    pub hold: Option<&'a Hold>,
    pub fault_refusal: Option<&'a FaultRefusal>,
}

/// (Reconciling, Stalled) from the obstacles and the computed Progressing.
pub fn reconciling_and_stalled(o: &Obstacles<'_>, progressing: &Said) -> (Said, Said) {
    let stalled = stalled(o);
    let reconciling = if let Some(v) = o.violations.first() {
        (
            false,
            v.reason.to_string(),
            "waiting for a valid spec".to_string(),
        )
    } else if let Some(hold) = o.hold {
        match &hold.retry_at {
            Some(t) => (
                true,
                "RetryPending".to_string(),
                format!(
                    "held at 0 replicas after {}; retrying at {}",
                    hold.reason, t.0
                ),
            ),
            None => (
                false,
                "ScaledToZero".to_string(),
                "held at 0 replicas until the spec changes".to_string(),
            ),
        }
    } else {
        progressing.clone()
    };
    (reconciling, stalled)
}

fn stalled(o: &Obstacles<'_>) -> Said {
    if !o.violations.is_empty() {
        let msg = (o.violations.iter())
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join("; ");
        return (true, o.violations[0].reason.to_string(), msg);
    }
    if let Some(hold) = o.hold.filter(|h| h.retry_at.is_none()) {
        let msg = format!(
            "{}; held at 0 replicas until the spec changes",
            hold.refusal()
        );
        return (true, hold.reason.clone(), msg);
    }
    if let Some(r) = o.fault_refusal {
        return (true, r.reason.to_string(), r.message.clone());
    }
    (
        false,
        "AsExpected".to_string(),
        "nothing keeps the spec from being served".to_string(),
    )
}

#[cfg(test)]
mod tests;
