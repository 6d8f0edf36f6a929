//! Wiring: one kube-rs Controller per server kind, all children and their pods watched.

use super::context::Context;
use crate::server::reconcile::{error_policy, reconcile};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::NamespaceResourceScope;
use kube::runtime::controller::{Config, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use msgbench_operator_core::meta::{LABEL_INSTANCE, LABEL_MANAGED_BY, LABEL_NAME, MANAGED_BY};
use msgbench_operator_core::server::kind::ManagedServerKind;
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

fn api<T>(client: &Client, namespace: Option<&str>) -> Api<T>
where
    T: Resource<DynamicType = (), Scope = NamespaceResourceScope>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// Runs until SIGTERM/SIGINT, then lets in-flight reconciles finish.
pub async fn run<K>(ctx: Arc<Context>, namespace: Option<String>)
where
    K: ManagedServerKind,
    K: Resource<DynamicType = ()> + DeserializeOwned + Debug,
{
    let client = ctx.client.clone();
    let ns = namespace.as_deref();
    // Only our own children: label-filtered watches keep the caches small.
    let children = watcher::Config::default().labels(&format!(
        "{LABEL_MANAGED_BY}={MANAGED_BY},{LABEL_NAME}={}",
        K::KIND_LABEL
    ));
    let controller = Controller::new(
        api::<K>(&client, ns),
        watcher::Config::default().any_semantic(),
    )
    .with_config(Config::default().concurrency(8))
    .owns(api::<ConfigMap>(&client, ns), children.clone())
    .owns(api::<Service>(&client, ns), children.clone())
    .owns(api::<StatefulSet>(&client, ns), children.clone())
    .owns(api::<Deployment>(&client, ns), children.clone())
    .owns(api::<PodDisruptionBudget>(&client, ns), children.clone())
    // Pods are owned by ReplicaSets/StatefulSets, not by us: map them by instance label,
    // so a kubelet refusal or readiness change reaches the status at once.
    .watches(api::<Pod>(&client, ns), children, |pod: Pod| {
        let ns = pod.namespace();
        pod.labels()
            .get(LABEL_INSTANCE)
            .cloned()
            .zip(ns)
            .map(|(name, ns)| ObjectRef::<K>::new(&name).within(&ns))
    })
    .shutdown_on_signal();

    let store = controller.store();
    let readiness = ctx.readiness.clone();
    tokio::spawn(async move {
        if store_ready(&store).await {
            readiness.mark_synced();
            tracing::info!(kind = K::KIND_LABEL, "cache synced");
        }
    });
    controller
        .run(reconcile::<K>, error_policy::<K>, ctx)
        .for_each(|res| async move {
            match res {
                Ok((obj, _)) => tracing::debug!(kind = K::KIND_LABEL, object = %obj, "reconciled"),
                Err(e) => tracing::debug!(kind = K::KIND_LABEL, error = %e, "controller event"),
            }
        })
        .await;
    tracing::info!(kind = K::KIND_LABEL, "controller stopped");
}

/// Waits until `store` holds its first full list; false if its writer is gone. kube-runtime's
/// `Store::wait_until_ready` wakes only the waiter that polled it last (its `DelayedInit` keeps
/// one waker) and the controller's applier waits on it too, so a single long wait can miss the
/// wake-up: re-poll on a short timer, and let one task per store wait.
pub async fn store_ready<K>(store: &Store<K>) -> bool
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    loop {
        match tokio::time::timeout(Duration::from_millis(500), store.wait_until_ready()).await {
            Ok(result) => return result.is_ok(),
            Err(_) => continue,
        }
    }
}
