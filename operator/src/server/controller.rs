//! Wiring: one kube-rs Controller per server kind, all children and their pods watched.

use super::reconcile::{error_policy, reconcile};
use crate::runtime::context::Context;
use crate::runtime::watch::{api, run_until_stopped, store_ready};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::runtime::controller::{Config, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use msgbench_operator_core::meta::{LABEL_INSTANCE, LABEL_MANAGED_BY, LABEL_NAME, MANAGED_BY};
use msgbench_operator_core::server::kind::ManagedServerKind;
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Runs until SIGTERM/SIGINT, then lets in-flight reconciles finish; or until `stop` (this
/// replica stepped down), then drops them at once.
pub async fn run<K>(ctx: Arc<Context>, namespace: Option<String>, stop: CancellationToken)
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
    // A fence edited or deleted by hand is put back at once, not at the next resync.
    .owns(api::<NetworkPolicy>(&client, ns), children.clone())
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
    // Beside the controller, not spawned: a stopped term must not mark the next one synced.
    let synced = async move {
        if store_ready(&store).await {
            readiness.mark_synced();
            tracing::info!(kind = K::KIND_LABEL, "cache synced");
        }
    };
    let work = controller
        .run(reconcile::<K>, error_policy::<K>, ctx)
        .for_each(|res| async move {
            match res {
                Ok((obj, _)) => tracing::debug!(kind = K::KIND_LABEL, object = %obj, "reconciled"),
                Err(e) => tracing::debug!(kind = K::KIND_LABEL, error = %e, "controller event"),
            }
        });
    let ended = run_until_stopped(&stop, work, synced).await;
    tracing::info!(
        kind = K::KIND_LABEL,
        stepped_down = !ended,
        "controller stopped"
    );
}
