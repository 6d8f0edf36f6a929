//! Status from observations: Ready/Progressing/Degraded with reasons, Reconciling/Stalled for
//! kstatus (`super::kstatus`), and the tuning that took effect. Pure, so every branch is unit-tested; `lastTransitionTime` only moves on a change.

use crate::fault_policy::FaultRefusal;
use crate::pod_observer::{is_transient_rejection, PodObservation, REJECTION_REASONS};
pub use crate::server::hold::Hold;
use crate::server::kstatus::{self, Obstacles, Said};
use crate::server::validate::SpecViolation;
use crate::status_text::set_condition;
use crate::tuning::is_integer_cpu;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use msgbench_crds::common::{ObservedTuning, Resources, ServerStatus, Sysctl, Tuning};
use msgbench_crds::conditions::{self, ConditionStatus, ConditionUpdate, DEGRADED};

/// Pause after a transient kubelet refusal (OutOfcpu, ...) before the workload is scaled up
/// again: at most one refused pod per pause, never a storm, and a server that starts by itself
/// once the node has room.
pub const REFUSAL_RETRY: std::time::Duration = std::time::Duration::from_secs(30);

fn retry_after(t: &Time) -> Option<Time> {
    let pause = k8s_openapi::jiff::SignedDuration::try_from(REFUSAL_RETRY).ok()?;
    Some(Time(t.0.checked_add(pause).ok()?))
}

/// The server's own report of its CPU view (nats `/varz`: `cores`, `gomaxprocs`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ServerReport {
    pub cores: Option<u32>,
    pub threads: Option<u16>,
}

pub struct StatusInput<'a> {
    pub previous: Option<&'a ServerStatus>,
    pub generation: Option<i64>,
    pub desired_replicas: i32,
    pub violations: &'a [SpecViolation],
    pub hold: Option<&'a Hold>,
    pub pods: &'a PodObservation,
    /// The workload controller has not finished rolling out the current template.
    pub rollout_pending: bool,
    pub url: String,
    pub tuning: &'a Tuning,
    pub resources: &'a Resources,
    pub configured_threads: Option<u16>,
    pub server_report: ServerReport,
    /// The fault agent the spec asks for and the operator's install does not allow.
    pub fault_refusal: Option<&'a FaultRefusal>,
    pub now: Time,
}

/// Keep the workload at 0 replicas when the kubelet refused its pods for this very generation
/// (a refusal seen now, or recorded in Degraded for the current generation). A permanent
/// refusal lasts until a spec change (new generation); a transient one until
/// [`REFUSAL_RETRY`] after it, then the workload is scaled up to try again.
pub fn hold_for(
    previous: Option<&ServerStatus>,
    generation: Option<i64>,
    pods: &PodObservation,
    now: &Time,
) -> Option<Hold> {
    let (reason, message, since) = match pods.problem.as_ref().filter(|p| p.rejected) {
        Some(p) => (&p.reason, &p.message, p.refused_at.as_ref()),
        None => {
            let d = conditions::get(&previous?.conditions, DEGRADED)?;
            let held = ConditionStatus::of(d) == Some(ConditionStatus::True)
                && REJECTION_REASONS.contains(&d.reason.as_str())
                && d.observed_generation == generation;
            if !held {
                return None;
            }
            // The refused pods may be gone (a StatefulSet at 0 deletes them): the record times it.
            (&d.reason, &d.message, Some(&d.last_transition_time))
        }
    };
    let retry_at = if is_transient_rejection(reason) {
        let until = retry_after(since?)?;
        if now.0 >= until.0 {
            return None; // the pause is over: scale up and try again
        }
        Some(until)
    } else {
        None
    };
    Some(Hold {
        reason: reason.clone(),
        message: message.clone(),
        retry_at,
    })
}

pub fn compute(input: &StatusInput<'_>) -> ServerStatus {
    let pods = input.pods;
    let (ready, progressing, degraded) = if !input.violations.is_empty() {
        invalid(input.violations)
    } else if let Some(hold) = input.hold {
        held(hold)
    } else {
        served(input)
    };
    let obstacles = Obstacles {
        violations: input.violations,
        hold: input.hold,
        fault_refusal: input.fault_refusal,
    };
    let (reconciling, stalled) = kstatus::reconciling_and_stalled(&obstacles, &progressing);
    let updates = [
        update(conditions::ready, ready),
        update(conditions::progressing, progressing),
        update(conditions::degraded, degraded),
        update(conditions::reconciling, reconciling),
        update(conditions::stalled, stalled),
    ];
    ServerStatus {
        conditions: server_conditions(input, updates),
        observed_generation: input.generation,
        replicas: pods.pods,
        ready_replicas: pods.ready,
        url: Some(input.url.clone()),
        observed_tuning: Some(observed_tuning(input)),
        images: pods.images.iter().take(MAX_IMAGES).cloned().collect(),
    }
}

