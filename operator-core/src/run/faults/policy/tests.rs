use super::*;
use crate::run::decide::time_at;
use crate::run::faults::settle::settle_injections;
use crate::run::model::{AgentAnswer, FaultPodSeen};
use msgbench_crds::benchmark_run::{FaultAction, FaultStreamLeader};
use runner_api::agent::AgentProgress;

fn run(yaml_faults: &str, variants: bool) -> BenchmarkRun {
    let v = if variants {
        "  variants:\n    - {name: r1, workload: {jetstream: {replicas: 1}}}\n    - {name: r3, workload: {jetstream: {replicas: 3}}}\n"
    } else {
        ""
    };
    let y = format!(
        "apiVersion: msgbench.dev/v1alpha1\nkind: BenchmarkRun\nmetadata: {{name: r, namespace: n}}\n\
         spec:\n  target: {{serverRef: {{kind: JetStreamCluster, name: js3}}}}\n  \
         workload: {{protocol: jetstream, durationSeconds: 30, warmupSeconds: 2}}\n{v}  faults:\n{yaml_faults}"
    );
    serde_norway::from_str(&y).unwrap()
}

fn agent(trial: u32, start: u64) -> AgentSeen {
    AgentSeen {
        pod: format!("p{trial}"),
        ip: "10.0.0.1".into(),
        progress: AgentProgress {
            trial,
            started: true,
            trial_start_unix_ms: start,
            ..AgentProgress::default()
        },
    }
}

fn rounds() -> Vec<ScheduledRound> {
    vec![
        ScheduledRound {
            round: 1,
            order: vec!["r3".into(), "r1".into()],
        },
        ScheduledRound {
            round: 2,
            order: vec!["r1".into(), "r3".into()],
        },
    ]
}

#[test]
fn a_started_trial_gets_each_fault_once_due_after_warmup_plus_offset() {
    let br = run("    - {afterSeconds: 10, action: kill, pod: streamLeader}\n    - {afterSeconds: 20, action: delete, pod: ordinal, ordinal: 1}\n", true);
    let mut recs = Vec::new();
    // Trial 3 is round 2's first: r1. A runner still waiting (no start) plans nothing.
    plan(
        &br,
        &mut recs,
        &rounds(),
        &[agent(3, 1_000_000), agent(4, 0)],
    );
    assert_eq!(recs.len(), 2);
    assert_eq!(
        (recs[0].trial, recs[0].round, recs[0].variant.as_deref()),
        (3, Some(2), Some("r1"))
    );
    assert_eq!(recs[0].planned_time, time_at(1_000_000 + 2_000 + 10_000));
    assert_eq!(recs[1].planned_time, time_at(1_000_000 + 2_000 + 20_000));
    assert_eq!(recs[1].action, Some(FaultAction::Delete));
    assert_eq!(recs[0].server, "JetStreamCluster/js3");
    // Seen again (every runner reports it, every pass): not planned twice.
    plan(
        &br,
        &mut recs,
        &rounds(),
        &[agent(3, 1_000_000), agent(3, 1_000_000)],
    );
    assert_eq!(recs.len(), 2);
}

#[test]
fn due_records_are_those_past_their_time_and_not_yet_done() {
    let br = run(
        "    - {afterSeconds: 5, action: kill, pod: random}\n",
        false,
    );
    let mut recs = Vec::new();
    plan(&br, &mut recs, &[], &[agent(1, 10_000)]);
    let due_at = 10_000 + 2_000 + 5_000;
    assert!(due(&recs, &time_at(due_at - 1).unwrap()).is_empty());
    assert_eq!(
        next_due_in(&recs, &time_at(due_at - 300).unwrap()),
        Some(Duration::from_millis(300))
    );
    assert_eq!(due(&recs, &time_at(due_at).unwrap()), vec![0]);
    recs[0].executed_time = time_at(due_at);
    assert!(due(&recs, &time_at(due_at + 5).unwrap()).is_empty());
    assert_eq!(next_due_in(&recs, &time_at(due_at + 5).unwrap()), None);
}

