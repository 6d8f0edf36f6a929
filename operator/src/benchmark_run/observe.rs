//! Observe: every read a reconcile makes, into one plain `Observed` value that `decide` turns
//! into the next status and effects. What is read depends on the phase: targets before the
//! runners exist, runner pods and agents while they run, results once every runner is done.
use crate::access::control_key::RequestSigner;
use crate::benchmark_run::faults;
use crate::benchmark_run::runners::gather::{self, DoneRunner};
use crate::benchmark_run::runners::runner_http;
use crate::benchmark_run::target::server_sampling;
use crate::benchmark_run::target::{self};
use crate::runtime::context::Context;
use crate::runtime::error::Result;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use msgbench_crds::benchmark_run::MAX_RUN_NAME;
use msgbench_crds::benchmark_run::{BenchmarkRun, BenchmarkRunStatus, ObservedPod, Phase};
use msgbench_crds::names::name_violation;
use msgbench_operator_core::run::conditions;
use msgbench_operator_core::run::model::{AgentSeen, BaselineSeen, BaselineState, Observed};
use msgbench_operator_core::run::results::server_restarts;
use msgbench_operator_core::run::runners::build::{server_selector, RunIdentity};
use msgbench_operator_core::run::runners::runner_pods::{self, RunnerView};
use msgbench_operator_core::run::runners::stop_when;
use msgbench_operator_core::run::target::stream_sweep;
use msgbench_operator_core::run::target::target_lock::{self, RunOnTarget};

/// Most runs followed along baselineRef when looking for a cycle.
const MAX_BASELINE_CHAIN: usize = 8;

/// The other runs that use one of `br`'s targets, in every namespace the controller watches
/// (the lock is cluster-wide: `target_lock`): from the controller's cache of run summaries (see
/// `target_lock` for why a stale one is safe), else the namespace's, listed (tests without a
/// controller). Only the summaries of runs in the way are built; nothing is copied whole.
async fn runs_on_target(ctx: &Context, br: &BenchmarkRun, ns: &str) -> Result<Vec<RunOnTarget>> {
    let mine = target_lock::target_keys(&br.spec, ns);
    let other = |r: &BenchmarkRun| {
        r.metadata.namespace.as_deref() != Some(ns) || r.metadata.name != br.metadata.name
    };
    let on_target = |o: &RunOnTarget| !o.targets.is_disjoint(&mine);
    Ok(match ctx.runs.run_cache.get() {
        Some(store) => (store.state().iter())
            .filter(|r| other(r))
            .map(|r| RunOnTarget::of(r))
            .filter(on_target)
            .collect(),
        None => (Api::<BenchmarkRun>::namespaced(ctx.client.clone(), ns)
            .list(&ListParams::default())
            .await?
            .items
            .iter())
        .filter(|r| other(r))
        .map(RunOnTarget::of)
        .filter(on_target)
        .collect(),
    })
}

/// A pass's reading, and the memory its results hold until the pass ends.
pub struct Observation {
    pub observed: Observed,
    /// The results' share of the operator's memory budget (released when dropped).
    pub results_memory: Option<crate::runtime::merge_budget::Reservation>,
}

/// Reads what the run's phase needs.
pub async fn observe(
    ctx: &Context,
    br: &BenchmarkRun,
    id: &RunIdentity,
    st: &BenchmarkRunStatus,
) -> Result<Observation> {
    let mut results_memory = None;
    let observed = read(ctx, br, id, st, &mut results_memory).await?;
    Ok(Observation {
        observed,
        results_memory,
    })
}

