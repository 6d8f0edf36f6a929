//! A fault whose agent report is lost, transition by transition: asked, then answered without
//! a report → unknown (never "not done", never asked for again); then evidence → done with how it
//! is known, or past the bound → unknown for good, saying what was checked; and the verdict.
use super::*;
use crate::run::decide::{self, EffectOutcome};
use crate::run::faults::request::{outcome, request};
use crate::run::model::AgentAnswer;
use k8s_openapi::api::core::v1::{ContainerState, ContainerStateRunning, ContainerStateTerminated};
use msgbench_crds::benchmark_run::{BenchmarkRunStatus, RunFailureReason};

const PLANNED: u64 = 1_800_000_010_000;
const ASKED: u64 = PLANNED + 50;

fn at(ms: u64) -> Time {
    time_at(ms).unwrap()
}

fn run(fault: &str) -> BenchmarkRun {
    serde_norway::from_str(&format!(
        "apiVersion: msgbench.dev/v1alpha1\nkind: BenchmarkRun\nmetadata: {{name: r, uid: run1}}\n\
         spec:\n  target: {{serverRef: {{kind: JetStreamCluster, name: js3}}}}\n  \
         workload: {{protocol: jetstream, durationSeconds: 60}}\n  faults:\n    - {fault}\n"
    ))
    .unwrap()
}

fn crash_run() -> BenchmarkRun {
    run("{afterSeconds: 5, action: crash, pod: ordinal, ordinal: 0}")
}

fn injection() -> FaultInjection {
    FaultInjection {
        pod: "js3-0".into(),
        pod_uid: "u0".into(),
        started_time: at(ASKED),
        how: "ordinal 0".into(),
        stream_leader: None,
    }
}

/// A record whose choice is in status (so its agent was asked).
fn chosen(action: FaultAction) -> FaultRecord {
    FaultRecord {
        fault: 0,
        trial: 1,
        action: Some(action),
        planned_time: Some(at(PLANNED)),
        injecting: Some(injection()),
        ..FaultRecord::default()
    }
}

/// The same, after the repeated ask found no report.
fn unknown(action: FaultAction) -> FaultRecord {
    let mut rec = chosen(action);
    mark_unknown(&mut rec, &injection(), "no report for run1/0/1");
    rec
}

