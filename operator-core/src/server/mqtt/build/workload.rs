//! The broker's workload: a StatefulSet with a claim per pod when persistent, else a
//! Deployment.
use crate::meta::Owner;
use crate::server::builder::{data_claim, pod_selector, pvc_retention, recreate_when_pinned};
use crate::server::children::Children;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, StatefulSet, StatefulSetSpec};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use msgbench_crds::mqtt_broker::MqttBrokerSpec;

pub(super) fn add(
    children: &mut Children,
    spec: &MqttBrokerSpec,
    owner: &Owner,
    replicas: i32,
    template: PodTemplateSpec,
) {
    let name = owner.name.as_str();
    if spec.persistence.enabled {
        let p = &spec.persistence;
        children.stateful_sets.push(StatefulSet {
            metadata: owner.child_meta(name),
            spec: Some(StatefulSetSpec {
                replicas: Some(replicas),
                service_name: Some(name.into()),
                selector: pod_selector(owner),
                template,
                volume_claim_templates: Some(vec![data_claim(
                    owner,
                    p.storage_class_name.clone(),
                    p.size.clone(),
                )]),
                persistent_volume_claim_retention_policy: Some(pvc_retention()),
                ..StatefulSetSpec::default()
            }),
            ..StatefulSet::default()
        });
    } else {
        children.deployments.push(Deployment {
            metadata: owner.child_meta(name),
            spec: Some(DeploymentSpec {
                replicas: Some(replicas),
                selector: pod_selector(owner),
                template,
                strategy: Some(recreate_when_pinned(spec.tuning.cpu_pinning)),
                ..DeploymentSpec::default()
            }),
            ..Deployment::default()
        });
    }
}
