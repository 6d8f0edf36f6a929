//! Act: carries out what `decide` chose (create the runners, release the barrier, acknowledge
//! results, suspend or delete children), then the one status write and its events.
use super::runner_http;
use crate::access::control_key::RequestSigner;
use crate::runtime::context::{Context, CONTROLLER_NAME};
use crate::runtime::error::Result;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PropagationPolicy};
use kube::runtime::events::{Event, EventType};
use kube::{Api, Resource, ResourceExt};
use msgbench_crds::benchmark_run::{BenchmarkRun, BenchmarkRunStatus, Outcome, Phase};
use msgbench_operator_core::run::build::{self, RunIdentity};
use msgbench_operator_core::run::decide::{Decision, Effect, EffectOutcome};
use msgbench_operator_core::run::runner_access;
use std::collections::BTreeMap;

/// Carries out `d.effects` in order and reports what the runners answered, for the pure
/// `decide::settle`.
pub async fn carry_out(
    ctx: &Context,
    br: &BenchmarkRun,
    id: &RunIdentity,
    d: &mut Decision,
) -> Result<Vec<EffectOutcome>> {
    let effects = std::mem::take(&mut d.effects);
    let mut outcomes = Vec::new();
    let mut injected = false;
    for effect in effects.iter().cloned() {
        match &effect {
            Effect::DeleteOtherGenerations => {
                let g = id.generation.to_string();
                delete_children(ctx, id, |l| l.get(build::LABEL_GENERATION) != Some(&g)).await?
            }
            Effect::CreateRunners { config_map, job } => {
                create_runners(ctx, id, config_map, job).await?
            }
            Effect::Release {
                trial,
                at_unix_ms,
                ips,
            } => {
                let control = ctx.control_for(&id.owner_ref.uid);
                let echoes = release(ctx, control, *trial, *at_unix_ms, ips).await;
                outcomes.push(EffectOutcome::Released {
                    trial: *trial,
                    at_unix_ms: *at_unix_ms,
                    echoes,
                });
            }
            Effect::StopRunners { after_trial, ips } => {
                let control = ctx.control_for(&id.owner_ref.uid);
                stop_runners(ctx, control, *after_trial, ips).await;
            }
            Effect::AckResults { ips, records } => {
                let control = ctx.control_for(&id.owner_ref.uid);
                let addrs: Vec<_> = ips
                    .iter()
                    .filter_map(|ip| runner_http::agent_addr(ip, ctx.runs.agent_port))
                    .collect();
                super::gather::release_holding(&addrs, control, *records).await;
            }
            Effect::SuspendJob { name } => suspend(ctx, &id.namespace, name).await?,
            Effect::DeleteChildren => delete_children(ctx, id, |_| true).await?,
            Effect::HoldStreams => super::sweep_streams::finalizer(ctx, id, true).await?,
            Effect::SweepStreams { job } => super::sweep_streams::start(ctx, job).await?,
            Effect::ReleaseStreams => super::sweep_streams::finalizer(ctx, id, false).await?,
            Effect::InjectFault { .. } => {
                // Every fault due now, together (done with the first; see `act_faults`).
                if !injected {
                    let due: Vec<usize> = (effects.iter())
                        .filter_map(|e| match e {
                            Effect::InjectFault { index } => Some(*index),
                            _ => None,
                        })
                        .collect();
                    super::act_faults::inject_faults(ctx, br, id, d, &due).await?;
                    injected = true;
                }
            }
        }
        d.effects.push(effect);
    }
    Ok(outcomes)
}