/// The servers a pass reads are those of due records with no pod chosen yet and still in time.
#[test]
fn only_due_unchosen_records_in_time_have_their_server_read() {
    let br = run(
        "    - {afterSeconds: 5, action: kill, pod: random}\n",
        false,
    );
    let mut recs = Vec::new();
    plan(&br, &mut recs, &[], &[agent(1, 10_000)]);
    let due_at = 10_000 + 2_000 + 5_000;
    let read_at = |ms: u64, recs: &[FaultRecord]| to_choose(recs, &time_at(ms).unwrap()).count();
    assert_eq!(read_at(due_at - 1, &recs), 0, "not due yet");
    assert_eq!(read_at(due_at, &recs), 1);
    assert_eq!(read_at(due_at + LATE_LIMIT_MS, &recs), 1);
    assert_eq!(
        read_at(due_at + LATE_LIMIT_MS + 1, &recs),
        0,
        "late: not done unread"
    );
    recs[0].injecting = injecting().injecting;
    assert_eq!(read_at(due_at, &recs), 0, "chosen: that pod, never another");
}

#[test]
fn a_run_missing_a_fault_execution_says_which_and_why() {
    let br = run("    - {afterSeconds: 5, action: kill, pod: random}\n", true);
    // 2 variants × 1 trial = 2 executions expected.
    let mut recs = Vec::new();
    plan(
        &br,
        &mut recs,
        &rounds()[..1],
        &[agent(1, 1_000), agent(2, 50_000)],
    );
    assert_eq!(recs.len(), 2);
    recs[0].executed_time = time_at(8_000);
    recs[1].message = Some("not done: no server pod".into());
    let msg = not_injected(&br, &recs).unwrap();
    assert!(msg.starts_with("1 of 2 fault executions"), "{msg}");
    assert!(
        msg.contains("fault 0 in trial 2: not done: no server pod"),
        "{msg}"
    );
    recs[1].executed_time = time_at(58_000);
    assert_eq!(not_injected(&br, &recs), None);
    recs.pop();
    assert!(not_injected(&br, &recs)
        .unwrap()
        .contains("trial 2: never planned"));
}

#[test]
fn trials_map_to_rounds_and_variants_in_schedule_order() {
    assert_eq!(slot(&rounds(), 1), (Some(1), Some("r3".into())));
    assert_eq!(slot(&rounds(), 2), (Some(1), Some("r1".into())));
    assert_eq!(slot(&rounds(), 4), (Some(2), Some("r3".into())));
    assert_eq!(slot(&[], 3), (None, None));
}

fn pods() -> Vec<(i32, String)> {
    (0..3).map(|o| (o, format!("js3-{o}"))).collect()
}

#[test]
fn an_ordinal_names_its_pod_or_says_it_does_not_exist() {
    let br = run(
        "    - {afterSeconds: 5, action: kill, pod: ordinal, ordinal: 2}\n",
        false,
    );
    let f = &br.spec.faults[0];
    assert_eq!(choose_pod(f, &pods(), 1, 7, None).unwrap().0, "js3-2");
    let err = choose_pod(f, &pods()[..2], 1, 7, None).unwrap_err();
    assert!(err.contains("no server pod with ordinal 2"), "{err}");
}

#[test]
fn a_random_pod_is_the_same_for_a_seed_and_round_and_varies_over_rounds() {
    let br = run(
        "    - {afterSeconds: 5, action: kill, pod: random, seed: 42}\n",
        false,
    );
    let f = &br.spec.faults[0];
    let first = choose_pod(f, &pods(), 1, 7, None).unwrap();
    assert_eq!(
        first,
        choose_pod(f, &pods(), 1, 99, None).unwrap(),
        "spec seed wins"
    );
    assert!(first.1.contains("seed 42, round 1"), "{}", first.1);
    let drawn: std::collections::BTreeSet<String> = (1..=20)
        .map(|r| choose_pod(f, &pods(), r, 7, None).unwrap().0)
        .collect();
    assert_eq!(drawn.len(), 3, "20 rounds draw every pod: {drawn:?}");
}

