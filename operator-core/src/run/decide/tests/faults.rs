//! A fault from plan to outcome, pass by pass: planned when its trial starts; when due, its pod
//! is chosen from the server as read in that pass and recorded in the status the pass writes
//! before anything touches the pod; every later pass (or a restarted operator, which knows only
//! status) acts on that same pod as a repeat, until the outcome is settled.
use super::*;
use crate::run::model::FaultTargetSeen;
use msgbench_crds::benchmark_run::FaultInjection;

const KILL_ORDINAL_1: &str = "faults: [{afterSeconds: 5, action: kill, pod: ordinal, ordinal: 1}]";

/// Both runners in trial 1, started at `START`.
fn in_trial_1(now_ms: u64) -> (BenchmarkRunStatus, Observed) {
    let both = vec![
        agent(0, started(1, 0, START)),
        agent(1, started(1, 0, START)),
    ];
    running(START, now_ms, both)
}

/// js3's three pods, as the pass that chooses reads them.
fn js3_pods(fault: i32, trial: i32) -> FaultTargetSeen {
    let pod = |i: u32| (format!("js3-{i}"), Some(format!("u{i}")));
    FaultTargetSeen {
        fault,
        trial,
        pods: Ok(vec![pod(0), pod(1), pod(2)]),
        leader: Some(Ok("js3-2".into())),
    }
}

/// The planned record's due time, after a pass in trial 1.
fn planned(br: &BenchmarkRun) -> (BenchmarkRunStatus, u64) {
    let (st, obs) = in_trial_1(START + 100);
    let d = decide_at(br, &st, &obs);
    assert_eq!(d.status.faults.len(), 1, "planned once the trial started");
    assert!(d.status.faults[0].injecting.is_none() && d.effects.is_empty());
    let due = millis(d.status.faults[0].planned_time.as_ref().unwrap());
    (d.status, due)
}

fn inject(index: usize, repeat: bool) -> Vec<Effect> {
    vec![Effect::InjectFault { index, repeat }]
}

#[test]
fn a_due_faults_pod_is_recorded_in_status_before_any_pass_acts_on_it() {
    let br = run(2, KILL_ORDINAL_1);
    let (planned_st, due) = planned(&br);
    // Due, its server not read yet (the pass that planned it did not know): nothing is done,
    // and the next pass comes at once.
    let (_, mut obs) = in_trial_1(due + 100);
    let d = decide_at(&br, &planned_st, &obs);
    assert!(d.effects.is_empty() && d.status.faults[0].injecting.is_none());
    assert_eq!(
        d.status.faults[0].message, None,
        "not judged before it could be chosen"
    );
    assert_eq!(d.requeue, Some(Duration::from_millis(20)));
    // Due with its server read: the pod is chosen into this pass's status, and act may touch
    // it only after that status is written.
    obs.fault_targets = vec![js3_pods(0, 1)];
    let d = decide_at(&br, &planned_st, &obs);
    let chosen = FaultInjection {
        pod: "js3-1".into(),
        pod_uid: "u1".into(),
        started_time: obs.now.clone(),
        how: "ordinal 1".into(),
        stream_leader: Some("js3-2".into()),
    };
    assert_eq!(d.status.faults[0].injecting, Some(chosen.clone()));
    assert_eq!(d.effects, inject(0, false));
    assert!(d.must_write_before_acting());
    // The next pass (or a restarted operator: it knows only status) acts on that same pod as a
    // repeat, whatever the server looks like now, and has nothing new to write first.
    let recorded = d.status;
    let (_, mut obs) = in_trial_1(due + 400);
    obs.fault_targets = vec![FaultTargetSeen {
        pods: Ok(vec![("js3-5".into(), Some("u5".into()))]),
        ..js3_pods(0, 1)
    }];
    let d = decide_at(&br, &recorded, &obs);
    assert_eq!(d.status.faults[0].injecting, Some(chosen.clone()));
    assert_eq!(d.effects, inject(0, true));
    assert!(!d.must_write_before_acting());
    // Once act reports the deletion, the record is settled and nothing is acted on again.
    let mut settled = recorded.clone();
    let deleted = EffectOutcome::FaultDeleted {
        index: 0,
        injection: chosen,
        at: at_ms(due + 450),
    };
    settle(&br, &mut settled, &[deleted], 1, &at_ms(due + 450));
    assert!(settled.faults[0].executed() && settled.faults[0].injecting.is_none());
    let (_, obs) = in_trial_1(due + 900);
    let d = decide_at(&br, &settled, &obs);
    assert!(d.effects.is_empty(), "{:?}", d.effects);
}

#[test]
fn a_fault_with_no_pod_to_choose_is_not_done_and_nothing_is_touched() {
    let br = run(2, KILL_ORDINAL_1);
    let (planned_st, due) = planned(&br);
    let (_, mut obs) = in_trial_1(due + 100);
    obs.fault_targets = vec![FaultTargetSeen {
        pods: Err("JetStreamCluster/js3 has no running pod it owns".into()),
        ..js3_pods(0, 1)
    }];
    let d = decide_at(&br, &planned_st, &obs);
    assert!(d.effects.is_empty());
    assert_eq!(
        d.status.faults[0].message.as_deref(),
        Some("not done: JetStreamCluster/js3 has no running pod it owns")
    );
    // An ordinal the server does not have is not done either, naming the pods it has.
    obs.fault_targets = vec![FaultTargetSeen {
        pods: Ok(vec![("js3-0".into(), Some("u0".into()))]),
        ..js3_pods(0, 1)
    }];
    let d = decide_at(&br, &planned_st, &obs);
    assert!(d.effects.is_empty() && d.status.faults[0].injecting.is_none());
    assert_eq!(
        d.status.faults[0].message.as_deref(),
        Some("not done: no server pod with ordinal 1 (pods: js3-0)")
    );
}

#[test]
fn a_due_fault_reached_late_is_not_done_and_no_pod_is_chosen() {
    let br = run(2, KILL_ORDINAL_1);
    let (planned_st, due) = planned(&br);
    let (_, mut obs) = in_trial_1(due + 2_500);
    obs.fault_targets = vec![js3_pods(0, 1)];
    let d = decide_at(&br, &planned_st, &obs);
    assert!(d.effects.is_empty() && d.status.faults[0].injecting.is_none());
    let message = d.status.faults[0].message.clone().unwrap_or_default();
    assert!(
        message.starts_with("not done: the operator reached it 2500 ms after it was due"),
        "{message}"
    );
}
