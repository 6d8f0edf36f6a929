//! The Services: a headless one that gives each server the DNS name its routes use, and the
//! clients' one.
use super::super::nats_conf::{CLIENT_PORT, CLUSTER_PORT, MONITOR_PORT};
use crate::meta::Owner;
use crate::server::builder::service_port;
use k8s_openapi::api::core::v1::{Service, ServiceSpec};

pub fn headless_name(name: &str) -> String {
    format!("{name}-headless")
}

pub(super) fn headless(owner: &Owner) -> Service {
    Service {
        metadata: owner.child_meta(headless_name(&owner.name)),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            // Routes must resolve before pods are ready, or the cluster never forms.
            publish_not_ready_addresses: Some(true),
            selector: Some(owner.selector_labels()),
            ports: Some(vec![
                service_port("client", CLIENT_PORT),
                service_port("cluster", CLUSTER_PORT),
                service_port("monitor", MONITOR_PORT),
            ]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

pub(super) fn client(owner: &Owner) -> Service {
    Service {
        metadata: owner.child_meta(owner.name.as_str()),
        spec: Some(ServiceSpec {
            selector: Some(owner.selector_labels()),
            ports: Some(vec![
                service_port("client", CLIENT_PORT),
                service_port("monitor", MONITOR_PORT),
            ]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}
