//! nats.conf in a ConfigMap, mounted at /etc/nats.
use crate::meta::Owner;
use k8s_openapi::api::core::v1::ConfigMap;
use std::collections::BTreeMap;

/// nats.conf's key in the ConfigMap, and its file name in the mount.
pub(super) const CONFIG_FILE: &str = "nats.conf";

pub fn config_name(name: &str) -> String {
    format!("{name}-config")
}

pub(super) fn config_map(owner: &Owner, conf: String) -> ConfigMap {
    ConfigMap {
        metadata: owner.child_meta(config_name(&owner.name)),
        data: Some(BTreeMap::from([(CONFIG_FILE.to_string(), conf)])),
        ..ConfigMap::default()
    }
}
