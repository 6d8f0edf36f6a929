//! The children a server kind builds, and what applying them left in the cluster.
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, PodTemplateSpec, Secret, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;
use serde::Serialize;
use std::collections::BTreeMap;

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
    /// Secrets the operator creates once with a random value before the workload that uses
    /// them (JetStream route passwords). Created only, never applied, read or deleted: they go
    /// with the owner through garbage collection.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub generated_secrets: Vec<GeneratedSecret>,
}

/// A Secret whose one value the operator draws at random (the core draws nothing: the caller
/// passes the value in). The operator may `create` Secrets but never `get` them, so it never
/// learns whether one exists except by creating it.
#[derive(Clone, Debug, Serialize)]
pub struct GeneratedSecret {
    pub metadata: ObjectMeta,
    /// The key the random value goes under.
    pub key: String,
}

impl GeneratedSecret {
    /// The Secret to create, holding `value`. Immutable: an edit cannot put the servers'
    /// copies out of step (a deleted one is created again, see `secret_missing`).
    pub fn with_value(&self, value: &str) -> Secret {
        Secret {
            metadata: self.metadata.clone(),
            data: Some(BTreeMap::from([(
                self.key.clone(),
                ByteString(value.as_bytes().to_vec()),
            )])),
            immutable: Some(true),
            type_: Some("Opaque".into()),
            ..Secret::default()
        }
    }

    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }
}

/// The kubelet refuses the server's pods because `name` is missing: a generated Secret deleted
/// by hand, to be created again.
pub fn secret_missing(pods: &crate::pod_observer::PodObservation, name: &str) -> bool {
    pods.problem.as_ref().is_some_and(|p| {
        p.reason == "SecretNotFound" && p.message.contains(&format!("secret \"{name}\" not found"))
    })
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
            .get(crate::meta::ANNOTATION_TEMPLATE_HASH)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod_observer::{PodObservation, PodProblem};

    #[test]
    fn a_generated_secret_holds_its_value_under_its_key_and_is_immutable() {
        let g = GeneratedSecret {
            metadata: ObjectMeta {
                name: Some("js-routes".into()),
                ..ObjectMeta::default()
            },
            key: "password".into(),
        };
        let s = g.with_value("0a1b");
        assert_eq!(s.data.unwrap()["password"].0, b"0a1b");
        assert_eq!(s.immutable, Some(true));
        assert_eq!(g.name(), "js-routes");
    }

    #[test]
    fn only_the_kubelets_word_for_that_secret_counts_as_missing() {
        let obs = |reason: &str, message: &str| PodObservation {
            problem: Some(PodProblem {
                reason: reason.into(),
                message: message.into(),
                rejected: false,
                refused_at: None,
            }),
            ..PodObservation::default()
        };
        let gone = obs("SecretNotFound", "secret \"js-routes\" not found");
        assert!(secret_missing(&gone, "js-routes"));
        assert!(!secret_missing(&gone, "js"));
        let other = obs("SecretNotFound", "secret \"js-tls\" not found");
        assert!(!secret_missing(&other, "js-routes"));
        assert!(!secret_missing(&PodObservation::default(), "js-routes"));
    }
}
