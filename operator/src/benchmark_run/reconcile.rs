//! The BenchmarkRun state machine. All state lives in status (phase, job name, barrier time,
//! condition times), so a restarted operator continues where the last one stopped: it resends
//! `/start` when the barrier was not released everywhere, or collects finished runners.
use super::build::{self, RunIdentity};
use super::conditions::{self as cond, Status, COMPLETE, RUNNERS_READY, TARGET_READY};
use super::gather::DoneRunner;
use super::{endpoints, finish, runner_access, runner_http, target, variants};
use crate::context::{Context, CONTROLLER_NAME};
use crate::error::{Error, Result};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PropagationPolicy};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Api, Resource, ResourceExt};
use msgbench_crds::benchmark_run::{
    BenchmarkRun, BenchmarkRunStatus, HistoryEntry, Phase, Progress, MAX_HISTORY,
};
use msgbench_crds::workload::Workload;
use runner_api::agent::AgentProgress;
use std::sync::Arc;
use std::time::Duration;

const POLL: Duration = Duration::from_secs(2);
/// Lead time between releasing the barrier and the common start, so every runner hears it.
const START_LEAD_MS: u64 = 2_000;
/// The same for later trials (runners already wait, polled every 500 ms).
const TRIAL_LEAD_MS: u64 = 500;
/// The operator's own barrier bound adds this to the spec's (pods that never became ready
/// cannot time out by themselves).
const BARRIER_GRACE_SECONDS: i64 = 30;
/// The runner Job's activeDeadlineSeconds exceeds the run's deadline by this much.
const JOB_DEADLINE_BACKSTOP_SECONDS: i64 = 60;

pub fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

fn seconds_since(t: &Time) -> i64 {
    (k8s_openapi::jiff::Timestamp::now().as_second() - t.0.as_second()).max(0)
}

/// Seconds one run of `w` is expected to take, when its length is known.
pub fn workload_seconds(w: &Workload) -> Option<i64> {
    let body = if let Some(d) = w.duration_seconds {
        i64::from(d)
    } else if let (Some(n), Some(r)) = (w.messages_per_publisher, w.rate_per_publisher) {
        (n / u64::from(r)) as i64 + 1
    } else if let Some(s) = &w.sessions {
        let mut t = 0i64;
        for x in s {
            t += i64::from(x.pause_after_seconds);
            t += w
                .rate_per_publisher
                .map_or(0, |r| (x.messages / u64::from(r)) as i64);
        }
        t
    } else {
        return None;
    };
    Some(body + i64::from(w.warmup_seconds) + i64::from(w.drain_seconds))
}

/// Trials the runners run: `trials`, times the variants with variants.
pub fn total_trials(br: &BenchmarkRun) -> i32 {
    br.spec.trials.max(1) * (br.spec.variants.len().max(1) as i32)
}

/// Seconds every trial takes back to back, settle pauses included, when all lengths are known.
pub fn expected_run_seconds(br: &BenchmarkRun) -> Option<i64> {
    let s = &br.spec;
    let per_round = match variants::plan(s) {
        Ok(p) if !p.is_empty() => p
            .iter()
            .map(|v| workload_seconds(&v.workload))
            .sum::<Option<i64>>()?,
        _ => workload_seconds(&s.workload)?,
    };
    let n = i64::from(total_trials(br));
    Some(per_round * i64::from(s.trials.max(1)) + i64::from(s.settle_seconds) * (n - 1))
}

/// Upper bound for the whole run: the spec's, or derived from the workload and timeouts.
pub fn deadline_seconds(br: &BenchmarkRun) -> i64 {
    if let Some(d) = br.spec.active_deadline_seconds {
        return d;
    }
    let s = &br.spec;
    let n = i64::from(total_trials(br));
    let run = expected_run_seconds(br).unwrap_or(1800 * n);
    i64::from(s.target_ready_timeout_seconds)
        + i64::from(s.barrier_timeout_seconds)
        + i64::from(s.connect_timeout_seconds) * n
        + run
        + n * (30 + i64::from(s.settle_seconds))
        + 60
}

