//! The start barrier. Starting: once every runner is ready, the common start time is chosen and
//! stored in status *before* any runner hears it (phase Running); the next pass sends it to all
//! runners in parallel. A resend (lost request, operator restart) always names the stored time,
//! and every agent keeps the first time it got, so runners cannot be merged as concurrent when
//! they started apart: that ends the run as RunnersStartedApart instead.
use super::decision::{Decision, Effect, POLL};
use super::ending::{fail, seconds_between};
use crate::run::conditions::{self as cond, Status, RUNNERS_READY};
use crate::run::model::{AgentSeen, Observed};
use crate::run::results::server_usage;
use crate::run::runners::build::RunIdentity;
use crate::run::runners::runner_pods::{self, RunnerView};
use crate::run::timing;
use crate::run::timing::{millis, time_at};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use msgbench_crds::benchmark_run::{BenchmarkRun, Phase, Progress, RunFailureReason};
use std::time::Duration;

/// Lead time between choosing the common start and the start itself, so every runner hears it.
pub const START_LEAD_MS: u64 = 2_000;
/// The same for later trials (runners already wait, polled every 500 ms).
pub const TRIAL_LEAD_MS: u64 = 500;
/// Runners whose starts differ by more than this did not run concurrently.
pub const START_APART_TOLERANCE_MS: u64 = 500;
/// How long a runner image pull may keep failing before the run ends (ImagePullFailed): the
/// kubelet retries after 10 s and 20 s, so a registry that was briefly unreachable recovers.
pub const PULL_GRACE_SECONDS: i64 = 40;
/// A start sent less than this before its time may arrive after it.
const SEND_MARGIN_MS: u64 = 100;

/// Starting: runner pods come up and connect; once all are ready the common start is chosen and
/// stored, and on the next pass sent to them: the run is Running once the runners have it.
/// Fails when they do not reach the barrier in time.
pub fn starting(br: &BenchmarkRun, id: &RunIdentity, obs: &Observed, d: &mut Decision) {
    let g = id.generation;
    let view = RunnerView::of(&obs.runner_pods, obs.job.as_ref());
    if let Some((reason, msg)) = view.failure() {
        fail(&mut d.status, reason, &msg, g, &obs.now);
        return;
    }
    if let Some(f) = runner_pods::image_pull_failure(&obs.runner_pods) {
        if image_pull_failed(&f, d, g, &obs.now) {
            return;
        }
    }
    if let Some(read) = &obs.server_usage {
        let connections = br.spec.workload.connections.is_some();
        server_usage::apply(&mut d.status, read, false, connections);
    }
    let count = br.spec.runners.count.max(1) as usize;
    let ready = view.ready_ips().len();
    d.status.progress = Some(Progress {
        trial: 0,
        trials: timing::total_trials(br),
        runners_ready: ready as i32,
        ..Progress::default()
    });
    d.requeue = Some(POLL);
    match d.status.start_time.as_ref().map(millis) {
        None if ready >= count => {
            let env = d.status.environment.get_or_insert_with(Default::default);
            env.server_pods_at_start = obs.server_pods.clone();
            let at = millis(&obs.now) + START_LEAD_MS;
            let why = format!("all {count} runner(s) ready; common start chosen");
            store_start(d, at, &why, g, &obs.now);
        }
        None => barrier_timeout(br, obs, d, ready, count),
        Some(start) => release(br, obs, d, start, count),
    }
}

/// A runner image the kubelet cannot pull: a registry blip is waited out for
/// [`PULL_GRACE_SECONDS`] since the pod was created (the kubelet retries by itself); a pull that
/// still fails then, or one no retry can mend, ends the run naming the image and the kubelet's
/// words, long before the barrier's bound. Returns whether the run ended.
fn image_pull_failed(f: &runner_pods::PullFailure, d: &mut Decision, g: i64, now: &Time) -> bool {
    let age = f
        .pod_created
        .as_ref()
        .map_or(0, |c| seconds_between(c, now));
    let what = format!(
        "runner pod {} cannot pull image {:?} ({}): {}",
        f.pod, f.image, f.reason, f.message
    );
    if f.permanent || age >= PULL_GRACE_SECONDS {
        let msg = match f.permanent {
            true => what,
            false => format!("{what}; still failing {age}s after the pod was created"),
        };
        fail(
            &mut d.status,
            RunFailureReason::ImagePullFailed,
            &msg,
            g,
            now,
        );
        return true;
    }
    let msg = format!(
        "{what}; the kubelet retries until {PULL_GRACE_SECONDS}s after the pod was created"
    );
    cond::set(
        &mut d.status.conditions,
        RUNNERS_READY,
        Status::False,
        &f.reason,
        &msg,
        Some(g),
        now,
    );
    false
}

