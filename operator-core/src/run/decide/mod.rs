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
mod finished;
mod prepare;
mod rounds;
mod running;
mod verdict;

#[cfg(test)]
mod tests;

pub use super::timing::{millis, time_at};
pub use barrier::check_echoes;

use super::build::RunIdentity;
use super::conditions as cond;
use super::model::Observed;
use super::timing;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use msgbench_crds::benchmark_run::{
    BenchmarkRun, BenchmarkRunStatus, FaultInjection, FaultRecord, HistoryEntry, Outcome, Phase,
    RunFailureReason, Verdict, MAX_HISTORY,
};
use runner_api::fault_agent::FaultReport;
use std::time::Duration;

/// How often a waiting or running run is looked at.
pub const POLL: Duration = Duration::from_secs(2);

/// What a pass decided.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub status: BenchmarkRunStatus,
    pub effects: Vec<Effect>,
    /// When to look again; `None`: only when something changes.
    pub requeue: Option<Duration>,
}

/// What `act` carries out, in order, before the status is written.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// Delete Jobs, ConfigMaps and NetworkPolicies of other spec generations.
    DeleteOtherGenerations,
    /// The token Secret, the NetworkPolicy, then the agent ConfigMap and the runner Job.
    CreateRunners {
        config_map: Box<ConfigMap>,
        job: Box<Job>,
    },
    /// `POST /start` for `trial` at `at_unix_ms` to these pod IPs, in parallel; the answers come
    /// back as [`EffectOutcome::Released`].
    Release {
        trial: u32,
        at_unix_ms: u64,
        ips: Vec<String>,
    },
    /// `POST /stop {afterTrial}` to these pod IPs: `spec.stopWhen` decided (and status
    /// recorded) that no trial after `after_trial` runs.
    StopRunners { after_trial: u32, ips: Vec<String> },
    /// Tell runners holding their results that the status has them (`records` per runner).
    AckResults { ips: Vec<String>, records: u32 },
    /// Stop a failed run's runners that are still active (the Job and its logs stay).
    SuspendJob { name: String },
    /// The TTL passed: delete the run's Jobs, pods, ConfigMaps and NetworkPolicies.
    DeleteChildren,
    /// Carry out `status.faults[index]`, which is due (`act` records what was done).
    InjectFault { index: usize },
    /// Hold `stream_sweep::FINALIZER`: the run is about to make streams on a server.
    HoldStreams,
    /// Create the Job that deletes the run's streams by its id (`stream_sweep`).
    SweepStreams { job: Box<Job> },
    /// Release `stream_sweep::FINALIZER` (condition `StreamsDeleted` says how the sweep went).
    ReleaseStreams,
}

/// What `act` learned carrying out an effect: [`settle`] folds it into the status to write,
/// so act reports and never decides.
#[derive(Clone, Debug, PartialEq)]
pub enum EffectOutcome {
    /// The answers to an [`Effect::Release`]: per runner IP, the start it keeps or why it did
    /// not answer.
    Released {
        trial: u32,
        at_unix_ms: u64,
        echoes: Vec<(String, Result<u64, String>)>,
    },
    /// The pod a due fault (`status.faults[index]`) will hit, chosen and not yet touched: it
    /// is written to status before anything is done to it.
    FaultChosen {
        index: usize,
        injection: FaultInjection,
    },
    /// The fault was not carried out: why (no pod to choose, the agent or the API server
    /// refused). It stays not done.
    FaultNotDone { index: usize, why: String },
    /// The pod's fault agent reports what it did.
    FaultSignalled {
        index: usize,
        injection: FaultInjection,
        report: FaultReport,
    },
    /// An earlier ask may have reached the agent, and the answer now is no report: the fault
    /// may have been carried out. It is unknown until evidence confirms it, never "not done".
    FaultUnknown {
        index: usize,
        injection: FaultInjection,
        answer: String,
    },
    /// The chosen pod was deleted, at `at`.
    FaultDeleted {
        index: usize,
        injection: FaultInjection,
        at: Time,
    },
}

