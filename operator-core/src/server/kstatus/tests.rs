//! Reconciling/Stalled through the whole status pass (`status::compute`), state by state.
use crate::fault_policy::FaultRefusal;
use crate::pod_observer::{PodObservation, PodProblem};
use crate::server::status::{compute, Hold, ServerReport, StatusInput};
use crate::server::validate::SpecViolation;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use msgbench_crds::common::{Resources, ServerStatus, Tuning};
use msgbench_crds::conditions::{self, INVALID_SPEC, RECONCILING, STALLED};

fn at(s: i64) -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(s).unwrap())
}

fn pods(pods: i32, ready: i32) -> PodObservation {
    PodObservation {
        pods,
        ready,
        ..PodObservation::default()
    }
}

fn input<'a>(
    pods: &'a PodObservation,
    (res, tuning): &'a (Resources, Tuning),
    previous: Option<&'a ServerStatus>,
) -> StatusInput<'a> {
    StatusInput {
        previous,
        generation: Some(2),
        desired_replicas: 3,
        violations: &[],
        hold: None,
        pods,
        rollout_pending: false,
        url: "nats://x.ns.svc:4222".into(),
        tuning,
        resources: res,
        configured_threads: None,
        server_report: ServerReport::default(),
        fault_refusal: None,
        now: at(1_000),
    }
}

/// (status, reason) of Reconciling and Stalled.
fn kstatus(s: &ServerStatus) -> [(String, String); 2] {
    [RECONCILING, STALLED].map(|t| {
        let c = conditions::get(&s.conditions, t).unwrap_or_else(|| panic!("no {t}"));
        (c.status.clone(), c.reason.clone())
    })
}

fn pair(r: (&str, &str), s: (&str, &str)) -> [(String, String); 2] {
    [r, s].map(|(a, b)| (a.to_string(), b.to_string()))
}

#[test]
fn a_rollout_reconciles_until_every_replica_is_ready_and_rolled_out() {
    let res = <(Resources, Tuning)>::default();
    let rolling = pods(3, 1);
    let first = compute(&input(&rolling, &res, None));
    assert_eq!(
        kstatus(&first),
        pair(("True", "RollingOut"), ("False", "AsExpected"))
    );
    assert_eq!(first.observed_generation, Some(2));

    let ready = pods(3, 3);
    let mut i = input(&ready, &res, Some(&first));
    i.now = at(1_050);
    let done = compute(&i);
    assert_eq!(
        kstatus(&done),
        pair(("False", "Stable"), ("False", "AsExpected"))
    );
    let r = conditions::get(&done.conditions, RECONCILING).unwrap();
    assert_eq!(r.last_transition_time, at(1_050));
    assert_eq!(r.observed_generation, Some(2));

    // Every replica ready on the old template still reconciles while the new one rolls out.
    i.rollout_pending = true;
    assert_eq!(kstatus(&compute(&i))[0].0, "True");
}

#[test]
fn pod_problems_the_kubelet_retries_keep_reconciling() {
    let res = <(Resources, Tuning)>::default();
    let mut crashing = pods(3, 0);
    crashing.problem = Some(PodProblem {
        reason: "ImagePullBackOff".into(),
        message: "pod x: back-off pulling image".into(),
        rejected: false,
        refused_at: None,
    });
    let s = compute(&input(&crashing, &res, None));
    assert_eq!(
        kstatus(&s),
        pair(("True", "RollingOut"), ("False", "AsExpected"))
    );
}

#[test]
fn an_invalid_spec_stalls_and_a_fixed_one_reconciles_again() {
    let (none, res) = (pods(0, 0), <(Resources, Tuning)>::default());
    let v = [SpecViolation::invalid(
        "metadata.name",
        "at most 52 characters",
    )];
    let mut i = input(&none, &res, None);
    i.violations = &v;
    let bad = compute(&i);
    assert_eq!(
        kstatus(&bad),
        pair(("False", INVALID_SPEC), ("True", INVALID_SPEC))
    );
    let stalled = conditions::get(&bad.conditions, STALLED).unwrap();
    assert_eq!(stalled.message, "metadata.name: at most 52 characters");

    let mut fixed = input(&none, &res, Some(&bad));
    fixed.generation = Some(3);
    fixed.now = at(1_100);
    let s = compute(&fixed);
    assert_eq!(
        kstatus(&s),
        pair(("True", "RollingOut"), ("False", "AsExpected"))
    );
    assert_eq!(s.observed_generation, Some(3));
    let stalled = conditions::get(&s.conditions, STALLED).unwrap();
    assert_eq!(
        (
            stalled.last_transition_time.clone(),
            stalled.observed_generation
        ),
        (at(1_100), Some(3))
    );
}

#[test]
fn a_permanent_refusal_stalls_a_transient_one_reconciles() {
    let (none, res) = (pods(0, 0), <(Resources, Tuning)>::default());
    let forbidden = Hold {
        reason: "SysctlForbidden".into(),
        message: "pod x: forbidden sysctl; scaled to 0 replicas until the spec changes".into(),
        retry_at: None,
    };
    let mut i = input(&none, &res, None);
    i.hold = Some(&forbidden);
    let s = compute(&i);
    assert_eq!(
        kstatus(&s),
        pair(("False", "ScaledToZero"), ("True", "SysctlForbidden"))
    );
    let msg = &conditions::get(&s.conditions, STALLED).unwrap().message;
    assert_eq!(
        msg,
        "pod x: forbidden sysctl; held at 0 replicas until the spec changes"
    );

    let out_of_cpu = Hold {
        reason: "OutOfcpu".into(),
        message: "pod x: not enough cpu".into(),
        retry_at: Some(at(1_030)),
    };
    i.hold = Some(&out_of_cpu);
    assert_eq!(
        kstatus(&compute(&i)),
        pair(("True", "RetryPending"), ("False", "AsExpected"))
    );
}

#[test]
fn a_refused_fault_agent_stalls_a_serving_server() {
    let (ready, res) = (pods(3, 3), <(Resources, Tuning)>::default());
    let refusal = FaultRefusal::not_allowed(
        "spec.faultInjection",
        &["faults.enabled"],
        "remove spec.faultInjection",
    );
    let mut i = input(&ready, &res, None);
    i.fault_refusal = Some(&refusal);
    let s = compute(&i);
    assert_eq!(
        kstatus(&s),
        pair(
            ("False", "Stable"),
            ("True", conditions::FAULT_INJECTION_NOT_ALLOWED)
        )
    );
}