pub async fn reconcile(br: Arc<BenchmarkRun>, ctx: Arc<Context>) -> Result<Action> {
    let _timer = ctx.metrics.reconcile_started(build::KIND_LABEL);
    if br.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let ns = br
        .namespace()
        .ok_or_else(|| Error::MissingNamespace(br.name_any()))?;
    let generation = br.meta().generation.unwrap_or(0);
    let id = RunIdentity {
        name: br.name_any(),
        namespace: ns.clone(),
        generation,
        owner_ref: br
            .controller_owner_ref(&())
            .ok_or_else(|| Error::MissingNamespace(br.name_any()))?,
    };
    let prev = br.status.clone().unwrap_or_default();
    let mut st = prev.clone();
    let action = step(&br, &ctx, &id, &mut st).await?;
    if st != prev {
        write_status(&ctx, &id, &st).await?;
        announce(&ctx, &br, &prev, &st).await;
    }
    if let Some(r) = &st.result {
        super::metrics::observe(&ctx.metrics.registry, &ns, &id.name, r, st.verdict.as_ref());
    }
    Ok(action)
}

async fn step(
    br: &BenchmarkRun,
    ctx: &Context,
    id: &RunIdentity,
    st: &mut BenchmarkRunStatus,
) -> Result<Action> {
    let t = now();
    let g = Some(id.generation);
    // A new spec generation starts a fresh run; the finished one moves to history.
    if st.observed_generation != Some(id.generation) {
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
        delete_other_generations(ctx, id).await?;
        *st = BenchmarkRunStatus {
            phase: Some(Phase::Pending),
            observed_generation: g,
            history,
            ..BenchmarkRunStatus::default()
        };
        cond::accept(&mut st.conditions, g, &t);
        return Ok(Action::requeue(Duration::from_millis(200)));
    }
    if matches!(st.phase, Some(Phase::Succeeded | Phase::Failed)) {
        super::stop_runners::after_failure(ctx, &id.namespace, st).await?;
        if st.phase == Some(Phase::Succeeded) {
            release_holding_runners(br, ctx, id).await?;
        }
        // A baseline that finished later still gets compared.
        if let (Some(b), Some(c)) = (&br.spec.baseline_ref, &st.comparison) {
            if c.reason.is_some() && !st.trials.is_empty() {
                st.comparison =
                    Some(super::compare::against(ctx, &id.namespace, &b.name, &st.trials).await?);
                if st.comparison.as_ref().is_some_and(|c| c.reason.is_some()) {
                    return Ok(Action::requeue(Duration::from_secs(15)));
                }
            }
        }
        return ttl(br, ctx, id, st).await;
    }
    let accepted = cond::get(&st.conditions, COMPLETE)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| t.clone());
    if seconds_since(&accepted) > deadline_seconds(br) {
        let msg = format!(
            "the run did not finish within {}s (activeDeadlineSeconds)",
            deadline_seconds(br)
        );
        finish::fail(st, "DeadlineExceeded", &msg, g);
        return Ok(Action::requeue(POLL));
    }

    // Target: resolved and Ready before any pod exists.
    let Some(job_name) = st.job_name.clone() else {
        // Rules admission cannot express (a variant's merged workload) end the run before
        // any pod exists, naming the field.
        let planned = match variants::plan(&br.spec) {
            Ok(p) => p,
            Err(msg) => {
                finish::fail(st, "InvalidSpec", &msg, g);
                return Ok(Action::requeue(POLL));
            }
        };
        let resolved = match target::resolve(ctx, br, &id.namespace).await? {
            // Missing is waited for like not-Ready: GitOps tools and `kubectl apply -f dir/`
            // create objects in any order, so the target may appear a moment later.
            Err(missing) => {
                let limit = i64::from(br.spec.target_ready_timeout_seconds);
                let timed_out = seconds_since(&accepted) > limit;
                let msg = if timed_out {
                    format!("{missing}; still missing after {limit}s (targetReadyTimeoutSeconds)")
                } else {
                    missing
                };
                cond::set(
                    &mut st.conditions,
                    TARGET_READY,
                    Status::False,
                    "TargetNotFound",
                    &msg,
                    g,
                    &t,
                );
                if timed_out {
                    finish::fail(st, "TargetNotFound", &msg, g);
                } else {
                    st.phase = Some(Phase::WaitingForTarget);
                }
                return Ok(Action::requeue(POLL));
            }
            Ok(r) => r,
        };
        st.target_name = Some(resolved.display.clone());
        if let Some(why) = &resolved.not_ready {
            let waited = seconds_since(&accepted);
            let limit = i64::from(br.spec.target_ready_timeout_seconds);
            if waited > limit {
                let msg =
                    format!("{why}; still not Ready after {limit}s (targetReadyTimeoutSeconds)");
                cond::set(
                    &mut st.conditions,
                    TARGET_READY,
                    Status::False,
                    "TargetNotReady",
                    &msg,
                    g,
                    &t,
                );
                finish::fail(st, "TargetNotReady", &msg, g);
                return Ok(Action::requeue(POLL));
            }
            st.phase = Some(Phase::WaitingForTarget);
            cond::set(
                &mut st.conditions,
                TARGET_READY,
                Status::False,
                "TargetNotReady",
                why,
                g,
                &t,
            );
            return Ok(Action::requeue(POLL));
        }
        // Ready is not reachable yet: the Service must list a ready endpoint first.
        let server_ref = br.spec.target.server_ref.is_some();
        if let Some(why) =
            endpoints::not_programmed(ctx, &resolved.url, &id.namespace, server_ref).await?
        {
            return Ok(wait_for_endpoints(
                br,
                st,
                &accepted,
                &resolved.url,
                &why,
                g,
            ));
        }
        cond::set(
            &mut st.conditions,
            TARGET_READY,
            Status::True,
            "TargetReady",
            &resolved.url,
            g,
            &t,
        );
        // Never load the same target twice at once: a run waits while its baseline runs.
        if let Some(b) = &br.spec.baseline_ref {
            if super::compare::baseline_running(ctx, &id.namespace, &b.name).await? {
                let msg = format!("waiting for baseline {} to finish", b.name);
                cond::set(
                    &mut st.conditions,
                    RUNNERS_READY,
                    Status::False,
                    "WaitingForBaseline",
                    &msg,
                    g,
                    &t,
                );
                st.phase = Some(Phase::Pending);
                return Ok(Action::requeue(Duration::from_secs(5)));
            }
        }
        let mut cfg = build::agent_config(&br.spec, &resolved.url);
        if !planned.is_empty() {
            // Every variant's own target must be there and Ready too.
            let mut urls = std::collections::BTreeMap::new();
            for v in &planned {
                let Some(vt) = &v.target else { continue };
                let r = target::resolve_target(ctx, vt, br.spec.workload.protocol, &id.namespace)
                    .await?;
                let problem = match &r {
                    Err(missing) => Some(("TargetNotFound", missing.clone())),
                    Ok(r) => r.not_ready.clone().map(|w| ("TargetNotReady", w)),
                };
                if let Some((reason, why)) = problem {
                    let why = format!("variant {}: {why}", v.name);
                    return Ok(wait_for_target(br, st, &accepted, reason, &why, g));
                }
                if let Ok(r) = r {
                    let server_ref = vt.server_ref.is_some();
                    if let Some(why) =
                        endpoints::not_programmed(ctx, &r.url, &id.namespace, server_ref).await?
                    {
                        let why = format!("variant {}: {why}", v.name);
                        return Ok(wait_for_endpoints(br, st, &accepted, &r.url, &why, g));
                    }
                    urls.insert(v.name.clone(), r.url);
                }
            }
            if st.schedule.is_empty() {
                let names: Vec<String> = planned.iter().map(|v| v.name.clone()).collect();
                let uid = br.meta().uid.clone().unwrap_or_default();
                st.schedule = variants::schedule(
                    &names,
                    br.spec.trials.max(1) as usize,
                    variants::seed(&uid, id.generation),
                );
            }
            let shown: std::collections::BTreeSet<String> = planned
                .iter()
                .map(|v| variants::target_display(&br.spec, &v.name))
                .collect();
            st.target_name = Some(shown.into_iter().collect::<Vec<_>>().join(", "));
            cfg.schedule = variants::agent_schedule(&st.schedule, &planned, |v| {
                urls.get(&v.name)
                    .cloned()
                    .unwrap_or_else(|| resolved.url.clone())
            });
        }
        runner_access::ensure_token(ctx, id).await?;
        let pp = PatchParams::apply(CONTROLLER_NAME).force();
        if let Some(peer) = &ctx.runner_peer {
            let np = runner_access::network_policy(id, peer);
            Api::<NetworkPolicy>::namespaced(ctx.client.clone(), &id.namespace)
                .patch(&id.job_name(), &pp, &Patch::Apply(&np))
                .await?;
        }
        let cm = build::config_map(id, &cfg).map_err(|e| Error::Build(e.to_string()))?;
        let job = build::job(
            id,
            &br.spec,
            resolved.server_labels.as_ref(),
            // The Job's own deadline is only a backstop for when the operator is down: it must
            // not race the run's deadline (its pod deletions would read as RunnerFailed), nor
            // cut short a runner holding its results for an operator that is away.
            deadline_seconds(br)
                + JOB_DEADLINE_BACKSTOP_SECONDS
                + i64::from(br.spec.runners.results_hold_seconds.max(0)),
        );
        let name = id.job_name();
        Api::<ConfigMap>::namespaced(ctx.client.clone(), &id.namespace)
            .patch(&name, &pp, &Patch::Apply(&cm))
            .await?;
        Api::<Job>::namespaced(ctx.client.clone(), &id.namespace)
            .patch(&name, &pp, &Patch::Apply(&job))
            .await?;
        st.job_name = Some(name);
        st.phase = Some(Phase::Starting);
        st.environment = resolved.environment.clone();
        cond::set(
            &mut st.conditions,
            RUNNERS_READY,
            Status::False,
            "Starting",
            "runner pods starting",
            g,
            &t,
        );
        return Ok(Action::requeue(POLL));
    };

    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &id.namespace);
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &id.namespace);
    let job = jobs.get_opt(&job_name).await?;
    let pod_list = pods
        .list(&ListParams::default().labels(&id.pod_selector()))
        .await?
        .items;
    let count = br.spec.runners.count.max(1) as usize;
    let view = finish::RunnerView::of(&pod_list, job.as_ref());

    if let Some((reason, msg)) = view.failure() {
        finish::fail(st, reason, &msg, g);
        return Ok(Action::requeue(POLL));
    }
    // Server CPU/memory: a baseline before the barrier release, then samples under load.
    if view.succeeded.len() < count {
        super::server_usage::sample(ctx, br, &id.namespace, st).await;
    }
    let token = runner_access::ensure_token(ctx, id).await?;
    if st.start_time.is_none() {
        let ready = view.ready_ips();
        st.progress = Some(Progress {
            trial: 0,
            trials: total_trials(br),
            runners_ready: ready.len() as i32,
            ..Progress::default()
        });
        if ready.len() >= count {
            let at = k8s_openapi::jiff::Timestamp::now().as_millisecond() as u64 + START_LEAD_MS;
            for ip in &ready {
                runner_http::start(ip, &token, 1, at)
                    .await
                    .map_err(|e| Error::Build(format!("releasing runner {ip}: {e:#}")))?;
            }
            st.start_time = k8s_openapi::jiff::Timestamp::from_millisecond(at as i64)
                .ok()
                .map(Time);
            st.phase = Some(Phase::Running);
            let msg = format!("{count} runner(s) connected; common start released");
            cond::set(
                &mut st.conditions,
                RUNNERS_READY,
                Status::True,
                "BarrierReleased",
                &msg,
                g,
                &t,
            );
            return Ok(Action::requeue(POLL));
        }
        let created = job
            .as_ref()
            .and_then(|j| j.metadata.creation_timestamp.clone())
            .unwrap_or_else(|| t.clone());
        // Runners may retry the target for connectTimeoutSeconds before they are ready.
        let limit = i64::from(br.spec.barrier_timeout_seconds)
            + i64::from(br.spec.connect_timeout_seconds)
            + BARRIER_GRACE_SECONDS;
        if seconds_since(&created) > limit {
            let msg = format!(
                "{} of {count} runners reached the start barrier within {limit}s \
                 (barrierTimeoutSeconds + connectTimeoutSeconds + {BARRIER_GRACE_SECONDS}s \
                 for pod start)",
                ready.len()
            );
            finish::fail(st, "BarrierTimeout", &msg, g);
        }
        return Ok(Action::requeue(POLL));
    }

    // Released: poll the running agents (progress, a lost /start, trial barriers); once every
    // runner is done (holding its results or exited) → gather and merge.
    let start_ms = st
        .start_time
        .as_ref()
        .map_or(0, |t| t.0.as_millisecond() as u64);
    let polled = poll_running(&view, &token, start_ms).await;
    let done: Vec<DoneRunner> = view
        .succeeded
        .iter()
        .map(|p| DoneRunner {
            pod: p,
            holding_at: None,
        })
        .chain(
            polled
                .iter()
                .filter(|r| r.progress.finished)
                .map(|r| DoneRunner {
                    pod: r.pod,
                    holding_at: Some(r.ip.clone()),
                }),
        )
        .collect();
    if done.len() >= count {
        finish::collect(ctx, br, id, st, &done, &pods, &token).await?;
        super::server_usage::attach(st);
        return Ok(Action::requeue(POLL));
    }
    if job.as_ref().is_some_and(finish::job_complete) || (job.is_none() && view.running.is_empty())
    {
        let msg = format!(
            "{} of {count} runner pods left results to read (Job or pods deleted before collection)",
            view.succeeded.len()
        );
        finish::fail(st, "ResultsLost", &msg, g);
        return Ok(Action::requeue(POLL));
    }
    let ips: Vec<String> = polled.iter().map(|r| r.ip.clone()).collect();
    let (mut published, mut received, mut trial) = (0, 0, 1);
    let mut waiting = Vec::new();
    for r in &polled {
        published += r.progress.published;
        received += r.progress.received;
        trial = trial.max(r.progress.trial as i32);
        waiting.push(r.progress.waiting_for);
    }
    // Per-trial barrier (several runners): release trial k once every runner waits for it.
    let next = waiting.first().copied().unwrap_or(0);
    let all_waiting = next > 1
        && view.running.len() == count
        && waiting.len() == count
        && waiting.iter().all(|w| *w == next);
    if all_waiting {
        let at = k8s_openapi::jiff::Timestamp::now().as_millisecond() as u64 + TRIAL_LEAD_MS;
        for ip in &ips {
            runner_http::start(ip, &token, next, at)
                .await
                .map_err(|e| {
                    Error::Build(format!("releasing runner {ip} for trial {next}: {e:#}"))
                })?;
        }
    }
    let elapsed = st.start_time.as_ref().map_or(0, seconds_since);
    let expected = expected_run_seconds(br);
    st.progress = Some(Progress {
        trial,
        trials: total_trials(br),
        elapsed_seconds: elapsed,
        expected_seconds: expected,
        published,
        received,
        runners_ready: count as i32,
    });
    // Runners waiting at a trial barrier are polled more often: each poll is start latency.
    if waiting.iter().any(|w| *w > 0) && !all_waiting {
        return Ok(Action::requeue(Duration::from_millis(500)));
    }
    Ok(Action::requeue(Duration::from_secs(3)))
}

