//! Act: carries out what `decide` chose (create the runners, release the barrier, acknowledge
//! results, inject faults, suspend or delete children); `write_status` is the pass's status write.
use crate::access::control_key::RequestSigner;
use crate::benchmark_run::runners::{children, runner_http};
use crate::runtime::context::Context;
use crate::runtime::error::Result;
use crate::runtime::CONTROLLER_NAME;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use msgbench_crds::benchmark_run::{BenchmarkRun, BenchmarkRunStatus};
use msgbench_operator_core::run::decide::{Decision, Effect, EffectOutcome};
use msgbench_operator_core::run::runners::build::{self, RunIdentity};
use msgbench_operator_core::run::runners::runner_access;

/// Carries out `d.effects` in order and reports what the runners and fault agents answered,
/// for the pure `decide::settle`.
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
                children::delete(ctx, id, |l| l.get(build::LABEL_GENERATION) != Some(&g)).await?
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
                crate::benchmark_run::runners::gather::release_holding(&addrs, control, *records)
                    .await;
            }
            Effect::SuspendJob { name } => suspend(ctx, &id.namespace, name).await?,
            Effect::DeleteChildren => children::delete(ctx, id, |_| true).await?,
            Effect::HoldStreams => {
                crate::benchmark_run::target::sweep_streams::finalizer(ctx, id, true).await?
            }
            Effect::SweepStreams { job } => {
                crate::benchmark_run::target::sweep_streams::start(ctx, job).await?
            }
            Effect::ReleaseStreams => {
                crate::benchmark_run::target::sweep_streams::finalizer(ctx, id, false).await?
            }
            Effect::InjectFault { .. } => {
                // Every fault due now, together (done with the first; see `faults::act`).
                if !injected {
                    let due: Vec<(usize, bool)> = (effects.iter())
                        .filter_map(|e| match e {
                            Effect::InjectFault { index, repeat } => Some((*index, *repeat)),
                            _ => None,
                        })
                        .collect();
                    let faults = &d.status.faults;
                    outcomes.extend(
                        crate::benchmark_run::faults::act::inject(ctx, br, id, faults, &due).await,
                    );
                    injected = true;
                }
            }
        }
        d.effects.push(effect);
    }
    Ok(outcomes)
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
