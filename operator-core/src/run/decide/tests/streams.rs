//! A finished run's streams, pass by pass: hold the finalizer before runners exist, sweep once
//! no runner is active, release with `StreamsDeleted` saying how it went, and no TTL deletion
//! of the children while the sweep may still run.
use super::*;
use crate::run::model::SweepSeen;
use crate::run::target::stream_sweep::{self, FINALIZER};

fn jetstream(extra: &str) -> BenchmarkRun {
    let mut br = run(1, extra);
    br.spec.workload.protocol = msgbench_crds::workload::Protocol::Jetstream;
    br
}

fn holding(mut br: BenchmarkRun) -> BenchmarkRun {
    br.metadata.finalizers = Some(vec!["other.example/keep".into(), FINALIZER.into()]);
    br
}

fn streams_condition(d: &Decision) -> Option<(String, String)> {
    let c = cond::get(&d.status.conditions, cond::STREAMS_DELETED)?;
    Some((c.status.clone(), c.reason.clone()))
}

#[test]
fn a_run_that_makes_streams_holds_the_finalizer_before_its_runners_exist() {
    let mut obs = Observed::at(at(T0 + 1));
    obs.targets = vec![ready_target()];
    let d = decide_at(&jetstream(""), &status(Phase::Pending), &obs);
    let hold = d.effects.iter().position(|e| *e == Effect::HoldStreams);
    let create = (d.effects.iter()).position(|e| matches!(e, Effect::CreateRunners { .. }));
    assert!(
        hold.is_some() && hold < create,
        "hold first: {:?}",
        d.effects
    );
    // Core NATS makes no stream; a run already holding it does not apply it again.
    for br in [run(1, ""), holding(jetstream(""))] {
        let d = decide_at(&br, &status(Phase::Pending), &obs);
        assert!(!d.effects.contains(&Effect::HoldStreams), "{:?}", d.effects);
        assert!(d
            .effects
            .iter()
            .any(|e| matches!(e, Effect::CreateRunners { .. })));
    }
}

#[test]
fn the_sweep_waits_for_active_runners_then_starts_once() {
    let br = holding(jetstream(""));
    let mut obs = Observed::at(at(T0 + 101));
    obs.targets = vec![ready_target()];
    obs.job = Some(job(T0 + 10)); // two runners still active
    let d = decide_at(&br, &finished(Phase::Succeeded), &obs);
    assert!(!(d.effects.iter()).any(|e| matches!(e, Effect::SweepStreams { .. })));
    assert_eq!(streams_condition(&d), None);

    obs.job = None;
    let d = decide_at(&br, &finished(Phase::Succeeded), &obs);
    let job = d.effects.iter().find_map(|e| match e {
        Effect::SweepStreams { job } => Some(job),
        _ => None,
    });
    let job = job.expect("a sweep Job");
    assert_eq!(job.metadata.name.as_deref(), Some("r1-streams"));
    assert_eq!(
        streams_condition(&d),
        Some(("Unknown".into(), stream_sweep::REASON_DELETING.into()))
    );
    assert_eq!(d.requeue, Some(POLL));

    obs.stream_sweep = Some(SweepSeen::Running);
    let d = decide_at(&br, &finished(Phase::Succeeded), &obs);
    assert!(d.effects.is_empty(), "no second Job: {:?}", d.effects);
    assert_eq!(d.requeue, Some(POLL));
}

#[test]
fn the_finalizer_goes_when_the_sweep_ended_either_way_and_the_condition_says_how() {
    let br = holding(jetstream(""));
    for (deleted, status, reason) in [
        (true, "True", stream_sweep::REASON_DELETED),
        (false, "False", stream_sweep::REASON_NOT_DELETED),
    ] {
        let mut obs = Observed::at(at(T0 + 120));
        obs.stream_sweep = Some(SweepSeen::Ended {
            deleted,
            message: "deleted 2 streams of run id 00000000".into(),
        });
        let d = decide_at(&br, &finished(Phase::Failed), &obs);
        assert_eq!(d.effects, vec![Effect::ReleaseStreams]);
        assert_eq!(streams_condition(&d), Some((status.into(), reason.into())));
        let c = cond::get(&d.status.conditions, cond::STREAMS_DELETED).unwrap();
        assert!(c.message.contains("deleted 2 streams"), "{}", c.message);
    }
}

