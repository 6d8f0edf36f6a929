//! The target server's own pods, as the fault code finds them: a pod counts only when its
//! StatefulSet (or its Deployment's ReplicaSet) is controlled by that very server object, so no
//! other pod can ever be chosen.
use crate::runtime::context::Context;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use msgbench_crds::benchmark_run::{ServerKind, ServerRef};
use msgbench_crds::{JetStreamCluster, MqttBroker};
use msgbench_operator_core::run::faults::policy;
use msgbench_operator_core::run::runners::build;

/// The pod called `name`, if any, by a list (the operator may list pods, never `get` one).
pub async fn pod_named(api: &Api<Pod>, name: &str) -> kube::Result<Option<Pod>> {
    let lp = ListParams::default().fields(&format!("metadata.name={name}"));
    Ok(api.list(&lp).await?.items.into_iter().next())
}

/// Uids of what directly controls the server's pods: its StatefulSets, and the ReplicaSets of
/// its Deployments (a single-broker MqttBroker is a Deployment), each checked by controller uid.
async fn controlled_by(ctx: &Context, ns: &str, server: &[String]) -> Result<Vec<String>, String> {
    let lp = ListParams::default();
    let mine = |refs: &[OwnerReference], of: &[String]| {
        controller_uid(refs).is_some_and(|u| of.iter().any(|o| o == u))
    };
    let c = ctx.client.clone();
    let sets = Api::<StatefulSet>::namespaced(c.clone(), ns)
        .list(&lp)
        .await;
    let deps = Api::<Deployment>::namespaced(c.clone(), ns).list(&lp).await;
    let (sets, deps) = (
        sets.map_err(|e| format!("listing StatefulSets: {e}"))?,
        deps.map_err(|e| format!("listing Deployments: {e}"))?,
    );
    let mut out: Vec<String> = (sets.items.iter())
        .filter(|s| mine(s.owner_references(), server))
        .filter_map(|s| s.uid())
        .collect();
    let owned_deps: Vec<String> = (deps.items.iter())
        .filter(|d| mine(d.owner_references(), server))
        .filter_map(|d| d.uid())
        .collect();
    if !owned_deps.is_empty() {
        let rs = Api::<ReplicaSet>::namespaced(c, ns).list(&lp).await;
        let rs = rs.map_err(|e| format!("listing ReplicaSets: {e}"))?;
        out.extend(
            (rs.items.iter())
                .filter(|r| mine(r.owner_references(), &owned_deps))
                .filter_map(|r| r.uid()),
        );
    }
    Ok(out)
}

/// Running pods of `server` whose controlling StatefulSet (or Deployment's ReplicaSet) is
/// controlled by `server` itself.
pub async fn owned_pods(ctx: &Context, server: &ServerRef, ns: &str) -> Result<Vec<Pod>, String> {
    let uid = server_uid(ctx, server, ns).await?;
    let sel = build::server_selector(server.kind, &server.name)
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let lp = ListParams::default().labels(&sel);
    let owned_sets = controlled_by(ctx, ns, std::slice::from_ref(&uid)).await?;
    let pods = Api::<Pod>::namespaced(ctx.client.clone(), ns)
        .list(&lp)
        .await
        .map_err(|e| format!("listing the server's pods: {e}"))?;
    let owned: Vec<Pod> = pods
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            controller_uid(p.owner_references()).is_some_and(|u| owned_sets.iter().any(|s| s == u))
        })
        .collect();
    if owned.is_empty() {
        return Err(format!(
            "{} has no running pod it owns",
            policy::server_display(server)
        ));
    }
    Ok(owned)
}

fn controller_uid(
    refs: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference],
) -> Option<&str> {
    refs.iter()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.as_str())
}

pub async fn server_uid(ctx: &Context, s: &ServerRef, ns: &str) -> Result<String, String> {
    let c = ctx.client.clone();
    let uid = match s.kind {
        ServerKind::JetStreamCluster => Api::<JetStreamCluster>::namespaced(c, ns)
            .get(&s.name)
            .await
            .map(|o| o.uid()),
        ServerKind::MqttBroker => Api::<MqttBroker>::namespaced(c, ns)
            .get(&s.name)
            .await
            .map(|o| o.uid()),
        ServerKind::PubSubServer => return Err("faults do not act on PubSubServer pods".into()),
    };
    uid.map_err(|e| format!("reading {}: {e}", policy::server_display(s)))?
        .ok_or_else(|| "the server has no uid".into())
}
