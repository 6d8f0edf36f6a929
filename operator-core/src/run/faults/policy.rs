//! `spec.faults`, pure: which executions a started trial gets (planned in status as soon as the
//! runners hold the trial's start, so a restarted operator still knows them), which are due,
//! and which server and pod each acts on. Carried out by `fault_inject`; what each did to
//! delivery is read afterwards by `fault_effect`.
use crate::run::model::{AgentSeen, FaultLeaderSeen, FaultTargetSeen};
use crate::run::timing::{self, millis};
use crate::run::variants;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use msgbench_crds::benchmark_run::{
    BenchmarkRun, Fault, FaultAction, FaultInjection, FaultPartition, FaultPod, FaultPowerLoss,
    FaultRecord, FaultSignal, FaultStreamLeader, RunFailureReason, ScheduledRound, ServerKind,
    ServerRef,
};
use runner_api::fault_agent::FaultReport;
use std::time::Duration;

/// A due fault later than this is not carried out: the measured window it belonged to may be
/// over, and a pod killed outside it would hurt the next trial instead.
pub const LATE_LIMIT_MS: u64 = 2_000;

/// Trial `trial` (1-based, execution order) → its round and variant (variants only).
pub fn slot(schedule: &[ScheduledRound], trial: u32) -> (Option<i32>, Option<String>) {
    let per_round = schedule.first().map_or(0, |r| r.order.len());
    if per_round == 0 {
        return (None, None);
    }
    let i = trial.saturating_sub(1) as usize;
    let round = schedule.get(i / per_round);
    (
        round.map(|r| r.round),
        round.and_then(|r| r.order.get(i % per_round).cloned()),
    )
}

/// The server a trial's faults act on: its variant's own `serverRef`, else `spec.target`'s.
pub fn server_of<'a>(br: &'a BenchmarkRun, variant: Option<&str>) -> Option<&'a ServerRef> {
    let own = variant
        .and_then(|n| br.spec.variants.iter().find(|v| v.name == n))
        .and_then(|v| v.target.as_ref());
    own.unwrap_or(&br.spec.target).server_ref.as_ref()
}

pub fn server_display(s: &ServerRef) -> String {
    let kind = match s.kind {
        ServerKind::JetStreamCluster => "JetStreamCluster",
        ServerKind::MqttBroker => "MqttBroker",
        ServerKind::PubSubServer => "PubSubServer",
    };
    format!("{kind}/{}", s.name)
}

/// Adds the executions of every trial whose start the agents hold and that has none yet.
pub fn plan(
    br: &BenchmarkRun,
    faults: &mut Vec<FaultRecord>,
    schedule: &[ScheduledRound],
    agents: &[AgentSeen],
) {
    if br.spec.faults.is_empty() {
        return;
    }
    let warmup_ms = u64::from(br.spec.workload.warmup_seconds) * 1000;
    for a in agents {
        let (trial, start) = (a.progress.trial, a.progress.trial_start_unix_ms);
        if trial == 0 || start == 0 || faults.iter().any(|f| f.trial == trial as i32) {
            continue;
        }
        let (round, variant) = slot(schedule, trial);
        let server = server_of(br, variant.as_deref()).map_or_else(String::new, server_display);
        for (i, f) in br.spec.faults.iter().enumerate() {
            let due = start + warmup_ms + u64::from(f.after_seconds.max(0) as u32) * 1000;
            faults.push(FaultRecord {
                fault: i as i32,
                trial: trial as i32,
                round,
                variant: variant.clone(),
                server: server.clone(),
                action: Some(f.action),
                planned_time: timing::time_at(due),
                ..FaultRecord::default()
            });
        }
    }
}

/// Indices of records due now and not yet carried out (or given up).
pub fn due(faults: &[FaultRecord], now: &Time) -> Vec<usize> {
    let now = millis(now);
    faults
        .iter()
        .enumerate()
        .filter(|(_, f)| pending(f) && f.planned_time.as_ref().is_some_and(|t| millis(t) <= now))
        .map(|(i, _)| i)
        .collect()
}

