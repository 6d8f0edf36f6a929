//! The retention sweep's client half: deletes the finished runs that
//! `msgbench_operator_core::run::retention::expired` no longer keeps, each on the condition that
//! it is still the object the cache saw (its uid), so a run created again under the same name
//! survives.
use crate::runtime::context::Context;
use kube::api::{DeleteParams, Preconditions};
use kube::Api;
use msgbench_crds::BenchmarkRun;
use msgbench_operator_core::run::retention::{self, Expired};
use std::sync::Arc;

/// Most deletes one sweep makes: a first sweep over a long history spreads its deletes over
/// sweeps instead of a burst at the API server.
const MAX_DELETES_PER_SWEEP: usize = 50;

/// Deletes what the policy no longer keeps among `runs` (the cache's summaries).
pub async fn apply(ctx: &Context, runs: &[Arc<BenchmarkRun>]) {
    if !ctx.runs.retention.deletes_anything() {
        return;
    }
    let refs: Vec<&BenchmarkRun> = runs.iter().map(|r| r.as_ref()).collect();
    let now = crate::runtime::now();
    let due = retention::expired(&refs, &ctx.runs.retention, &now);
    for e in due.into_iter().take(MAX_DELETES_PER_SWEEP) {
        delete(ctx, &e).await;
    }
}

async fn delete(ctx: &Context, e: &Expired) {
    let api: Api<BenchmarkRun> = Api::namespaced(ctx.client.clone(), &e.namespace);
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(e.uid.clone()),
            resource_version: None,
        }),
        ..DeleteParams::background()
    };
    match api.delete(&e.name, &dp).await {
        Ok(_) => {
            ctx.metrics.run_deleted(e.reason.label());
            tracing::info!(namespace = %e.namespace, run = %e.name, reason = %e.reason,
                "deleted a finished BenchmarkRun (retention)");
        }
        // Gone already, or another object by now: nothing of ours to delete.
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
        Err(err) => {
            tracing::warn!(namespace = %e.namespace, run = %e.name, error = %err,
                "retention could not delete a finished BenchmarkRun; the next sweep tries again")
        }
    }
}
