//! The interval and the judgement of `spec.stopWhen`, check by check.
use super::*;
use runner_api::agent::AgentProgress;

fn run(extra: &str) -> BenchmarkRun {
    serde_norway::from_str(&format!(
        r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata: {{name: r, namespace: bench, uid: u-1, generation: 1}}
spec:
  target: {{serverRef: {{kind: JetStreamCluster, name: js3}}}}
  workload: {{protocol: jetstream, durationSeconds: 5}}
  trials: 20
  stopWhen: {{intervalWithinPercent: 5, figure: deliveryRate, minRounds: 3}}
  {extra}"#
    ))
    .unwrap()
}

fn variants_run() -> BenchmarkRun {
    run("variants: [{name: r1}, {name: r2, workload: {jetstream: {replicas: 2}}}]")
}

fn fig(round: i32, rate: Option<f64>) -> TrialFigures {
    TrialFigures {
        trial: round,
        delivery_rate: rate,
        receive_rate: rate.unwrap_or(0.0),
        publish_rate: 1000.0,
        ..TrialFigures::default()
    }
}

/// Per-round figures of r1 and r2, r2 at `ratios[i]` of r1, r1 drifting.
fn rounds(ratios: &[f64]) -> Vec<(String, Vec<TrialFigures>)> {
    let drift = [50_000.0, 30_000.0, 45_000.0, 38_000.0, 52_000.0, 41_000.0];
    let r1 = (0..ratios.len())
        .map(|i| fig(i as i32 + 1, Some(drift[i])))
        .collect();
    let r2 = ratios
        .iter()
        .enumerate()
        .map(|(i, r)| fig(i as i32 + 1, Some(drift[i] * r)))
        .collect();
    vec![("r1".into(), r1), ("r2".into(), r2)]
}

fn waiting(n: usize, trial: u32) -> Vec<AgentSeen> {
    (0..n)
        .map(|i| AgentSeen {
            pod: format!("p{i}"),
            ip: format!("10.0.0.{i}"),
            progress: AgentProgress {
                started: true,
                trial,
                waiting_for: trial,
                ..AgentProgress::default()
            },
        })
        .collect()
}

fn sw(br: &BenchmarkRun) -> &RunStopWhen {
    br.spec.stop_when.as_ref().unwrap()
}

#[test]
fn a_check_is_due_at_a_round_boundary_from_min_rounds_on_once_per_round() {
    let br = variants_run(); // 2 trials per round
    let st = BenchmarkRunStatus::default();
    // Round 3 starts at trial 5 (after 2 rounds): below minRounds.
    assert_eq!(check_due(&br, &st, &waiting(2, 5), 2), None);
    // Trial 6 is the second of round 3: no boundary.
    assert_eq!(check_due(&br, &st, &waiting(2, 6), 2), None);
    // Trial 7 begins round 4: 3 rounds ran, minRounds reached.
    assert_eq!(check_due(&br, &st, &waiting(2, 7), 2), Some(3));
    // Not every runner is there yet.
    assert_eq!(check_due(&br, &st, &waiting(1, 7), 2), None);
    let mut apart = waiting(2, 7);
    apart[1].progress.waiting_for = 0;
    assert_eq!(check_due(&br, &st, &apart, 2), None);
    // Recorded: not redone.
    let checked = BenchmarkRunStatus {
        stop: Some(StopStatus {
            rounds: 3,
            ..StopStatus::default()
        }),
        ..BenchmarkRunStatus::default()
    };
    assert_eq!(check_due(&br, &checked, &waiting(2, 7), 2), None);
    assert_eq!(check_due(&br, &checked, &waiting(2, 9), 2), Some(4));
    // Without stopWhen, never.
    let mut plain = variants_run();
    plain.spec.stop_when = None;
    assert_eq!(check_due(&plain, &st, &waiting(2, 7), 2), None);
}

#[test]
fn a_stop_recorded_in_status_cuts_the_plan_and_nothing_else_does() {
    let br = variants_run();
    let mut st = BenchmarkRunStatus::default();
    assert_eq!((rounds_run(&br, &st), trials_run(&br, &st)), (20, 40));
    assert_eq!(stop_after_trial(&br, &st), None);
    st.stop = Some(StopStatus {
        rounds: 4,
        ..StopStatus::default()
    });
    assert_eq!(rounds_run(&br, &st), 20, "a check that continued");
    st.stop.as_mut().unwrap().reason = Some(StopReason::IntervalReached);
    assert_eq!((rounds_run(&br, &st), trials_run(&br, &st)), (4, 8));
    assert_eq!(stop_after_trial(&br, &st), Some(8));
    st.stop = Some(StopStatus {
        rounds: 20,
        reason: Some(StopReason::MaxRounds),
        ..StopStatus::default()
    });
    assert_eq!(
        (rounds_run(&br, &st), stop_after_trial(&br, &st)),
        (20, None)
    );
}