/// Records due now with no pod chosen yet and still in time: those whose server a pass reads so
/// that `decide` can choose (one found late is not done without it).
pub fn to_choose<'a>(
    faults: &'a [FaultRecord],
    now: &Time,
) -> impl Iterator<Item = &'a FaultRecord> {
    let now_ms = millis(now);
    let in_time = move |f: &FaultRecord| {
        let planned = f.planned_time.as_ref().map_or(now_ms, millis);
        now_ms.saturating_sub(planned) <= LATE_LIMIT_MS
    };
    (due(faults, now).into_iter())
        .map(move |i| &faults[i])
        .filter(move |f| f.injecting.is_none() && in_time(f))
}

/// Time until the next pending record is due.
pub fn next_due_in(faults: &[FaultRecord], now: &Time) -> Option<Duration> {
    let now = millis(now);
    faults
        .iter()
        .filter(|f| pending(f))
        .filter_map(|f| f.planned_time.as_ref().map(millis))
        .min()
        .map(|at| Duration::from_millis(at.saturating_sub(now)))
}

fn pending(f: &FaultRecord) -> bool {
    f.executed_time.is_none() && f.message.is_none()
}

/// Seconds after a fault before its stream's leader is read as the one after it: nats-server's
/// Raft election timeout is 4 to 9 s, and until one fires the followers still name the old
/// leader. A pause or partition is read a second after it is over, and no sooner than this.
pub const LEADER_SETTLE_SECONDS: u64 = 10;
/// After this long past its fault the leader is no longer read (the trial has moved on).
const LEADER_AFTER_WITHIN_SECONDS: u64 = 120;

/// Records whose stream leader after the fault is due to be read now: carried out, on
/// JetStream, not read yet, `LEADER_SETTLE_SECONDS` past (a pause or partition: a second past
/// its end, if later), and not long ago.
pub fn leader_after_due<'a>(
    br: &'a BenchmarkRun,
    faults: &'a [FaultRecord],
    now: &Time,
) -> impl Iterator<Item = &'a FaultRecord> {
    let now = millis(now);
    faults.iter().filter(move |rec| {
        let (Some(sl), Some(done)) = (&rec.stream_leader, &rec.executed_time) else {
            return false;
        };
        let lasts = (br.spec.faults.get(rec.fault as usize))
            .and_then(|f| f.duration_seconds)
            .unwrap_or(0)
            .max(0) as u64;
        let from = millis(done) + (lasts + 1).max(LEADER_SETTLE_SECONDS) * 1000;
        sl.after.is_none() && (from..from + LEADER_AFTER_WITHIN_SECONDS * 1000).contains(&now)
    })
}

/// Writes the leaders read after their faults into their records.
pub fn record_leaders_after(faults: &mut [FaultRecord], seen: &[FaultLeaderSeen], now: &Time) {
    for s in seen {
        let rec = faults
            .iter_mut()
            .find(|r| r.fault == s.fault && r.trial == s.trial);
        if let Some(sl) = rec.and_then(|r| r.stream_leader.as_mut()) {
            sl.after.get_or_insert_with(|| s.leader.clone());
            sl.after_time.get_or_insert_with(|| now.clone());
        }
    }
}

/// The injection of a record whose outcome is not recorded yet.
pub fn unsettled_injection(f: &FaultRecord) -> Option<&FaultInjection> {
    f.injecting.as_ref().filter(|_| pending(f))
}

