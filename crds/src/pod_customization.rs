//! What a team may add to the pods msgbench creates (runner pods and server pods): pull
//! secrets for a private registry, a service account, a priority class, extra labels and
//! annotations. Defaults for all of these come from the operator's configuration (the chart's
//! `runnerPods` / `serverPods`); a CR's values are added to them and win per key.
//!
//! The operator's own labels and annotations are reserved: admission refuses them here, so a
//! selector or a config hash can never be bent by a CR.
use std::collections::BTreeMap;

use kube::core::{Message, Rule};
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Label keys the operator sets on its pods and selects by.
pub const RESERVED_LABELS: &[&str] = &[
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/component",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/part-of",
];
/// Prefix of every label and annotation key the operator owns (generation, hashes).
pub const RESERVED_PREFIX: &str = "msgbench.dev/";

fn cel_list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("'{s}'")).collect();
    format!("[{}]", quoted.join(", "))
}

fn labels_rule() -> Rule {
    Rule::new(format!(
        "!has(self.labels) || self.labels.all(k, !(k in {}) && !k.startsWith('{RESERVED_PREFIX}'))",
        cel_list(RESERVED_LABELS)
    ))
    .message(Message::Message(format!(
        "pod.labels: {} and {RESERVED_PREFIX}* are the operator's own labels (its selectors) and \
         cannot be set",
        RESERVED_LABELS.join(", ")
    )))
    .field_path(".labels")
}

fn annotations_rule() -> Rule {
    Rule::new(format!(
        "!has(self.annotations) || self.annotations.all(k, !k.startsWith('{RESERVED_PREFIX}'))"
    ))
    .message(Message::Message(format!(
        "pod.annotations: {RESERVED_PREFIX}* annotations are the operator's own and cannot be set"
    )))
    .field_path(".annotations")
}

/// Additions to the pods the operator creates for this object.
#[derive(Clone, Debug, Default, Deserialize, Serialize, KubeSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = labels_rule())]
#[x_kube(validation = annotations_rule())]
pub struct PodCustomization {
    /// Extra pod labels (added to the operator's defaults; a key here wins).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "labels_schema")]
    pub labels: BTreeMap<String, String>,
    /// Extra pod annotations, e.g. a service mesh's injection switch (added to the operator's
    /// defaults; a key here wins).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "annotations_schema")]
    pub annotations: BTreeMap<String, String>,
    /// Secrets in this namespace with registry credentials (type
    /// kubernetes.io/dockerconfigjson), added to the operator's default pull secrets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub image_pull_secrets: Vec<PullSecret>,
    /// ServiceAccount the pods run as (its token is never mounted: these pods do not talk to
    /// the API server). Unset: the operator's default, else the namespace's `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub service_account_name: Option<String>,
    /// PriorityClass of the pods. Unset: the operator's default, else none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub priority_class_name: Option<String>,
}

/// A Secret holding registry credentials, by name (as in a pod's `imagePullSecrets`).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PullSecret {
    /// Secret name in the object's namespace.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

fn labels_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "maxProperties": 32,
        "additionalProperties": {"type": "string", "maxLength": 63}
    })
}

fn annotations_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "maxProperties": 32,
        "additionalProperties": {"type": "string", "maxLength": 4096}
    })
}

/// Nothing added (kept out of serialized specs, so objects written before the field existed
/// read back unchanged).
pub fn is_empty(p: &PodCustomization) -> bool {
    p == &PodCustomization::default()
}
