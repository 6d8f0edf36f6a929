//! Running (and Merging): runners load the target; the operator polls their progress, releases
//! per-trial barriers, and once every runner's records are read turns them into a verdict.
use super::barrier::{next_release, store_start, Release};
use super::decision::{Decision, Effect, POLL};
use super::ending::{fail, seconds_between};
use super::{rounds, verdict};
use crate::run::faults::{
    policy as faults, restart as fault_restart, settle, unknown as fault_unknown,
};
use crate::run::model::Gathered;
use crate::run::model::{AgentSeen, FaultTargetSeen, Observed};
use crate::run::results::server_usage::{self, UsageRead};
use crate::run::runners::build::RunIdentity;
use crate::run::runners::runner_pods::{job_complete, RunnerView};
use crate::run::timing;
use crate::run::timing::millis;
use msgbench_crds::benchmark_run::{
    BenchmarkRun, BenchmarkRunStatus, Phase, Progress, RunFailureReason,
};
use std::time::Duration;

/// `status.progress` is written at most this often (a trial change is written at once, and a
/// server sample, every `server_usage::SAMPLE_EVERY_MS`, takes it along): each status write is
/// an API write and an event for every watcher of runs.
pub const PROGRESS_EVERY_SECONDS: i64 = 5;
/// Runners at a trial barrier are polled this often: each poll is start latency.
const BARRIER_POLL: Duration = Duration::from_millis(500);

pub fn decide(br: &BenchmarkRun, id: &RunIdentity, obs: &Observed, d: &mut Decision) {
    let g = id.generation;
    let count = br.spec.runners.count.max(1) as usize;
    // Before anything can end the run: a fault whose pod was deleted counts as carried out.
    settle_faults(br, obs, d);
    let view = RunnerView::of(&obs.runner_pods, obs.job.as_ref());
    if let Some((reason, msg)) = view.failure() {
        fail(&mut d.status, reason, &msg, g, &obs.now);
        return;
    }
    let sampled = matches!(obs.server_usage, Some(UsageRead::Readings { .. }));
    if let Some(read) = &obs.server_usage {
        let connections = br.spec.workload.connections.is_some();
        server_usage::apply(&mut d.status, read, true, connections);
    }
    if results_decided(br, id, obs, d) {
        return;
    }
    let gone = obs.job.is_none() && view.running.is_empty();
    if gone || obs.job.as_ref().is_some_and(job_complete) {
        let msg = format!(
            "{} of {count} runner pods left results to read (Job or pods deleted before collection)",
            view.succeeded.len()
        );
        return fail(
            &mut d.status,
            RunFailureReason::ResultsLost,
            &msg,
            g,
            &obs.now,
        );
    }
    if rounds::at_barrier(br, obs, d) {
        // Held between rounds (a stopWhen check, or a stop to send): nothing is released.
        if d.status.verdict.is_none() {
            update_progress(br, &mut d.status, &obs.agents, obs, sampled);
        }
        return;
    }
    if !release_trial(obs, count, g, d) {
        return;
    }
    // A server sample is a status write anyway: the progress goes with it.
    update_progress(br, &mut d.status, &obs.agents, obs, sampled);
    let at_barrier = obs.agents.iter().any(|a| a.progress.waiting_for > 0);
    let poll = if at_barrier || !d.effects.is_empty() {
        BARRIER_POLL
    } else {
        POLL
    };
    d.requeue = Some(schedule_faults(br, obs, d).map_or(poll, |next| next.min(poll)));
}

/// What the pass read of the faults carried out: deleted pods, leaders after, evidence of lost
/// reports, restarts.
fn settle_faults(br: &BenchmarkRun, obs: &Observed, d: &mut Decision) {
    settle::settle_injections(br, &mut d.status.faults, &obs.fault_pods, &obs.now);
    faults::record_leaders_after(&mut d.status.faults, &obs.fault_leaders, &obs.now);
    fault_unknown::confirm(br, &mut d.status.faults, &obs.fault_evidence, &obs.now);
    fault_restart::record_restarts(&mut d.status.faults, &obs.fault_restarts);
}

/// The runners' records, once gathered, decide the pass: a verdict, a wait in Merging, or a
/// failure. False when nothing was gathered (the runners are still at work).
fn results_decided(br: &BenchmarkRun, id: &RunIdentity, obs: &Observed, d: &mut Decision) -> bool {
    let (g, now) = (id.generation, &obs.now);
    match &obs.results {
        // A fault whose report was lost is judged once its evidence is in or its bound passed
        // (`fault_unknown::evidence_bound_ms`: at most the fault's duration + 20 s after it).
        Some(Gathered::Complete(_))
            if fault_unknown::evidence_due(&d.status.faults).count() > 0 =>
        {
            d.status.phase = Some(Phase::Merging);
            d.requeue = Some(POLL);
        }
        Some(Gathered::Complete(lines)) => verdict::decide(br, id, obs, lines, d),
        Some(Gathered::NotYet(_)) => {
            // A holding runner did not answer yet (it may just have exited): read again soon.
            d.status.phase = Some(Phase::Merging);
            d.requeue = Some(Duration::from_secs(1));
        }
        Some(Gathered::Lost(why)) => {
            fail(&mut d.status, RunFailureReason::ResultsLost, why, g, now)
        }
        Some(Gathered::TooLarge(why)) => fail(
            &mut d.status,
            RunFailureReason::ResultsTooLarge,
            why,
            g,
            now,
        ),
        None => return false,
    }
    true
}