/// The grace period a `kill` deletes its pod with: the shortest that is not a forced deletion.
/// Grace 0 removes the pod object at once, so the StatefulSet starts the replacement (same name,
/// same volume) while the kubelet is still stopping the old process: two nats-servers on one
/// store, which corrupted the meta log (`malformed or corrupt message in 1.blk`) and left
/// JetStream unavailable to every later run on that cluster. With 1 s the object stays until the
/// old container is gone: SIGTERM, then SIGKILL when the kubelet's grace ends (it stretches
/// anything shorter to 2 s). Measured on the local cluster with a StatefulSet whose container
/// keeps writing after SIGTERM: grace 0, the replacement started 1.4 s before the old one
/// stopped writing; grace 1, it started after.
pub const KILL_GRACE_SECONDS: u32 = 1;

/// The grace period a fault's pod deletion asks for (`None`: the pod's own).
pub fn deletion_grace_seconds(a: Option<FaultAction>) -> Option<u32> {
    matches!(a, Some(FaultAction::Kill)).then_some(KILL_GRACE_SECONDS)
}

pub fn verb(a: Option<FaultAction>) -> &'static str {
    match a {
        Some(FaultAction::Kill) => "killed (grace 1 s)",
        Some(FaultAction::Crash) => "crashed (SIGKILL)",
        Some(FaultAction::Pause) => "paused (SIGSTOP)",
        Some(FaultAction::Partition) => "partitioned",
        Some(FaultAction::PowerLoss) => "lost power (unsynced writes discarded, SIGKILL)",
        _ => "deleted",
    }
}

fn time_ms(ms: u64) -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_millisecond(ms as i64).unwrap_or_default())
}

/// Records a fault the agent carried out (`crash`, `pause`) as it reports it: when it sent which
/// signal to which process, and for a pause when it resumes it.
pub fn mark_signalled(
    br: &BenchmarkRun,
    rec: &mut FaultRecord,
    inj: &FaultInjection,
    r: &FaultReport,
) {
    let at = time_ms(r.at_unix_ms);
    mark_executed(br, rec, inj, &at);
    let until = r.until_unix_ms.map_or(String::new(), |ms| {
        let secs = ms.saturating_sub(r.at_unix_ms) as f64 / 1000.0;
        format!(" for {secs:.1} s")
    });
    let discarded = (r.power_loss.as_ref()).map_or(String::new(), |p| {
        format!(
            "{} unsynced bytes discarded by the lazy file system, then ",
            p.discarded_bytes
        )
    });
    let what = match (&r.signal, &r.partition) {
        (Some(s), _) => format!("{discarded}{} to {} (pid {})", s.signal, s.process, s.pid),
        (None, Some(p)) => format!("TCP ports {:?} dropped both ways", p.ports),
        (None, None) => "done (the agent reported no detail)".to_string(),
    };
    rec.message = Some(format!("{what}{until} in pod {} ({})", inj.pod, inj.how));
    rec.signal = r.signal.as_ref().map(|s| FaultSignal {
        signal: s.signal.clone(),
        process: s.process.clone(),
        pid: s.pid,
        sent_time: at.clone(),
        resume_time: r.until_unix_ms.map(time_ms),
    });
    rec.power_loss = r.power_loss.as_ref().map(|p| FaultPowerLoss {
        discarded_bytes: i64::try_from(p.discarded_bytes).unwrap_or(i64::MAX),
    });
    rec.partition = r.partition.as_ref().map(|p| FaultPartition {
        ports: p.ports.iter().map(|&p| i32::from(p)).collect(),
        rules: p.rules.clone(),
        applied_time: at.clone(),
        heal_time: time_ms(r.until_unix_ms.unwrap_or(r.at_unix_ms)),
    });
}

/// The fault agent's key of one fault execution: the same on every retry.
pub fn agent_key(run_uid: &str, rec: &FaultRecord) -> String {
    format!("{run_uid}/{}/{}", rec.fault, rec.trial)
}

/// The last moment a fault may still be carried out (later, it measures something else).
pub fn not_after_ms(rec: &FaultRecord) -> u64 {
    rec.planned_time.as_ref().map_or(0, millis) + LATE_LIMIT_MS
}

