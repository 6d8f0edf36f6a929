//! Act on the faults `decide` found due, intent first: each chosen pod is written to status
//! before it is touched, so a lost status write or a leader change afterwards can neither turn
//! the fault into "not done" (the next pass confirms it, `faults::settle_injections`) nor repeat
//! it on another pod. A pass that finds the choice recorded acts on that same pod (uid-checked),
//! as a repeat: an earlier pass may have acted, so only a report or a pod seen deleted settles
//! it, and an agent without a report makes it unknown (`fault_request::outcome`).
//!
//! Faults due together are carried out together: every pod is chosen first, the choices go out
//! in one status write, then every fault agent is asked at once. So one crash per ordinal at the
//! same `afterSeconds` crashes every server within milliseconds of each other, not one status
//! write apart (a first-crashed server could be back before the last is hit).
use super::fault_by_agent;
use super::fault_inject::{self, Deletion};
use super::observe::now;
use crate::runtime::context::Context;
use crate::runtime::error::Result;
use kube::runtime::events::EventType;
use msgbench_crds::benchmark_run::{BenchmarkRun, FaultAction, FaultInjection, FaultRecord};
use msgbench_operator_core::run::build::RunIdentity;
use msgbench_operator_core::run::decide::{self, Decision, EffectOutcome};
use msgbench_operator_core::run::fault_request::{self, AgentAnswer};

/// Carries out the due records `due` (indices into `status.faults`). What happens comes back as
/// outcomes that the pure `decide::settle` writes into the records: act chooses nothing.
pub async fn inject_faults(
    ctx: &Context,
    br: &BenchmarkRun,
    id: &RunIdentity,
    d: &mut Decision,
    due: &[usize],
) -> Result<()> {
    let chosen = choose_pods(ctx, br, id, &d.status.faults, due).await;
    decide::settle(br, &mut d.status, &chosen, id.generation, &now());
    if chosen
        .iter()
        .any(|o| matches!(o, EffectOutcome::FaultChosen { .. }))
    {
        super::act::write_status(ctx, id, &d.status).await?;
    }
    events(ctx, br, id, &d.status.faults, &chosen).await;
    let ready: Vec<(usize, FaultInjection)> = (due.iter())
        .filter_map(|&i| Some((i, d.status.faults.get(i)?.injecting.clone()?)))
        .collect();
    let by_agent = |rec: &FaultRecord| rec.action.is_some_and(FaultAction::needs_agent);
    let (agent, deletion): (Vec<_>, Vec<_>) =
        (ready.into_iter()).partition(|(i, _)| by_agent(&d.status.faults[*i]));
    // Chosen before this pass: an earlier pass may have asked (or deleted) already.
    let repeat = |i: usize| !chosen.iter().any(|o| o.fault() == Some(i));
    let mut done = ask_agents(ctx, br, id, &d.status.faults, &agent, repeat).await;
    for (index, injection) in deletion {
        let action = d.status.faults[index].action;
        match fault_inject::delete(ctx, &id.namespace, &injection, action).await {
            Deletion::Done => done.push(EffectOutcome::FaultDeleted {
                index,
                injection,
                at: now(),
            }),
            // Gone or replaced after an earlier delete may be its work: the pod, looked at
            // next pass, says (`settle_injections`).
            Deletion::Refused(why) if repeat(index) => {
                tracing::warn!(run = %id.name, %why, "repeated fault deletion refused")
            }
            Deletion::Refused(why) => done.push(EffectOutcome::FaultNotDone { index, why }),
            // The pod is looked at on the next pass (soon: the record is still due).
            Deletion::Unknown(e) => {
                tracing::warn!(run = %id.name, error = %e, "fault deletion unconfirmed")
            }
        }
    }
    decide::settle(br, &mut d.status, &done, id.generation, &now());
    // Events after every agent answer and deletion, so none waits on another's API call.
    events(ctx, br, id, &d.status.faults, &done).await;
    Ok(())
}

/// A pod for each due record without one (a record that has one keeps it: uid-checked later).
async fn choose_pods(
    ctx: &Context,
    br: &BenchmarkRun,
    id: &RunIdentity,
    faults: &[FaultRecord],
    due: &[usize],
) -> Vec<EffectOutcome> {
    let mut out = Vec::new();
    for &index in due {
        let Some(rec) = faults.get(index) else {
            continue;
        };
        if rec.injecting.is_some() {
            continue;
        }
        out.push(
            match fault_inject::choose(ctx, br, &id.namespace, rec, &now()).await {
                Ok(injection) => EffectOutcome::FaultChosen { index, injection },
                Err(why) => EffectOutcome::FaultNotDone {
                    index,
                    why: why.to_string(),
                },
            },
        );
    }
    out
}

/// Every agent at once. An answer not known yet is no outcome: asked again next pass, with the
/// same key (never a second signal).
async fn ask_agents(
    ctx: &Context,
    br: &BenchmarkRun,
    id: &RunIdentity,
    faults: &[FaultRecord],
    agent: &[(usize, FaultInjection)],
    repeat: impl Fn(usize) -> bool,
) -> Vec<EffectOutcome> {
    let asks = agent.iter().map(|(i, inj)| {
        let (rec, repeat) = (faults[*i].clone(), repeat(*i));
        async move { fault_by_agent::ask(ctx, br, &id.namespace, &rec, inj, repeat).await }
    });
    let answers = futures::future::join_all(asks).await;
    let mut out = Vec::new();
    for ((index, injection), answer) in agent.iter().zip(answers) {
        if let AgentAnswer::Unknown(e) = &answer {
            tracing::warn!(run = %id.name, error = %e, "fault unconfirmed");
        }
        out.extend(fault_request::outcome(
            *index,
            injection,
            answer,
            repeat(*index),
        ));
    }
    out
}

/// One Event per settled fault (a chosen pod is not an outcome yet).
async fn events(
    ctx: &Context,
    br: &BenchmarkRun,
    id: &RunIdentity,
    faults: &[FaultRecord],
    outcomes: &[EffectOutcome],
) {
    let settled = outcomes.iter().filter(|o| o.settles_fault());
    for rec in settled.filter_map(|o| faults.get(o.fault()?)) {
        fault_event(ctx, br, id, rec).await;
    }
}

/// The Event of a fault's outcome: what was done to which pod, or why nothing was.
async fn fault_event(ctx: &Context, br: &BenchmarkRun, id: &RunIdentity, rec: &FaultRecord) {
    let (ty, reason) = if rec.executed() {
        (EventType::Normal, "FaultInjected")
    } else if rec.unknown() {
        (EventType::Warning, "FaultUnconfirmed")
    } else {
        (EventType::Warning, "FaultNotInjected")
    };
    let where_ = rec
        .variant
        .as_ref()
        .map_or(format!("trial {}", rec.trial), |v| {
            format!("round {} variant {v}", rec.round.unwrap_or(0))
        });
    let note = format!(
        "fault {} ({where_}) on {}: {}",
        rec.fault,
        rec.server,
        rec.message.as_deref().unwrap_or_default()
    );
    tracing::info!(run = %id.name, %note, "fault");
    super::act::publish(ctx, br, ty, reason, note, "Fault").await;
}
