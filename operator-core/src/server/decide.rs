//! One server pass decided, in two pure steps around the apply: `plan` (from the object and its
//! pods: the children to apply, or none, and whether the workload is held at 0 replicas), then
//! `settle` (from the plan, what applying left and what the server reported: the status and
//! when to look again).
use crate::fault_policy::FaultRefusal;
use crate::meta::Owner;
use crate::operands::OperandDefaults;
use crate::pod_observer::{observe_pods, PodObservation};
use crate::server::children::Children;
use crate::server::kind::ManagedServerKind;
use crate::server::status::{self, Hold, ServerReport, StatusInput};
use crate::server::validate::SpecViolation;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use msgbench_crds::common::ServerStatus;
use msgbench_crds::names::{name_violation, MAX_SERVER_NAME};
use std::time::Duration;

/// Spec rules admission cannot check, the object's name included. A name past the label limit
/// cannot even be listed by: its pods are not read (`pods_readable`).
pub fn violations<K: ManagedServerKind>(obj: &K, owner: &Owner) -> Vec<SpecViolation> {
    let mut violations = obj.validate();
    if let Some(rule) = name_violation(&owner.name, MAX_SERVER_NAME) {
        violations.push(SpecViolation::invalid("metadata.name", rule));
    }
    violations
}

/// The pods can be listed by the object's labels (its name fits in a label value).
pub fn pods_readable(violations: &[SpecViolation]) -> bool {
    !violations.iter().any(|v| v.field == "metadata.name")
}

/// What to apply, decided before applying.
#[derive(Debug)]
pub struct ServerPlan {
    pub violations: Vec<SpecViolation>,
    /// `None`: an invalid spec leaves the running children alone.
    pub children: Option<Children>,
    pub hold: Option<Hold>,
    /// The pods as they are, judged against the desired pod template.
    pub pods: PodObservation,
    /// The fault agent the spec asks for and the operator's fault policy refuses: the pods
    /// are built without it (`ServerPod::agent_if`), the status says why.
    pub fault_refusal: Option<FaultRefusal>,
}

/// Pure: the children (scaled to 0 while held).
pub fn plan<K: ManagedServerKind>(
    obj: &K,
    owner: &Owner,
    violations: Vec<SpecViolation>,
    pods: &[Pod],
    operands: &OperandDefaults,
    now: &Time,
) -> ServerPlan {
    let generation = obj.meta().generation;
    let desired =
        (violations.is_empty()).then(|| obj.build(owner, obj.desired_replicas(), operands));
    let template_hash = desired.as_ref().and_then(Children::template_hash);
    let observed = observe_pods(pods, template_hash.as_deref());
    let hold = (violations.is_empty())
        .then(|| status::hold_for(obj.server_status(), generation, &observed, now))
        .flatten();
    let children = desired.map(|desired| match hold {
        Some(_) => obj.build(owner, 0, operands),
        None => desired,
    });
    ServerPlan {
        violations,
        children,
        hold,
        pods: observed,
        fault_refusal: operands.faults.admit(obj.fault_injection()).err(),
    }
}

/// How often to look again: `converging` while Progressing, else `stable` (watches on the
/// object, its children and pods do the rest).
#[derive(Clone, Copy, Debug)]
pub struct LookAgain {
    pub converging: Duration,
    pub stable: Duration,
}

