//! Act on the faults `decide` found due, intent first: each chosen pod is written to status
//! before it is touched, so a lost status write or a leader change afterwards can neither turn
//! the fault into "not done" (the next pass confirms it, `faults::settle_injections`) nor repeat
//! it on another pod. A pass that finds the choice recorded acts on that same pod (uid-checked).
//!
//! Faults due together are carried out together: every pod is chosen first, the choices go out
//! in one status write, then every fault agent is asked at once. So one crash per ordinal at the
//! same `afterSeconds` crashes every server within milliseconds of each other, not one status
//! write apart (a first-crashed server could be back before the last is hit).
use super::build::RunIdentity;
use super::decide::Decision;
use super::fault_by_agent::{self, AgentAnswer};
use super::fault_inject::{self, Deletion};
use super::faults;
use crate::context::Context;
use crate::error::Result;
use kube::runtime::events::EventType;
use msgbench_crds::benchmark_run::{BenchmarkRun, FaultAction, FaultInjection, FaultRecord};

/// Carries out the due records `due` (indices into `status.faults`).
pub async fn inject_faults(
    ctx: &Context,
    br: &BenchmarkRun,
    id: &RunIdentity,
    d: &mut Decision,
    due: &[usize],
) -> Result<()> {
    let mut chosen_now = false;
    let mut ready: Vec<(usize, FaultInjection)> = Vec::new();
    for &i in due {
        let Some(rec) = d.status.faults.get(i).cloned() else {
            continue;
        };
        if let Some(inj) = rec.injecting.clone() {
            ready.push((i, inj));
            continue;
        }
        let now = super::observe::now();
        match fault_inject::choose(ctx, br, &id.namespace, &rec, &now).await {
            Ok(inj) => {
                d.status.faults[i].injecting = Some(inj.clone());
                ready.push((i, inj));
                chosen_now = true;
            }
            Err(e) => {
                d.status.faults[i].message = Some(format!("not done: {e}"));
                fault_event(ctx, br, id, &d.status.faults[i]).await;
            }
        }
    }
    if chosen_now {
        super::act::write_status(ctx, br, id, &d.status).await?;
    }
    let by_agent = |rec: &FaultRecord| rec.action.is_some_and(FaultAction::needs_agent);
    let (agent, deletion): (Vec<_>, Vec<_>) =
        (ready.into_iter()).partition(|(i, _)| by_agent(&d.status.faults[*i]));
    let asks = agent.iter().map(|(i, inj)| {
        let rec = d.status.faults[*i].clone();
        async move { fault_by_agent::ask(ctx, br, &id.namespace, &rec, inj).await }
    });
    let answers = futures::future::join_all(asks).await;
    for ((i, inj), answer) in agent.iter().zip(answers) {
        if record_answer(br, id, &mut d.status.faults[*i], inj, answer) {
            fault_event(ctx, br, id, &d.status.faults[*i]).await;
        }
    }
    let mut settled = Vec::new();
    for (i, inj) in deletion {
        let rec = &mut d.status.faults[i];
        match fault_inject::delete(ctx, &id.namespace, &inj, rec.action).await {
            Deletion::Done => faults::mark_executed(br, rec, &inj, &super::observe::now()),
            Deletion::Refused(e) => {
                rec.message = Some(format!("not done: {e}"));
                rec.injecting = None;
            }
            Deletion::Unknown(e) => {
                // The pod is looked at on the next pass (soon: the record is still due).
                tracing::warn!(run = %id.name, error = %e, "fault deletion unconfirmed");
                continue;
            }
        }
        settled.push(i);
    }
    // Events after every deletion, so none waits on another's API call.
    for i in settled {
        fault_event(ctx, br, id, &d.status.faults[i]).await;
    }
    Ok(())
}

/// Records the agent's answer; false when it is not known yet (asked again next pass, with the
/// same key: never a second signal).
fn record_answer(
    br: &BenchmarkRun,
    id: &RunIdentity,
    rec: &mut FaultRecord,
    inj: &FaultInjection,
    answer: AgentAnswer,
) -> bool {
    match answer {
        AgentAnswer::Done(r) => faults::mark_signalled(br, rec, inj, &r),
        AgentAnswer::Refused(e) => {
            rec.message = Some(format!("not done: {e}"));
            rec.injecting = None;
        }
        AgentAnswer::Unknown(e) => {
            tracing::warn!(run = %id.name, error = %e, "fault unconfirmed");
            return false;
        }
    }
    true
}

/// The Event of a fault's outcome: what was done to which pod, or why nothing was.
async fn fault_event(ctx: &Context, br: &BenchmarkRun, id: &RunIdentity, rec: &FaultRecord) {
    let (ty, reason) = if rec.executed() {
        (EventType::Normal, "FaultInjected")
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
    super::act::publish(ctx, br, ty, reason, note).await;
}
