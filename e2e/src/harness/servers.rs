//! Server CRs as the tests see them: wait for Ready, find their pods and children by the contract
//! labels (never by guessed names).
use crate::harness::TestContext;
use crate::kinds::{self, Kind};
use crate::wait;
use anyhow::{Context, Result};
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DynamicObject, ListParams};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::time::Duration;

// The repeated server manifests, from `e2e/fixtures/` (tests call them through here).
pub use crate::fixtures::{js_memory, pubsub_memory};

/// Label selector of every child the operator made for instance `name`.
pub fn instance_selector(name: &str) -> String {
    format!("app.kubernetes.io/instance={name},app.kubernetes.io/managed-by=msgbench-operator")
}

/// Wait until `kind/name` reports Ready=True for its current generation.
pub async fn wait_ready(
    ctx: &TestContext,
    kind: Kind,
    name: &str,
    timeout: Duration,
) -> Result<DynamicObject> {
    let api = kind.api(&ctx.client, &ctx.ns);
    wait::until(
        &api,
        name,
        timeout,
        &format!("{} {name} Ready", kind.name()),
        kinds::is_ready,
    )
    .await
}

/// The running server pods of instance `name`, sorted by name.
pub async fn server_pods(ctx: &TestContext, name: &str) -> Result<Vec<Pod>> {
    let api = Api::<Pod>::namespaced(ctx.client.clone(), &ctx.ns);
    let lp = ListParams::default().labels(&format!(
        "{},app.kubernetes.io/component=server",
        instance_selector(name)
    ));
    let mut pods = api.list(&lp).await.context("listing server pods")?.items;
    pods.retain(|p| p.metadata.deletion_timestamp.is_none());
    pods.sort_by_key(|p| p.name_any());
    Ok(pods)
}

/// The pod's IP, or an error naming the pod.
pub fn pod_ip(pod: &Pod) -> Result<String> {
    pod.status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .with_context(|| format!("pod {} has no IP", pod.name_any()))
}

/// Name of the server container: the pod's first container.
pub fn server_container(pod: &Pod) -> Result<String> {
    pod.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .map(|c| c.name.clone())
        .with_context(|| format!("pod {} has no containers", pod.name_any()))
}

/// One child object: kind, name, uid.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Child {
    pub kind: &'static str,
    pub name: String,
    pub uid: String,
}

async fn list_kind<K>(
    ctx: &TestContext,
    selector: &str,
    kind: &'static str,
    with_terminating: bool,
    out: &mut Vec<Child>,
) -> Result<()>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + Debug
        + DeserializeOwned,
{
    let api = Api::<K>::namespaced(ctx.client.clone(), &ctx.ns);
    for o in api
        .list(&ListParams::default().labels(selector))
        .await
        .with_context(|| format!("listing {kind}"))?
        .items
    {
        if o.meta().deletion_timestamp.is_some() && !with_terminating {
            continue;
        }
        out.push(Child {
            kind,
            name: o.name_any(),
            uid: o.uid().unwrap_or_default(),
        });
    }
    Ok(())
}

/// Every live child of instance `name` across the kinds the operator creates (pods included).
pub async fn children(ctx: &TestContext, name: &str) -> Result<Vec<Child>> {
    list_children(ctx, name, false).await
}

/// Like [`children`], but also objects still terminating: "gone" means gone.
pub async fn children_including_terminating(ctx: &TestContext, name: &str) -> Result<Vec<Child>> {
    list_children(ctx, name, true).await
}

async fn list_children(ctx: &TestContext, name: &str, t: bool) -> Result<Vec<Child>> {
    let sel = instance_selector(name);
    let mut out = Vec::new();
    list_kind::<ConfigMap>(ctx, &sel, "ConfigMap", t, &mut out).await?;
    list_kind::<Service>(ctx, &sel, "Service", t, &mut out).await?;
    list_kind::<StatefulSet>(ctx, &sel, "StatefulSet", t, &mut out).await?;
    list_kind::<Deployment>(ctx, &sel, "Deployment", t, &mut out).await?;
    list_kind::<PodDisruptionBudget>(ctx, &sel, "PodDisruptionBudget", t, &mut out).await?;
    list_kind::<Job>(ctx, &sel, "Job", t, &mut out).await?;
    list_kind::<Pod>(ctx, &sel, "Pod", t, &mut out).await?;
    out.sort();
    Ok(out)
}