/// Records `rec` as carried out on `inj`'s pod at `at`: its offset into the measured phase is
/// `afterSeconds` plus how late it came.
pub fn mark_executed(br: &BenchmarkRun, rec: &mut FaultRecord, inj: &FaultInjection, at: &Time) {
    let after = br
        .spec
        .faults
        .get(rec.fault as usize)
        .map_or(0, |f| f.after_seconds);
    let due = rec.planned_time.as_ref().map_or(0, millis) as f64;
    let late_s = (millis(at) as f64 - due) / 1000.0;
    rec.offset_seconds = Some(((f64::from(after) + late_s) * 1000.0).round() / 1000.0);
    rec.executed_time = Some(at.clone());
    let jetstream = server_of(br, rec.variant.as_deref())
        .is_some_and(|s| s.kind == ServerKind::JetStreamCluster);
    if jetstream {
        rec.stream_leader = Some(FaultStreamLeader {
            before: inj.stream_leader.clone(),
            ..FaultStreamLeader::default()
        });
    }
    rec.pod = Some(inj.pod.clone());
    rec.message = Some(format!("{} {} ({})", verb(rec.action), inj.pod, inj.how));
    rec.injecting = None;
}

/// Every trial must have had every fault: a run that asked for a fault and ran without it
/// does not answer its question. `None` when all were carried out.
pub fn not_injected(br: &BenchmarkRun, faults: &[FaultRecord]) -> Option<String> {
    not_injected_in(br, faults, timing::total_trials(br)).map(|(_, msg)| msg)
}

/// As [`not_injected`], over the first `trials` trials (those that ran: `spec.stopWhen` may
/// end a run before its last round), with the reason: `FaultsNotInjected` when one was not
/// carried out, else `FaultsUnconfirmed` when one is unknown (its agent's report lost).
pub fn not_injected_in(
    br: &BenchmarkRun,
    faults: &[FaultRecord],
    trials: i32,
) -> Option<(RunFailureReason, String)> {
    if br.spec.faults.is_empty() {
        return None;
    }
    let trials = trials.max(1);
    let (mut missing, mut unknown) = (Vec::new(), Vec::new());
    for trial in 1..=trials {
        for i in 0..br.spec.faults.len() as i32 {
            match faults.iter().find(|f| f.trial == trial && f.fault == i) {
                Some(f) if f.executed() => {}
                Some(f) => {
                    let why = f.message.as_deref().unwrap_or("not carried out");
                    let list = if f.unknown() {
                        &mut unknown
                    } else {
                        &mut missing
                    };
                    list.push(format!("fault {i} in trial {trial}: {why}"));
                }
                None => missing.push(format!("fault {i} in trial {trial}: never planned")),
            }
        }
    }
    let total = trials as usize * br.spec.faults.len();
    let unknown_text = |more: &str| {
        format!(
            "{} {more}of {total} fault executions are unknown (the fault agent's report was lost \
             and no evidence confirmed them: the figures may or may not include them): {}",
            unknown.len(),
            unknown.join("; ")
        )
    };
    match (missing.is_empty(), unknown.is_empty()) {
        (true, true) => None,
        (true, false) => Some((RunFailureReason::FaultsUnconfirmed, unknown_text(""))),
        (false, u) => {
            let mut msg = format!(
                "{} of {total} fault executions were not carried out: {}",
                missing.len(),
                missing.join("; ")
            );
            if !u {
                msg = format!("{msg}; {}", unknown_text("more "));
            }
            Some((RunFailureReason::FaultsNotInjected, msg))
        }
    }
}

