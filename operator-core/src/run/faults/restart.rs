//! After a `crash`, pure: how the server container came back, read from the pod's status as the
//! kubelet reports it (`status.faults[].restart`). The kubelet restarts a crashed container at
//! once the first time, then holds later restarts back (CrashLoopBackOff: 10 s, doubling to
//! 5 min, forgotten after 10 min without a crash), so a run that crashes the same servers round
//! after round measures a longer outage each round. The record says so per fault.
use crate::run::model::FaultRestartSeen;
use crate::run::timing::millis;
use k8s_openapi::api::core::v1::ContainerStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use msgbench_crds::benchmark_run::{BenchmarkRun, FaultAction, FaultRecord, FaultRestart};

/// A restart taking this long (seconds, kubelet clock) was held back: an unheld one takes a
/// second or two, the kubelet's first back-off step is 10 s.
pub const BACK_OFF_MIN_SECONDS: i64 = 5;
/// After this long past its crash a restart is no longer read (the longest back-off is 300 s).
const RESTART_WITHIN_SECONDS: u64 = 330;
/// The kubelet's exit time (whole seconds, truncated) of the container the agent's SIGKILL
/// ended lies within this window around the agent's send time; an older exit is an earlier
/// crash's, a much later one a later crash's.
const EXIT_BEFORE_MS: u64 = 2_000;
const EXIT_AFTER_MS: u64 = 15_000;

/// Crash records whose restart is still to be read: signalled, not seen running again, and
/// not long ago.
pub fn restart_due<'a>(
    faults: &'a [FaultRecord],
    now: &Time,
) -> impl Iterator<Item = &'a FaultRecord> {
    let now = millis(now);
    faults.iter().filter(move |rec| {
        let Some(sent) = signal_ms(rec) else {
            return false;
        };
        let open = rec
            .restart
            .as_ref()
            .is_none_or(|r| r.running_time.is_none());
        open && now < sent + RESTART_WITHIN_SECONDS * 1000
    })
}

/// When the crash happened: the agent's report, or for one whose report was lost, the time the
/// evidence that confirmed it gave (`fault_unknown`).
fn signal_ms(rec: &FaultRecord) -> Option<u64> {
    matches!(
        rec.action,
        Some(FaultAction::Crash | FaultAction::PowerLoss)
    )
    .then_some(())?;
    let confirmed = (rec.report_lost.as_ref()).is_some_and(|l| l.confirmed.is_some());
    match &rec.signal {
        Some(s) => Some(millis(&s.sent_time)),
        None if confirmed => rec.executed_time.as_ref().map(millis),
        None => None,
    }
}

/// Writes what each crashed container's status says into its record.
pub fn record_restarts(faults: &mut [FaultRecord], seen: &[FaultRestartSeen]) {
    for s in seen {
        let rec = faults
            .iter_mut()
            .find(|r| r.fault == s.fault && r.trial == s.trial);
        let Some(rec) = rec else { continue };
        let Some(sent) = signal_ms(rec) else { continue };
        // A status that does not show this exit keeps what earlier passes recorded.
        if let Some(r) = restart_of(&s.status, sent, rec.restart.clone()) {
            rec.restart = Some(r);
        }
    }
}

/// Once results are in: marks each crash whose server was not running again before its
/// trial's drain could end, the latest being the measured phase's end plus `drainSeconds`
/// (`FaultRestart::down_past_drain`).
pub fn mark_down_past_drain(br: &BenchmarkRun, faults: &mut [FaultRecord]) {
    let w = &br.spec.workload;
    let Some(duration) = w.duration_seconds else {
        return;
    };
    for rec in faults.iter_mut().filter(|r| signal_ms(r).is_some()) {
        let Some(fault) = br.spec.faults.get(rec.fault as usize) else {
            continue;
        };
        let Some(planned) = rec.planned_time.as_ref().map(millis) else {
            continue;
        };
        let after_ms = u64::from(fault.after_seconds.max(0) as u32) * 1000;
        let drain_end = planned.saturating_sub(after_ms)
            + (u64::from(duration) + u64::from(w.drain_seconds)) * 1000;
        let r = rec.restart.get_or_insert_with(FaultRestart::default);
        r.down_past_drain = r
            .running_time
            .as_ref()
            .is_none_or(|t| millis(t) > drain_end);
    }
}

