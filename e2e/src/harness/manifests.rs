//! Plain Kubernetes manifests (the servers a team runs without msgbench: Deployments,
//! StatefulSets, Services, ConfigMaps), created as they are, whatever their kind.
use anyhow::{Context, Result};
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::pinned_kind;
use kube::{Client, ResourceExt};
use serde::Deserialize;
use std::time::Duration;

/// Creates every document of `yaml` in `ns` (a document's own namespace is replaced).
pub async fn create_all(client: &Client, ns: &str, yaml: &str) -> Result<()> {
    for doc in serde_norway::Deserializer::from_str(yaml) {
        let mut obj = DynamicObject::deserialize(doc).context("parsing a manifest")?;
        let gvk = obj
            .types
            .as_ref()
            .context("a manifest without apiVersion/kind")?
            .try_into()
            .context("apiVersion/kind")?;
        let (resource, _) = pinned_kind(client, &gvk).await?;
        obj.metadata.namespace = Some(ns.into());
        let name = obj.name_any();
        Api::<DynamicObject>::namespaced_with(client.clone(), ns, &resource)
            .create(&PostParams::default(), &obj)
            .await
            .with_context(|| format!("creating {} {name}", resource.kind))?;
    }
    Ok(())
}

/// Waits until a Deployment's or StatefulSet's `replicas` pods are all ready.
pub async fn wait_ready(client: &Client, ns: &str, kind: &str, name: &str) -> Result<()> {
    let timeout = Duration::from_secs(240);
    let what = format!("{kind} {name} ready");
    match kind {
        "Deployment" => {
            let api: Api<Deployment> = Api::namespaced(client.clone(), ns);
            crate::wait::until(&api, name, timeout, &what, |d| {
                let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                d.status.as_ref().and_then(|s| s.ready_replicas) == Some(want)
            })
            .await?;
        }
        _ => {
            let api: Api<StatefulSet> = Api::namespaced(client.clone(), ns);
            crate::wait::until(&api, name, timeout, &what, |d| {
                let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                d.status.as_ref().and_then(|s| s.ready_replicas) == Some(want)
            })
            .await?;
        }
    }
    Ok(())
}

/// Creates the plain manifests of sample file `file` (under `config/samples`, e.g.
/// `endpoint-servers/mosquitto.yaml`) in `ns`; returns their Deployments and StatefulSets, to
/// [`wait_ready`] for.
pub async fn create_sample(client: &Client, ns: &str, file: &str) -> Result<Vec<(String, String)>> {
    let path = crate::cluster::repo_root()
        .join("config/samples")
        .join(file);
    let yaml = std::fs::read_to_string(&path).with_context(|| path.display().to_string())?;
    create_all(client, ns, &yaml).await?;
    workloads(&yaml)
}

/// The Deployments and StatefulSets of `yaml`, as (kind, name): what [`wait_ready`] waits for.
pub fn workloads(yaml: &str) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for doc in serde_norway::Deserializer::from_str(yaml) {
        let obj = DynamicObject::deserialize(doc).context("parsing a manifest")?;
        let kind = obj
            .types
            .as_ref()
            .map(|t| t.kind.clone())
            .unwrap_or_default();
        if kind == "Deployment" || kind == "StatefulSet" {
            out.push((kind, obj.name_any()));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn workloads_are_the_deployments_and_statefulsets() {
        let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\n\
                    apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n---\n\
                    apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: s}\n";
        assert_eq!(
            super::workloads(yaml).unwrap(),
            [
                ("Deployment".into(), "d".into()),
                ("StatefulSet".into(), "s".into())
            ]
        );
    }
}