/// A running runner pod and what its agent said.
struct PolledRunner<'a> {
    pod: &'a Pod,
    ip: String,
    progress: AgentProgress,
}

/// Asks every running agent for its progress (runners that do not answer are left out) and
/// resends the common start to one that lost it.
async fn poll_running<'a>(
    view: &finish::RunnerView<'a>,
    token: &str,
    start_ms: u64,
) -> Vec<PolledRunner<'a>> {
    let mut out = Vec::new();
    for pod in &view.running {
        let Some(ip) = finish::ip(pod) else {
            continue;
        };
        if let Some(p) = runner_http::progress(&ip, token).await {
            if !p.started {
                let _ = runner_http::start(&ip, token, 1, start_ms).await;
            }
            out.push(PolledRunner {
                pod,
                ip,
                progress: p,
            });
        }
    }
    out
}

/// After a success: runners still holding their results may exit now.
async fn release_holding_runners(br: &BenchmarkRun, ctx: &Context, id: &RunIdentity) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &id.namespace);
    let lp = ListParams::default().labels(&id.pod_selector());
    let ips: Vec<String> = pods
        .list(&lp)
        .await?
        .items
        .iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .filter_map(|p| p.status.as_ref()?.pod_ip.clone())
        .collect();
    if ips.is_empty() {
        return Ok(());
    }
    let token = runner_access::ensure_token(ctx, id).await?;
    super::gather::release_holding(&ips, &token, total_trials(br) as u32).await;
    Ok(())
}

