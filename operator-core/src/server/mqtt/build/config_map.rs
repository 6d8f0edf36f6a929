//! The broker's configuration file: its ConfigMap, and the volume and mount that put it where
//! the engine reads it.
use crate::meta::Owner;
use k8s_openapi::api::core::v1::{ConfigMap, ConfigMapVolumeSource, Volume, VolumeMount};
use std::collections::BTreeMap;

/// The broker's configuration file's key in its ConfigMap.
pub(super) const CONFIG_KEY: &str = "broker.conf";

pub fn config_name(name: &str) -> String {
    format!("{name}-config")
}

pub(super) fn config_map(owner: &Owner, conf: &str) -> ConfigMap {
    ConfigMap {
        metadata: owner.child_meta(config_name(&owner.name)),
        data: Some(BTreeMap::from([(CONFIG_KEY.to_string(), conf.to_string())])),
        ..ConfigMap::default()
    }
}

pub(super) fn volume(owner: &Owner) -> Volume {
    Volume {
        name: "config".into(),
        config_map: Some(ConfigMapVolumeSource {
            name: config_name(&owner.name),
            ..ConfigMapVolumeSource::default()
        }),
        ..Volume::default()
    }
}

/// subPath: the file alone, so the image's other files in that directory stay visible.
pub(super) fn mount(config_path: &str) -> VolumeMount {
    VolumeMount {
        name: "config".into(),
        mount_path: config_path.into(),
        sub_path: Some(CONFIG_KEY.into()),
        read_only: Some(true),
        ..VolumeMount::default()
    }
}
