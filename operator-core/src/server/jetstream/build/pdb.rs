//! The PodDisruptionBudget: one server down at a time.
use crate::meta::Owner;
use crate::server::builder::pod_selector;
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

pub(super) fn pod_disruption_budget(owner: &Owner) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: owner.child_meta(owner.name.as_str()),
        spec: Some(PodDisruptionBudgetSpec {
            // JetStream R3 streams keep quorum with one server down.
            max_unavailable: Some(IntOrString::Int(1)),
            selector: Some(pod_selector(owner)),
            ..PodDisruptionBudgetSpec::default()
        }),
        ..PodDisruptionBudget::default()
    }
}