/// The restart after a SIGKILL sent at `sent` (ms), from the container's status, on top of
/// what an earlier pass saw. `None`: the status does not show that exit yet.
pub fn restart_of(
    status: &ContainerStatus,
    sent: u64,
    before: Option<FaultRestart>,
) -> Option<FaultRestart> {
    let terminated = status
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref());
    let Some((exited, exited_at)) = terminated.and_then(|t| Some((t, t.finished_at.as_ref()?)))
    else {
        return restarted_without_last_state(status, sent).or(before);
    };
    let at = millis(exited_at);
    if !(sent.saturating_sub(EXIT_BEFORE_MS)..sent + EXIT_AFTER_MS).contains(&at) {
        return before;
    }
    let mut r = before.unwrap_or_default();
    r.exit_code = Some(exited.exit_code);
    r.exited_time = Some(exited_at.clone());
    let state = status.state.as_ref();
    let waiting = state.and_then(|s| s.waiting.as_ref());
    if waiting.is_some_and(|w| w.reason.as_deref() == Some("CrashLoopBackOff")) {
        r.back_off = true;
    }
    if let Some(started) = running_since(status).filter(|t| millis(t) >= at) {
        let down = (millis(started) - at) as i64 / 1000;
        r.running_time = Some(started.clone());
        r.down_seconds = Some(down);
        r.back_off |= down >= BACK_OFF_MIN_SECONDS;
    }
    Some(r)
}

/// `exitUnavailable` when the kubelet shows a restart but no last state.
pub const EXIT_UNAVAILABLE: &str = "the kubelet showed the container started again after the \
     signal (restart count up) but no last state: it had already removed the exited container";

/// A container running again since after the signal, with a restart counted, whose status
/// carries no last state: the restart is certain (it was running when signalled, and started
/// again since), its exit code and time are not known.
fn restarted_without_last_state(status: &ContainerStatus, sent: u64) -> Option<FaultRestart> {
    let started = running_since(status)?;
    // The kubelet's times are whole seconds, truncated.
    let window = sent.saturating_sub(1_000)..sent + EXIT_AFTER_MS;
    (status.restart_count > 0 && window.contains(&millis(started))).then(|| FaultRestart {
        running_time: Some(started.clone()),
        exit_unavailable: Some(EXIT_UNAVAILABLE.to_string()),
        ..FaultRestart::default()
    })
}