/// A target (a variant's own) is missing or not Ready: wait up to `targetReadyTimeoutSeconds`
/// since acceptance, then fail with `reason`.
fn wait_for_target(
    br: &BenchmarkRun,
    st: &mut BenchmarkRunStatus,
    accepted: &Time,
    reason: &str,
    why: &str,
    g: Option<i64>,
) -> Action {
    let limit = i64::from(br.spec.target_ready_timeout_seconds);
    let timed_out = seconds_since(accepted) > limit;
    let msg = if timed_out {
        format!("{why}; still not there/Ready after {limit}s (targetReadyTimeoutSeconds)")
    } else {
        why.to_string()
    };
    cond::set(
        &mut st.conditions,
        TARGET_READY,
        Status::False,
        reason,
        &msg,
        g,
        &now(),
    );
    if timed_out {
        finish::fail(st, reason, &msg, g);
    } else {
        st.phase = Some(Phase::WaitingForTarget);
    }
    Action::requeue(POLL)
}

/// The target is Ready but its Service lists no ready endpoint for the run's port: wait (no
/// runner exists yet) up to `targetReadyTimeoutSeconds` since acceptance, then TargetUnreachable.
fn wait_for_endpoints(
    br: &BenchmarkRun,
    st: &mut BenchmarkRunStatus,
    accepted: &Time,
    url: &str,
    why: &str,
    g: Option<i64>,
) -> Action {
    let limit = i64::from(br.spec.target_ready_timeout_seconds);
    let w = endpoints::waiting(seconds_since(accepted), limit, url, why);
    cond::set(
        &mut st.conditions,
        TARGET_READY,
        Status::False,
        w.reason,
        &w.message,
        g,
        &now(),
    );
    if w.failed {
        finish::fail(st, w.reason, &w.message, g);
    } else {
        st.phase = Some(Phase::WaitingForTarget);
    }
    Action::requeue(POLL)
}