fn status(restarts: i32, exited: Option<(u64, &str)>, running_since: u64) -> ContainerStatus {
    let sec = |ms: u64| at(ms / 1000 * 1000);
    ContainerStatus {
        name: "nats".into(),
        restart_count: restarts,
        last_state: exited.map(|(ms, reason)| ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: 137,
                reason: Some(reason.into()),
                finished_at: Some(sec(ms)),
                ..Default::default()
            }),
            ..Default::default()
        }),
        state: Some(ContainerState {
            running: Some(ContainerStateRunning {
                started_at: Some(sec(running_since)),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn server(uid: &str, s: ContainerStatus) -> Vec<FaultEvidenceSeen> {
    vec![FaultEvidenceSeen {
        fault: 0,
        trial: 1,
        evidence: Evidence::Server {
            uid: Some(uid.into()),
            status: Some(Box::new(s)),
        },
    }]
}

fn agent(st: AgentState) -> Vec<FaultEvidenceSeen> {
    vec![FaultEvidenceSeen {
        fault: 0,
        trial: 1,
        evidence: Evidence::Agent(Ok(st)),
    }]
}

/// The first ask's refusal is "not done" (that agent did nothing). A repeat's refusal, or its
/// "no report", is unknown: the earlier ask may have been carried out by an agent that lost its
/// reports. An unknown record is not due again (never a second execution).
#[test]
fn a_repeated_ask_answered_without_a_report_is_unknown_not_not_done() {
    let br = crash_run();
    let inj = injection();
    let refused = || AgentAnswer::Refused("not done: 3000 ms past its last moment".into());
    assert!(matches!(
        outcome(0, &inj, refused(), false),
        Some(EffectOutcome::FaultNotDone { .. })
    ));
    for answer in [
        refused(),
        AgentAnswer::NoReport("no report for run1/0/1".into()),
    ] {
        let o = outcome(0, &inj, answer, true).unwrap();
        assert!(matches!(o, EffectOutcome::FaultUnknown { .. }), "{o:?}");
        let mut st = BenchmarkRunStatus {
            faults: vec![chosen(FaultAction::Crash)],
            ..BenchmarkRunStatus::default()
        };
        decide::settle(&br, &mut st, &[o], 1, &at(ASKED + 5_000));
        let rec = &st.faults[0];
        assert!(rec.unknown() && !rec.executed(), "{rec:?}");
        assert!(rec
            .message
            .as_deref()
            .unwrap()
            .starts_with("unknown: pod js3-0 may have been crashed"));
        let lost = rec.report_lost.as_ref().unwrap();
        assert_eq!(lost.asked_time, at(ASKED));
        assert!(
            faults::due(&st.faults, &at(ASKED + 5_000)).is_empty(),
            "never asked again"
        );
        assert_eq!(
            faults::unsettled_injection(rec),
            None,
            "nor re-asked by observe"
        );
    }
    // An unanswered ask settles nothing: asked again, as a repeat.
    assert_eq!(
        outcome(0, &inj, AgentAnswer::Unknown("timeout".into()), true),
        None
    );
    assert!(request(&br, &chosen(FaultAction::Crash), true).repeat);
}

/// Crash evidence: the server container of the very pod asked exited after the ask (SIGKILL's
/// 137) → done, at that exit, with the restart recorded and how it is known; the restart is then
/// read on as for a reported crash.
#[test]
fn a_crash_whose_report_is_lost_is_confirmed_by_the_containers_exit() {
    let br = crash_run();
    let mut recs = vec![unknown(FaultAction::Crash)];
    assert_eq!(evidence_due(&recs).count(), 1);
    // Still running since before the ask, nothing yet: no change, within the bound.
    let before = status(0, None, ASKED - 60_000);
    confirm(&br, &mut recs, &server("u0", before), &at(ASKED + 3_000));
    assert_eq!(recs[0], unknown(FaultAction::Crash));
    // Exited (137) a second after the ask and running again.
    let exited = status(1, Some((ASKED + 1_000, "Error")), ASKED + 2_000);
    confirm(&br, &mut recs, &server("u0", exited), &at(ASKED + 4_000));
    let r = &recs[0];
    assert!(r.executed() && !r.unknown(), "{r:?}");
    assert_eq!(
        r.executed_time,
        Some(at((ASKED + 1_000) / 1000 * 1000)),
        "the kubelet's exit"
    );
    assert_eq!(r.restart.as_ref().unwrap().exit_code, Some(137));
    let lost = r.report_lost.as_ref().unwrap();
    let how = lost.confirmed.as_deref().unwrap();
    assert!(
        how.contains("exited (code 137)") && how.contains("restart count 1"),
        "{how}"
    );
    assert!(
        r.message
            .as_deref()
            .unwrap()
            .ends_with("report lost, confirmed: reportLost"),
        "{r:?}"
    );
    assert_eq!(
        (r.injecting.as_ref(), evidence_due(&recs).count()),
        (None, 0)
    );
    assert_eq!(
        faults::not_injected(&br, &recs),
        None,
        "counts as carried out"
    );
    // The restart is read on (running time) as for a reported crash.
    let mut waiting = recs.clone();
    waiting[0].restart.as_mut().unwrap().running_time = None;
    let due = crate::run::faults::restart::restart_due(&waiting, &at(ASKED + 5_000));
    assert_eq!(due.count(), 1);
}

/// No evidence by the bound: unknown for good, saying what was checked, and the verdict says
/// the fault is unknown (FaultsUnconfirmed), not that it was not carried out.
#[test]
fn a_crash_without_evidence_past_the_bound_stays_unknown_with_what_was_checked() {
    let br = crash_run();
    let mut recs = vec![unknown(FaultAction::Crash)];
    let bound = evidence_bound_ms(&br, &recs[0]);
    assert_eq!(bound, ASKED + EVIDENCE_SECONDS * 1000);
    let quiet = || server("u0", status(0, None, ASKED - 60_000));
    confirm(&br, &mut recs, &quiet(), &at(bound - 1));
    assert_eq!(recs[0], unknown(FaultAction::Crash), "still looking");
    confirm(&br, &mut recs, &quiet(), &at(bound));
    let r = &recs[0];
    assert!(r.unknown() && r.injecting.is_none(), "{r:?}");
    let checked = r
        .report_lost
        .as_ref()
        .unwrap()
        .unconfirmed
        .as_deref()
        .unwrap();
    assert!(
        checked.contains("no exit after the ask") && checked.contains("restart count 0"),
        "{checked}"
    );
    let msg = r.message.as_deref().unwrap();
    assert!(
        msg.starts_with("unknown:") && !msg.contains("not done"),
        "{msg}"
    );
    assert_eq!(evidence_due(&recs).count(), 0, "no more reads");
    let (reason, text) = faults::not_injected_in(&br, &recs, 1).unwrap();
    assert_eq!(reason, RunFailureReason::FaultsUnconfirmed);
    assert!(
        text.starts_with("1 of 1 fault executions are unknown"),
        "{text}"
    );
    // Beside one not carried out, the run fails FaultsNotInjected and still names the unknown.
    let mut two = recs.clone();
    two.push(FaultRecord {
        trial: 2,
        message: Some("not done: no pod".into()),
        ..chosen(FaultAction::Crash)
    });
    let (reason, text) = faults::not_injected_in(&br, &two, 2).unwrap();
    assert_eq!(reason, RunFailureReason::FaultsNotInjected);
    assert!(
        text.contains("1 of 2 fault executions were not carried out"),
        "{text}"
    );
    assert!(
        text.contains("1 more of 2 fault executions are unknown"),
        "{text}"
    );
}

/// Evidence from another pod, or an exit that is not the crash, confirms nothing.
#[test]
fn a_replaced_pod_or_an_oom_kill_confirms_no_crash() {
    let br = crash_run();
    let exited = || status(1, Some((ASKED + 1_000, "Error")), ASKED + 2_000);
    let mut recs = vec![unknown(FaultAction::Crash)];
    let end = at(evidence_bound_ms(&br, &recs[0]));
    confirm(&br, &mut recs, &server("u1", exited()), &end);
    let checked = recs[0]
        .report_lost
        .as_ref()
        .unwrap()
        .unconfirmed
        .clone()
        .unwrap();
    assert!(checked.contains("pod js3-0 is replaced"), "{checked}");
    let mut recs = vec![unknown(FaultAction::Crash)];
    let oom = status(1, Some((ASKED + 1_000, "OOMKilled")), ASKED + 2_000);
    confirm(&br, &mut recs, &server("u0", oom), &end);
    assert!(recs[0].unknown(), "{:?}", recs[0]);
}

/// A partition: a restarted agent removed its table as a leftover within the fault's time, or
/// the table is in place → done. A pause: the server stopped, or resumed as a leftover → done;
/// neither by the bound → unknown.
#[test]
fn a_partition_or_pause_is_confirmed_from_the_agents_state() {
    let part =
        run("{afterSeconds: 5, action: partition, pod: ordinal, ordinal: 0, durationSeconds: 10}");
    let mut recs = vec![unknown(FaultAction::Partition)];
    let leftover = AgentState {
        started_unix_ms: ASKED + 4_000,
        partition_table: Some(false),
        leftover_partition_removed_unix_ms: Some(ASKED + 4_100),
        ..AgentState::default()
    };
    confirm(&part, &mut recs, &agent(leftover), &at(ASKED + 5_000));
    assert_eq!(recs[0].executed_time, Some(at(ASKED)), "the ask's time");
    let how = recs[0]
        .report_lost
        .as_ref()
        .unwrap()
        .confirmed
        .clone()
        .unwrap();
    assert!(
        how.contains("removed it") && how.contains("cut short"),
        "{how}"
    );
    let mut recs = vec![unknown(FaultAction::Partition)];
    let table = AgentState {
        partition_table: Some(true),
        ..AgentState::default()
    };
    confirm(&part, &mut recs, &agent(table), &at(ASKED + 5_000));
    assert!(recs[0].executed());

    let pause =
        run("{afterSeconds: 5, action: pause, pod: ordinal, ordinal: 0, durationSeconds: 10}");
    let mut recs = vec![unknown(FaultAction::Pause)];
    let stopped = AgentState {
        server_stopped: Some(true),
        ..AgentState::default()
    };
    confirm(&pause, &mut recs, &agent(stopped), &at(ASKED + 5_000));
    assert!(recs[0].executed());
    let mut recs = vec![unknown(FaultAction::Pause)];
    let running = AgentState {
        server_stopped: Some(false),
        ..AgentState::default()
    };
    let bound = evidence_bound_ms(&pause, &recs[0]);
    assert_eq!(
        bound,
        ASKED + 10_000 + EVIDENCE_SECONDS * 1000,
        "past the pause's end"
    );
    confirm(&pause, &mut recs, &agent(running), &at(bound));
    let checked = recs[0]
        .report_lost
        .as_ref()
        .unwrap()
        .unconfirmed
        .clone()
        .unwrap();
    assert!(
        checked.contains("the server process is running"),
        "{checked}"
    );
    assert!(recs[0].unknown());
}
