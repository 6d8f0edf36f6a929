//! The run's Events: one per phase change, per verdict and per fault whose outcome a pass
//! settled, published after the status write that holds them.
use crate::runtime::context::Context;
use kube::runtime::events::{Event, EventType};
use kube::Resource;
use msgbench_crds::benchmark_run::{BenchmarkRun, BenchmarkRunStatus, FaultRecord, Phase};

pub async fn publish(
    ctx: &Context,
    br: &BenchmarkRun,
    type_: EventType,
    reason: &str,
    note: String,
    action: &str,
) {
    let ev = Event {
        type_,
        reason: reason.into(),
        note: Some(note.chars().take(1000).collect()),
        action: action.into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&ev, &br.object_ref(&())).await {
        tracing::warn!(error = %e, "could not publish event");
    }
}

/// One event per phase change, per verdict and per fault settled (`prev`: the status before
/// this pass).
pub async fn announce(
    ctx: &Context,
    br: &BenchmarkRun,
    prev: &BenchmarkRunStatus,
    st: &BenchmarkRunStatus,
) {
    let mut events = Vec::new();
    if let Some(p) = st.phase.filter(|p| prev.phase != Some(*p)) {
        let note = match p {
            Phase::Starting => format!(
                "runner Job {} created",
                st.job_name.clone().unwrap_or_default()
            ),
            Phase::Running => "all runners ready; common start chosen".into(),
            _ => format!("phase {p:?}"),
        };
        let ty = if p == Phase::Failed {
            EventType::Warning
        } else {
            EventType::Normal
        };
        events.push((ty, format!("{p:?}"), note));
    }
    if let Some(v) = st
        .verdict
        .as_ref()
        .filter(|v| prev.verdict.as_ref() != Some(*v))
    {
        let ty = if st.phase == Some(Phase::Succeeded) {
            EventType::Normal
        } else {
            EventType::Warning
        };
        events.push((ty, v.reason.clone(), v.message.clone().unwrap_or_default()));
    }
    faults_settled(ctx, br, &prev.faults, &st.faults).await;
    let reference = br.object_ref(&());
    for (type_, reason, note) in events {
        let ev = Event {
            type_,
            reason,
            note: Some(note.chars().take(1000).collect()),
            action: "Benchmark".into(),
            secondary: None,
        };
        if let Err(e) = ctx.recorder.publish(&ev, &reference).await {
            tracing::warn!(error = %e, "could not publish event");
        }
    }
}

/// A fault's outcome, once: done, not done or unknown, whichever step of the pass settled it.
async fn faults_settled(
    ctx: &Context,
    br: &BenchmarkRun,
    prev: &[FaultRecord],
    now: &[FaultRecord],
) {
    let open = |r: &FaultRecord| r.executed_time.is_none() && r.message.is_none();
    for (i, rec) in now.iter().enumerate() {
        if prev.get(i).is_none_or(open) && !open(rec) {
            fault_event(ctx, br, rec).await;
        }
    }
}

/// The Event of a fault's outcome: what was done to which pod, or why nothing was.
async fn fault_event(ctx: &Context, br: &BenchmarkRun, rec: &FaultRecord) {
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
    tracing::info!(run = %br.metadata.name.as_deref().unwrap_or_default(), %note, "fault");
    publish(ctx, br, ty, reason, note, "Fault").await;
}