/// Ready, Progressing, Degraded of a spec that breaks `violations` (none applied).
fn invalid(violations: &[SpecViolation]) -> (Said, Said, Said) {
    let msg = (violations.iter())
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join("; ");
    let reason = violations[0].reason;
    (
        (
            false,
            reason.to_string(),
            format!("spec not applied: {msg}"),
        ),
        (
            false,
            reason.to_string(),
            "waiting for a valid spec".to_string(),
        ),
        (true, reason.to_string(), msg),
    )
}

/// ... of a workload held at 0 replicas after a kubelet refusal.
fn held(hold: &Hold) -> (Said, Said, Said) {
    let base = hold.refusal();
    let msg = match &hold.retry_at {
        Some(t) => format!("{base}; scaled to 0 replicas, retrying at {}", t.0),
        None => format!("{base}; scaled to 0 replicas until the spec changes"),
    };
    (
        (false, hold.reason.clone(), msg.clone()),
        (
            false,
            "ScaledToZero".to_string(),
            "held at 0 replicas after a kubelet refusal".into(),
        ),
        (true, hold.reason.clone(), msg),
    )
}

/// ... of a server whose children were applied. A refused fault agent leaves it serving
/// (Ready as its pods are) but Degraded, unless a pod problem says more urgently why.
fn served(input: &StatusInput<'_>) -> (Said, Said, Said) {
    let (pods, desired_replicas) = (input.pods, input.desired_replicas);
    let all_ready = pods.ready >= desired_replicas && desired_replicas > 0;
    let count = format!(
        "{}/{} replicas ready",
        pods.ready.min(desired_replicas),
        desired_replicas
    );
    let degraded = match (&pods.problem, input.fault_refusal) {
        (Some(p), _) => (true, p.reason.clone(), p.message.clone()),
        (None, Some(r)) => (true, r.reason.to_string(), r.message.clone()),
        (None, None) => (
            false,
            "AsExpected".to_string(),
            "no pod problems observed".to_string(),
        ),
    };
    if all_ready && input.rollout_pending {
        (
            (true, "AllReplicasReady".to_string(), count),
            (
                true,
                "RollingOut".to_string(),
                "replacing pods with the new template".into(),
            ),
            degraded,
        )
    } else if all_ready {
        (
            (true, "AllReplicasReady".to_string(), count),
            (false, "Stable".to_string(), "rollout complete".to_string()),
            degraded,
        )
    } else {
        (
            (false, "ReplicasNotReady".to_string(), count.clone()),
            (true, "RollingOut".to_string(), count),
            degraded,
        )
    }
}

/// `status.images` holds at most this many pods (the schema's bound; servers run at most 5).
const MAX_IMAGES: usize = 8;

/// A constructor of the vocabulary applied to one computed (status, reason, message).
fn update(
    make: fn(ConditionStatus, String, String) -> ConditionUpdate,
    (status, reason, message): (bool, String, String),
) -> ConditionUpdate {
    make(status.into(), reason, message)
}

/// Exactly the kind's five conditions, in order; each keeps its previous transition time
/// unless its status flipped (the setter's rule). Pod events and kubelet messages may carry
/// escapes and newlines: `set_condition` makes them plain.
fn server_conditions(input: &StatusInput<'_>, updates: [ConditionUpdate; 5]) -> Vec<Condition> {
    let previous = input.previous.map_or(&[][..], |p| p.conditions.as_slice());
    let mut out = Vec::with_capacity(updates.len());
    for u in updates {
        out.extend(conditions::get(previous, &u.type_).cloned());
        set_condition(&mut out, u, input.generation, &input.now);
    }
    out
}

