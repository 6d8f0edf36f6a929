//! Succeeded or Failed: nothing more is measured. What remains: stop a failed run's runners,
//! let holding runners exit once the status has their records, finish a baseline comparison
//! that waited for the baseline, delete the run's streams by its id (`stream_sweep`), and delete
//! the children after `ttlSecondsAfterFinished`.
use super::decision::{Decision, Effect, POLL};
use super::ending::seconds_between;
use crate::run::conditions as cond;
use crate::run::model::Observed;
use crate::run::results::compare;
use crate::run::runners::build::RunIdentity;
use crate::run::runners::runner_pods::{ip, RunnerView};
use crate::run::runners::stop_runners::has_active_runners;
use crate::run::target::stream_sweep::{self, StreamsStep};
use msgbench_crds::benchmark_run::{BenchmarkRun, Phase};
use std::time::Duration;

/// How often a finished run looks at a baseline that is still running.
const BASELINE_POLL: Duration = Duration::from_secs(15);

pub fn decide(br: &BenchmarkRun, id: &RunIdentity, obs: &Observed, d: &mut Decision) {
    d.requeue = None;
    let view = RunnerView::of(&obs.runner_pods, obs.job.as_ref());
    match d.status.phase {
        Some(Phase::Failed) => {
            if let Some(job) = obs.job.as_ref().filter(|j| has_active_runners(j)) {
                let name = job.metadata.name.clone().unwrap_or_default();
                d.effects.push(Effect::SuspendJob { name });
            }
        }
        _ => {
            // The status holds every record now: runners still holding theirs may exit.
            let ips: Vec<String> = view.running.iter().filter_map(|p| ip(p)).collect();
            if !ips.is_empty() {
                d.effects.push(Effect::AckResults {
                    ips,
                    records: crate::run::runners::stop_when::trials_run(br, &d.status),
                });
            }
        }
    }
    let active = !view.running.is_empty() || obs.job.as_ref().is_some_and(has_active_runners);
    let cleaned =
        view.failed.is_empty() && view.succeeded.len() >= br.spec.runners.count.max(1) as usize;
    compare_late(br, obs, d);
    let released = streams(br, id, obs, (active, cleaned), d);
    // Deleting the children while the sweep may run would delete it. The pass that releases
    // the finalizer applies the TTL itself: releasing changes no generation, so no later
    // event is sure to come.
    if released || !stream_sweep::holds_finalizer(br) {
        ttl(br, obs, d);
    }
}

/// Once no runner is active, the run's streams are deleted by its id, then the finalizer goes
/// (`true`: it goes in this pass).
fn streams(
    br: &BenchmarkRun,
    id: &RunIdentity,
    obs: &Observed,
    (active, cleaned): (bool, bool),
    d: &mut Decision,
) -> bool {
    let step = stream_sweep::after_finish(
        br,
        id,
        active,
        cleaned,
        &obs.targets,
        obs.stream_sweep.as_ref(),
        &obs.operands,
    );
    let released = matches!(step, StreamsStep::Release(..));
    let (status, reason, message) = match step {
        StreamsStep::Nothing => return false,
        // A finished run's runners are not stopped for the sweep (`after_finish` waits).
        StreamsStep::Wait | StreamsStep::StopRunners => {
            d.requeue = Some(d.requeue.map_or(POLL, |r| r.min(POLL)));
            return false;
        }
        StreamsStep::Sweep(job, msg) => {
            d.effects.push(Effect::SweepStreams { job });
            d.requeue = Some(d.requeue.map_or(POLL, |r| r.min(POLL)));
            (cond::Status::Unknown, stream_sweep::REASON_DELETING, msg)
        }
        StreamsStep::Release(deleted, reason, message) => {
            d.effects.push(Effect::ReleaseStreams);
            let status = if deleted {
                cond::Status::True
            } else {
                cond::Status::False
            };
            (status, reason, message)
        }
    };
    let g = d.status.observed_generation;
    let st = &mut d.status.conditions;
    cond::set(
        st,
        cond::STREAMS_DELETED,
        status,
        reason,
        &message,
        g,
        &obs.now,
    );
    released
}

/// A baseline that was still running when this run finished: compare once it has a verdict;
/// a failed or deleted baseline ends the wait with that reason (no polling forever).
fn compare_late(br: &BenchmarkRun, obs: &Observed, d: &mut Decision) {
    let st = &mut d.status;
    let (Some(b), Some(c)) = (&br.spec.baseline_ref, &st.comparison) else {
        return;
    };
    if c.reason.as_deref() != Some(cond::BASELINE_NOT_FINISHED) || st.trials.is_empty() {
        return;
    }
    let Some(seen) = &obs.baseline else {
        return;
    };
    let next = compare::with_baseline(&b.name, Some(seen), &st.trials);
    let waiting = next.reason.as_deref() == Some(cond::BASELINE_NOT_FINISHED);
    st.comparison = Some(next);
    if waiting {
        d.requeue = Some(BASELINE_POLL);
    }
}

/// After the verdict: delete the runner Job (and its pods) once the TTL has passed; results
/// stay in status.
fn ttl(br: &BenchmarkRun, obs: &Observed, d: &mut Decision) {
    let (Some(ttl), Some(done)) = (
        br.spec.ttl_seconds_after_finished,
        &d.status.completion_time,
    ) else {
        return;
    };
    let left = i64::from(ttl) - seconds_between(done, &obs.now);
    if left > 0 {
        let at = Duration::from_secs(left as u64 + 1);
        d.requeue = Some(d.requeue.map_or(at, |r| r.min(at)));
    } else if obs.job.is_some() || !obs.runner_pods.is_empty() {
        d.effects.push(Effect::DeleteChildren);
    }
}
