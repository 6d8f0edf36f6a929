//! A fault whose fault agent report was lost, pure. The agent keeps its reports in memory: if it
//! restarts (or its pod is replaced) after an ask that may have reached it, the repeated ask
//! finds no report (`AgentAnswer::NoReport`) or a refusal. The fault may have been carried out,
//! so it is unknown (`status.faults[].reportLost`), never "not done" and never asked for again;
//! then evidence read from what outlives the agent's memory may confirm it:
//!
//! | action      | evidence                                                                 |
//! |-------------|--------------------------------------------------------------------------|
//! | `crash`     | the server container's exit after the ask (or its restart since), as the kubelet reports it, on the very pod (uid) asked |
//! | `partition` | the agent's nftables table in place, or removed by a restarted agent as a leftover |
//! | `pause`     | the server process stopped (`T`), or resumed by a restarted agent as a leftover |
//!
//! Past [`evidence_bound_ms`] without evidence it stays unknown, with what was checked.
use super::policy as faults;
use super::restart::restart_of;
use crate::run::model::{AgentAnswer, Evidence, FaultEvidenceSeen, FaultPodSeen};
use crate::run::timing::{millis, time_at};
use k8s_openapi::api::core::v1::ContainerStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use msgbench_crds::benchmark_run::{
    BenchmarkRun, FaultAction, FaultInjection, FaultRecord, FaultReportLost, FaultRestart,
};
use runner_api::fault_agent::AgentState;

/// Evidence is looked for this long past the fault (past its end for a pause or partition):
/// the kubelet shows a SIGKILLed container's exit within a second or two, and a restarted agent
/// reports what it undid as soon as it answers.
pub const EVIDENCE_SECONDS: u64 = 20;
/// The agent's clock against the operator's.
const SKEW_MS: u64 = 2_000;

/// Longest answer kept (characters): an agent's words are not carried into status unbounded.
pub const MAX_ANSWER_CHARS: usize = 80;

/// Records `rec` as unknown: the agent asked (`inj`, at its `startedTime`) answered `answer`
/// instead of a report. `injecting` stays: evidence is read from that very pod.
pub fn mark_unknown(rec: &mut FaultRecord, inj: &FaultInjection, answer: &str) {
    let answer: String = answer.trim_end().chars().take(MAX_ANSWER_CHARS).collect();
    rec.report_lost = Some(FaultReportLost {
        asked_time: inj.started_time.clone(),
        answer: answer.clone(),
        confirmed: None,
        unconfirmed: None,
    });
    rec.pod = Some(inj.pod.clone());
    rec.message = Some(format!(
        "unknown: pod {} may have been {}, but the fault agent's report is lost ({answer})",
        inj.pod,
        faults::verb(rec.action)
    ));
}

/// Settles a `crash`, `pause` or `partition` whose choice was in status before this pass (so an
/// earlier ask may have reached the agent) from the agent's answer to the repeated ask: its
/// report is done; anything else that settles it is unknown, never "not done".
pub fn settle_asked(
    br: &BenchmarkRun,
    rec: &mut FaultRecord,
    inj: &FaultInjection,
    pod: &FaultPodSeen,
    now: &Time,
) {
    match &pod.answer {
        Some(AgentAnswer::Done(r)) => return faults::mark_signalled(br, rec, inj, r),
        Some(AgentAnswer::Refused(a) | AgentAnswer::NoReport(a)) => {
            return mark_unknown(rec, inj, a)
        }
        _ => {}
    }
    if pod.uid.as_deref() != Some(inj.pod_uid.as_str()) {
        let how = if pod.uid.is_none() {
            "gone"
        } else {
            "replaced"
        };
        return mark_unknown(
            rec,
            inj,
            &format!("pod {} is {how}: no agent to ask", inj.pod),
        );
    }
    let late = millis(now).saturating_sub(rec.planned_time.as_ref().map_or(0, millis));
    if late > faults::LATE_LIMIT_MS {
        let why = match &pod.answer {
            Some(AgentAnswer::Unknown(e)) => format!(": {e}"),
            _ => String::new(),
        };
        let answer = format!("no answer from the fault agent {late} ms after it was due{why}");
        mark_unknown(rec, inj, &answer);
    }
}