/// After the verdict: delete the runner Job (and its pods) once the TTL has passed; results stay.
async fn ttl(
    br: &BenchmarkRun,
    ctx: &Context,
    id: &RunIdentity,
    st: &BenchmarkRunStatus,
) -> Result<Action> {
    let (Some(ttl), Some(done)) = (br.spec.ttl_seconds_after_finished, &st.completion_time) else {
        return Ok(Action::await_change());
    };
    let left = i64::from(ttl) - seconds_since(done);
    if left > 0 {
        return Ok(Action::requeue(Duration::from_secs(left as u64 + 1)));
    }
    delete_children(ctx, id, |_| true).await?;
    Ok(Action::await_change())
}

async fn delete_other_generations(ctx: &Context, id: &RunIdentity) -> Result<()> {
    let g = id.generation.to_string();
    delete_children(ctx, id, |labels| {
        labels.get(build::LABEL_GENERATION) != Some(&g)
    })
    .await
}

/// Deletes this run's Jobs (pods go with them), ConfigMaps and NetworkPolicies whose labels
/// match `pick`. The token Secret stays until the run is deleted.
async fn delete_children(
    ctx: &Context,
    id: &RunIdentity,
    pick: impl Fn(&std::collections::BTreeMap<String, String>) -> bool,
) -> Result<()> {
    let sel = format!(
        "{}={},{}={}",
        crate::meta::LABEL_NAME,
        build::KIND_LABEL,
        crate::meta::LABEL_INSTANCE,
        id.name
    );
    let lp = ListParams::default().labels(&sel);
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..DeleteParams::default()
    };
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &id.namespace);
    for j in jobs.list(&lp).await?.items {
        if pick(j.labels()) {
            ignore_gone(jobs.delete(&j.name_any(), &dp).await.map(|_| ()))?;
        }
    }
    let cms: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &id.namespace);
    for c in cms.list(&lp).await?.items {
        if pick(c.labels()) {
            ignore_gone(cms.delete(&c.name_any(), &dp).await.map(|_| ()))?;
        }
    }
    let nps: Api<NetworkPolicy> = Api::namespaced(ctx.client.clone(), &id.namespace);
    for n in nps.list(&lp).await?.items {
        if pick(n.labels()) {
            ignore_gone(nps.delete(&n.name_any(), &dp).await.map(|_| ()))?;
        }
    }
    Ok(())
}