async fn read(
    ctx: &Context,
    br: &BenchmarkRun,
    id: &RunIdentity,
    st: &BenchmarkRunStatus,
    results_memory: &mut Option<crate::runtime::merge_budget::Reservation>,
) -> Result<Observed> {
    let mut obs = Observed::at(crate::runtime::now());
    obs.faults_allowed = ctx.runs.allow_faults;
    obs.operands = ctx.operands.clone();
    if st.observed_generation != Some(id.generation) {
        return Ok(obs); // a new generation starts over: nothing to read
    }
    if name_violation(&id.name, MAX_RUN_NAME).is_some() {
        return Ok(obs); // refused in decide; its children could not even be listed by label
    }
    let phase = st.phase.unwrap_or(Phase::Pending);
    if matches!(phase, Phase::Pending | Phase::WaitingForTarget) {
        obs.targets = target::targets(ctx, br, &id.namespace).await?;
        obs.baseline = baseline(ctx, br, &id.namespace, &id.name).await?;
        obs.on_target = runs_on_target(ctx, br, &id.namespace).await?;
        return Ok(obs);
    }
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &id.namespace);
    // Only this run's Job (a Job of that name left by an earlier run of the same name is not),
    // and only the pods it controls: labels alone can be anyone's.
    obs.job = Api::<Job>::namespaced(ctx.client.clone(), &id.namespace)
        .get_opt(&id.job_name())
        .await?
        .filter(|j| runner_pods::controller_uid(&j.metadata) == Some(id.owner_ref.uid.as_str()));
    let labelled = pods
        .list(&ListParams::default().labels(&id.pod_selector()))
        .await?
        .items;
    obs.runner_pods = runner_pods::owned_by_job(labelled, obs.job.as_ref());
    if matches!(phase, Phase::Succeeded | Phase::Failed) {
        let comparing = st
            .comparison
            .as_ref()
            .is_some_and(|c| c.reason.as_deref() == Some(conditions::BASELINE_NOT_FINISHED));
        if comparing {
            obs.baseline = baseline(ctx, br, &id.namespace, &id.name).await?;
        }
        if stream_sweep::holds_finalizer(br) {
            obs.stream_sweep = crate::benchmark_run::target::sweep_streams::seen(ctx, id).await?;
            if obs.stream_sweep.is_none() {
                obs.targets = target::targets(ctx, br, &id.namespace).await?;
            }
        }
        return Ok(obs);
    }
    let now_ms = obs.now.0.as_millisecond();
    let view = RunnerView::of(&obs.runner_pods, obs.job.as_ref());
    if view.succeeded.len() < br.spec.runners.count.max(1) as usize {
        obs.server_usage = server_sampling::read(ctx, br, &id.namespace, st, now_ms).await;
    }
    if phase == Phase::Starting && st.start_time.is_none() {
        // The pass that may choose the start: the servers as they are then, for the restarts
        // judged with the results.
        obs.server_pods = server_pods(ctx, br, &id.namespace).await?;
        return Ok(obs); // nothing to ask the agents before the start is chosen
    }
    let control = ctx.control_for(&id.owner_ref.uid);
    obs.agents = poll_agents(ctx, &view, control).await;
    if phase == Phase::Starting {
        return Ok(obs);
    }
    // What the fault steps of `decide` need.
    let (ns, recs) = (&id.namespace, &st.faults);
    obs.fault_targets = faults::observe::targets(ctx, br, ns, recs, &obs.now).await;
    obs.fault_pods = faults::observe::injected_pods(ctx, br, ns, recs).await?;
    obs.fault_leaders = faults::observe::leaders_after(ctx, br, ns, recs, &obs.now).await;
    obs.fault_restarts = faults::observe::restarts_after(ctx, ns, recs, &obs.now).await;
    obs.fault_evidence = faults::evidence::read(ctx, br, ns, recs).await;
    let runners = br.spec.runners.count.max(1) as usize;
    let done = done_runners(&view, &obs.agents, ctx.runs.agent_port);
    let budget = &ctx.runs.merge_budget;
    let mut access = gather::ResultsAccess {
        control,
        from_logs: ctx.runs.results_from_pod_logs,
        so_far: false,
    };
    if done.len() >= runners {
        // The trials that ran: all of them, or those before a recorded stop (stopWhen).
        let trials = stop_when::trials_run(br, st);
        let (results, held) = gather::gather(&pods, &done, &access, trials, budget).await?;
        (obs.results, *results_memory) = (Some(results), Some(held));
        obs.baseline = baseline(ctx, br, &id.namespace, &id.name).await?;
        obs.server_pods = server_pods(ctx, br, &id.namespace).await?;
    } else if let Some(k) = stop_when::check_due(br, st, &obs.agents, runners) {
        // Every runner waits for round k + 1: their records of rounds 1..=k decide it.
        let waiting = waiting_runners(&view, &obs.agents, ctx.runs.agent_port);
        (access.from_logs, access.so_far) = (false, true);
        let trials = k * stop_when::per_round(br);
        let (interim, held) = gather::gather(&pods, &waiting, &access, trials, budget).await?;
        (obs.interim, *results_memory) = (Some(interim), Some(held));
    }
    Ok(obs)
}

