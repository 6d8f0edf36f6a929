//! The BenchmarkRun reconcile: observe → decide → act → status. All state lives in status
//! (phase, job name, the chosen start time, condition times), so a restarted operator continues
//! where the last one stopped.
use crate::benchmark_run::{act, events, observe};
use crate::runtime::context::Context;
use crate::runtime::error::{Error, Result};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use msgbench_crds::benchmark_run::BenchmarkRun;
use msgbench_operator_core::run::decide;
use msgbench_operator_core::run::runners::build::{self, RunIdentity};
use std::sync::Arc;
use std::time::Duration;

pub async fn reconcile(br: Arc<BenchmarkRun>, ctx: Arc<Context>) -> Result<Action> {
    let _timer = ctx.metrics.reconcile_started(build::KIND_LABEL);
    if br.meta().deletion_timestamp.is_some() {
        // The cache's summary keeps spec and finalizers: enough to sweep the run's streams.
        return crate::benchmark_run::target::sweep_streams::on_delete(&ctx, &br, &identity(&br)?)
            .await;
    }
    let Some(br) = act::latest(&ctx, &br).await? else {
        return Ok(Action::await_change()); // deleted since the event
    };
    let id = identity(&br)?;
    let prev = br.status.clone().unwrap_or_default();
    // `_held`: the results' memory stays reserved until this pass has written them.
    let observe::Observation {
        observed: obs,
        results_memory: _held,
    } = observe::observe(&ctx, &br, &id, &prev).await?;
    let mut d = decide::decide(&br, &id, &prev, &obs);
    if d.must_write_before_acting() {
        // A fault's pod chosen this pass is in status before act touches it: a later pass
        // (or another operator) must know an ask may have reached its agent.
        act::write_status(&ctx, &id, &d.status).await?;
    }
    let outcomes = act::carry_out(&ctx, &br, &id, &mut d).await?;
    decide::settle(&br, &mut d.status, &outcomes, id.generation, &obs.now);
    if d.status != prev {
        act::write_status(&ctx, &id, &d.status).await?;
        events::announce(&ctx, &br, &prev, &d.status).await;
    }
    crate::benchmark_run::metrics::observe_status(
        &ctx.metrics.registry,
        &id.namespace,
        &id.name,
        &d.status,
    );
    crate::benchmark_run::metrics::trend::observe_run(&ctx.metrics.registry, &br, &d.status);
    ctx.backoff.succeeded(&backoff_key(&br));
    Ok(d.requeue.map_or_else(Action::await_change, Action::requeue))
}

fn identity(br: &BenchmarkRun) -> Result<RunIdentity> {
    RunIdentity::of(br).ok_or_else(|| Error::MissingNamespace(br.name_any()))
}

fn backoff_key(br: &BenchmarkRun) -> String {
    format!(
        "benchmarkrun/{}/{}",
        br.namespace().unwrap_or_default(),
        br.name_any()
    )
}

pub fn error_policy(br: Arc<BenchmarkRun>, err: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics
        .reconcile_failed(build::KIND_LABEL, err.metric_label());
    let n = ctx.backoff.failed(&backoff_key(&br));
    tracing::warn!(run = %br.name_any(), error = %err, "benchmark reconcile failed");
    Action::requeue(ctx.requeue.error_delay(n).min(Duration::from_secs(30)))
}
