//! Placement spec turned into pod scheduling fields.

use k8s_openapi::api::core::v1::{
    Affinity, PodAffinityTerm, PodAntiAffinity, Toleration, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use msgbench_crds::common::{AntiAffinity, Placement};
use std::collections::BTreeMap;

pub struct PodPlacement {
    pub node_selector: Option<BTreeMap<String, String>>,
    pub tolerations: Option<Vec<Toleration>>,
    pub affinity: Option<Affinity>,
}

fn enum_str<T: serde::Serialize>(v: &T) -> Option<String> {
    serde_json::to_value(v).ok()?.as_str().map(str::to_string)
}

/// `selector` are the pods' own labels: anti-affinity spreads replicas of one instance.
pub fn pod_placement(p: Option<&Placement>, selector: &BTreeMap<String, String>) -> PodPlacement {
    let default = Placement::default();
    let p = p.unwrap_or(&default);
    let term = PodAffinityTerm {
        label_selector: Some(LabelSelector {
            match_labels: Some(selector.clone()),
            ..LabelSelector::default()
        }),
        topology_key: "kubernetes.io/hostname".into(),
        ..PodAffinityTerm::default()
    };
    let anti = match p.pod_anti_affinity {
        AntiAffinity::None => None,
        AntiAffinity::Required => Some(PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![term]),
            ..PodAntiAffinity::default()
        }),
        AntiAffinity::Preferred => Some(PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                WeightedPodAffinityTerm {
                    weight: 100,
                    pod_affinity_term: term,
                },
            ]),
            ..PodAntiAffinity::default()
        }),
    };
    PodPlacement {
        node_selector: (!p.node_selector.is_empty()).then(|| p.node_selector.clone()),
        tolerations: (!p.tolerations.is_empty()).then(|| {
            p.tolerations
                .iter()
                // Admission requires a key; one stored before that rule is not given to pods
                // (a key-less Exists would tolerate every taint).
                .filter(|t| t.key.as_deref().is_some_and(|k| !k.is_empty()))
                .map(|t| Toleration {
                    key: t.key.clone(),
                    operator: t.operator.as_ref().and_then(enum_str),
                    value: t.value.clone(),
                    effect: t.effect.as_ref().and_then(enum_str),
                    toleration_seconds: t.toleration_seconds,
                })
                .collect()
        }),
        affinity: anti.map(|a| Affinity {
            pod_anti_affinity: Some(a),
            ..Affinity::default()
        }),
    }
}