/// When the container's current run started, if it is running.
fn running_since(status: &ContainerStatus) -> Option<&Time> {
    status.state.as_ref()?.running.as_ref()?.started_at.as_ref()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    };
    use msgbench_crds::benchmark_run::FaultSignal;

    fn at(ms: u64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_millisecond(ms as i64).unwrap())
    }

    const SENT: u64 = 1_800_000_000_500;

    fn crash() -> FaultRecord {
        FaultRecord {
            fault: 0,
            trial: 2,
            action: Some(FaultAction::Crash),
            signal: Some(FaultSignal {
                signal: "SIGKILL".into(),
                process: "nats-server".into(),
                pid: 7,
                sent_time: at(SENT),
                resume_time: None,
            }),
            ..FaultRecord::default()
        }
    }

    /// The kubelet's view: the last exit at `exited` (truncated to the second, as the API
    /// serves it) and now either waiting with `reason` or running since `started`.
    fn status(exited: u64, reason: Option<&str>, started: Option<u64>) -> ContainerStatus {
        let sec = |ms: u64| at(ms / 1000 * 1000);
        ContainerStatus {
            name: "nats".into(),
            last_state: Some(ContainerState {
                terminated: Some(ContainerStateTerminated {
                    exit_code: 137,
                    finished_at: Some(sec(exited)),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            state: Some(ContainerState {
                waiting: reason.map(|r| ContainerStateWaiting {
                    reason: Some(r.into()),
                    ..Default::default()
                }),
                running: started.map(|s| ContainerStateRunning {
                    started_at: Some(sec(s)),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn seen(s: ContainerStatus) -> Vec<FaultRestartSeen> {
        vec![FaultRestartSeen {
            fault: 0,
            trial: 2,
            status: s,
        }]
    }

    #[test]
    fn a_prompt_restart_is_recorded_with_its_exit_code_and_no_back_off() {
        let mut recs = vec![crash()];
        record_restarts(
            &mut recs,
            &seen(status(SENT + 30, None, Some(SENT + 1_200))),
        );
        let r = recs[0].restart.as_ref().unwrap();
        assert_eq!(r.exit_code, Some(137));
        assert_eq!(r.down_seconds, Some(1));
        assert!(!r.back_off);
        assert_eq!(restart_due(&recs, &at(SENT + 5_000)).count(), 0, "done");
    }

    #[test]
    fn a_held_back_restart_is_marked_while_waiting_and_timed_once_running() {
        let mut recs = vec![crash()];
        record_restarts(
            &mut recs,
            &seen(status(SENT, Some("CrashLoopBackOff"), None)),
        );
        let r = recs[0].restart.as_ref().unwrap();
        assert!(r.back_off && r.running_time.is_none());
        assert_eq!(
            restart_due(&recs, &at(SENT + 5_000)).count(),
            1,
            "read again"
        );
        // Running again 10 s later: the back-off stays recorded, with the time it cost.
        record_restarts(&mut recs, &seen(status(SENT, None, Some(SENT + 10_000))));
        let r = recs[0].restart.as_ref().unwrap();
        assert_eq!((r.down_seconds, r.back_off), (Some(10), true));
    }

    #[test]
    fn a_slow_restart_counts_as_held_back_even_if_the_waiting_state_was_missed() {
        let mut recs = vec![crash()];
        record_restarts(&mut recs, &seen(status(SENT, None, Some(SENT + 20_000))));
        let r = recs[0].restart.as_ref().unwrap();
        assert_eq!((r.down_seconds, r.back_off), (Some(20), true));
    }

    #[test]
    fn a_restart_without_last_state_is_recorded_as_running_with_its_exit_unavailable() {
        let mut recs = vec![crash()];
        let mut s = status(SENT, None, Some(SENT + 1_200));
        s.last_state = Some(ContainerState::default());
        s.restart_count = 1;
        record_restarts(&mut recs, &seen(s.clone()));
        let r = recs[0].restart.as_ref().unwrap();
        assert_eq!(r.running_time, Some(at((SENT + 1_200) / 1000 * 1000)));
        assert_eq!((r.exit_code, r.down_seconds), (None, None), "not known");
        assert_eq!(r.exit_unavailable.as_deref(), Some(EXIT_UNAVAILABLE));
        assert_eq!(restart_due(&recs, &at(SENT + 5_000)).count(), 0, "done");
        // Still running since before the signal: no restart of this crash yet.
        let mut recs = vec![crash()];
        let started = |s: &mut ContainerStatus, ms| {
            s.state
                .as_mut()
                .unwrap()
                .running
                .as_mut()
                .unwrap()
                .started_at = Some(at(ms));
        };
        started(&mut s, SENT - 60_000);
        record_restarts(&mut recs, &seen(s.clone()));
        assert_eq!(recs[0].restart, None);
        // Started after the signal but never restarted: not this container's restart.
        started(&mut s, SENT + 1_000);
        s.restart_count = 0;
        record_restarts(&mut recs, &seen(s));
        assert_eq!(recs[0].restart, None);
    }

    #[test]
    fn an_exit_of_another_crash_is_not_taken_for_this_one() {
        let mut recs = vec![crash()];
        // Not yet noticed by the kubelet: last exit is an earlier crash's, state still running.
        record_restarts(
            &mut recs,
            &seen(status(SENT - 60_000, None, Some(SENT - 59_000))),
        );
        assert_eq!(recs[0].restart, None);
        // A later crash's exit neither.
        record_restarts(&mut recs, &seen(status(SENT + 40_000, None, None)));
        assert_eq!(recs[0].restart, None);
        assert_eq!(restart_due(&recs, &at(SENT + 1_000)).count(), 1);
    }

    /// A run whose fault 0 crashes 10 s into a 30 s measured phase with a 5 s drain: the
    /// drain ends at most 25 s after the crash was planned.
    fn run_30s_drain_5s() -> BenchmarkRun {
        serde_norway::from_str(
            "apiVersion: msgbench.dev/v1alpha1\nkind: BenchmarkRun\nmetadata: {name: r}\nspec:\n  \
             target: {serverRef: {kind: JetStreamCluster, name: js3}}\n  \
             workload: {protocol: jetstream, durationSeconds: 30, drainSeconds: 5}\n  \
             faults: [{afterSeconds: 10, action: crash, pod: ordinal, ordinal: 0}]\n",
        )
        .unwrap()
    }

    #[test]
    fn a_server_back_before_the_drain_ended_is_not_down_past_it_and_a_later_one_is() {
        let br = run_30s_drain_5s();
        let planned = |mut r: FaultRecord| {
            r.planned_time = Some(at(SENT));
            r
        };
        let back_at = |s: u64| {
            let mut r = planned(crash());
            record_restarts(
                std::slice::from_mut(&mut r),
                &seen(status(SENT, None, Some(s))),
            );
            r
        };
        let mut recs = vec![
            back_at(SENT + 24_000),
            back_at(SENT + 27_000),
            planned(crash()),
        ];
        mark_down_past_drain(&br, &mut recs);
        let past: Vec<bool> = (recs.iter())
            .map(|r| r.restart.as_ref().unwrap().down_past_drain)
            .collect();
        assert_eq!(
            past,
            [false, true, true],
            "back in time, too late, never seen back"
        );
    }

    #[test]
    fn only_signalled_crashes_are_read_and_not_forever() {
        let mut pause = crash();
        pause.action = Some(FaultAction::Pause);
        let mut unsent = crash();
        unsent.signal = None;
        let recs = vec![pause, unsent, crash()];
        assert_eq!(restart_due(&recs, &at(SENT + 1_000)).count(), 1);
        let late = SENT + RESTART_WITHIN_SECONDS * 1000;
        assert_eq!(restart_due(&recs, &at(late)).count(), 0);
    }
}