/// Unknown records still looking for evidence.
pub fn evidence_due(faults: &[FaultRecord]) -> impl Iterator<Item = &FaultRecord> {
    faults.iter().filter(|r| open(r))
}

fn open(rec: &FaultRecord) -> bool {
    rec.unknown()
        && rec.injecting.is_some()
        && rec
            .report_lost
            .as_ref()
            .is_some_and(|l| l.unconfirmed.is_none())
}

/// The last moment evidence of `rec` is looked for: the ask, the fault's duration, then
/// [`EVIDENCE_SECONDS`].
pub fn evidence_bound_ms(br: &BenchmarkRun, rec: &FaultRecord) -> u64 {
    let asked = (rec.report_lost.as_ref()).map_or(0, |l| millis(&l.asked_time));
    asked + duration_ms(br, rec) + EVIDENCE_SECONDS * 1000
}

fn duration_ms(br: &BenchmarkRun, rec: &FaultRecord) -> u64 {
    let f = br.spec.faults.get(rec.fault as usize);
    let secs = f.and_then(|f| f.duration_seconds).unwrap_or(0).max(0) as u64;
    match rec.action {
        Some(FaultAction::Pause | FaultAction::Partition) => secs * 1000,
        _ => 0,
    }
}

/// What confirms a fault: when it was carried out (the operator's clock, near enough), what
/// was seen, and for a crash the restart as the kubelet reports it.
struct Found {
    at_ms: u64,
    what: String,
    restart: Option<FaultRestart>,
}

/// Confirms unknown faults from this pass's evidence; past its bound, one without evidence
/// stays unknown for good, with what was checked.
pub fn confirm(
    br: &BenchmarkRun,
    faults: &mut [FaultRecord],
    seen: &[FaultEvidenceSeen],
    now: &Time,
) {
    for rec in faults.iter_mut().filter(|r| open(r)) {
        let Some(inj) = rec.injecting.clone() else {
            continue;
        };
        let s = seen
            .iter()
            .find(|s| s.fault == rec.fault && s.trial == rec.trial);
        let window = Window {
            asked: millis(&inj.started_time),
            lasts: duration_ms(br, rec),
            now: millis(now),
        };
        let judged = s.map(|s| judge(rec.action, &inj, &s.evidence, &window));
        match judged {
            Some(Ok(found)) => confirmed(br, rec, &inj, found),
            _ if window.now < evidence_bound_ms(br, rec) => {}
            other => {
                let checked = match other {
                    Some(Err(seen)) => seen,
                    _ => "nothing could be read".to_string(),
                };
                unconfirmed(rec, &checked, evidence_bound_ms(br, rec));
            }
        }
    }
}

struct Window {
    asked: u64,
    lasts: u64,
    now: u64,
}

impl Window {
    /// A time of the agent's clock within the fault: from the ask to its end.
    fn within(&self, t: u64) -> bool {
        (self.asked.saturating_sub(SKEW_MS)..=self.asked + self.lasts + SKEW_MS).contains(&t)
    }
}

fn judge(
    action: Option<FaultAction>,
    inj: &FaultInjection,
    e: &Evidence,
    w: &Window,
) -> Result<Found, String> {
    match e {
        Evidence::Server { uid, status } => {
            crash_evidence(inj, uid.as_deref(), status.as_deref(), w)
        }
        Evidence::Agent(Err(e)) => Err(format!("the fault agent's state could not be read: {e}")),
        Evidence::Agent(Ok(st)) if action == Some(FaultAction::Partition) => {
            partition_evidence(st, w)
        }
        Evidence::Agent(Ok(st)) => pause_evidence(st, w),
    }
}

