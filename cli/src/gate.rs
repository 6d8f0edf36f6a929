//! `kubectl msgbench gate`: the decision, kept pure. What was read of each named run (a run,
//! "no such run", or an API error) and whether the deadline has passed go in; the exit code
//! and one line per run come out. The waiting, reading and writing are `gate_cmd`'s.
//!
//! A run is finished as the operator says (`crds/src/benchmark_run_status.rs`): condition
//! Complete is True, either way, for the spec generation the run is at; a status without
//! conditions (older operators, some files) is finished at phase Succeeded or Failed. The
//! verdict is `status.verdict`, else condition Succeeded, else the phase.
use msgbench_crds::benchmark_run::{Phase, RunFailureReason, ThresholdResult};
use msgbench_crds::conditions::{self, COMPLETE, SUCCEEDED};

use crate::run_view::Run;
use crate::thresholds;

/// Every run passed.
pub const PASSED: u8 = 0;
/// A run finished with a failed verdict.
pub const FAILED: u8 = 1;
/// Not decided: a run missing or not finished by the deadline, or an API error.
pub const UNDECIDED: u8 = 2;

/// What reading one named run gave.
#[derive(Clone, Debug)]
pub enum Fetched {
    Found(Box<Run>),
    /// No such run; says where it was looked for.
    Missing(String),
    /// The run could not be read. `retry`: a later read may succeed (the API server was
    /// unreachable or overloaded), so the gate keeps waiting until its deadline.
    Error {
        message: String,
        retry: bool,
    },
}

/// One named run and what reading it gave.
#[derive(Clone, Debug)]
pub struct Observed {
    pub name: String,
    pub fetched: Fetched,
}

/// Where one run stands.
#[derive(Clone, Debug, PartialEq)]
pub enum RunState {
    Passed {
        message: Option<String>,
    },
    Failed {
        reason: String,
        message: Option<String>,
    },
    /// Not finished yet: the phase and what the status says about it.
    Running {
        detail: String,
    },
    Missing(String),
    Error {
        message: String,
        retry: bool,
    },
}

impl RunState {
    /// Passed or failed: reading the run again cannot change it.
    pub fn finished(&self) -> bool {
        matches!(self, RunState::Passed { .. } | RunState::Failed { .. })
    }

    /// Waiting longer cannot change this run's outcome from "undecided".
    fn hopeless(&self) -> bool {
        matches!(
            self,
            RunState::Missing(_) | RunState::Error { retry: false, .. }
        )
    }
}

/// The gate's answer: `code` None means "keep waiting" (only ever before the deadline).
#[derive(Clone, Debug, PartialEq)]
pub struct GateOutcome {
    pub code: Option<u8>,
    /// One line per run, in the order the runs were named.
    pub lines: Vec<String>,
}

/// The decision over every named run. It waits while a run is still running and the deadline
/// has not passed, and stops early only when waiting cannot help (a run is missing or cannot be
/// read at all); a failed run does not stop it, so every run's outcome is reported.
pub fn decide(runs: &[Observed], deadline_passed: bool) -> GateOutcome {
    let states: Vec<RunState> = runs.iter().map(|o| judge(&o.fetched)).collect();
    let all_finished = states.iter().all(RunState::finished);
    let stop = deadline_passed || all_finished || states.iter().any(RunState::hopeless);
    let code = stop.then(|| {
        if !all_finished {
            UNDECIDED
        } else if states.iter().any(|s| matches!(s, RunState::Failed { .. })) {
            FAILED
        } else {
            PASSED
        }
    });
    let lines = (runs.iter().zip(&states))
        .map(|(o, s)| line(o, s, deadline_passed))
        .collect();
    GateOutcome { code, lines }
}

/// Where one run stands, from what reading it gave.
pub fn judge(fetched: &Fetched) -> RunState {
    match fetched {
        Fetched::Found(run) => judge_run(run),
        Fetched::Missing(m) => RunState::Missing(m.clone()),
        Fetched::Error { message, retry } => RunState::Error {
            message: message.clone(),
            retry: *retry,
        },
    }
}

