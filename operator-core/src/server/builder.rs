//! Small builders every server kind's children share: the pod selector, named Service ports,
//! the data volume claim, and how a workload rolls and what it keeps of its claims.
use crate::meta::Owner;
use k8s_openapi::api::apps::v1::{
    DeploymentStrategy, StatefulSetPersistentVolumeClaimRetentionPolicy,
};
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimSpec, ServicePort, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeMap;

/// Selects every server pod of `owner` (workloads, PDBs).
pub fn pod_selector(owner: &Owner) -> LabelSelector {
    LabelSelector {
        match_labels: Some(owner.selector_labels()),
        ..LabelSelector::default()
    }
}

/// Service port `port` that targets the container port of the same name.
pub fn service_port(name: &str, port: i32) -> ServicePort {
    ServicePort {
        name: Some(name.into()),
        port,
        target_port: Some(IntOrString::String(name.into())),
        ..ServicePort::default()
    }
}

/// The `data` volume claim template of a persistent server: one ReadWriteOnce volume per pod.
pub fn data_claim(
    owner: &Owner,
    storage_class_name: Option<String>,
    size: Quantity,
) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some("data".into()),
            labels: Some(owner.labels()),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            storage_class_name,
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([("storage".to_string(), size)])),
                ..VolumeResourceRequirements::default()
            }),
            ..PersistentVolumeClaimSpec::default()
        }),
        ..PersistentVolumeClaim::default()
    }
}

/// Deleting the CR frees its volumes (benchmark data is disposable and a local pool is small);
/// scaling down keeps them, so scaling back up finds a server's stream data again.
pub fn pvc_retention() -> StatefulSetPersistentVolumeClaimRetentionPolicy {
    StatefulSetPersistentVolumeClaimRetentionPolicy {
        when_deleted: Some("Delete".into()),
        when_scaled: Some("Retain".into()),
    }
}

/// A rolling update of a pinned pod needs a second set of exclusive CPUs, which small nodes
/// do not have: pinned servers are replaced, not surged.
pub fn recreate_when_pinned(pinned: bool) -> DeploymentStrategy {
    DeploymentStrategy {
        type_: Some(if pinned { "Recreate" } else { "RollingUpdate" }.into()),
        ..DeploymentStrategy::default()
    }
}