#[test]
fn a_wide_paired_interval_continues_and_a_tight_one_stops() {
    let br = variants_run();
    let noisy = rounds(&[0.60, 0.75, 0.66]);
    let s = spread(&br, sw(&br), RoundFigures::Variants(&noisy));
    let p = s.percent.unwrap();
    assert!(p > 5.0, "{s:?}");
    let j = judge(sw(&br), 20, 3, &s, false);
    assert_eq!((j.rounds, j.reason), (3, None));
    assert!(
        j.message
            .starts_with("after 3 of 20 rounds: r2/r1 deliveryRate ±")
            && j.message.ends_with("(target ±5 %): next round"),
        "{}",
        j.message
    );

    // Drift cancels in the pair: 0.62 ± 1 % every round is decisive after 4 rounds.
    let steady = rounds(&[0.62, 0.615, 0.625, 0.62]);
    let s = spread(&br, sw(&br), RoundFigures::Variants(&steady));
    let p = s.percent.unwrap();
    assert!(p < 5.0, "{s:?}");
    let j = judge(sw(&br), 20, 4, &s, false);
    assert_eq!(j.reason, Some(StopReason::IntervalReached));
    assert_eq!(j.interval_percent, Some((p * 100.0).round() / 100.0));
    assert!(
        j.message.ends_with("within the target: stopped"),
        "{}",
        j.message
    );
}

#[test]
fn the_last_round_without_the_interval_says_it_was_not_reached() {
    let br = variants_run();
    let noisy = rounds(&[0.60, 0.75, 0.66, 0.8, 0.55, 0.7]);
    let s = spread(&br, sw(&br), RoundFigures::Variants(&noisy));
    let j = judge(sw(&br), 6, 6, &s, true);
    assert_eq!(j.reason, Some(StopReason::MaxRounds));
    assert!(j.interval_percent.unwrap() > 5.0);
    assert!(
        j.message.ends_with("the interval was NOT reached"),
        "{}",
        j.message
    );
}

#[test]
fn a_variant_missing_the_figure_has_no_interval_and_the_rounds_go_on() {
    let br = variants_run();
    let mut missing = rounds(&[0.62, 0.62, 0.62]);
    for t in &mut missing[1].1[1..] {
        t.delivery_rate = None; // nothing published in those rounds
    }
    let s = spread(&br, sw(&br), RoundFigures::Variants(&missing));
    assert_eq!(s.percent, None);
    assert!(
        s.detail.contains("r2/r1 has no interval on deliveryRate"),
        "{s:?}"
    );
    let j = judge(sw(&br), 20, 3, &s, false);
    assert_eq!((j.reason, j.interval_percent), (None, None));
    assert_eq!(
        judge(sw(&br), 3, 3, &s, true).reason,
        Some(StopReason::MaxRounds)
    );
}

#[test]
fn without_variants_the_mean_over_trials_decides() {
    let br = run("");
    let tight: Vec<_> = [1000.0, 1010.0, 995.0, 1005.0]
        .iter()
        .zip(1..)
        .map(|(r, t)| fig(t, Some(*r)))
        .collect();
    let s = spread(&br, sw(&br), RoundFigures::Single(&tight));
    // Half width t(3) · sd/√4 over the mean: 3.182 · 6.45/2 / 1002.5 = 1.02 %.
    let p = s.percent.unwrap();
    assert!((p - 1.02).abs() < 0.01, "{s:?}");
    assert_eq!(s.detail, format!("mean deliveryRate ±{p:.1} %"));
    let wide: Vec<_> = [1000.0, 1400.0, 800.0]
        .iter()
        .zip(1..)
        .map(|(r, t)| fig(t, Some(*r)))
        .collect();
    assert!(
        spread(&br, sw(&br), RoundFigures::Single(&wide))
            .percent
            .unwrap()
            > 5.0
    );
    let lacking = vec![fig(1, Some(1000.0)), fig(2, None), fig(3, Some(1000.0))];
    assert_eq!(
        spread(&br, sw(&br), RoundFigures::Single(&lacking)).percent,
        None
    );
}

/// One runner waits between rounds too, so the operator can decide before the next one.
#[test]
fn with_stop_when_even_one_runner_waits_for_each_trial() {
    use crate::run::runners::build::agent_config;
    let mut br = run("");
    assert_eq!(br.spec.runners.count, 1);
    assert!(agent_config(&br.spec, "nats://x:4222").trial_barrier);
    br.spec.stop_when = None;
    assert!(!agent_config(&br.spec, "nats://x:4222").trial_barrier);
}
