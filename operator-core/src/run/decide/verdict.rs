//! Every runner's records are in: check they ran together, merge exactly, evaluate thresholds,
//! compare with the baseline, record the environment, and reach the verdict.
use super::barrier::START_APART_TOLERANCE_MS;
use super::decision::{Decision, POLL};
use super::ending::{fail, pass};
use super::rounds;
use crate::run::faults::{effect as fault_effect, policy as faults};
use crate::run::model::Observed;
use crate::run::results::{compare, server_restarts, server_usage, variant_results, ResultsError};
use crate::run::runners::build::RunIdentity;
use crate::run::runners::runner_pods::observed_pod;
use crate::run::runners::stop_when;
use crate::run::{results, variants};
use msgbench_crds::benchmark_run::{
    BenchmarkRun, BenchmarkRunStatus, ObservedEnvironment, Phase, RunFailureReason, Severity,
};
use runner_api::agent::RawResultLine;
use std::collections::{BTreeMap, BTreeSet};

pub fn decide(
    br: &BenchmarkRun,
    id: &RunIdentity,
    obs: &Observed,
    lines: &[RawResultLine],
    d: &mut Decision,
) {
    let g = id.generation;
    let st = &mut d.status;
    st.phase = Some(Phase::Merging);
    d.requeue = Some(POLL);
    let count = br.spec.runners.count.max(1) as usize;
    if let Some(msg) = started_apart(lines) {
        return fail(st, RunFailureReason::RunnersStartedApart, &msg, g, &obs.now);
    }
    // Before the merge: thresholds read the faults' effects.
    if let Some(seconds) = br.spec.workload.duration_seconds {
        fault_effect::attach(lines, seconds, &mut st.faults);
    }
    crate::run::faults::restart::mark_down_past_drain(br, &mut st.faults);
    // A run that stopped early (spec.stopWhen) has the rounds that ran, no more.
    let ran = stop_when::trials_run(br, st) as i32;
    st.schedule.truncate(stop_when::rounds_run(br, st) as usize);
    let merged = if br.spec.variants.is_empty() {
        single(br, st, lines, count, obs)
    } else {
        let shown = |name: &str| variants::target_display(&br.spec, name);
        variant_results::apply(br, st, lines, count, shown)
    };
    if let Err(e) = merged {
        return fail(
            st,
            RunFailureReason::ResultsLost,
            &e.to_string(),
            g,
            &obs.now,
        );
    }
    rounds::conclude(br, st);
    if let Some((reason, msg)) = faults::not_injected_in(br, &st.faults, ran) {
        // The figures are kept: they show the run without the fault it asked for, or with a
        // fault nobody can confirm.
        return fail(st, reason, &msg, g, &obs.now);
    }
    let mut env = environment(st.environment.take(), obs);
    env.server_restarts =
        server_restarts::unexplained(&env.server_pods_at_start, &env.server_pods, &st.faults);
    let caution = server_restarts::caution(&env.server_restarts);
    st.environment = Some(env);
    if let Some(p) = &mut st.progress {
        (p.trial, p.trials) = (ran, ran);
    }
    server_usage::attach(st);
    let broken = broken_thresholds(st);
    if !broken.is_empty() {
        let mut why = broken.join("; ");
        if let Some(c) = &caution {
            why = format!("{why}; {c}");
        }
        return fail(st, RunFailureReason::ThresholdsNotMet, &why, g, &obs.now);
    }
    let msg = match (
        &st.result,
        st.headline.as_ref().and_then(|h| h.comparison.clone()),
    ) {
        (_, Some(c)) => format!(
            "{} variants x {} rounds: {c}",
            st.variants.len(),
            st.schedule.len()
        ),
        (Some(r), None) => format!(
            "{} received, {} end to end ({:.1} msg/s in the receive window), delivered {:.4}, \
             p99 {}",
            r.received,
            r.delivery_rate
                .map_or("no delivery rate".into(), |d| format!("{d:.1} msg/s")),
            r.receive_rate,
            r.delivered_ratio,
            st.headline.as_ref().map_or("-".into(), |h| h.p99.clone())
        ),
        (None, None) => {
            let why = "no result after merging";
            return fail(st, RunFailureReason::ResultsLost, why, g, &obs.now);
        }
    };
    let msg = match &st.stop {
        Some(s) => format!("{msg}; stopWhen {}", s.message),
        None => msg,
    };
    let msg = match caution {
        Some(c) => format!("{msg}; {c}"),
        None => msg,
    };
    pass(st, &msg, g, &obs.now);
}