fn crash_evidence(
    inj: &FaultInjection,
    uid: Option<&str>,
    status: Option<&ContainerStatus>,
    w: &Window,
) -> Result<Found, String> {
    let pod = &inj.pod;
    if uid != Some(inj.pod_uid.as_str()) {
        let how = if uid.is_none() {
            "gone"
        } else {
            "replaced (another uid)"
        };
        return Err(format!(
            "pod {pod} is {how}: its server container's status went with it"
        ));
    }
    let Some(status) = status else {
        return Err(format!("pod {pod} shows no status of its server container"));
    };
    let count = status.restart_count;
    let terminated = (status.last_state.as_ref()).and_then(|s| s.terminated.as_ref());
    if let Some(t) = terminated.filter(|t| t.reason.as_deref() == Some("OOMKilled")) {
        let at = t
            .finished_at
            .as_ref()
            .map_or("?".into(), |f| f.0.to_string());
        return Err(format!(
            "the server container of pod {pod} was OOMKilled at {at}, not crashed"
        ));
    }
    let Some(r) = restart_of(status, w.asked, None) else {
        return Err(format!(
            "the server container of pod {pod} shows no exit after the ask and no restart since \
             (restart count {count})"
        ));
    };
    let what = match (&r.exit_code, &r.exited_time) {
        (Some(code), Some(t)) => format!(
            "the server container exited (code {code}) at {} (kubelet; restart count {count})",
            t.0
        ),
        _ => format!("the server container started again since (kubelet; restart count {count})"),
    };
    let exited = r.exited_time.as_ref().map_or(w.asked, millis);
    Ok(Found {
        at_ms: exited.max(w.asked),
        what,
        restart: Some(r),
    })
}

fn partition_evidence(st: &AgentState, w: &Window) -> Result<Found, String> {
    let found = |what: String| Found {
        at_ms: w.asked,
        what,
        restart: None,
    };
    if let Some(t) = st
        .leftover_partition_removed_unix_ms
        .filter(|&t| w.within(t))
    {
        return Ok(found(format!(
            "the fault agent, restarted, found its nftables table in place and removed it at \
             {t} (unix ms): the partition was applied and cut short"
        )));
    }
    if st.partition_table == Some(true) && w.within(w.now) {
        return Ok(found("the fault agent's nftables table is in place".into()));
    }
    let table = match st.partition_table {
        Some(true) => "in place (outside the fault's time)",
        Some(false) => "absent",
        None => "not kept by this agent",
    };
    Err(format!(
        "the fault agent's nftables table is {table}, and it removed none left over within the \
         fault's time"
    ))
}

fn pause_evidence(st: &AgentState, w: &Window) -> Result<Found, String> {
    let found = |what: String| Found {
        at_ms: w.asked,
        what,
        restart: None,
    };
    if let Some(t) = st.leftover_pause_resumed_unix_ms.filter(|&t| w.within(t)) {
        return Ok(found(format!(
            "the fault agent, restarted, found the server process stopped and resumed it at {t} \
             (unix ms): the pause was carried out and cut short"
        )));
    }
    if st.server_stopped == Some(true) && w.within(w.now) {
        return Ok(found("the server process is stopped (T)".into()));
    }
    let state = match st.server_stopped {
        Some(true) => "stopped (outside the fault's time)",
        Some(false) => "running",
        None => "not found",
    };
    Err(format!(
        "the server process is {state}, and the fault agent resumed none left stopped within the \
         fault's time"
    ))
}

/// Confirmed: recorded as carried out at the evidence's time, saying how it is known.
fn confirmed(br: &BenchmarkRun, rec: &mut FaultRecord, inj: &FaultInjection, found: Found) {
    let Some(at) = time_at(found.at_ms) else {
        return;
    };
    faults::mark_executed(br, rec, inj, &at);
    rec.restart = found.restart;
    // The evidence is in `reportLost.confirmed` once (status is bounded: not twice).
    let executed = rec.message.take().unwrap_or_default();
    rec.message = Some(format!("{executed}; report lost, confirmed: reportLost"));
    if let Some(l) = rec.report_lost.as_mut() {
        l.confirmed = Some(found.what);
    }
}

/// No evidence by the bound: unknown for good, saying what was checked.
fn unconfirmed(rec: &mut FaultRecord, checked: &str, bound_ms: u64) {
    let until = time_at(bound_ms).map_or(String::new(), |t| format!(" until {}", t.0));
    let Some(l) = rec.report_lost.as_mut() else {
        return;
    };
    l.unconfirmed = Some(format!("looked for{until}: {checked}"));
    rec.message = Some(format!(
        "unknown: pod {} may have been {}, but the fault agent's report is lost ({}) and no \
         evidence confirmed it ({checked})",
        rec.pod.as_deref().unwrap_or("?"),
        faults::verb(rec.action),
        l.answer
    ));
    rec.injecting = None;
}

#[cfg(test)]
mod tests;
