//! Contract labels, owner references and the hash annotations shared by all children.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{Resource, ResourceExt};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

pub const LABEL_NAME: &str = "app.kubernetes.io/name";
pub const LABEL_INSTANCE: &str = "app.kubernetes.io/instance";
pub const LABEL_COMPONENT: &str = "app.kubernetes.io/component";
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const LABEL_PART_OF: &str = "app.kubernetes.io/part-of";
pub const MANAGED_BY: &str = "msgbench-operator";
/// sha256 of the desired object as the operator last applied it: an unchanged hash means no write.
pub const ANNOTATION_APPLIED_HASH: &str = "msgbench.dev/applied-hash";
/// Hash of the whole pod template (`server_pod::pod_template`): tells pods of the current
/// template from stale ones (a Deployment keeps kubelet-refused pods of old ReplicaSets around).
pub const ANNOTATION_TEMPLATE_HASH: &str = "msgbench.dev/template-hash";

/// Identity of the owning custom resource, enough to name, label and own a child.
#[derive(Clone, Debug)]
pub struct Owner {
    /// Lowercase kind, e.g. `jetstreamcluster` (the `app.kubernetes.io/name` label).
    pub kind_label: &'static str,
    pub name: String,
    pub namespace: String,
    pub owner_ref: k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
}

impl Owner {
    /// `None` when the object has no namespace/uid (never the case for stored objects).
    pub fn of<K: Resource<DynamicType = ()>>(obj: &K, kind_label: &'static str) -> Option<Self> {
        Some(Self {
            kind_label,
            name: obj.name_any(),
            namespace: obj.namespace()?,
            owner_ref: obj.controller_owner_ref(&())?,
        })
    }

    /// Labels selecting every server pod of this instance (stable: used in selectors).
    pub fn selector_labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (LABEL_NAME.to_string(), self.kind_label.to_string()),
            (LABEL_INSTANCE.to_string(), self.name.clone()),
            (LABEL_COMPONENT.to_string(), "server".to_string()),
        ])
    }

    /// Full contract label set for children and pod templates.
    pub fn labels(&self) -> BTreeMap<String, String> {
        let mut l = self.selector_labels();
        l.insert(LABEL_MANAGED_BY.into(), MANAGED_BY.into());
        l.insert(LABEL_PART_OF.into(), "msgbench".into());
        l
    }

    /// Label selector string listing every child of this instance (for orphan cleanup and pods).
    pub fn children_selector(&self) -> String {
        format!(
            "{LABEL_NAME}={},{LABEL_INSTANCE}={},{LABEL_MANAGED_BY}={MANAGED_BY}",
            self.kind_label, self.name
        )
    }

    /// Metadata for a child named `name`: namespace, contract labels, controller owner reference.
    pub fn child_meta(&self, name: impl Into<String>) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: Some(self.namespace.clone()),
            labels: Some(self.labels()),
            owner_references: Some(vec![self.owner_ref.clone()]),
            ..ObjectMeta::default()
        }
    }
}

/// Stamp the hash of the object's current content into its annotations.
pub fn stamp_hash<T: serde::Serialize + Resource>(
    obj: &mut T,
) -> Result<String, serde_json::Error> {
    if let Some(a) = obj.meta_mut().annotations.as_mut() {
        a.remove(ANNOTATION_APPLIED_HASH);
    }
    let digest = hex::encode(Sha256::digest(serde_json::to_vec(obj)?));
    obj.annotations_mut()
        .insert(ANNOTATION_APPLIED_HASH.into(), digest.clone());
    Ok(digest)
}
