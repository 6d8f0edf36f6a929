//! The server's Deployment (it keeps no state a pod restart must find again).
use crate::meta::Owner;
use crate::server::builder::{pod_selector, recreate_when_pinned};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use msgbench_crds::pubsub_server::PubSubServerSpec;

pub(super) fn deployment(
    spec: &PubSubServerSpec,
    owner: &Owner,
    replicas: i32,
    template: PodTemplateSpec,
) -> Deployment {
    Deployment {
        metadata: owner.child_meta(owner.name.as_str()),
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            selector: pod_selector(owner),
            template,
            strategy: Some(recreate_when_pinned(spec.tuning.cpu_pinning)),
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}
