//! Which runs a command reads, as kubectl picks objects: names, files (`-f/--filename`), or a
//! label selector (`-l/--selector`) in one namespace or all (`-A/--all-namespaces`). Nightly
//! runs are created with `generateName`: a selector is how a pipeline finds them.
use anyhow::{bail, Context, Result};
use kube::api::{Api, ListParams};
use msgbench_crds::benchmark_run::BenchmarkRun;
use std::path::PathBuf;

use crate::kube_flags::Connection;

/// `-l` and `-A`, shared by `gate`, `report` and `export`.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct Selector {
    /// Every BenchmarkRun whose labels match, as kubectl's -l (e.g.
    /// msgbench.dev/benchmark=nightly,tier!=smoke).
    #[arg(short = 'l', long = "selector", value_name = "SELECTOR")]
    pub selector: Option<String>,
    /// With -l: match runs in every namespace (they print as namespace/name).
    #[arg(short = 'A', long = "all-namespaces", requires = "selector")]
    pub all_namespaces: bool,
}

/// `-f/--filename` and its deprecated spelling `--file` (hidden; kept for one minor version).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct Filenames {
    /// Read the run from this file instead of the cluster: a BenchmarkRun (YAML or JSON, as
    /// `kubectl get benchmarkrun X -o yaml` prints it) or a `bench-runner run --output` result;
    /// repeat for several.
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub filename: Vec<PathBuf>,
    /// Deprecated spelling of -f/--filename.
    #[arg(long = "file", value_name = "FILE", hide = true)]
    pub file: Vec<PathBuf>,
}

impl Filenames {
    /// The files named either way; the old spelling warns on standard error.
    pub fn paths(&self) -> Vec<PathBuf> {
        if !self.file.is_empty() {
            deprecated("--file", "-f/--filename");
        }
        self.filename.iter().chain(&self.file).cloned().collect()
    }
}

/// Tells on standard error that `old` will go after the next minor release.
pub fn deprecated(old: &str, new: &str) {
    eprintln!(
        "warning: {old} is deprecated and will be removed after the next minor release; use {new}"
    );
}

/// The runs `selector` matches (sorted by namespace, then name); `Ok(empty)` when none does.
pub async fn list(conn: &Connection, sel: &Selector) -> Result<Vec<BenchmarkRun>> {
    let Some(labels) = &sel.selector else {
        bail!("no selector given");
    };
    let api: Api<BenchmarkRun> = if sel.all_namespaces {
        Api::all(conn.client.clone())
    } else {
        Api::namespaced(conn.client.clone(), &conn.namespace)
    };
    let mut runs = api
        .list(&ListParams::default().labels(labels))
        .await
        .with_context(|| {
            format!(
                "listing BenchmarkRuns with -l {labels} {}",
                where_(conn, sel)
            )
        })?
        .items;
    runs.sort_by_key(|r| (r.metadata.namespace.clone(), r.metadata.name.clone()));
    Ok(runs)
}

/// "in namespace X" or "in all namespaces", for messages.
pub fn where_(conn: &Connection, sel: &Selector) -> String {
    if sel.all_namespaces {
        "in all namespaces".into()
    } else {
        format!("in namespace {}", conn.namespace)
    }
}

/// How a selected run is named in output: `namespace/name` across namespaces, else its name.
pub fn display_name(br: &BenchmarkRun, sel: &Selector) -> String {
    let name = br.metadata.name.clone().unwrap_or_default();
    match (&br.metadata.namespace, sel.all_namespaces) {
        (Some(ns), true) => format!("{ns}/{name}"),
        _ => name,
    }
}
