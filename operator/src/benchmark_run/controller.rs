//! Wiring: the BenchmarkRun controller owns its runner Jobs and watches their pods.
use crate::benchmark_run::reconcile::{error_policy, reconcile};
use crate::runtime::context::Context;
use crate::runtime::watch::{api, run_until_stopped, store_ready};
use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::controller::{Config, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{predicates, watcher, PredicateConfig, WatchStreamExt};
use kube::{Api, ResourceExt};
use msgbench_crds::BenchmarkRun;
use msgbench_operator_core::meta::{LABEL_INSTANCE, LABEL_MANAGED_BY, LABEL_NAME, MANAGED_BY};
use msgbench_operator_core::run::retention;
use msgbench_operator_core::run::runners::build::KIND_LABEL;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How often gauges of deleted runs are removed and the retention policy is applied.
const PRUNE_EVERY: Duration = Duration::from_secs(10);
/// Runs per page of the initial list (and every relist): a page is held whole while it is
/// parsed, and one run may carry 1.34 MiB of status, so a page stays near 10 MiB at worst.
const LIST_PAGE_SIZE: u32 = 8;

/// Runs until SIGTERM/SIGINT, then lets in-flight reconciles finish; or until `stop` (this
/// replica stepped down), then drops them at once and withdraws the run gauges.
pub async fn run(ctx: Arc<Context>, namespace: Option<String>, stop: CancellationToken) {
    let (c, ns) = (&ctx.client, namespace.as_deref());
    let (runs, jobs, pods): (Api<BenchmarkRun>, Api<Job>, Api<Pod>) =
        (api(c, ns), api(c, ns), api(c, ns));
    let children = watcher::Config::default().labels(&format!(
        "{LABEL_MANAGED_BY}={MANAGED_BY},{LABEL_NAME}={KIND_LABEL}"
    ));
    // Only spec changes of a run trigger it: its own status writes must not (each write would
    // fire the next pass, a tight loop for the whole run). Timers and the runner pods and Job
    // drive a running run.
    // The cache holds a summary of each run, never its results (`retention::summary_for_cache`):
    // finished runs stay for months, and the operator's memory must not grow with them. Pages
    // are small and the list is not served "any" (resourceVersion 0 ignores the page size).
    let (reader, writer) = reflector::store();
    let list = watcher::Config::default().page_size(LIST_PAGE_SIZE);
    let spec_changes = watcher(runs, list)
        .default_backoff()
        .modify(retention::summary_for_cache)
        .reflect(writer)
        .applied_objects()
        .predicate_filter(predicates::generation, PredicateConfig::default());
    let controller = Controller::for_stream(spec_changes, reader)
        .with_config(Config::default().concurrency(8))
        .owns(jobs, children.clone())
        // Runner pods are owned by the Job: map them by instance label so readiness (the
        // barrier) and completion reach the run at once.
        .watches(pods, children, |pod: Pod| {
            let ns = pod.namespace();
            pod.labels()
                .get(LABEL_INSTANCE)
                .cloned()
                .zip(ns)
                .map(|(name, ns)| ObjectRef::<BenchmarkRun>::new(&name).within(&ns))
        })
        .shutdown_on_signal();
    let store = controller.store();
    let _ = ctx.runs.run_cache.set(store.clone());
    // Beside the controller, not spawned: the sweep ends with the term.
    let beside = synced_then_prune(store, ctx.clone());
    let work = controller
        .run(reconcile, error_policy, ctx)
        .for_each(|res| async move {
            if let Err(e) = res {
                tracing::debug!(kind = KIND_LABEL, error = %e, "controller event");
            }
        });
    let ended = run_until_stopped(&stop, work, beside).await;
    if !ended {
        // No sweep runs any more: a standby exports no run's figures (the leader does).
        crate::benchmark_run::metrics::forget_all();
    }
    tracing::info!(
        kind = KIND_LABEL,
        stepped_down = !ended,
        "controller stopped"
    );
}

/// Marks the run cache synced, then sweeps deleted runs: one task waits for the cache, never two
/// (see `store_ready`). With a second waiter here the sweep never ran, and a deleted run's
/// gauges stayed on `/metrics` for good, until e2e `variants` checked.
async fn synced_then_prune(store: Store<BenchmarkRun>, ctx: Arc<Context>) {
    if !store_ready(&store).await {
        return;
    }
    ctx.readiness.mark_synced();
    tracing::info!(kind = KIND_LABEL, "cache synced");
    prune_deleted_runs(store, ctx).await;
}

/// Reconcile never sees a deleted run (no finalizer), so its gauges would stay on `/metrics`
/// forever: sweep them against the store (ready: see `synced_then_prune`). The same sweep
/// deletes the finished runs the retention policy no longer keeps.
async fn prune_deleted_runs(store: Store<BenchmarkRun>, ctx: Arc<Context>) {
    let mut tick = tokio::time::interval(PRUNE_EVERY);
    loop {
        tick.tick().await;
        let state = store.state();
        let present: BTreeSet<(String, String)> = state
            .iter()
            .map(|r| (r.namespace().unwrap_or_default(), r.name_any()))
            .collect();
        let n = crate::benchmark_run::metrics::prune(|ns, name| {
            present.contains(&(ns.into(), name.into()))
        });
        if n > 0 {
            tracing::debug!(pruned = n, "removed gauges of deleted BenchmarkRuns");
        }
        crate::benchmark_run::retention::apply(&ctx, &state).await;
    }
}