/// Pure: the status after the apply (`rollout_pending`: the workload controller has not rolled
/// out the current template) and the server's own report, and when to look again.
pub fn settle<K: ManagedServerKind>(
    obj: &K,
    owner: &Owner,
    plan: &ServerPlan,
    rollout_pending: bool,
    report: ServerReport,
    look: LookAgain,
    now: &Time,
) -> (ServerStatus, Duration) {
    let input = StatusInput {
        previous: obj.server_status(),
        generation: obj.meta().generation,
        desired_replicas: obj.desired_replicas(),
        violations: &plan.violations,
        hold: plan.hold.as_ref(),
        pods: &plan.pods,
        rollout_pending,
        url: obj.client_url(owner),
        tuning: obj.tuning(),
        resources: obj.resources(),
        configured_threads: obj.configured_threads(),
        server_report: report,
        fault_refusal: plan.fault_refusal.as_ref(),
        now: now.clone(),
    };
    let new_status = status::compute(&input);
    let progressing =
        (new_status.conditions.iter()).any(|c| c.type_ == "Progressing" && c.status == "True");
    let mut after = if progressing {
        look.converging
    } else {
        look.stable
    };
    // A transient kubelet refusal is retried at its time (no watch event says when).
    if let Some(at) = plan.hold.as_ref().and_then(|h| h.retry_at.as_ref()) {
        let wait = at.0.duration_since(now.0).unsigned_abs();
        after = after.min(wait + Duration::from_secs(1));
    }
    (new_status, after)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault_policy::FaultPolicy;
    use msgbench_crds::benchmark_run::FaultAgentSpec;
    use msgbench_crds::conditions;
    use msgbench_crds::JetStreamCluster;

    fn cluster(name: &str, replicas: i32) -> JetStreamCluster {
        serde_norway::from_str(&format!(
            "apiVersion: msgbench.dev/v1alpha1\nkind: JetStreamCluster\n\
             metadata: {{name: {name}, namespace: bench, uid: u1, generation: 2}}\n\
             spec: {{replicas: {replicas}}}\n"
        ))
        .unwrap()
    }

    fn now() -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap())
    }

    const LOOK: LookAgain = LookAgain {
        converging: Duration::from_secs(15),
        stable: Duration::from_secs(300),
    };

    #[test]
    fn a_valid_server_plans_its_children_and_settles_progressing_until_pods_are_ready() {
        let obj = cluster("js", 3);
        let owner = Owner::of(&obj, JetStreamCluster::KIND_LABEL).unwrap();
        let v = violations(&obj, &owner);
        assert!(v.is_empty() && pods_readable(&v), "{v:?}");
        let plan = plan(&obj, &owner, v, &[], &OperandDefaults::default(), &now());
        let children = plan.children.as_ref().expect("children to apply");
        let sts = &children.stateful_sets[0];
        assert_eq!(sts.spec.as_ref().unwrap().replicas, Some(3));
        assert!(plan.hold.is_none());
        assert_eq!(
            children.network_policies.len(),
            1,
            "fenced without an agent or a known operator too"
        );
        let (st, after) = settle(
            &obj,
            &owner,
            &plan,
            true,
            ServerReport::default(),
            LOOK,
            &now(),
        );
        let ready = st.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(ready.status, "False");
        assert_eq!(
            after, LOOK.converging,
            "a rollout in progress is looked at soon"
        );
    }

    /// A server asking for a fault agent the install does not allow is served without one,
    /// and its Degraded condition names the chart value and the field; allowed, it gets one.
    #[test]
    fn a_fault_agent_the_install_refuses_is_left_out_and_reported() {
        let mut obj = cluster("js", 3);
        obj.spec.fault_injection = Some(FaultAgentSpec {
            enabled: true,
            network: true,
            power_loss: false,
        });
        let owner = Owner::of(&obj, JetStreamCluster::KIND_LABEL).unwrap();
        let pass = |faults: FaultPolicy| {
            let operands = OperandDefaults {
                faults,
                ..OperandDefaults::default()
            };
            let plan = plan(&obj, &owner, vec![], &[], &operands, &now());
            let template = plan.children.as_ref().and_then(|c| c.template().cloned());
            let containers = template.and_then(|t| t.spec).unwrap().containers.len();
            let report = ServerReport::default();
            let (st, _) = settle(&obj, &owner, &plan, false, report, LOOK, &now());
            let degraded = conditions::get(&st.conditions, conditions::DEGRADED).cloned();
            (containers, degraded.unwrap())
        };
        for (faults, chart_value, field) in [
            (
                FaultPolicy::default(),
                "faults.enabled=true",
                "spec.faultInjection ",
            ),
            (
                FaultPolicy {
                    agents: true,
                    network: false,
                    power_loss: false,
                },
                "faults.network=true",
                "spec.faultInjection.network ",
            ),
        ] {
            let (containers, d) = pass(faults);
            assert_eq!(containers, 1, "{faults:?}: no agent");
            assert_eq!(
                (d.status.as_str(), d.reason.as_str()),
                ("True", conditions::FAULT_INJECTION_NOT_ALLOWED)
            );
            assert!(
                d.message.contains(chart_value) && d.message.starts_with(field),
                "{d:?}"
            );
        }
        let all = FaultPolicy {
            agents: true,
            network: true,
            power_loss: false,
        };
        let (containers, d) = pass(all);
        assert_eq!((containers, d.status.as_str()), (2, "False"), "{d:?}");
    }

    #[test]
    fn an_invalid_spec_plans_no_children_and_a_name_too_long_reads_no_pods() {
        let long = "j".repeat(MAX_SERVER_NAME + 1);
        let obj = cluster(&long, 3);
        let owner = Owner::of(&obj, JetStreamCluster::KIND_LABEL).unwrap();
        let v = violations(&obj, &owner);
        assert!(v.iter().any(|v| v.field == "metadata.name"), "{v:?}");
        assert!(!pods_readable(&v));
        let plan = plan(&obj, &owner, v, &[], &OperandDefaults::default(), &now());
        assert!(plan.children.is_none(), "running children are left alone");
        let (st, _) = settle(
            &obj,
            &owner,
            &plan,
            false,
            ServerReport::default(),
            LOOK,
            &now(),
        );
        let degraded = st
            .conditions
            .iter()
            .find(|c| c.type_ == "Degraded")
            .unwrap();
        assert_eq!(degraded.status, "True", "{degraded:?}");
    }
}