/// The stored start goes to every runner that does not have it yet.
fn release(br: &BenchmarkRun, obs: &Observed, d: &mut Decision, start: u64, count: usize) {
    let g = d.status.observed_generation.unwrap_or(0);
    match next_release(&obs.agents, count, start, millis(&obs.now)) {
        Release::Send { trial, at, ips } => {
            d.effects.push(Effect::Release {
                trial,
                at_unix_ms: at,
                ips,
            });
            // The sends happen before this status is written.
            released(d, count, g, &obs.now);
        }
        Release::Rechoose(at) => {
            let why =
                format!("{count} runner(s) ready; nobody had received the first start: moved");
            store_start(d, at, &why, g, &obs.now);
        }
        Release::Apart(msg) => {
            let reason = RunFailureReason::RunnersStartedApart;
            fail(&mut d.status, reason, &msg, g, &obs.now)
        }
        // Every runner has it already (sent by an operator that stopped before writing).
        Release::Nothing if obs.agents.len() >= count => released(d, count, g, &obs.now),
        Release::Nothing => {
            let ready = obs.agents.len();
            barrier_timeout(br, obs, d, ready, count);
            if d.status.verdict.is_none() {
                d.requeue = Some(Duration::from_millis(500));
            }
        }
    }
}

fn released(d: &mut Decision, count: usize, g: i64, now: &Time) {
    let st = &mut d.status;
    st.phase = Some(Phase::Running);
    let at = st
        .start_time
        .as_ref()
        .map_or(String::new(), |t| t.0.to_string());
    let msg = format!("{count} runner(s) connected; common start released for {at}");
    cond::set(
        &mut st.conditions,
        RUNNERS_READY,
        Status::True,
        "BarrierReleased",
        &msg,
        Some(g),
        now,
    );
    d.requeue = Some(Duration::from_millis(500));
}

/// Runners must reach the barrier within the bound since their Job was created.
fn barrier_timeout(
    br: &BenchmarkRun,
    obs: &Observed,
    d: &mut Decision,
    ready: usize,
    count: usize,
) {
    let g = d.status.observed_generation.unwrap_or(0);
    let created = obs
        .job
        .as_ref()
        .and_then(|j| j.metadata.creation_timestamp.clone())
        .unwrap_or_else(|| obs.now.clone());
    let limit = timing::barrier_limit_seconds(br);
    if seconds_between(&created, &obs.now) > limit {
        let msg = format!(
            "{ready} of {count} runners reached the start barrier within {limit}s \
             (barrierTimeoutSeconds + connectTimeoutSeconds + {}s for pod start)",
            timing::BARRIER_GRACE_SECONDS
        );
        // A runner no node would take says why in the scheduler's words.
        match runner_pods::unschedulable(&obs.runner_pods) {
            Some((pod, why)) => {
                let msg = format!("{msg}; runner pod {pod} could not be scheduled: {why}");
                let reason = RunFailureReason::RunnersUnschedulable;
                fail(&mut d.status, reason, &msg, g, &obs.now);
            }
            None => fail(
                &mut d.status,
                RunFailureReason::BarrierTimeout,
                &msg,
                g,
                &obs.now,
            ),
        }
    }
}

/// Stores the common start `at`. It is sent on the next pass, once stored, so no runner ever
/// holds a start the status does not.
pub fn store_start(d: &mut Decision, at: u64, why: &str, g: i64, now: &Time) {
    let st = &mut d.status;
    st.start_time = Some(time_at(at).unwrap_or_else(|| now.clone()));
    let msg = format!(
        "{why}: {}",
        st.start_time
            .as_ref()
            .map_or(String::new(), |t| t.0.to_string())
    );
    let status = if st.phase == Some(Phase::Running) {
        Status::True
    } else {
        Status::False
    };
    let reason = if status == Status::True {
        "BarrierReleased"
    } else {
        "StartChosen"
    };
    cond::set(
        &mut st.conditions,
        RUNNERS_READY,
        status,
        reason,
        &msg,
        Some(g),
        now,
    );
    d.requeue = Some(Duration::from_millis(100));
}