fn ignore_gone(r: kube::Result<()>) -> Result<()> {
    match r {
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        other => Ok(other?),
    }
}

async fn write_status(ctx: &Context, id: &RunIdentity, st: &BenchmarkRunStatus) -> Result<()> {
    let api: Api<BenchmarkRun> = Api::namespaced(ctx.client.clone(), &id.namespace);
    let patch = serde_json::json!({
        "apiVersion": "msgbench.dev/v1alpha1",
        "kind": "BenchmarkRun",
        "status": st,
    });
    api.patch_status(
        &id.name,
        &PatchParams::apply(CONTROLLER_NAME).force(),
        &Patch::Apply(&patch),
    )
    .await?;
    Ok(())
}

/// One event per phase change and per verdict.
async fn announce(
    ctx: &Context,
    br: &BenchmarkRun,
    prev: &BenchmarkRunStatus,
    st: &BenchmarkRunStatus,
) {
    let mut events = Vec::new();
    if prev.phase != st.phase {
        if let Some(p) = st.phase {
            let note = match p {
                Phase::Starting => format!(
                    "runner Job {} created",
                    st.job_name.clone().unwrap_or_default()
                ),
                Phase::Running => "all runners ready; common start released".into(),
                _ => format!("phase {p:?}"),
            };
            let failed = p == Phase::Failed;
            events.push((
                if failed {
                    EventType::Warning
                } else {
                    EventType::Normal
                },
                format!("{p:?}"),
                note,
            ));
        }
    }
    if prev.verdict != st.verdict {
        if let Some(v) = &st.verdict {
            let ty = if v.outcome == msgbench_crds::benchmark_run::Outcome::Passed {
                EventType::Normal
            } else {
                EventType::Warning
            };
            events.push((ty, v.reason.clone(), v.message.clone().unwrap_or_default()));
        }
    }
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

pub fn error_policy(br: Arc<BenchmarkRun>, err: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics
        .reconcile_failed(build::KIND_LABEL, err.metric_label());
    let key = format!(
        "benchmarkrun/{}/{}",
        br.namespace().unwrap_or_default(),
        br.name_any()
    );
    let n = ctx.backoff.failed(&key);
    tracing::warn!(run = %br.name_any(), error = %err, "benchmark reconcile failed");
    Action::requeue(ctx.requeue.error_delay(n).min(Duration::from_secs(30)))
}