#[test]
fn the_stream_leader_must_be_one_of_the_servers_own_pods() {
    let br = run(
        "    - {afterSeconds: 5, action: kill, pod: streamLeader}\n",
        false,
    );
    let f = &br.spec.faults[0];
    let ok = choose_pod(f, &pods(), 1, 7, Some(Ok("js3-1".into()))).unwrap();
    assert_eq!(ok.0, "js3-1");
    let foreign = choose_pod(f, &pods(), 1, 7, Some(Ok("other-0".into()))).unwrap_err();
    assert!(
        foreign.contains("not one of this server's pods"),
        "{foreign}"
    );
    let none = choose_pod(f, &pods(), 1, 7, Some(Err("no answer".into()))).unwrap_err();
    assert!(none.contains("no stream leader found: no answer"), "{none}");
}

#[test]
fn ordinals_are_read_only_from_statefulset_pod_names_of_that_server() {
    assert_eq!(ordinal("js3", "js3-2"), Some(2));
    assert_eq!(ordinal("js3", "js30-2"), None);
    assert_eq!(ordinal("js3", "js3-x"), None);
}

#[test]
fn with_faults_even_one_runner_waits_for_each_trial_so_its_start_is_known() {
    use crate::run::runners::build::agent_config;
    let mut br = run(
        "    - {afterSeconds: 5, action: kill, pod: random}\n",
        false,
    );
    assert!(agent_config(&br.spec, "nats://x:4222").trial_barrier);
    br.spec.faults.clear();
    assert!(!agent_config(&br.spec, "nats://x:4222").trial_barrier);
}

#[test]
fn deployment_pods_are_numbered_in_name_order_statefulset_pods_by_name() {
    let sts = ["js3-2".to_string(), "js3-0".into(), "js3-1".into()];
    assert_eq!(ordinals("js3", &sts)[0], (0, "js3-0".into()));
    assert_eq!(ordinals("js3", &sts)[2], (2, "js3-2".into()));
    let dep = ["mq-7d7-zz".to_string(), "mq-7d7-aa".into()];
    assert_eq!(
        ordinals("mq", &dep),
        vec![(0, "mq-7d7-aa".into()), (1, "mq-7d7-zz".into())]
    );
}

/// A record whose pod `demo-0` (uid `u0`) was recorded as chosen at 10_050, due at 10_000.
fn injecting() -> FaultRecord {
    FaultRecord {
        fault: 0,
        trial: 1,
        action: Some(FaultAction::Kill),
        planned_time: time_at(10_000),
        injecting: Some(msgbench_crds::benchmark_run::FaultInjection {
            pod: "demo-0".into(),
            pod_uid: "u0".into(),
            started_time: time_at(10_050).unwrap(),
            how: "ordinal 0".into(),
            stream_leader: Some("js3-1".into()),
        }),
        ..FaultRecord::default()
    }
}

