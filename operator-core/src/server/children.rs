//! The children a server kind builds, and what applying them left in the cluster.
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, PodTemplateSpec, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde::Serialize;

/// Every child kind a server controller manages. Empty lists mean "none of this kind", so a
/// kind switch (e.g. MqttBroker Deployment -> StatefulSet) deletes the old workload.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Children {
    pub config_maps: Vec<ConfigMap>,
    pub services: Vec<Service>,
    pub pod_disruption_budgets: Vec<PodDisruptionBudget>,
    pub stateful_sets: Vec<StatefulSet>,
    pub deployments: Vec<Deployment>,
    /// The server's fence (`server::fence`): who may reach which of its ports.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub network_policies: Vec<NetworkPolicy>,
}

impl Children {
    /// The (single) workload's pod template.
    pub fn template(&self) -> Option<&PodTemplateSpec> {
        let sts = (self.stateful_sets.iter())
            .filter_map(|s| s.spec.as_ref())
            .map(|s| &s.template);
        let deps = (self.deployments.iter())
            .filter_map(|d| d.spec.as_ref())
            .map(|d| &d.template);
        sts.chain(deps).next()
    }

    /// `msgbench.dev/template-hash` of the (single) workload's pod template.
    pub fn template_hash(&self) -> Option<String> {
        let annotations = self.template()?.metadata.as_ref()?.annotations.as_ref()?;
        annotations
            .get(crate::server_pod::ANNOTATION_TEMPLATE_HASH)
            .cloned()
    }
}

/// What the cluster holds after applying: the workloads (for their status) and the write count.
#[derive(Debug, Default)]
pub struct Applied {
    pub stateful_sets: Vec<StatefulSet>,
    pub deployments: Vec<Deployment>,
    pub applied: usize,
    pub deleted: usize,
}
