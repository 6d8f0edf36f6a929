//! Generation of the committed files derived from the API types (the CRD YAML, the CRD
//! reference page, the Argo CD health scripts), shared by the `crdgen` binary and the freshness
//! test.
use std::path::{Path, PathBuf};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::Value;

use msgbench_crds::{BenchmarkRun, JetStreamCluster, MqttBroker, PubSubServer};

use crate::error::GenerateError;
use crate::{argocd_health, reference};

/// Directory of the plain CRD YAML, relative to the repository root.
pub const YAML_DIR: &str = "crds/yaml";
/// Directory of the chart's CRD templates, relative to the repository root.
pub const CHART_DIR: &str = "charts/msgbench/templates/crds";

/// Every CRD msgbench serves.
pub fn all_crds() -> Vec<CustomResourceDefinition> {
    vec![
        JetStreamCluster::crd(),
        MqttBroker::crd(),
        PubSubServer::crd(),
        BenchmarkRun::crd(),
    ]
    .into_iter()
    .map(unwrap_descriptions)
    .collect()
}

/// Doc comments arrive hard-wrapped at the source's line width; `kubectl explain` wraps again,
/// so join lines within a paragraph and keep blank-line paragraph breaks.
fn unwrap_descriptions(crd: CustomResourceDefinition) -> CustomResourceDefinition {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(map) => {
                for (k, child) in map.iter_mut() {
                    match child {
                        Value::String(text) if k == "description" => {
                            let paragraphs: Vec<String> =
                                text.split("\n\n").map(|p| p.replace('\n', " ")).collect();
                            *text = paragraphs.join("\n\n");
                        }
                        _ => walk(child),
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    let mut value = serde_json::to_value(&crd).expect("CRD serializes");
    walk(&mut value);
    serde_json::from_value(value).expect("CRD round-trips")
}

/// `<plural>.<group>.yaml`, the file name of a CRD.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}.yaml", crd.metadata.name.as_deref().unwrap_or_default())
}

/// Plain YAML for `kubectl apply`.
pub fn render_plain(crd: &CustomResourceDefinition) -> Result<String, serde_norway::Error> {
    Ok(format!("---\n{}", serde_norway::to_string(crd)?))
}

/// The chart template: installed only with `crds.install`, kept on `helm uninstall` so
/// benchmark results are not deleted with the operator.
pub fn render_chart(crd: &CustomResourceDefinition) -> Result<String, serde_norway::Error> {
    let mut crd = crd.clone();
    crd.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert("helm.sh/resource-policy".into(), "keep".into());
    let body = serde_norway::to_string(&crd)?;
    Ok(format!(
        "{{{{- if .Values.crds.install }}}}\n---\n{body}{{{{- end }}}}\n"
    ))
}

/// Every generated file as (path under `root`, content): the CRDs, the CRD reference page, then
/// a health script per kind.
pub fn expected_files(root: &Path) -> Result<Vec<(PathBuf, String)>, GenerateError> {
    let mut files = Vec::new();
    let mut kinds = Vec::new();
    for crd in all_crds() {
        let name = file_name(&crd);
        files.push((root.join(YAML_DIR).join(&name), render_plain(&crd)?));
        files.push((root.join(CHART_DIR).join(&name), render_chart(&crd)?));
        kinds.push(crd.spec.names.kind);
    }
    let pages = reference::pages(&all_crds());
    files.extend(
        pages
            .into_iter()
            .map(|(path, page)| (root.join(path), page)),
    );
    files.extend(argocd_health::scripts(root, &kinds)?);
    Ok(files)
}

/// Paths whose committed content differs from the generated one (missing files included).
pub fn stale_files(root: &Path) -> Result<Vec<PathBuf>, GenerateError> {
    Ok(expected_files(root)?
        .into_iter()
        .filter(|(path, want)| std::fs::read_to_string(path).ok().as_deref() != Some(want.as_str()))
        .map(|(path, _)| path)
        .collect())
}

/// The repository root, found from this crate's manifest directory: as `cargo run`/`cargo test`
/// set it for this process, else as at build time. A build cache shared by checkouts at other
/// paths may hand one checkout a binary built in another (removed since).
pub fn repo_root() -> PathBuf {
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest_dir
        .parent()
        .expect("crdgen/ has a parent")
        .to_path_buf()
}