/// A JetStream fault records the stream's leader when its pod was chosen, and the one most
/// servers name once it is over plus the election bound, read once, and only while recent.
#[test]
fn the_stream_leader_is_recorded_before_and_after_the_fault() {
    let br = run(
        "    - {afterSeconds: 5, action: pause, pod: ordinal, ordinal: 0, durationSeconds: 4}\n",
        false,
    );
    let mut recs = vec![injecting()];
    settle_injections(
        &br,
        &mut recs,
        &[seen(Some("u1"), false)],
        &time_at(10_100).unwrap(),
    );
    let done = recs[0]
        .executed_time
        .clone()
        .expect("replaced: carried out");
    assert_eq!(
        recs[0].stream_leader,
        Some(FaultStreamLeader {
            before: Some("js3-1".into()),
            ..FaultStreamLeader::default()
        })
    );
    let at = |ms: i64| time_at((done.0.as_millisecond() + ms) as u64).unwrap();
    let due = |recs: &[FaultRecord], ms| leader_after_due(&br, recs, &at(ms)).count();
    let settle = LEADER_SETTLE_SECONDS as i64 * 1000;
    assert_eq!(
        due(&recs, settle - 1),
        0,
        "an election first (the pause is shorter)"
    );
    assert_eq!(due(&recs, settle), 1);
    assert_eq!(
        due(&recs, settle + 120_000),
        0,
        "too late: the trial moved on"
    );
    let seen_after = FaultLeaderSeen {
        fault: 0,
        trial: 1,
        leader: "js3-2".into(),
    };
    record_leaders_after(&mut recs, &[seen_after], &at(settle));
    let sl = recs[0].stream_leader.clone().unwrap();
    assert_eq!(
        (sl.before.as_deref(), sl.after.as_deref()),
        (Some("js3-1"), Some("js3-2"))
    );
    assert_eq!(sl.after_time, Some(at(settle)));
    assert_eq!(due(&recs, settle + 1_000), 0, "read once");
    // A pause longer than the election bound is read a second after it ends.
    let long = run(
        "    - {afterSeconds: 5, action: pause, pod: ordinal, ordinal: 0, durationSeconds: 12}\n",
        false,
    );
    let mut fresh = recs.clone();
    fresh[0].stream_leader.as_mut().unwrap().after = None;
    let due_long = |ms| leader_after_due(&long, &fresh, &at(ms)).count();
    assert_eq!((due_long(12_999), due_long(13_000)), (0, 1));
}

fn seen(uid: Option<&str>, deleting: bool) -> FaultPodSeen {
    FaultPodSeen {
        pod: "demo-0".into(),
        uid: uid.map(Into::into),
        deleting,
        answer: None,
    }
}

/// A crash is settled by the fault agent's report alone: at the agent's time, with its signal;
/// the pod untouched (a crash restarts the container, not the pod) proves nothing either way.
/// Its choice was in status, so it was asked: a replaced pod, or no report by the time it is
/// late, leaves it unknown (`fault_unknown`), never "not done".
#[test]
fn a_crash_counts_only_by_the_agents_report() {
    let br = run(
        "    - {afterSeconds: 5, action: crash, pod: ordinal, ordinal: 0}\n",
        false,
    );
    let crash = || FaultRecord {
        action: Some(FaultAction::Crash),
        ..injecting()
    };
    let report = runner_api::fault_agent::FaultReport {
        key: "uid/0/1".into(),
        action: runner_api::fault_agent::AgentAction::Crash,
        signal: Some(runner_api::fault_agent::SignalSent {
            signal: "SIGKILL".into(),
            process: "nats-server".into(),
            pid: 7,
        }),
        partition: None,
        power_loss: None,
        at_unix_ms: 10_080,
        until_unix_ms: None,
    };
    let at = time_at(10_500).unwrap();
    let mut recs = vec![crash()];
    let replaced = seen(Some("u1"), false);
    settle_injections(&br, &mut recs, std::slice::from_ref(&replaced), &at);
    assert!(
        recs[0].unknown(),
        "a replaced pod may hide a crash: {:?}",
        recs[0]
    );
    assert!(recs[0]
        .message
        .as_deref()
        .unwrap()
        .starts_with("unknown: pod demo-0"));
    let mut recs = vec![crash()];
    let reported = FaultPodSeen {
        answer: Some(AgentAnswer::Done(report)),
        ..seen(Some("u0"), false)
    };
    settle_injections(&br, &mut recs, std::slice::from_ref(&reported), &at);
    let r = &recs[0];
    assert_eq!(r.executed_time, time_at(10_080), "the agent's clock");
    assert_eq!(r.offset_seconds, Some(5.08));
    let signal = r.signal.as_ref().unwrap();
    assert_eq!((signal.signal.as_str(), signal.pid), ("SIGKILL", 7));
    assert_eq!(
        r.message.as_deref(),
        Some("SIGKILL to nats-server (pid 7) in pod demo-0 (ordinal 0)")
    );
    // No report, and late: unknown (the ask may have been carried out), not "not done".
    let mut recs = vec![crash()];
    let untouched = seen(Some("u0"), false);
    settle_injections(&br, &mut recs, &[untouched], &time_at(12_500).unwrap());
    assert!(recs[0].unknown(), "{:?}", recs[0]);
    assert!(recs[0].message.as_deref().unwrap().starts_with("unknown"));
}