fn judge_run(run: &Run) -> RunState {
    let s = &run.status;
    if let Some(detail) = not_finished(run) {
        return RunState::Running { detail };
    }
    // The terminal phase says whether it passed, the verdict why.
    if let Some(v) = &s.verdict {
        match s.phase {
            Some(Phase::Succeeded) => {
                return RunState::Passed {
                    message: v.message.clone(),
                }
            }
            Some(Phase::Failed) => {
                return RunState::Failed {
                    reason: v.reason.clone(),
                    message: v.message.clone(),
                }
            }
            _ => {}
        }
    }
    // No verdict or no terminal phase: the Succeeded condition says how, else the terminal phase.
    let succeeded = conditions::get(&s.conditions, SUCCEEDED);
    let complete = conditions::get(&s.conditions, COMPLETE);
    let said = succeeded.or(complete);
    let message = said.map(|c| c.message.clone()).filter(|m| !m.is_empty());
    match (succeeded.map(|c| c.status.as_str()), s.phase) {
        (Some("True"), _) | (None, Some(Phase::Succeeded)) => RunState::Passed { message },
        (Some("False"), _) | (None, Some(Phase::Failed)) => RunState::Failed {
            reason: said.map_or("Failed".into(), |c| c.reason.clone()),
            message,
        },
        _ => RunState::Error {
            message: "finished (Complete is True) but neither a terminal phase nor the \
                      Succeeded condition says how"
                .into(),
            retry: true,
        },
    }
}

/// Why the run is not finished, or None when it is.
fn not_finished(run: &Run) -> Option<String> {
    let s = &run.status;
    let phase = run.phase();
    // A status about an earlier spec generation says nothing about the current one.
    let stale = |observed: Option<i64>| match (observed, run.generation) {
        (Some(o), Some(g)) if o < g => Some(format!(
            "phase {phase} of generation {o}; the spec is at generation {g}"
        )),
        _ => None,
    };
    if let Some(why) = stale(s.observed_generation) {
        return Some(why);
    }
    match conditions::get(&s.conditions, COMPLETE) {
        Some(c) if c.status == "True" => stale(c.observed_generation),
        Some(c) => Some(format!(
            "phase {phase}, Complete {} ({}{})",
            c.status,
            c.reason,
            if c.message.is_empty() {
                String::new()
            } else {
                format!(": {}", c.message)
            }
        )),
        None if matches!(s.phase, Some(Phase::Succeeded | Phase::Failed)) => None,
        None => Some(format!("phase {phase}")),
    }
}

/// `name: outcome: why`, one line.
fn line(o: &Observed, state: &RunState, deadline_passed: bool) -> String {
    let name = &o.name;
    let thresholds = match &o.fetched {
        Fetched::Found(run) => &run.status.thresholds[..],
        _ => &[][..],
    };
    match state {
        RunState::Passed { message } => {
            let warned = described(thresholds, thresholds::warns);
            let mut out = format!("{name}: Passed");
            if let Some(m) = message {
                out.push_str(&format!(": {m}"));
            }
            if !warned.is_empty() {
                out.push_str(&format!(" (warnings: {warned})"));
            }
            out
        }
        RunState::Failed { reason, message } => {
            let broken = described(thresholds, thresholds::breaks_run);
            let message = message.as_deref().unwrap_or("no message");
            // For ThresholdsNotMet the thresholds say more than the operator's terse message.
            let why = match (reason.parse(), broken.is_empty()) {
                (_, true) => message.to_string(),
                (Ok(RunFailureReason::ThresholdsNotMet), false) => broken,
                (_, false) => format!("{message}; thresholds not held: {broken}"),
            };
            format!("{name}: Failed ({reason}): {why}")
        }
        RunState::Running { detail } if deadline_passed => {
            format!("{name}: timed out: not finished at the deadline ({detail})")
        }
        RunState::Running { detail } => format!("{name}: not finished ({detail})"),
        RunState::Missing(m) => format!("{name}: missing: {m}"),
        RunState::Error { message, .. } => format!("{name}: error: {message}"),
    }
}

/// The thresholds `pick` selects as `name: observed X, limit Y`, joined by `; `.
fn described(ts: &[ThresholdResult], pick: fn(&ThresholdResult) -> bool) -> String {
    (ts.iter().filter(|t| pick(t)))
        .map(|t| {
            format!(
                "{}: {}",
                thresholds::name(t),
                thresholds::observed_vs_limit(t)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}