fn observed_tuning(input: &StatusInput<'_>) -> ObservedTuning {
    let pods = input.pods;
    let cpu_limit = input.resources.limits.as_ref().and_then(|l| l.cpu.as_ref());
    let limit_cores = cpu_limit
        .and_then(crate::tuning::cpu_millis)
        .map(|m| m / 1000);
    let cores = input.server_report.cores;
    let (pinning_effective, pinning_reason) = if !input.tuning.cpu_pinning {
        (false, None)
    } else if pods.pods == 0 {
        (false, Some("no running server pods".to_string()))
    } else if pods.qos_class.as_deref() != Some("Guaranteed") {
        let q = pods.qos_class.as_deref().unwrap_or("unknown");
        (
            false,
            Some(format!("pods have QoS class {q}; pinning needs Guaranteed")),
        )
    } else if !cpu_limit.is_some_and(is_integer_cpu) {
        (false, Some("CPU limit is not an integer".to_string()))
    } else if let (Some(seen), Some(limit)) = (cores, limit_cores) {
        if u64::from(seen) == limit {
            (true, None)
        } else {
            (
                false,
                Some(format!(
                    "server sees {seen} CPUs but the limit is {limit}: the node's kubelet does \
                     not run the static CPU manager policy (or no exclusive CPU was free)"
                )),
            )
        }
    } else {
        // Guaranteed + integer CPU: the static CPU manager pins it (if the node runs it).
        (true, None)
    };
    ObservedTuning {
        qos_class: pods.qos_class.clone(),
        pinning_effective,
        pinning_reason,
        cpus: cores.map(|c| format!("{c} visible to the server")),
        // A running pod means the kubelet accepted and set them.
        sysctls_applied: if pods.ready > 0 {
            input
                .tuning
                .sysctls
                .iter()
                .map(|s| Sysctl {
                    name: s.name.replace('/', "."),
                    value: s.value.clone(),
                })
                .collect()
        } else {
            Vec::new()
        },
        threads: input.server_report.threads.or(input.configured_threads),
    }
}