/// A partition is recorded as the agent applied it: its ports and rules, when they were in
/// place and when the agent heals them, by the agent's clock; and the agent is asked for the
/// fault's own duration and side.
#[test]
fn a_partition_is_recorded_with_the_agents_rules_and_times() {
    let br = run(
        "    - {afterSeconds: 5, action: partition, pod: ordinal, ordinal: 0, durationSeconds: 10, partitionFrom: both}\n",
        false,
    );
    let part = || FaultRecord {
        action: Some(FaultAction::Partition),
        ..injecting()
    };
    let asked = crate::run::faults::request::request(&br, &part(), false);
    assert_eq!(
        asked.action,
        runner_api::fault_agent::AgentAction::Partition
    );
    assert_eq!(asked.duration_ms, Some(10_000));
    assert_eq!(
        asked.partition_from,
        Some(msgbench_crds::benchmark_run::PartitionFrom::Both)
    );
    let report = runner_api::fault_agent::FaultReport {
        key: asked.key.clone(),
        action: asked.action,
        signal: None,
        partition: Some(runner_api::fault_agent::RulesApplied {
            ports: vec![6222, 4222],
            rules: "table inet msgbench_fault { }".into(),
        }),
        power_loss: None,
        at_unix_ms: 10_200,
        until_unix_ms: Some(20_200),
    };
    let mut recs = vec![part()];
    let reported = FaultPodSeen {
        answer: Some(AgentAnswer::Done(report)),
        ..seen(Some("u0"), false)
    };
    settle_injections(
        &br,
        &mut recs,
        std::slice::from_ref(&reported),
        &time_at(10_500).unwrap(),
    );
    let r = &recs[0];
    assert_eq!(r.executed_time, time_at(10_200), "the agent's clock");
    assert!(r.signal.is_none());
    let p = r.partition.as_ref().unwrap();
    assert_eq!(p.ports, [6222, 4222]);
    assert_eq!(Some(p.heal_time.clone()), time_at(20_200));
    assert_eq!(
        r.message.as_deref(),
        Some("TCP ports [6222, 4222] dropped both ways for 10.0 s in pod demo-0 (ordinal 0)")
    );
}

#[test]
fn a_recorded_choice_whose_pod_is_gone_replaced_or_terminating_counts_as_carried_out() {
    let br = run(
        "    - {afterSeconds: 5, action: kill, pod: ordinal, ordinal: 0}\n",
        false,
    );
    let late = time_at(60_000).unwrap(); // far past the lateness limit: no matter
    for pod in [
        seen(None, false),
        seen(Some("u1"), false),
        seen(Some("u0"), true),
    ] {
        let mut recs = vec![injecting()];
        settle_injections(&br, &mut recs, std::slice::from_ref(&pod), &late);
        let r = &recs[0];
        assert_eq!(
            r.executed_time,
            time_at(10_050),
            "at the recorded time: {pod:?}"
        );
        assert_eq!(r.offset_seconds, Some(5.05));
        assert_eq!(r.pod.as_deref(), Some("demo-0"));
        assert_eq!(
            r.message.as_deref(),
            Some("killed (grace 1 s) demo-0 (ordinal 0)")
        );
        assert!(r.injecting.is_none());
        assert_eq!(not_injected(&br, &recs), None, "no FaultsNotInjected");
    }
}

