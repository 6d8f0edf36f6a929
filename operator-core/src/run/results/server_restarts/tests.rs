use super::*;
use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateTerminated, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

fn pod(name: &str, uid: &str, restarts: i32, last: Option<&str>) -> ObservedPod {
    ObservedPod {
        name: name.into(),
        uid: Some(uid.into()),
        restarts: (restarts > 0).then_some(restarts),
        last_termination: last.map(Into::into),
        ..ObservedPod::default()
    }
}

fn fault(pod: &str, action: FaultAction) -> FaultRecord {
    FaultRecord {
        pod: Some(pod.into()),
        action: Some(action),
        executed_time: Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
        ..FaultRecord::default()
    }
}

#[test]
fn nothing_changed_nothing_reported() {
    let start = [pod("js-0", "a", 1, Some("Error (exit 1)"))];
    assert!(unexplained(&start, &start, &[]).is_empty());
    assert_eq!(caution(&[]), None);
    let restarted = [pod("js-0", "a", 2, Some("OOMKilled (exit 137)"))];
    assert!(
        unexplained(&[], &restarted, &[]).is_empty(),
        "no pods kept at the start: no judgement"
    );
}

#[test]
fn an_oom_kill_of_a_pod_no_fault_touched_is_reported_with_its_reason() {
    let start = [pod("js-0", "a", 0, None), pod("js-1", "b", 0, None)];
    let now = [
        pod("js-0", "a", 1, Some("OOMKilled (exit 137)")),
        pod("js-1", "b", 0, None),
    ];
    let r = unexplained(&start, &now, &[]);
    assert_eq!(
        r,
        vec![ServerRestart {
            pod: "js-0".into(),
            change: "restarted".into(),
            restarts: 1,
            last_termination: Some("OOMKilled (exit 137)".into()),
        }]
    );
    let c = caution(&r).unwrap();
    assert!(c.contains("js-0 restarted (OOMKilled (exit 137))"), "{c}");
}

#[test]
fn restarts_before_the_run_do_not_count() {
    let start = [pod("js-0", "a", 2, Some("Error (exit 1)"))];
    let now = [pod("js-0", "a", 3, Some("Error (exit 2)"))];
    assert_eq!(unexplained(&start, &now, &[])[0].restarts, 1);
}

#[test]
fn a_crash_fault_explains_its_pods_restart_but_not_an_oom_kill() {
    let start = [pod("js-0", "a", 0, None)];
    let crashed = [pod("js-0", "a", 1, Some("Error (exit 137)"))];
    let crash = [fault("js-0", FaultAction::Crash)];
    assert!(unexplained(&start, &crashed, &crash).is_empty());
    let oom = [pod("js-0", "a", 2, Some("OOMKilled (exit 137)"))];
    assert_eq!(unexplained(&start, &oom, &crash).len(), 1);
}

#[test]
fn a_fault_on_one_pod_does_not_explain_another() {
    let start = [pod("js-0", "a", 0, None), pod("js-1", "b", 0, None)];
    let now = [
        pod("js-0", "a2", 0, None),
        pod("js-1", "b", 1, Some("Error (exit 2)")),
    ];
    let r = unexplained(&start, &now, &[fault("js-0", FaultAction::Kill)]);
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(
        (r[0].pod.as_str(), r[0].change.as_str()),
        ("js-1", "restarted")
    );
}

#[test]
fn a_replacement_nobody_asked_for_and_a_pod_gone_are_reported() {
    let start = [pod("js-0", "a", 0, None), pod("js-1", "b", 0, None)];
    let now = [pod("js-0", "a2", 0, None)];
    let r = unexplained(&start, &now, &[]);
    let seen: Vec<(&str, &str)> = r
        .iter()
        .map(|x| (x.pod.as_str(), x.change.as_str()))
        .collect();
    assert_eq!(seen, [("js-0", "replaced"), ("js-1", "gone")]);
}

#[test]
fn a_new_pod_counts_as_planned_only_when_a_fault_deleted_one() {
    let start = [pod("mq-abc", "a", 0, None)];
    let now = [pod("mq-xyz", "c", 0, None)];
    let kill = [fault("mq-abc", FaultAction::Kill)];
    assert!(unexplained(&start, &now, &kill).is_empty());
    let r = unexplained(&start, &now, &[]);
    let seen: Vec<&str> = r.iter().map(|x| x.change.as_str()).collect();
    assert_eq!(seen, ["new", "gone"]);
}

#[test]
fn a_fault_that_was_never_carried_out_explains_nothing() {
    let start = [pod("js-0", "a", 0, None)];
    let now = [pod("js-0", "a", 1, Some("Error (exit 1)"))];
    let mut f = fault("js-0", FaultAction::Crash);
    f.executed_time = None;
    assert_eq!(unexplained(&start, &now, &[f]).len(), 1);
}

#[test]
fn the_server_container_is_read_from_the_pod() {
    let mut p = Pod::default();
    p.metadata.name = Some("js-0".into());
    p.metadata.uid = Some("u1".into());
    p.spec = Some(PodSpec {
        containers: vec![
            Container {
                name: "nats".into(),
                ..Container::default()
            },
            Container {
                name: "fault-agent".into(),
                ..Container::default()
            },
        ],
        ..PodSpec::default()
    });
    let status = |name: &str, n: i32, reason: &str, code: i32| ContainerStatus {
        name: name.into(),
        restart_count: n,
        last_state: Some(ContainerState {
            terminated: Some(ContainerStateTerminated {
                reason: Some(reason.into()),
                exit_code: code,
                ..ContainerStateTerminated::default()
            }),
            ..ContainerState::default()
        }),
        ..ContainerStatus::default()
    };
    p.status = Some(PodStatus {
        container_statuses: Some(vec![
            status("fault-agent", 5, "Error", 1),
            status("nats", 1, "OOMKilled", 137),
        ]),
        ..PodStatus::default()
    });
    let o = observed_server_pod(&p);
    assert_eq!(o.uid.as_deref(), Some("u1"));
    assert_eq!(o.restarts, Some(1));
    assert_eq!(o.last_termination.as_deref(), Some("OOMKilled (exit 137)"));
}

#[test]
fn only_a_workload_controllers_pods_are_the_servers() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    let owned_by = |kind: &str, controller: bool| {
        let mut p = Pod::default();
        p.metadata.owner_references = Some(vec![OwnerReference {
            api_version: if kind == "ConfigMap" { "v1" } else { "apps/v1" }.into(),
            kind: kind.into(),
            name: "js3".into(),
            uid: "u".into(),
            controller: Some(controller),
            ..OwnerReference::default()
        }]);
        p
    };
    assert!(is_workload_pod(&owned_by("StatefulSet", true)));
    assert!(is_workload_pod(&owned_by("ReplicaSet", true)));
    assert!(
        !is_workload_pod(&owned_by("ConfigMap", true)),
        "a lookalike"
    );
    assert!(
        !is_workload_pod(&owned_by("StatefulSet", false)),
        "not its controller"
    );
    assert!(!is_workload_pod(&Pod::default()), "made by hand");
}
