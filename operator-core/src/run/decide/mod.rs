//! Decide: a pure function from (spec, status, observed, now) to the next status, the effects
//! to carry out and when to look again. No client and no clock here: `Observed::now` is the one
//! clock reading of a pass. The phase in status says where the run is; each phase has its own
//! module:
//!
//! | phase                         | module     | leaves when                                   |
//! |-------------------------------|------------|-----------------------------------------------|
//! | Pending, WaitingForTarget     | `prepare`  | every target Ready and reachable → Starting   |
//! | Starting                      | `barrier`  | every runner ready → Running (start chosen)   |
//! | Running, Merging              | `running`  | every runner's records read → a verdict       |
//! |   (between rounds)            | `rounds`   | `spec.stopWhen`: next round, or stop          |
//! | Succeeded, Failed             | `finished` | never (a new generation starts over)          |
//!
//! A run ends Failed with one reason, a `msgbench_crds::RunFailureReason` (each variant says
//! when it is set).
mod barrier;
mod decision;
mod ending;
mod finished;
mod prepare;
mod rounds;
mod running;
mod settle;
mod verdict;

#[cfg(test)]
mod tests;

pub use super::timing::{millis, time_at};
pub use barrier::check_echoes;
pub use decision::{Decision, Effect, EffectOutcome, POLL};
pub use ending::{fail, pass};
pub use settle::settle;

use super::conditions as cond;
use super::model::Observed;
use super::runners::build::RunIdentity;
use super::timing;
use ending::{accepted_at, seconds_between};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use msgbench_crds::benchmark_run::{
    BenchmarkRun, BenchmarkRunStatus, HistoryEntry, Phase, RunFailureReason, MAX_HISTORY,
};
use std::time::Duration;

/// The next status, effects and requeue for `br` as `obs` saw it.
pub fn decide(
    br: &BenchmarkRun,
    id: &RunIdentity,
    status: &BenchmarkRunStatus,
    obs: &Observed,
) -> Decision {
    let mut d = Decision::keep(status);
    if status.observed_generation != Some(id.generation) {
        new_generation(&mut d, id.generation, &obs.now);
        return d;
    }
    let phase = status.phase.unwrap_or(Phase::Pending);
    if matches!(phase, Phase::Succeeded | Phase::Failed) {
        finished::decide(br, id, obs, &mut d);
        return d;
    }
    let limit = timing::deadline_seconds(br);
    if seconds_between(&accepted_at(status, &obs.now), &obs.now) > limit {
        let msg = format!("the run did not finish within {limit}s (activeDeadlineSeconds)");
        fail(
            &mut d.status,
            RunFailureReason::DeadlineExceeded,
            &msg,
            id.generation,
            &obs.now,
        );
        return d;
    }
    match phase {
        Phase::Pending | Phase::WaitingForTarget => prepare::decide(br, id, obs, &mut d),
        Phase::Starting => barrier::starting(br, id, obs, &mut d),
        _ => running::decide(br, id, obs, &mut d),
    }
    d
}

/// A new spec generation starts a fresh run; the finished one moves to history.
fn new_generation(d: &mut Decision, generation: i64, now: &Time) {
    let st = &mut d.status;
    let mut history = std::mem::take(&mut st.history);
    if st.verdict.is_some() {
        history.insert(
            0,
            HistoryEntry {
                generation: st.observed_generation.unwrap_or(0),
                completion_time: st.completion_time.clone(),
                phase: st.phase,
                verdict: st.verdict.clone(),
                headline: st.headline.clone(),
                statistics: st.statistics.clone(),
            },
        );
        history.truncate(MAX_HISTORY);
    }
    *st = BenchmarkRunStatus {
        phase: Some(Phase::Pending),
        observed_generation: Some(generation),
        history,
        ..BenchmarkRunStatus::default()
    };
    cond::accept(&mut st.conditions, Some(generation), now);
    d.effects.push(Effect::DeleteOtherGenerations);
    d.requeue = Some(Duration::from_millis(200));
}