#[test]
fn a_recorded_choice_whose_pod_is_untouched_is_finished_in_time_and_not_done_when_late() {
    let br = run(
        "    - {afterSeconds: 5, action: kill, pod: ordinal, ordinal: 0}\n",
        false,
    );
    let mut recs = vec![injecting()];
    settle_injections(
        &br,
        &mut recs,
        &[seen(Some("u0"), false)],
        &time_at(11_000).unwrap(),
    );
    assert_eq!(recs[0], injecting(), "left for act to delete that same pod");
    assert_eq!(due(&recs, &time_at(11_000).unwrap()), [0]);
    settle_injections(
        &br,
        &mut recs,
        &[seen(Some("u0"), false)],
        &time_at(12_500).unwrap(),
    );
    assert!(recs[0].executed_time.is_none() && recs[0].injecting.is_none());
    assert!(recs[0]
        .message
        .as_deref()
        .unwrap()
        .starts_with("not done: pod demo-0"));
    // Not looked at this pass: nothing is concluded.
    let mut recs = vec![injecting()];
    settle_injections(&br, &mut recs, &[], &time_at(60_000).unwrap());
    assert_eq!(recs[0], injecting());
}

#[test]
fn a_kill_is_never_a_forced_deletion() {
    // Grace 0 would let the StatefulSet start the replacement on the same volume at once.
    assert_eq!(deletion_grace_seconds(Some(FaultAction::Kill)), Some(1));
    assert_eq!(deletion_grace_seconds(Some(FaultAction::Delete)), None);
    assert_eq!(deletion_grace_seconds(None), None);
}

/// A power loss is recorded as the agent reports it: the bytes the lazy file system discarded
/// beside the SIGKILL its wrapper sent, in the record and its message.
#[test]
fn a_power_loss_records_what_was_discarded() {
    let br = run(
        "    - {afterSeconds: 5, action: powerLoss, pod: ordinal, ordinal: 0}\n",
        false,
    );
    let rec = FaultRecord {
        action: Some(FaultAction::PowerLoss),
        ..injecting()
    };
    let asked = crate::run::faults::request::request(&br, &rec, false);
    assert_eq!(
        asked.action,
        runner_api::fault_agent::AgentAction::PowerLoss
    );
    assert_eq!(asked.duration_ms, None);
    let report = runner_api::fault_agent::FaultReport {
        key: asked.key.clone(),
        action: asked.action,
        signal: Some(runner_api::fault_agent::SignalSent {
            signal: "SIGKILL".into(),
            process: "nats-server".into(),
            pid: 7,
        }),
        partition: None,
        power_loss: Some(runner_api::fault_agent::PowerLossDone {
            discarded_bytes: 1_048_576,
        }),
        at_unix_ms: 10_080,
        until_unix_ms: None,
    };
    let mut recs = vec![rec];
    let reported = FaultPodSeen {
        answer: Some(AgentAnswer::Done(report)),
        ..seen(Some("u0"), false)
    };
    settle_injections(&br, &mut recs, &[reported], &time_at(10_500).unwrap());
    let r = &recs[0];
    assert_eq!(
        r.power_loss.as_ref().map(|p| p.discarded_bytes),
        Some(1_048_576)
    );
    assert_eq!(r.executed_time, time_at(10_080), "the agent's clock");
    assert_eq!(
        r.message.as_deref(),
        Some(
            "1048576 unsynced bytes discarded by the lazy file system, then SIGKILL to \
             nats-server (pid 7) in pod demo-0 (ordinal 0)"
        )
    );
}
