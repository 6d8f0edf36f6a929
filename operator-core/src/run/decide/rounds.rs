//! Between rounds, with `spec.stopWhen`: while every runner waits for the next round, the
//! records so far say whether the answer is decisive. The check is written to `status.stop`
//! before anything follows from it: a stop is sent to the runners on a later pass, from
//! status, so a restarted operator neither loses nor doubles it (and a runner keeps the first
//! stop it hears). At the verdict, the run's last check says whether the interval was reached.
use super::decision::{Decision, Effect};
use super::ending::fail;
use crate::run::model::{Gathered, Observed};
use crate::run::results::{self, ResultsError, TrialRecord};
use crate::run::runners::stop_when::{self, RoundFigures};
use msgbench_crds::benchmark_run::{
    BenchmarkRun, BenchmarkRunStatus, RunFailureReason, StopReason,
};
use runner_api::agent::RawResultLine;
use std::time::Duration;

/// How soon a pass follows one that recorded a stop or waits for records.
const SOON: Duration = Duration::from_millis(200);

/// At a round boundary: true when this pass holds the runners there (a check under way, or a
/// stop to send); false lets the barrier release the next trial as usual.
pub(super) fn at_barrier(br: &BenchmarkRun, obs: &Observed, d: &mut Decision) -> bool {
    let g = d.status.observed_generation.unwrap_or(0);
    if let Some(after) = stop_when::stop_after_trial(br, &d.status) {
        let ips: Vec<String> = (obs.agents.iter())
            .filter(|a| a.progress.waiting_for > after && a.progress.stopped_after != after)
            .map(|a| a.ip.clone())
            .collect();
        if !ips.is_empty() {
            d.effects.push(Effect::StopRunners {
                after_trial: after,
                ips,
            });
        }
        d.requeue = Some(SOON);
        return true;
    }
    let runners = br.spec.runners.count.max(1) as usize;
    let Some(k) = stop_when::check_due(br, &d.status, &obs.agents, runners) else {
        return false;
    };
    d.requeue = Some(SOON);
    let lines = match &obs.interim {
        Some(Gathered::Complete(lines)) => lines,
        // Not read yet, or a runner did not answer: ask again (the runners keep waiting).
        None | Some(Gathered::NotYet(_)) => return true,
        Some(Gathered::Lost(why)) => {
            fail(
                &mut d.status,
                RunFailureReason::ResultsLost,
                why,
                g,
                &obs.now,
            );
            return true;
        }
        Some(Gathered::TooLarge(why)) => {
            let reason = RunFailureReason::ResultsTooLarge;
            fail(&mut d.status, reason, why, g, &obs.now);
            return true;
        }
    };
    match judge_rounds(br, &d.status, lines, k, runners) {
        Ok(s) => {
            let stop = s.reason.is_some();
            d.status.stop = Some(s);
            // A stop is acted on next pass, from status; a next round is released now.
            stop
        }
        Err(e) => {
            let msg = format!("reading rounds 1-{k} for stopWhen: {e}");
            fail(
                &mut d.status,
                RunFailureReason::ResultsLost,
                &msg,
                g,
                &obs.now,
            );
            true
        }
    }
}

/// The check after `rounds` rounds from `lines` (every runner's records of those rounds).
fn judge_rounds(
    br: &BenchmarkRun,
    st: &BenchmarkRunStatus,
    lines: &[RawResultLine],
    rounds: u32,
    runners: usize,
) -> Result<msgbench_crds::benchmark_run::StopStatus, ResultsError> {
    let sw = br.spec.stop_when.as_ref().expect("checked by the caller");
    let spread = if br.spec.variants.is_empty() {
        let records: Vec<TrialRecord> = lines.iter().map(|l| (l.trial, l)).collect();
        let c = results::collect(&records, runners, rounds as usize)?;
        stop_when::spread(br, sw, RoundFigures::Single(&c.trials))
    } else {
        let names: Vec<String> = br.spec.variants.iter().map(|v| v.name.clone()).collect();
        let schedule = &st.schedule[..(rounds as usize).min(st.schedule.len())];
        let per_variant: Vec<(String, Vec<_>)> =
            results::collect_variants(lines, runners, schedule, &names)?
                .into_iter()
                .map(|(n, c)| (n, c.trials))
                .collect();
        stop_when::spread(br, sw, RoundFigures::Variants(&per_variant))
    };
    Ok(stop_when::judge(sw, br.spec.trials, rounds, &spread, false))
}

/// At the verdict, once the figures of every round that ran are in status: a run that
/// stopped keeps its decision; one that ran every round says whether its interval got there
/// (MaxRounds: it did not).
pub(super) fn conclude(br: &BenchmarkRun, st: &mut BenchmarkRunStatus) {
    let Some(sw) = &br.spec.stop_when else {
        return;
    };
    if st.stop.as_ref().and_then(|s| s.reason) == Some(StopReason::IntervalReached) {
        return;
    }
    let rounds = br.spec.trials.max(1) as u32;
    let per_variant: Vec<(String, Vec<_>)> = (st.variants.iter())
        .map(|v| (v.name.clone(), v.trials.clone()))
        .collect();
    let figures = if br.spec.variants.is_empty() {
        RoundFigures::Single(&st.trials)
    } else {
        RoundFigures::Variants(&per_variant)
    };
    let spread = stop_when::spread(br, sw, figures);
    st.stop = Some(stop_when::judge(sw, br.spec.trials, rounds, &spread, true));
}