/// The pod a due record with none chosen yet acts on, from its server as `seen` this pass: the
/// choice goes into status (`injecting`, started `now`) before anything is done to that pod.
pub fn choose(
    br: &BenchmarkRun,
    rec: &FaultRecord,
    seen: &FaultTargetSeen,
    now: &Time,
) -> Result<FaultInjection, String> {
    let fault =
        (br.spec.faults.get(rec.fault as usize)).ok_or("the fault is no longer in spec.faults")?;
    let server =
        server_of(br, rec.variant.as_deref()).ok_or("the trial's target is not a serverRef")?;
    let pods = seen.pods.as_ref().map_err(Clone::clone)?;
    let names: Vec<String> = pods.iter().map(|(name, _)| name.clone()).collect();
    let by_ordinal = ordinals(&server.name, &names);
    // Read for every JetStream fault (the record says whom it hit); it chooses only for
    // `streamLeader`.
    let before = seen.leader.clone().and_then(Result::ok);
    let leader = (seen.leader.clone()).filter(|_| fault.pod == FaultPod::StreamLeader);
    let seed = variants::seed(
        br.metadata.uid.as_deref().unwrap_or_default(),
        br.metadata.generation.unwrap_or(0),
    );
    let round = rec.round.unwrap_or(rec.trial).max(1) as u32;
    let (name, how) = choose_pod(fault, &by_ordinal, round, seed, leader)?;
    let (_, uid) = (pods.iter().find(|(p, _)| *p == name)).ok_or("the chosen pod is gone")?;
    Ok(FaultInjection {
        pod_uid: uid.clone().ok_or("the chosen pod has no uid")?,
        pod: name,
        started_time: now.clone(),
        how,
        stream_leader: before,
    })
}

/// How the pod of `fault` is chosen in `round`, given the server's pods by ordinal (sorted)
/// and, for `streamLeader`, the leader's name as the servers report it.
pub fn choose_pod(
    fault: &Fault,
    pods: &[(i32, String)],
    round: u32,
    default_seed: u64,
    leader: Option<Result<String, String>>,
) -> Result<(String, String), String> {
    match fault.pod {
        FaultPod::Ordinal => {
            let want = fault.ordinal.unwrap_or(0);
            pods.iter()
                .find(|(o, _)| *o == want)
                .map(|(_, p)| (p.clone(), format!("ordinal {want}")))
                .ok_or_else(|| format!("no server pod with ordinal {want} (pods: {})", names(pods)))
        }
        FaultPod::Random => {
            if pods.is_empty() {
                return Err("the server has no pods".into());
            }
            let seed = fault.seed.map_or(default_seed, |s| s as u64);
            let draw = variants::draw(seed, round) % pods.len() as u64;
            let (o, p) = &pods[draw as usize];
            Ok((
                p.clone(),
                format!("random, seed {seed}, round {round}: ordinal {o}"),
            ))
        }
        FaultPod::StreamLeader => match leader {
            Some(Ok(name)) if pods.iter().any(|(_, p)| *p == name) => {
                Ok((name, "leader of the benchmark stream (from /jsz)".into()))
            }
            Some(Ok(name)) => Err(format!(
                "the stream leader {name} is not one of this server's pods ({})",
                names(pods)
            )),
            Some(Err(e)) => Err(format!("no stream leader found: {e}")),
            None => Err("no stream leader found".into()),
        },
    }
}

fn names(pods: &[(i32, String)]) -> String {
    pods.iter()
        .map(|(_, p)| p.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The server's pods by ordinal: `<server>-<n>` for StatefulSet pods; a Deployment's pods
/// (random names) are numbered in name order.
pub fn ordinals(server: &str, pods: &[String]) -> Vec<(i32, String)> {
    let mut named: Vec<(i32, String)> = pods
        .iter()
        .filter_map(|p| Some((ordinal(server, p)?, p.clone())))
        .collect();
    if named.is_empty() {
        let mut sorted = pods.to_vec();
        sorted.sort();
        named = sorted
            .into_iter()
            .enumerate()
            .map(|(i, p)| (i as i32, p))
            .collect();
    }
    named.sort();
    named
}

/// A pod's ordinal, when it is `<server>-<n>` (StatefulSet naming).
pub fn ordinal(server: &str, pod: &str) -> Option<i32> {
    pod.strip_prefix(server)?.strip_prefix('-')?.parse().ok()
}

#[cfg(test)]
mod tests;
