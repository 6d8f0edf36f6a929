//! `spec.stopWhen`, transition by transition: two runners wait between rounds of a run with
//! variants a and b (two trials a round); the records so far decide the next round or a stop,
//! the stop is recorded before it is sent, and the verdict counts the rounds that ran.
use super::*;
use msgbench_crds::benchmark_run::{ScheduledRound, StopReason, StopStatus};

const STOP: &str = "trials: 20\n  stopWhen: {intervalWithinPercent: 5, minRounds: 3}\n  \
    variants: [{name: a}, {name: b, workload: {payloadBytes: 128}}]";

/// Rounds in the order a, b.
fn schedule(rounds: i32) -> Vec<ScheduledRound> {
    (1..=rounds)
        .map(|round| ScheduledRound {
            round,
            order: vec!["a".into(), "b".into()],
        })
        .collect()
}

fn waiting_at(trial: u32) -> Vec<AgentSeen> {
    (0..2)
        .map(|i| agent(i, started(trial - 1, trial, 0)))
        .collect()
}

/// Both runners' records of `rounds` rounds; b delivers `ratio[r]` of a's 100 msg/s, a's
/// rate drifting by round.
fn records(ratios: &[f64]) -> Vec<runner_api::agent::RawResultLine> {
    let mut lines = Vec::new();
    for (i, ratio) in ratios.iter().enumerate() {
        let round = i as u32 + 1;
        let a_rate = 100 + 40 * (i as u64 % 3);
        let b_rate = (a_rate as f64 * ratio).round() as u64;
        for (pos, (name, rate)) in [("a", a_rate), ("b", b_rate)].into_iter().enumerate() {
            let trial = (round - 1) * 2 + pos as u32 + 1;
            for runner in 1..=2 {
                let mut l = record(runner, trial, &vec![1_000; rate as usize], rate);
                l.variant = Some(name.into());
                l.round = Some(round);
                lines.push(l);
            }
        }
    }
    crate::run::results::tests::raw(&lines)
}

fn between_rounds(trial: u32, rounds: i32) -> (BenchmarkRunStatus, Observed) {
    let (mut st, obs) = running(START, START + 60_000, waiting_at(trial));
    st.schedule = schedule(20);
    st.stop = (rounds > 0).then(|| StopStatus {
        rounds,
        ..StopStatus::default()
    });
    (st, obs)
}

fn released(d: &Decision) -> Option<u32> {
    d.effects.iter().find_map(|e| match e {
        Effect::Release { trial, .. } => Some(*trial),
        _ => None,
    })
}

#[test]
fn below_min_rounds_the_next_round_is_released_unread() {
    let br = run(2, STOP);
    let (st, obs) = between_rounds(5, 0); // after 2 rounds
    let d = decide_at(&br, &st, &obs);
    assert_eq!(released(&d), Some(5));
    assert_eq!(d.status.stop, None);
}

#[test]
fn a_due_check_holds_the_runners_until_the_records_are_read() {
    let br = run(2, STOP);
    let (st, mut obs) = between_rounds(7, 0); // after 3 rounds
    let d = decide_at(&br, &st, &obs);
    assert_eq!((released(&d), d.effects.len()), (None, 0));
    assert_eq!(d.status.phase, Some(Phase::Running));
    obs.interim = Some(Gathered::NotYet("pod p: connection refused".into()));
    let d = decide_at(&br, &st, &obs);
    assert_eq!((d.effects.len(), d.status.verdict.clone()), (0, None));
}

#[test]
fn a_wide_interval_is_recorded_and_the_next_round_released() {
    let br = run(2, STOP);
    let (st, mut obs) = between_rounds(7, 0);
    obs.interim = Some(Gathered::Complete(records(&[0.6, 0.8, 0.7])));
    let d = decide_at(&br, &st, &obs);
    let s = d.status.stop.as_ref().unwrap();
    assert_eq!((s.rounds, s.max_rounds, s.reason), (3, 20, None));
    assert!(s.interval_percent.unwrap() > 5.0, "{s:?}");
    assert!(s.message.contains("b/a deliveryRate ±"), "{}", s.message);
    assert_eq!(released(&d), Some(7));
    // The same boundary again (the status write raced the release): not re-read, released.
    obs.interim = None;
    let d = decide_at(&br, &d.status, &obs);
    assert_eq!(released(&d), Some(7));
}