/// Several runners' records of one trial must have started together (their starts within the
/// tolerance), or merging them as concurrent load would be wrong.
pub fn started_apart(lines: &[RawResultLine]) -> Option<String> {
    let mut by_trial: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    for l in lines {
        let e = by_trial
            .entry(l.trial)
            .or_insert((l.started_unix_ms, l.started_unix_ms));
        e.0 = e.0.min(l.started_unix_ms);
        e.1 = e.1.max(l.started_unix_ms);
    }
    let apart: Vec<String> = by_trial
        .iter()
        .filter(|(_, (lo, hi))| hi - lo > START_APART_TOLERANCE_MS)
        .map(|(t, (lo, hi))| format!("trial {t}: starts {} ms apart", hi - lo))
        .collect();
    (!apart.is_empty()).then(|| {
        format!(
            "runners started more than {START_APART_TOLERANCE_MS} ms apart, so their load was not \
             concurrent: {}",
            apart.join("; ")
        )
    })
}

/// A run without variants: merge, thresholds, baseline comparison.
fn single(
    br: &BenchmarkRun,
    st: &mut BenchmarkRunStatus,
    lines: &[RawResultLine],
    count: usize,
    obs: &Observed,
) -> Result<(), ResultsError> {
    let records: Vec<results::TrialRecord> = lines.iter().map(|l| (l.trial, l)).collect();
    let trials = stop_when::rounds_run(br, st) as usize;
    let mut collected = results::collect(&records, count, trials)?;
    collected.result.faults = fault_effect::summary(&st.faults, None);
    st.thresholds = results::evaluate(&collected.result, &br.spec.thresholds);
    st.comparison = br
        .spec
        .baseline_ref
        .as_ref()
        .map(|b| compare::with_baseline(&b.name, obs.baseline.as_ref(), &collected.trials));
    st.result = Some(collected.result);
    st.trials = collected.trials;
    st.statistics = collected.statistics;
    st.headline = Some(collected.headline);
    Ok(())
}

fn broken_thresholds(st: &BenchmarkRunStatus) -> Vec<String> {
    st.thresholds
        .iter()
        .filter(|t| !t.passed && t.severity == Severity::Fail)
        .map(|t| {
            format!(
                "{}{:?} {:?} {} (observed {})",
                t.variant
                    .as_ref()
                    .map_or(String::new(), |v| format!("{v}: ")),
                t.metric,
                t.op,
                t.value,
                t.observed.map_or("none".into(), |o| o.to_string())
            )
        })
        .collect()
}

/// Runner and server pods, and whether they shared a node.
fn environment(prior: Option<ObservedEnvironment>, obs: &Observed) -> ObservedEnvironment {
    let mut env = prior.unwrap_or_default();
    env.runner_pods = obs
        .runner_pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .take(64)
        .map(observed_pod)
        .collect();
    env.server_pods = obs.server_pods.clone();
    let server_nodes: BTreeSet<_> = env
        .server_pods
        .iter()
        .filter_map(|p| p.node.clone())
        .collect();
    env.shared_nodes = env
        .runner_pods
        .iter()
        .filter_map(|p| p.node.as_ref())
        .any(|n| server_nodes.contains(n));
    env
}