/// True while a StatefulSet/Deployment has not caught up with its latest spec.
pub fn rollout_pending(applied: &crate::server::children::Applied) -> bool {
    let sts = applied.stateful_sets.iter().any(|s| {
        let want = s.spec.as_ref().and_then(|sp| sp.replicas).unwrap_or(1);
        match &s.status {
            None => want > 0,
            Some(st) => {
                st.observed_generation < s.metadata.generation
                    || st.updated_replicas.unwrap_or(0) < want
                    || (st.update_revision.is_some() && st.current_revision != st.update_revision)
            }
        }
    });
    let deps = applied.deployments.iter().any(|d| {
        let want = d.spec.as_ref().and_then(|sp| sp.replicas).unwrap_or(1);
        match &d.status {
            None => want > 0,
            Some(st) => {
                st.observed_generation < d.metadata.generation
                    || st.updated_replicas.unwrap_or(0) < want
                    || st.replicas.unwrap_or(0) > want
            }
        }
    });
    sts || deps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod_observer::PodProblem;
    use msgbench_crds::common::{Quantity, ResourceAmounts};

    fn now() -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(1_700_000_000).unwrap())
    }

    fn pinned_resources() -> Resources {
        Resources {
            requests: None,
            limits: Some(ResourceAmounts {
                cpu: Some(Quantity("1".into())),
                memory: Some(Quantity("256Mi".into())),
            }),
        }
    }

    fn input<'a>(
        pods: &'a PodObservation,
        tuning: &'a Tuning,
        res: &'a Resources,
        previous: Option<&'a ServerStatus>,
    ) -> StatusInput<'a> {
        StatusInput {
            previous,
            generation: Some(3),
            desired_replicas: 1,
            violations: &[],
            hold: None,
            pods,
            rollout_pending: false,
            url: "nats://x.ns.svc:4222".into(),
            tuning,
            resources: res,
            configured_threads: Some(1),
            server_report: ServerReport::default(),
            fault_refusal: None,
            now: now(),
        }
    }

    fn cond<'a>(s: &'a ServerStatus, t: &str) -> &'a Condition {
        s.conditions.iter().find(|c| c.type_ == t).unwrap()
    }

    #[test]
    fn ready_pinned_pod_reports_guaranteed_and_effective_pinning() {
        let pods = PodObservation {
            pods: 1,
            ready: 1,
            qos_class: Some("Guaranteed".into()),
            ..PodObservation::default()
        };
        let tuning = Tuning {
            cpu_pinning: true,
            ..Tuning::default()
        };
        let res = pinned_resources();
        let s = compute(&input(&pods, &tuning, &res, None));
        assert_eq!(cond(&s, "Ready").status, "True");
        assert_eq!(cond(&s, "Ready").observed_generation, Some(3));
        assert_eq!(cond(&s, "Progressing").status, "False");
        assert_eq!(cond(&s, "Degraded").reason, "AsExpected");
        let t = s.observed_tuning.unwrap();
        assert!(t.pinning_effective);
        assert_eq!(t.qos_class.as_deref(), Some("Guaranteed"));
    }

    #[test]
    fn server_seeing_more_cpus_than_its_limit_means_no_static_cpu_manager() {
        let pods = PodObservation {
            pods: 1,
            ready: 1,
            qos_class: Some("Guaranteed".into()),
            ..PodObservation::default()
        };
        let tuning = Tuning {
            cpu_pinning: true,
            ..Tuning::default()
        };
        let res = pinned_resources();
        let mut i = input(&pods, &tuning, &res, None);
        i.server_report = ServerReport {
            cores: Some(8),
            threads: Some(1),
        };
        let t = compute(&i).observed_tuning.unwrap();
        assert!(!t.pinning_effective);
        assert!(t.pinning_reason.unwrap().contains("static CPU manager"));
        assert_eq!(t.threads, Some(1));
    }

    #[test]
    fn burstable_pods_do_not_pin() {
        let pods = PodObservation {
            pods: 1,
            ready: 1,
            qos_class: Some("Burstable".into()),
            ..PodObservation::default()
        };
        let tuning = Tuning {
            cpu_pinning: true,
            ..Tuning::default()
        };
        let res = pinned_resources();
        let t = compute(&input(&pods, &tuning, &res, None))
            .observed_tuning
            .unwrap();
        assert!(!t.pinning_effective);
        assert!(t.pinning_reason.unwrap().contains("Burstable"));
    }

    #[test]
    fn image_pull_problem_is_degraded_but_not_held() {
        let pods = PodObservation {
            pods: 1,
            ready: 0,
            problem: Some(PodProblem {
                reason: "ImagePullBackOff".into(),
                message: "pod x: back-off pulling image".into(),
                rejected: false,
                refused_at: None,
            }),
            ..PodObservation::default()
        };
        assert!(hold_for(None, Some(3), &pods, &now()).is_none());
        let tuning = Tuning::default();
        let res = Resources::default();
        let s = compute(&input(&pods, &tuning, &res, None));
        assert_eq!(cond(&s, "Degraded").status, "True");
        assert_eq!(cond(&s, "Degraded").reason, "ImagePullBackOff");
        assert_eq!(cond(&s, "Progressing").status, "True");
        assert_eq!(cond(&s, "Ready").reason, "ReplicasNotReady");
    }

    #[test]
    fn hold_is_remembered_for_the_same_generation_only() {
        let pods = PodObservation::default();
        let tuning = Tuning::default();
        let res = Resources::default();
        let hold = Hold {
            reason: "SysctlForbidden".into(),
            message: "pod x: forbidden".into(),
            retry_at: None,
        };
        let mut i = input(&pods, &tuning, &res, None);
        i.hold = Some(&hold);
        let held = compute(&i);
        assert!(cond(&held, "Degraded").message.contains("scaled to 0"));
        assert!(hold_for(Some(&held), Some(3), &pods, &now()).is_some());
        assert!(
            hold_for(Some(&held), Some(4), &pods, &now()).is_none(),
            "a new generation retries"
        );
    }

    #[test]
    fn a_transient_refusal_is_held_for_the_pause_then_retried() {
        let at = |s: i64| Time(k8s_openapi::jiff::Timestamp::from_second(s).unwrap());
        let refused = |reason: &str| PodObservation {
            problem: Some(PodProblem {
                reason: reason.into(),
                message: "pod x: Node didn't have enough resource: cpu".into(),
                rejected: true,
                refused_at: Some(at(1_000)),
            }),
            ..PodObservation::default()
        };
        let pods = refused("OutOfcpu");
        let hold = hold_for(None, Some(3), &pods, &at(1_010)).expect("held");
        assert_eq!(hold.retry_at, Some(at(1_030)));
        assert!(
            hold_for(None, Some(3), &pods, &at(1_030)).is_none(),
            "retried"
        );
        // A permanent refusal is held whatever the time.
        let forbidden = refused("SysctlForbidden");
        let h = hold_for(None, Some(3), &forbidden, &at(9_999)).expect("held");
        assert_eq!(h.retry_at, None);

        // The refused pods gone (a StatefulSet at 0 deletes them): the Degraded record times it.
        let (tuning, res) = (Tuning::default(), Resources::default());
        let mut i = input(&pods, &tuning, &res, None);
        i.hold = Some(&hold);
        i.now = at(1_010);
        let held = compute(&i);
        let msg = &cond(&held, "Degraded").message;
        assert!(msg.contains("retrying at"), "{msg}");
        let gone = PodObservation::default();
        assert!(hold_for(Some(&held), Some(3), &gone, &at(1_020)).is_some());
        assert!(hold_for(Some(&held), Some(3), &gone, &at(1_040)).is_none());
    }

    #[test]
    fn transition_time_moves_only_when_the_status_flips() {
        let pods = PodObservation {
            pods: 1,
            ready: 0,
            ..PodObservation::default()
        };
        let tuning = Tuning::default();
        let res = Resources::default();
        let first = compute(&input(&pods, &tuning, &res, None));
        let mut later = input(&pods, &tuning, &res, Some(&first));
        later.now = Time(k8s_openapi::jiff::Timestamp::from_second(1_700_000_100).unwrap());
        let same = compute(&later);
        assert_eq!(
            same, first,
            "unchanged observations give an identical status"
        );
        let ready = PodObservation {
            pods: 1,
            ready: 1,
            ..PodObservation::default()
        };
        later.pods = &ready;
        let flipped = compute(&later);
        assert_eq!(cond(&flipped, "Ready").last_transition_time, later.now);
    }

    #[test]
    fn condition_messages_are_plain_text() {
        let pods = PodObservation {
            pods: 1,
            problem: Some(PodProblem {
                reason: "CrashLoopBackOff".into(),
                message: "pod x: \u{1b}[31mfatal\u{1b}[0m\nexit 1".into(),
                rejected: false,
                refused_at: None,
            }),
            ..PodObservation::default()
        };
        let tuning = Tuning::default();
        let res = Resources::default();
        let s = compute(&input(&pods, &tuning, &res, None));
        assert_eq!(cond(&s, "Degraded").message, "pod x: fatal | exit 1");
    }

    /// A refused fault agent does not stop the server serving: Ready as its pods are,
    /// Degraded with the refusal; a pod problem is told first.
    #[test]
    fn a_refused_fault_agent_is_degraded_but_ready() {
        let ready = PodObservation {
            pods: 1,
            ready: 1,
            ..PodObservation::default()
        };
        let (tuning, res) = (Tuning::default(), Resources::default());
        let refusal = crate::fault_policy::FaultRefusal::not_allowed(
            "spec.faultInjection",
            &["faults.enabled"],
            "remove spec.faultInjection",
        );
        let mut i = input(&ready, &tuning, &res, None);
        i.fault_refusal = Some(&refusal);
        let s = compute(&i);
        assert_eq!(cond(&s, "Ready").status, "True");
        assert_eq!(cond(&s, "Progressing").status, "False");
        let d = cond(&s, "Degraded");
        assert_eq!(d.status, "True");
        assert_eq!(d.reason, conditions::FAULT_INJECTION_NOT_ALLOWED);
        assert_eq!(d.message, refusal.message);
        let crashing = PodObservation {
            pods: 1,
            problem: Some(PodProblem {
                reason: "CrashLoopBackOff".into(),
                message: "pod x: exit 1".into(),
                rejected: false,
                refused_at: None,
            }),
            ..PodObservation::default()
        };
        i.pods = &crashing;
        assert_eq!(cond(&compute(&i), "Degraded").reason, "CrashLoopBackOff");
    }

    #[test]
    fn invalid_spec_names_the_field() {
        let pods = PodObservation::default();
        let tuning = Tuning::default();
        let res = Resources::default();
        let v = [SpecViolation::invalid(
            "spec.replicas",
            "must be between 1 and 5",
        )];
        let mut i = input(&pods, &tuning, &res, None);
        i.violations = &v;
        let s = compute(&i);
        assert_eq!(cond(&s, "Degraded").reason, conditions::INVALID_SPEC);
        assert!(cond(&s, "Ready")
            .message
            .contains("spec.replicas: must be between 1 and 5"));
    }
}