#[test]
fn a_tight_interval_is_recorded_as_a_stop_before_any_runner_hears_it() {
    let br = run(2, STOP);
    let (st, mut obs) = between_rounds(9, 3); // after 4 rounds, round 3 checked
    obs.interim = Some(Gathered::Complete(records(&[0.6, 0.61, 0.6, 0.6])));
    let d = decide_at(&br, &st, &obs);
    let s = d.status.stop.clone().unwrap();
    assert_eq!((s.rounds, s.reason), (4, Some(StopReason::IntervalReached)));
    assert!(s.interval_percent.unwrap() <= 5.0, "{s:?}");
    assert!(d.effects.is_empty(), "stored first: {:?}", d.effects);

    // Next pass (also after an operator restart): the stop goes to the waiting runners.
    obs.interim = None;
    let d = decide_at(&br, &d.status, &obs);
    let ips = vec!["10.0.0.1".to_string(), "10.0.0.2".to_string()];
    assert_eq!(
        d.effects,
        vec![Effect::StopRunners {
            after_trial: 8,
            ips
        }]
    );
    // One runner already keeps it: only the other hears it again; never a release.
    obs.agents[0].progress.stopped_after = 8;
    let d = decide_at(&br, &d.status, &obs);
    assert_eq!(
        d.effects,
        vec![Effect::StopRunners {
            after_trial: 8,
            ips: vec!["10.0.0.2".into()]
        }]
    );
}

#[test]
fn a_run_that_stopped_early_succeeds_with_the_rounds_that_ran() {
    let br = run(2, STOP);
    let (mut st, mut obs) = running(START, START + 90_000, vec![]);
    st.schedule = schedule(20);
    st.progress = Some(Progress::default());
    st.stop = Some(StopStatus {
        rounds: 4,
        reason: Some(StopReason::IntervalReached),
        message: "after 4 of 20 rounds: b/a deliveryRate ±1.2 % (target ±5 %): \
                  within the target: stopped"
            .into(),
        ..StopStatus::default()
    });
    obs.results = Some(Gathered::Complete(records(&[0.6, 0.61, 0.6, 0.6])));
    let d = decide_at(&br, &st, &obs);
    assert_eq!(verdict(&d), (Some(Phase::Succeeded), "Succeeded".into()));
    assert_eq!(d.status.schedule.len(), 4, "the rounds that ran");
    assert_eq!(d.status.variant_comparison.as_ref().unwrap().rounds, 4);
    assert_eq!(d.status.variants[1].trials.len(), 4);
    assert_eq!(d.status.progress.as_ref().map(|p| p.trials), Some(8));
    assert!(message(&d).contains("x 4 rounds"), "{}", message(&d));
    assert!(
        message(&d).contains("stopWhen after 4 of 20"),
        "{}",
        message(&d)
    );
    // Once finished, holding runners are told the status has their 8 records.
    let mut done = d.status.clone();
    done.phase = Some(Phase::Succeeded);
    let d = decide_at(&br, &done, &obs);
    assert!(d
        .effects
        .iter()
        .any(|e| matches!(e, Effect::AckResults { records: 8, .. })));
}

#[test]
fn every_round_without_the_interval_ends_max_rounds_saying_it_was_not_reached() {
    let br = run(
        2,
        "trials: 3\n  stopWhen: {intervalWithinPercent: 5, minRounds: 3}\n  \
         variants: [{name: a}, {name: b, workload: {payloadBytes: 128}}]",
    );
    let (mut st, mut obs) = running(START, START + 90_000, vec![]);
    st.schedule = schedule(3);
    obs.results = Some(Gathered::Complete(records(&[0.6, 0.8, 0.7])));
    let d = decide_at(&br, &st, &obs);
    assert_eq!(verdict(&d), (Some(Phase::Succeeded), "Succeeded".into()));
    let s = d.status.stop.as_ref().unwrap();
    assert_eq!((s.rounds, s.reason), (3, Some(StopReason::MaxRounds)));
    assert!(
        s.message.ends_with("the interval was NOT reached"),
        "{}",
        s.message
    );
    assert!(message(&d).contains("NOT reached"), "{}", message(&d));
}
