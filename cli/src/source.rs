//! Where a run comes from: the cluster (picked by kubectl's flags, [`ClusterAccess`]) or a file
//! holding a BenchmarkRun (YAML or JSON) or a standalone `bench-runner run --output` result.
//! Every path ends in the same [`Run`], so the report, export and compare read one set of
//! figures.
use anyhow::{bail, Context, Result};
use msgbench_crds::benchmark_run::{BenchmarkRun, BenchmarkRunStatus};
use runner_api::result::{RunnerResult, FORMAT};
use std::path::Path;

use crate::kube_flags::ClusterAccess;
use crate::run_view::Run;

/// Reads `name` from the cluster `access` picks, or from `file` when given.
pub async fn load(name: &str, access: &ClusterAccess, file: Option<&Path>) -> Result<Run> {
    let run = match file {
        Some(path) => from_file_named(path, name)?,
        None => from_cluster(name, access).await?,
    };
    run.require_results()?;
    Ok(run)
}

async fn from_cluster(name: &str, access: &ClusterAccess) -> Result<Run> {
    let conn = access.connect().await?;
    let api: kube::Api<BenchmarkRun> = kube::Api::namespaced(conn.client, &conn.namespace);
    let br = api.get(name).await.with_context(|| {
        format!(
            "reading BenchmarkRun {name} in namespace {}",
            conn.namespace
        )
    })?;
    Ok(Run::from_benchmark_run(br))
}

/// Reads a file and decides what it holds from its content, not its name; a bench-runner
/// result is named after the file.
pub fn from_file(path: &Path) -> Result<Run> {
    let stem = path
        .file_stem()
        .map_or("run".into(), |s| s.to_string_lossy().into_owned());
    from_file_named(path, &stem)
}

/// As [`from_file`], naming a bench-runner result `name` (a BenchmarkRun keeps its own name).
pub fn from_file_named(path: &Path, name: &str) -> Result<Run> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    parse(&text, name).with_context(|| format!("reading {}", path.display()))
}

/// `text` as a BenchmarkRun or a RunnerResult (YAML is a superset of JSON, so one parser reads
/// both); `fallback_name` names a RunnerResult, which carries no name of its own.
pub fn parse(text: &str, fallback_name: &str) -> Result<Run> {
    let value: serde_json::Value = serde_norway::from_str(text).context("neither YAML nor JSON")?;
    if value.get("kind").and_then(|k| k.as_str()) == Some("BenchmarkRun") {
        let br: BenchmarkRun = serde_json::from_value(value).context("not a valid BenchmarkRun")?;
        return Ok(Run::from_benchmark_run(br));
    }
    match value.get("format").and_then(|f| f.as_str()) {
        Some(FORMAT) => {
            let r: RunnerResult =
                serde_json::from_value(value).context("not a valid bench-runner result")?;
            Ok(from_runner_result(&r, fallback_name))
        }
        Some(other) => bail!("bench-runner result format {other:?} is not supported (expected {FORMAT})"),
        None => bail!("neither a BenchmarkRun (kind: BenchmarkRun) nor a bench-runner result (format: {FORMAT})"),
    }
}

/// [`Run::origin`] of a standalone bench-runner result.
pub const RUNNER_RESULT_ORIGIN: &str = "bench-runner result file";

/// A standalone runner result in status form, exactly as the operator would write it.
fn from_runner_result(r: &RunnerResult, name: &str) -> Run {
    let status = BenchmarkRunStatus {
        target_name: Some(r.target.clone()),
        result: Some(runner_api::status_form::to_status(r, 1)),
        ..Default::default()
    };
    Run {
        name: name.to_string(),
        origin: RUNNER_RESULT_ORIGIN.into(),
        workload: Some(crate::run_view::workload_shape(&r.workload)),
        generation: None,
        status,
    }
}