/// Runners waiting at a trial barrier, as runners whose records can be read so far.
fn waiting_runners<'a>(
    view: &RunnerView<'a>,
    agents: &[AgentSeen],
    agent_port: u16,
) -> Vec<DoneRunner<'a>> {
    (view.running.iter())
        .filter_map(|p| {
            let a = agents.iter().find(|a| a.pod == p.name_any())?;
            let addr = runner_http::agent_addr(&a.ip, agent_port)?;
            (a.progress.waiting_for > 0).then_some(DoneRunner {
                pod: p,
                holding_at: Some(addr),
            })
        })
        .collect()
}

/// Runners that finished every trial: exited, or holding their results (`finished`).
pub fn done_runners<'a>(
    view: &RunnerView<'a>,
    agents: &[AgentSeen],
    agent_port: u16,
) -> Vec<DoneRunner<'a>> {
    let exited = view.succeeded.iter().map(|p| DoneRunner {
        pod: p,
        holding_at: None,
    });
    let holding = view.running.iter().filter_map(|p| {
        let a = agents.iter().find(|a| a.pod == p.name_any())?;
        let addr = runner_http::agent_addr(&a.ip, agent_port)?;
        a.progress.finished.then_some(DoneRunner {
            pod: p,
            holding_at: Some(addr),
        })
    });
    exited.chain(holding).collect()
}

/// Every running agent's `/progress`, asked in parallel.
async fn poll_agents(
    ctx: &Context,
    view: &RunnerView<'_>,
    control: RequestSigner<'_>,
) -> Vec<AgentSeen> {
    let asks = view.running.iter().filter_map(|pod| {
        let ip = runner_pods::ip(pod)?;
        let name = pod.name_any();
        Some(async move {
            let addr = runner_http::agent_addr(&ip, ctx.runs.agent_port)?;
            let progress = runner_http::progress(addr, control).await?;
            Some(AgentSeen {
                pod: name,
                ip,
                progress,
            })
        })
    });
    futures::future::join_all(asks)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// The baseline run and the chain of unfinished runs behind it.
async fn baseline(
    ctx: &Context,
    br: &BenchmarkRun,
    ns: &str,
    me: &str,
) -> Result<Option<BaselineSeen>> {
    let Some(b) = &br.spec.baseline_ref else {
        return Ok(None);
    };
    let api: Api<BenchmarkRun> = Api::namespaced(ctx.client.clone(), ns);
    let mut seen = BaselineSeen {
        name: b.name.clone(),
        ..BaselineSeen::default()
    };
    let mut next = Some(b.name.clone());
    while let Some(name) = next.take() {
        if seen.waiting_chain.len() >= MAX_BASELINE_CHAIN || seen.waiting_chain.contains(&name) {
            break;
        }
        let Some(run) = api.get_opt(&name).await? else {
            break;
        };
        let st = run.status.clone().unwrap_or_default();
        let ended = st
            .phase
            .filter(|p| matches!(p, Phase::Succeeded | Phase::Failed));
        if seen.state.is_none() {
            seen.state = Some(BaselineState {
                ended,
                trials: st.trials.clone(),
                observed_generation: st.observed_generation,
            });
        }
        if ended.is_some() {
            break;
        }
        seen.waiting_chain.push(name.clone());
        if name != me {
            next = run.spec.baseline_ref.map(|r| r.name);
        }
    }
    Ok(Some(seen))
}

/// The run's servers and every variant's own, at most 16 pods: those with the server's labels
/// that a StatefulSet or ReplicaSet controls (a lookalike made by hand is not a server).
async fn server_pods(ctx: &Context, br: &BenchmarkRun, ns: &str) -> Result<Vec<ObservedPod>> {
    let mut out: Vec<ObservedPod> = Vec::new();
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    for r in std::iter::once(&br.spec.target)
        .chain(br.spec.variants.iter().filter_map(|v| v.target.as_ref()))
        .filter_map(|t| t.server_ref.as_ref())
    {
        if out.len() >= 16 {
            break;
        }
        let sel = server_selector(r.kind, &r.name)
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        let list = pods.list(&ListParams::default().labels(&sel)).await?;
        let servers = list
            .items
            .iter()
            .filter(|p| server_restarts::is_workload_pod(p));
        for p in servers.take(16 - out.len()) {
            if !out.iter().any(|x| x.name == p.name_any()) {
                out.push(server_restarts::observed_server_pod(p));
            }
        }
    }
    Ok(out)
}
