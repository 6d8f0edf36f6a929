//! `spec.stopWhen`: between rounds, is the answer decisive yet? Pure: the interval of the
//! chosen figure over the rounds so far (with variants, every variant's paired ratio to the
//! baseline, `paired.rs`; without, the mean over trials), judged against the target, and how
//! many rounds (and trials) the run takes once a stop is recorded in `status.stop`.
use crate::run::model::AgentSeen;
use crate::run::results::paired;
use crate::run::results::stats::{half_width95, mean};
use crate::run::variants;
use msgbench_crds::benchmark_run::{
    BenchmarkRun, BenchmarkRunStatus, RunStopWhen, StopFigure, StopReason, StopStatus, TrialFigures,
};

/// Trials per round: every variant once, or the one workload.
pub fn per_round(br: &BenchmarkRun) -> u32 {
    br.spec.variants.len().max(1) as u32
}

/// Rounds the run takes: those a recorded stop kept, else `trials`.
pub fn rounds_run(br: &BenchmarkRun, st: &BenchmarkRunStatus) -> u32 {
    match &st.stop {
        Some(s) if s.reason == Some(StopReason::IntervalReached) => s.rounds.max(1) as u32,
        _ => br.spec.trials.max(1) as u32,
    }
}

/// Trials the runners run in all (what their results and the ack count).
pub fn trials_run(br: &BenchmarkRun, st: &BenchmarkRunStatus) -> u32 {
    rounds_run(br, st) * per_round(br)
}

/// The last trial before a recorded stop, while it still cuts the plan short.
pub fn stop_after_trial(br: &BenchmarkRun, st: &BenchmarkRunStatus) -> Option<u32> {
    let rounds = rounds_run(br, st);
    (br.spec.stop_when.is_some() && rounds < br.spec.trials.max(1) as u32)
        .then(|| rounds * per_round(br))
}

/// The rounds `k` a check is due for: every runner waits for the first trial of round `k + 1`,
/// `minRounds ≤ k < trials`, and no check of `k` is recorded (a recorded one is not redone:
/// the same records give the same answer, and a stop is acted on from status).
pub fn check_due(
    br: &BenchmarkRun,
    st: &BenchmarkRunStatus,
    agents: &[AgentSeen],
    runners: usize,
) -> Option<u32> {
    let sw = br.spec.stop_when.as_ref()?;
    let next = agents.first()?.progress.waiting_for;
    if agents.len() < runners || agents.iter().any(|a| a.progress.waiting_for != next) {
        return None;
    }
    let per = per_round(br);
    if next < 2 || (next - 1) % per != 0 {
        return None;
    }
    let k = (next - 1) / per;
    let checked = st.stop.as_ref().map_or(0, |s| s.rounds.max(0) as u32);
    let decided = st.stop.as_ref().is_some_and(|s| s.reason.is_some());
    (k >= sw.min_rounds.max(2) as u32 && k < br.spec.trials as u32 && k > checked && !decided)
        .then_some(k)
}

/// The figures of the rounds so far: per variant (`trial` = round), or the run's trials.
pub enum RoundFigures<'a> {
    Variants(&'a [(String, Vec<TrialFigures>)]),
    Single(&'a [TrialFigures]),
}

/// The widest interval, in ± percent of its estimate, and what it is in words; `None` (with
/// why) when some interval cannot be computed yet.
#[derive(Clone, Debug, PartialEq)]
pub struct Spread {
    pub percent: Option<f64>,
    pub detail: String,
}

fn value(f: StopFigure) -> paired::Figure {
    match f {
        StopFigure::DeliveryRate => |t| t.delivery_rate,
        StopFigure::ReceiveRate => |t| Some(t.receive_rate),
        StopFigure::PublishRate => |t| Some(t.publish_rate),
    }
}

/// The interval of `sw.figure` over `figures`.
pub fn spread(br: &BenchmarkRun, sw: &RunStopWhen, figures: RoundFigures) -> Spread {
    let (name, f) = (sw.figure.as_str(), value(sw.figure));
    match figures {
        RoundFigures::Single(trials) => {
            let xs: Option<Vec<f64>> = trials.iter().map(f).collect();
            let Some(xs) = xs.filter(|x| x.len() >= 2 && mean(x) > 0.0) else {
                return Spread {
                    percent: None,
                    detail: format!("no interval on {name} (a trial without it, or below 2)"),
                };
            };
            let percent = half_width95(&xs) / mean(&xs) * 100.0;
            Spread {
                percent: Some(percent),
                detail: format!("mean {name} ±{percent:.1} %"),
            }
        }
        RoundFigures::Variants(per_variant) => {
            let baseline = variants::baseline(&br.spec).unwrap_or_default();
            let empty = Vec::new();
            let base = per_variant
                .iter()
                .find(|(n, _)| *n == baseline)
                .map_or(&empty, |(_, t)| t);
            let mut widest: Option<(f64, String)> = None;
            for (n, trials) in per_variant.iter().filter(|(n, _)| *n != baseline) {
                let (b, v) = paired::paired(base, trials, f);
                let Some(p) = paired::ratio_spread_percent(&b, &v) else {
                    return Spread {
                        percent: None,
                        detail: format!(
                            "{n}/{baseline} has no interval on {name} (fewer than 2 rounds \
                             with it above 0 on both sides)"
                        ),
                    };
                };
                if widest.as_ref().is_none_or(|(w, _)| p > *w) {
                    widest = Some((p, format!("{n}/{baseline} {name} ±{p:.1} %")));
                }
            }
            match widest {
                Some((p, d)) => Spread {
                    percent: Some(p),
                    detail: d,
                },
                None => Spread {
                    percent: None,
                    detail: "no variant besides the baseline".into(),
                },
            }
        }
    }
}

/// The check after `rounds` rounds: stop when the interval is within the target, or with
/// `last` (no round follows) say whether it was reached; otherwise the next round runs.
pub fn judge(sw: &RunStopWhen, max_rounds: i32, rounds: u32, s: &Spread, last: bool) -> StopStatus {
    let target = sw.interval_within_percent;
    let reached = s.percent.is_some_and(|p| p <= target);
    let reason = match (reached, last) {
        (true, _) => Some(StopReason::IntervalReached),
        (false, true) => Some(StopReason::MaxRounds),
        (false, false) => None,
    };
    let said = match reason {
        Some(StopReason::IntervalReached) if last => "within the target",
        Some(StopReason::IntervalReached) => "within the target: stopped",
        Some(StopReason::MaxRounds) => "the interval was NOT reached",
        None => "next round",
    };
    StopStatus {
        rounds: rounds as i32,
        max_rounds,
        figure: sw.figure,
        target_percent: target,
        interval_percent: s.percent.map(|p| (p * 100.0).round() / 100.0),
        reason,
        message: format!(
            "after {rounds} of {max_rounds} rounds: {} (target ±{target} %): {said}",
            s.detail
        ),
    }
}

#[cfg(test)]
mod tests;