/// Releases the next trial's start when every runner waits at its barrier. False when the
/// pass ends here (the start moved, or the runners started apart).
fn release_trial(obs: &Observed, count: usize, g: i64, d: &mut Decision) -> bool {
    let start_ms = d.status.start_time.as_ref().map_or(0, millis);
    let now_ms = millis(&obs.now);
    match next_release(&obs.agents, count, start_ms, now_ms) {
        Release::Nothing => {}
        Release::Send { trial, at, ips } => d.effects.push(Effect::Release {
            trial,
            at_unix_ms: at,
            ips,
        }),
        Release::Rechoose(at) => {
            let why =
                format!("{count} runner(s) connected; nobody had received the first start: moved");
            store_start(d, at, &why, g, &obs.now);
            return false;
        }
        Release::Apart(msg) => {
            let apart = RunFailureReason::RunnersStartedApart;
            fail(&mut d.status, apart, &msg, g, &obs.now);
            return false;
        }
    }
    true
}

/// Plans the faults of trials that started, chooses the pod of each due one (written to status
/// with this pass's effects: `InjectFault` follows the choice, never precedes it), marks those
/// chosen earlier for `act` again (or records why a late one is not done; one already chosen is
/// never judged late here: `settle_injections` did) and says when the next one is due.
fn schedule_faults(br: &BenchmarkRun, obs: &Observed, d: &mut Decision) -> Option<Duration> {
    let st = &mut d.status;
    faults::plan(br, &mut st.faults, &st.schedule, &obs.agents);
    let now = millis(&obs.now);
    for i in faults::due(&st.faults, &obs.now) {
        let rec = &mut st.faults[i];
        if rec.injecting.is_some() {
            // Chosen and recorded, not deleted yet, still in time: that same pod.
            d.effects.push(Effect::InjectFault {
                index: i,
                repeat: true,
            });
            continue;
        }
        let planned = rec.planned_time.as_ref().map_or(now, millis);
        let late = now.saturating_sub(planned);
        if late > faults::LATE_LIMIT_MS {
            rec.message = Some(format!(
                "not done: the operator reached it {late} ms after it was due (more than {} ms \
                 late would put it outside its place in the measured phase)",
                faults::LATE_LIMIT_MS
            ));
            continue;
        }
        // Its server is read by the pass that finds it due unchosen: due only now, next pass.
        let seen = obs.fault_targets.iter().find(|t| is_for(t, rec));
        match seen.map(|t| faults::choose(br, rec, t, &obs.now)) {
            Some(Ok(injection)) => {
                rec.injecting = Some(injection);
                d.effects.push(Effect::InjectFault {
                    index: i,
                    repeat: false,
                });
            }
            Some(Err(why)) => rec.message = Some(format!("not done: {why}")),
            None => {}
        }
    }
    faults::next_due_in(&st.faults, &obs.now).map(|d| d.max(Duration::from_millis(20)))
}

fn is_for(seen: &FaultTargetSeen, rec: &msgbench_crds::benchmark_run::FaultRecord) -> bool {
    seen.fault == rec.fault && seen.trial == rec.trial
}

/// Sums the agents' counts into `status.progress`, at most every few seconds.
fn update_progress(
    br: &BenchmarkRun,
    st: &mut BenchmarkRunStatus,
    agents: &[AgentSeen],
    obs: &Observed,
    now_anyway: bool,
) {
    if agents.is_empty() {
        return; // nobody answered: keep the last figures rather than zeros
    }
    let elapsed = st
        .start_time
        .as_ref()
        .map_or(0, |s| seconds_between(s, &obs.now));
    let next = Progress {
        trial: agents
            .iter()
            .map(|a| a.progress.trial as i32)
            .max()
            .unwrap_or(0),
        trials: crate::run::runners::stop_when::trials_run(br, st) as i32,
        elapsed_seconds: elapsed,
        expected_seconds: timing::expected_run_seconds(br),
        published: agents.iter().map(|a| a.progress.published).sum(),
        received: agents.iter().map(|a| a.progress.received).sum(),
        runners_ready: br.spec.runners.count.max(1),
    };
    let due = now_anyway
        || st.progress.as_ref().is_none_or(|old| {
            old.trial != next.trial
                || old.runners_ready != next.runners_ready
                || next.elapsed_seconds - old.elapsed_seconds >= PROGRESS_EVERY_SECONDS
        });
    if due {
        st.progress = Some(next);
    }
}
