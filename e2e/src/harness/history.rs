//! A namespace full of finished runs, as a cluster has after months of nightly runs: each run is
//! created, then given a finished status of a real size (`status_size::samples`: the largest
//! admitted, a soak's, the demo's) through the status subresource, as the operator would have
//! written it. Used by e2e `finished_runs` and by `bench/operator` (`finished-runs` binary).
use anyhow::{Context, Result};
use futures::{stream, StreamExt, TryStreamExt};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::Client;
use msgbench_operator_core::run::results::status_size::samples;
use serde_json::{json, Value};

/// How many runs of each status size; a run's name says its size (`largest-7`, `soak-12`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Mix {
    pub largest: usize,
    pub soak: usize,
    pub demo: usize,
}

/// Requests in flight while filling: fast, without queueing the API server for long.
const PARALLEL: usize = 8;

/// Creates the runs of `mix` in `ns` (label `msgbench.dev/history-fill: "true"`, no benchmark
/// label, so retention keeps them) and returns the bytes of status written.
pub async fn fill(client: &Client, ns: &str, mix: Mix) -> Result<u64> {
    let kinds = [
        ("largest", mix.largest, samples::largest as fn() -> _),
        ("soak", mix.soak, samples::soak),
        ("demo", mix.demo, samples::demo),
    ];
    let api = crate::kinds::Kind::BenchmarkRun.api(client, ns);
    let mut total = 0u64;
    for (size, count, make) in kinds.into_iter().filter(|k| k.1 > 0) {
        let status = serde_json::to_value(make())?;
        let bytes = serde_json::to_vec(&status)?.len() as u64;
        stream::iter(0..count)
            .map(|i| one(&api, format!("{size}-{i}"), &status))
            .buffer_unordered(PARALLEL)
            .try_collect::<Vec<()>>()
            .await?;
        total += bytes * count as u64;
    }
    Ok(total)
}

async fn one(api: &Api<DynamicObject>, name: String, status: &Value) -> Result<()> {
    let run = json!({
        "apiVersion": "msgbench.dev/v1alpha1",
        "kind": "BenchmarkRun",
        "metadata": {"name": name, "labels": {"msgbench.dev/history-fill": "true"}},
        "spec": {
            "target": {"serverRef": {"kind": "JetStreamCluster", "name": "history-gone"}},
            "workload": {"protocol": "nats", "payloadBytes": 16, "ratePerPublisher": 10,
                         "durationSeconds": 1},
        },
    });
    let obj: DynamicObject = serde_json::from_value(run)?;
    api.create(&PostParams::default(), &obj)
        .await
        .with_context(|| format!("creating BenchmarkRun {name}"))?;
    let patch = json!({"status": status});
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("writing the finished status of {name}"))?;
    Ok(())
}
