//! The client half of `msgbench_operator_core::run::target::stream_sweep`: the finalizer held while a
//! run may have streams, the sweep Job that deletes them by the run's id, what that Job said,
//! and the pass of a run being deleted.
//!
//! The finalizer is applied (server-side apply) by a field manager of its own, which owns
//! nothing else of the run: applying without it removes exactly that entry, never another
//! controller's finalizer.
use crate::benchmark_run::target;
use crate::runtime::context::Context;
use crate::runtime::error::Result;
use crate::runtime::now;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Api, ResourceExt};
use msgbench_crds::BenchmarkRun;
use msgbench_operator_core::meta::{LABEL_COMPONENT, LABEL_INSTANCE, LABEL_NAME};
use msgbench_operator_core::run::decide::POLL;
use msgbench_operator_core::run::model::SweepSeen;
use msgbench_operator_core::run::runners::build::{RunIdentity, KIND_LABEL};
use msgbench_operator_core::run::target::stream_sweep::{self, StreamsStep};
use std::collections::BTreeMap;
use std::time::Duration;

const FINALIZER_MANAGER: &str = "msgbench-operator-streams";

/// Holds (`true`) or releases the finalizer. Releasing that of a run being deleted may delete
/// it: a run already gone is fine.
pub async fn finalizer(ctx: &Context, id: &RunIdentity, hold: bool) -> Result<()> {
    let api: Api<BenchmarkRun> = Api::namespaced(ctx.client.clone(), &id.namespace);
    let finalizers: Vec<&str> = if hold {
        vec![stream_sweep::FINALIZER]
    } else {
        vec![]
    };
    let patch = serde_json::json!({
        "apiVersion": "msgbench.dev/v1alpha1",
        "kind": "BenchmarkRun",
        "metadata": {"name": id.name, "finalizers": finalizers},
    });
    let pp = PatchParams::apply(FINALIZER_MANAGER).force();
    match api.patch(&id.name, &pp, &Patch::Apply(&patch)).await {
        Err(kube::Error::Api(s)) if s.code == 404 && !hold => Ok(()),
        other => other.map(|_| ()).map_err(Into::into),
    }
}

/// Creates the sweep Job (server-side apply: a repeated pass changes nothing).
pub async fn start(ctx: &Context, job: &Job) -> Result<()> {
    let ns = job.namespace().unwrap_or_default();
    let pp = PatchParams::apply(crate::runtime::CONTROLLER_NAME).force();
    Api::<Job>::namespaced(ctx.client.clone(), &ns)
        .patch(&job.name_any(), &pp, &Patch::Apply(job))
        .await?;
    Ok(())
}

/// This run's sweep Job as it is now (a Job of that name for another run is not).
pub async fn seen(ctx: &Context, id: &RunIdentity) -> Result<Option<SweepSeen>> {
    let name = stream_sweep::job_name(&id.name);
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &id.namespace);
    let Some(job) = jobs.get_opt(&name).await? else {
        return Ok(None);
    };
    if job.labels().get(stream_sweep::LABEL_RUN_UID) != Some(&id.owner_ref.uid) {
        return Ok(None);
    }
    let ended = |type_: &str| {
        (job.status
            .iter()
            .flat_map(|s| s.conditions.iter().flatten()))
        .find(|c| c.type_ == type_ && c.status == "True")
        .map(|c| c.message.clone().unwrap_or_default())
    };
    let (deleted, job_message) = match (ended("Complete"), ended("Failed")) {
        (Some(m), _) => (true, m),
        (None, Some(m)) => (false, m),
        (None, None) => return Ok(Some(SweepSeen::Running)),
    };
    let said = said(ctx, &id.namespace, &name).await?;
    let message = if said.is_empty() { job_message } else { said };
    Ok(Some(SweepSeen::Ended { deleted, message }))
}

/// What the sweep's containers wrote to their termination log (the runner's summary, or its
/// error), each once.
async fn said(ctx: &Context, ns: &str, job: &str) -> Result<String> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    let lp = ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}"));
    let mut out: Vec<String> = Vec::new();
    for p in pods.list(&lp).await?.items {
        let statuses = p
            .status
            .iter()
            .flat_map(|s| s.container_statuses.iter().flatten());
        for m in statuses.filter_map(|c| c.state.as_ref()?.terminated.as_ref()?.message.clone()) {
            let m = m.trim().to_string();
            if !m.is_empty() && !out.contains(&m) {
                out.push(m);
            }
        }
    }
    Ok(out.join("; ").chars().take(2000).collect())
}

/// Whether a runner pod of the run (any generation) has not ended yet.
async fn runners_active(ctx: &Context, id: &RunIdentity) -> Result<bool> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &id.namespace);
    let sel = format!(
        "{LABEL_NAME}={KIND_LABEL},{LABEL_INSTANCE}={},{LABEL_COMPONENT}=runner",
        id.name
    );
    let list = pods.list(&ListParams::default().labels(&sel)).await?;
    Ok(list.items.iter().any(|p| {
        let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
        !matches!(phase, Some("Succeeded" | "Failed"))
    }))
}

/// A pass over a run being deleted: sweep its streams if it holds the finalizer, then let it
/// go (at most `stream_sweep::DELETE_WAIT` after its deletion).
pub async fn on_delete(ctx: &Context, br: &BenchmarkRun, id: &RunIdentity) -> Result<Action> {
    if !stream_sweep::holds_finalizer(br) {
        return Ok(Action::await_change());
    }
    let since = br.metadata.deletion_timestamp.as_ref();
    let waited = since.map_or(0, |t| now().0.as_second() - t.0.as_second());
    let waited = Duration::from_secs(waited.max(0) as u64);
    let sweep = seen(ctx, id).await?;
    let runners_active = runners_active(ctx, id).await?;
    let targets = match sweep {
        None => target::targets(ctx, br, &id.namespace).await?,
        Some(_) => Vec::new(),
    };
    let step = stream_sweep::on_delete(
        br,
        id,
        waited,
        runners_active,
        &targets,
        sweep.as_ref(),
        &ctx.operands,
    );
    match step {
        StreamsStep::Nothing => Ok(Action::await_change()),
        StreamsStep::Sweep(job, _) => {
            start(ctx, &job).await?;
            Ok(Action::requeue(POLL))
        }
        StreamsStep::Wait => Ok(Action::requeue(POLL)),
        StreamsStep::StopRunners => {
            let runner = |l: &BTreeMap<String, String>| {
                l.get(LABEL_COMPONENT).map(String::as_str) == Some("runner")
            };
            crate::benchmark_run::runners::children::delete(ctx, id, runner).await?;
            Ok(Action::requeue(POLL))
        }
        StreamsStep::Release(deleted, reason, message) => {
            let ty = if deleted {
                EventType::Normal
            } else {
                EventType::Warning
            };
            crate::benchmark_run::events::publish(ctx, br, ty, reason, message, "DeleteStreams")
                .await;
            finalizer(ctx, id, false).await?;
            Ok(Action::await_change())
        }
    }
}