/// What the barrier needs this pass.
#[derive(Clone, Debug, PartialEq)]
pub enum Release {
    Nothing,
    /// Send `trial`'s start at `at` to these pod IPs.
    Send {
        trial: u32,
        at: u64,
        ips: Vec<String>,
    },
    /// Nobody got the stored start and it is (nearly) past: store a new one first.
    Rechoose(u64),
    /// Some runners started and another can no longer start with them.
    Apart(String),
}

/// Trial 1 against the stored start `start_ms`, then the per-trial barriers of several runners:
/// trial k is released once every runner waits for it; a runner still waiting while others
/// already hold k's start gets that same start, if it is not too late.
pub fn next_release(agents: &[AgentSeen], runners: usize, start_ms: u64, now_ms: u64) -> Release {
    let not_started: Vec<&AgentSeen> = agents.iter().filter(|a| !a.progress.started).collect();
    if !not_started.is_empty() {
        let any_started = not_started.len() < agents.len();
        return catch_up(1, &not_started, start_ms, any_started, now_ms);
    }
    let Some(k) = agents
        .iter()
        .map(|a| a.progress.waiting_for)
        .max()
        .filter(|k| *k > 1)
    else {
        return Release::Nothing;
    };
    let waiting: Vec<&AgentSeen> = agents
        .iter()
        .filter(|a| a.progress.waiting_for == k)
        .collect();
    let released_at = agents
        .iter()
        .filter(|a| a.progress.trial == k && a.progress.waiting_for == 0)
        .filter_map(|a| {
            (a.progress.trial_start_unix_ms > 0).then_some(a.progress.trial_start_unix_ms)
        })
        .min();
    match released_at {
        Some(t) => catch_up(k, &waiting, t, true, now_ms),
        None if waiting.len() >= runners => Release::Send {
            trial: k,
            at: now_ms + TRIAL_LEAD_MS,
            ips: ips(&waiting),
        },
        None => Release::Nothing,
    }
}

/// Runners in `late` have not got `trial`'s start `at` yet.
fn catch_up(
    trial: u32,
    late: &[&AgentSeen],
    at: u64,
    others_have_it: bool,
    now_ms: u64,
) -> Release {
    if now_ms + SEND_MARGIN_MS < at {
        return Release::Send {
            trial,
            at,
            ips: ips(late),
        };
    }
    if !others_have_it && trial == 1 {
        return Release::Rechoose(now_ms + START_LEAD_MS);
    }
    if now_ms + SEND_MARGIN_MS <= at + START_APART_TOLERANCE_MS {
        return Release::Send {
            trial,
            at,
            ips: ips(late),
        };
    }
    let pods: Vec<&str> = late.iter().map(|a| a.pod.as_str()).collect();
    Release::Apart(format!(
        "trial {trial}: runner pod(s) {} had not received the common start {} ms after it \
         (others had started); runners that start apart are not merged",
        pods.join(", "),
        now_ms.saturating_sub(at)
    ))
}

fn ips(agents: &[&AgentSeen]) -> Vec<String> {
    agents.iter().map(|a| a.ip.clone()).collect()
}

/// Pure: what agents answered to `POST /start` (the start each keeps, or why it did not
/// answer). A kept start more than the tolerance away from `at` means that runner had been
/// released earlier with another time: the message says so.
pub fn check_echoes(
    trial: u32,
    at: u64,
    echoes: &[(String, Result<u64, String>)],
) -> Option<String> {
    let apart: Vec<String> = echoes
        .iter()
        .filter_map(|(ip, r)| {
            let kept = *r.as_ref().ok()?;
            (kept.abs_diff(at) > START_APART_TOLERANCE_MS).then(|| {
                format!(
                    "{ip} keeps {kept} (common start {at}, {} ms apart)",
                    kept.abs_diff(at)
                )
            })
        })
        .collect();
    (!apart.is_empty()).then(|| {
        format!(
            "trial {trial}: runner(s) started apart: {}",
            apart.join("; ")
        )
    })
}