#[test]
fn a_run_whose_server_is_gone_releases_and_says_no_target() {
    let br = holding(jetstream(""));
    let mut obs = Observed::at(at(T0 + 120));
    obs.targets = vec![TargetSeen {
        variant: None,
        resolved: Err("JetStreamCluster js3 not found".into()),
        unreachable: None,
    }];
    let d = decide_at(&br, &finished(Phase::Succeeded), &obs);
    assert_eq!(d.effects, vec![Effect::ReleaseStreams]);
    assert_eq!(
        streams_condition(&d),
        Some(("False".into(), stream_sweep::REASON_NO_TARGET.into()))
    );
    let c = cond::get(&d.status.conditions, cond::STREAMS_DELETED).unwrap();
    assert!(c.message.contains("js3 not found"), "{}", c.message);
}

#[test]
fn children_outlive_their_ttl_until_the_streams_are_settled() {
    let br = holding(jetstream("ttlSecondsAfterFinished: 0"));
    let mut obs = Observed::at(at(T0 + 200));
    obs.targets = vec![ready_target()];
    let d = decide_at(&br, &finished(Phase::Succeeded), &obs);
    assert!(
        !d.effects.contains(&Effect::DeleteChildren),
        "{:?}",
        d.effects
    );
    let mut released = br.clone();
    released.metadata.finalizers = Some(vec!["other.example/keep".into()]);
    obs.job = Some(job(T0 + 10));
    obs.job.as_mut().unwrap().status = None;
    let d = decide_at(&released, &finished(Phase::Succeeded), &obs);
    assert_eq!(d.effects, vec![Effect::DeleteChildren]);
}

#[test]
fn the_pass_that_releases_the_finalizer_applies_the_ttl_too() {
    // Releasing changes no generation: the controller's filter lets no later event through,
    // so waiting for one would keep the children past their TTL (CI saw this).
    let br = holding(jetstream("ttlSecondsAfterFinished: 0"));
    let mut obs = Observed::at(at(T0 + 200));
    obs.targets = vec![ready_target()];
    obs.runner_pods = vec![pod(0, "Succeeded", false)];
    let d = decide_at(&br, &finished(Phase::Succeeded), &obs);
    assert_eq!(
        d.effects,
        vec![Effect::ReleaseStreams, Effect::DeleteChildren]
    );
    // With time left, the pass that releases asks to come back when it runs out.
    let br = holding(jetstream("ttlSecondsAfterFinished: 600"));
    let d = decide_at(&br, &finished(Phase::Succeeded), &obs);
    assert_eq!(d.effects, vec![Effect::ReleaseStreams]);
    assert!(
        d.requeue.is_some_and(|r| r.as_secs() > 300),
        "{:?}",
        d.requeue
    );
}

#[test]
fn runners_that_all_exited_normally_deleted_their_streams_and_no_sweep_runs() {
    let br = holding(jetstream(""));
    let mut obs = Observed::at(at(T0 + 120));
    obs.targets = vec![ready_target()];
    obs.runner_pods = vec![pod(0, "Succeeded", false)];
    let d = decide_at(&br, &finished(Phase::Succeeded), &obs);
    assert_eq!(d.effects, vec![Effect::ReleaseStreams]);
    assert_eq!(
        streams_condition(&d),
        Some((
            "True".into(),
            stream_sweep::REASON_DELETED_BY_RUNNERS.into()
        ))
    );
    // A failed runner may have left its stream: the sweep runs.
    obs.runner_pods = vec![pod(0, "Failed", false)];
    let d = decide_at(&br, &finished(Phase::Failed), &obs);
    assert!((d.effects.iter()).any(|e| matches!(e, Effect::SweepStreams { .. })));
}
