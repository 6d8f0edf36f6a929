//! The servers' StatefulSet, with a claim per server for file storage.
use super::service::headless_name;
use crate::meta::Owner;
use crate::server::builder::{data_claim, pod_selector, pvc_retention};
use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use msgbench_crds::jetstream_cluster::{JetStreamClusterSpec, StorageType};

pub(super) fn stateful_set(
    spec: &JetStreamClusterSpec,
    owner: &Owner,
    replicas: i32,
    template: PodTemplateSpec,
) -> StatefulSet {
    let storage = &spec.jetstream.storage;
    let claims = (storage.type_ == StorageType::File).then(|| {
        vec![data_claim(
            owner,
            storage.storage_class_name.clone(),
            storage.size.clone(),
        )]
    });
    StatefulSet {
        metadata: owner.child_meta(owner.name.as_str()),
        spec: Some(StatefulSetSpec {
            replicas: Some(replicas),
            service_name: Some(headless_name(&owner.name)),
            // All servers start together: routes need peers, and ordered start only slows it.
            pod_management_policy: Some("Parallel".into()),
            selector: pod_selector(owner),
            template,
            volume_claim_templates: claims,
            persistent_volume_claim_retention_policy: Some(pvc_retention()),
            ..StatefulSetSpec::default()
        }),
        ..StatefulSet::default()
    }
}