pub(super) async fn publish(
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

/// The NetworkPolicy first (nothing but the operator may reach the runners' control port), the
/// ConfigMap, the Job.
async fn create_runners(ctx: &Context, id: &RunIdentity, cm: &ConfigMap, job: &Job) -> Result<()> {
    let pp = PatchParams::apply(CONTROLLER_NAME).force();
    let name = id.job_name();
    if let Some(peer) = &ctx.runner_peer {
        let np = runner_access::network_policy(id, peer);
        Api::<NetworkPolicy>::namespaced(ctx.client.clone(), &id.namespace)
            .patch(&name, &pp, &Patch::Apply(&np))
            .await?;
    }
    Api::<ConfigMap>::namespaced(ctx.client.clone(), &id.namespace)
        .patch(&name, &pp, &Patch::Apply(cm))
        .await?;
    Api::<Job>::namespaced(ctx.client.clone(), &id.namespace)
        .patch(&name, &pp, &Patch::Apply(job))
        .await?;
    Ok(())
}

/// `POST /stop` to every IP at once. Best effort: a runner that did not answer is asked again
/// next pass (it still waits at the barrier); one that refuses had already run past the stop,
/// and its records then name the trial that is not in the plan (ResultsLost).
async fn stop_runners(ctx: &Context, control: RequestSigner<'_>, after_trial: u32, ips: &[String]) {
    let sends = ips.iter().map(|ip| async move {
        let Some(addr) = runner_http::agent_addr(ip, ctx.runs.agent_port) else {
            return;
        };
        match runner_http::stop(addr, control, after_trial).await {
            Ok(kept) if kept == after_trial => {}
            Ok(kept) => {
                tracing::warn!(runner = %addr, kept, after_trial, "runner keeps another stop")
            }
            Err(e) => tracing::warn!(runner = %addr, error = %e, "stop not delivered"),
        }
    });
    futures::future::join_all(sends).await;
}

/// `POST /start` to every IP at once; each answer is the start that agent keeps.
async fn release(
    ctx: &Context,
    control: RequestSigner<'_>,
    trial: u32,
    at: u64,
    ips: &[String],
) -> Vec<(String, std::result::Result<u64, String>)> {
    let sends = ips.iter().map(|ip| async move {
        let answer = match runner_http::agent_addr(ip, ctx.runs.agent_port) {
            Some(addr) => runner_http::start(addr, control, trial, at)
                .await
                .map_err(|e| format!("{e:#}")),
            None => Err(format!("not an IP address: {ip}")),
        };
        if let Err(e) = &answer {
            // Resent on the next pass with the same time (or the run ends as started apart).
            tracing::info!(runner = %ip, trial, error = %e, "start not delivered");
        }
        (ip.clone(), answer)
    });
    futures::future::join_all(sends).await
}

/// Suspending the Job deletes its active pods and keeps the Job, its finished pods and their
/// logs for debugging until `ttlSecondsAfterFinished`: pending runners must not load the
/// server during someone else's run.
async fn suspend(ctx: &Context, ns: &str, name: &str) -> Result<()> {
    tracing::info!(job = %name, "run failed: suspending its runner Job (active pods go)");
    let patch = serde_json::json!({"spec": {"suspend": true}});
    Api::<Job>::namespaced(ctx.client.clone(), ns)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// Deletes this run's Jobs (pods go with them), ConfigMaps and NetworkPolicies whose labels
/// match `pick`.
pub(super) async fn delete_children(
    ctx: &Context,
    id: &RunIdentity,
    pick: impl Fn(&BTreeMap<String, String>) -> bool,
) -> Result<()> {
    let sel = format!(
        "{}={},{}={}",
        msgbench_operator_core::meta::LABEL_NAME,
        build::KIND_LABEL,
        msgbench_operator_core::meta::LABEL_INSTANCE,
        id.name
    );
    let lp = ListParams::default().labels(&sel);
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &id.namespace);
    delete_matching(&jobs, &lp, &pick).await?;
    let cms: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &id.namespace);
    delete_matching(&cms, &lp, &pick).await?;
    let nps: Api<NetworkPolicy> = Api::namespaced(ctx.client.clone(), &id.namespace);
    delete_matching(&nps, &lp, &pick).await
}

async fn delete_matching<K>(
    api: &Api<K>,
    lp: &ListParams,
    pick: &impl Fn(&BTreeMap<String, String>) -> bool,
) -> Result<()>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..DeleteParams::default()
    };
    for o in api.list(lp).await?.items {
        if pick(o.labels()) {
            match api.delete(&o.name_any(), &dp).await {
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                other => {
                    other?;
                }
            }
        }
    }
    Ok(())
}

/// One server-side apply of the whole status.
pub async fn write_status(ctx: &Context, id: &RunIdentity, st: &BenchmarkRunStatus) -> Result<()> {
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
    ctx.metrics.status_written(build::KIND_LABEL);
    Ok(())
}

/// The run as it is now, read whole: the controller's cache holds only a summary of each run
/// (`retention::summary_for_cache`), and status is this controller's memory. None: deleted.
pub async fn latest(ctx: &Context, br: &BenchmarkRun) -> Result<Option<BenchmarkRun>> {
    let api: Api<BenchmarkRun> =
        Api::namespaced(ctx.client.clone(), &br.namespace().unwrap_or_default());
    Ok(api.get_opt(&br.name_any()).await?)
}

/// One event per phase change and per verdict.
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
        let ty = if v.outcome == Outcome::Passed {
            EventType::Normal
        } else {
            EventType::Warning
        };
        events.push((ty, v.reason.clone(), v.message.clone().unwrap_or_default()));
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