/// Pure: the status after what act reported. Runners that keep a start other than the one
/// just sent were released apart earlier: the run ends (unanswered sends are resent). A
/// fault's record takes its chosen pod, what was done, or why nothing was.
pub fn settle(
    br: &BenchmarkRun,
    st: &mut BenchmarkRunStatus,
    outcomes: &[EffectOutcome],
    generation: i64,
    now: &Time,
) {
    for o in outcomes {
        if let EffectOutcome::Released {
            trial,
            at_unix_ms,
            echoes,
        } = o
        {
            if let Some(msg) = check_echoes(*trial, *at_unix_ms, echoes) {
                fail(
                    st,
                    RunFailureReason::RunnersStartedApart,
                    &msg,
                    generation,
                    now,
                );
            }
        } else {
            settle_fault(br, &mut st.faults, o);
        }
    }
}

fn settle_fault(br: &BenchmarkRun, faults: &mut [FaultRecord], o: &EffectOutcome) {
    use EffectOutcome::*;
    let Some(rec) = o.fault().and_then(|i| faults.get_mut(i)) else {
        return;
    };
    match o {
        FaultChosen { injection, .. } => rec.injecting = Some(injection.clone()),
        FaultNotDone { why, .. } => {
            rec.message = Some(format!("not done: {why}"));
            rec.injecting = None;
        }
        FaultSignalled {
            injection, report, ..
        } => super::faults::mark_signalled(br, rec, injection, report),
        FaultDeleted { injection, at, .. } => super::faults::mark_executed(br, rec, injection, at),
        FaultUnknown {
            injection, answer, ..
        } => super::fault_unknown::mark_unknown(rec, injection, answer),
        Released { .. } => {}
    }
}

impl EffectOutcome {
    /// The `status.faults` index a fault outcome is about (`None` for a release).
    pub fn fault(&self) -> Option<usize> {
        use EffectOutcome::*;
        match self {
            Released { .. } => None,
            FaultChosen { index, .. }
            | FaultNotDone { index, .. }
            | FaultSignalled { index, .. }
            | FaultUnknown { index, .. }
            | FaultDeleted { index, .. } => Some(*index),
        }
    }

    /// The fault's outcome is settled (done, not done or unknown), not just its pod chosen:
    /// worth an Event.
    pub fn settles_fault(&self) -> bool {
        self.fault().is_some() && !matches!(self, EffectOutcome::FaultChosen { .. })
    }
}

impl Decision {
    fn keep(status: &BenchmarkRunStatus) -> Self {
        Decision {
            status: status.clone(),
            effects: Vec::new(),
            requeue: Some(POLL),
        }
    }
}

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

/// When this generation was accepted: Complete's transition time (deadlines count from it).
fn accepted_at(st: &BenchmarkRunStatus, now: &Time) -> Time {
    cond::get(&st.conditions, cond::COMPLETE)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| now.clone())
}

pub(crate) fn seconds_between(from: &Time, to: &Time) -> i64 {
    (to.0.as_second() - from.0.as_second()).max(0)
}

/// Ends the run as Failed with `reason`.
pub fn fail(
    st: &mut BenchmarkRunStatus,
    reason: RunFailureReason,
    message: &str,
    generation: i64,
    now: &Time,
) {
    end(
        st,
        Outcome::Failed,
        reason.as_str(),
        message,
        generation,
        now,
    );
    // A target the runners found unreachable or that refused them was not ready after all:
    // TargetReady must not stay True beside that verdict (kstatus readers and `kubectl wait`
    // look at the condition, not the verdict).
    if cond::is_about_the_target(reason) {
        let message = crate::status_text::plain(message);
        let gen = Some(generation);
        let status = cond::Status::False;
        cond::set(
            &mut st.conditions,
            cond::TARGET_READY,
            status,
            reason.as_str(),
            &message,
            gen,
            now,
        );
    }
}

/// Ends the run as Passed.
pub fn pass(st: &mut BenchmarkRunStatus, message: &str, generation: i64, now: &Time) {
    end(st, Outcome::Passed, "Succeeded", message, generation, now);
}

/// Phase, completion time, verdict and the terminal conditions (see `conditions`).
fn end(
    st: &mut BenchmarkRunStatus,
    outcome: Outcome,
    reason: &str,
    message: &str,
    generation: i64,
    now: &Time,
) {
    let message = crate::status_text::plain(message);
    st.phase = Some(match outcome {
        Outcome::Passed => Phase::Succeeded,
        Outcome::Failed => Phase::Failed,
    });
    st.completion_time = Some(now.clone());
    st.verdict = Some(Verdict {
        outcome,
        reason: reason.into(),
        message: Some(message.clone()),
    });
    cond::finish(
        &mut st.conditions,
        outcome,
        reason,
        &message,
        Some(generation),
        now,
    );
}
