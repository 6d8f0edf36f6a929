//! The broker's client Service: every listener, by port name.
use crate::meta::Owner;
use crate::server::builder::service_port;
use k8s_openapi::api::core::v1::{ContainerPort, Service, ServiceSpec};

pub(super) fn service(owner: &Owner, ports: &[ContainerPort]) -> Service {
    Service {
        metadata: owner.child_meta(owner.name.as_str()),
        spec: Some(ServiceSpec {
            selector: Some(owner.selector_labels()),
            ports: Some(
                (ports.iter())
                    .map(|p| service_port(p.name.as_deref().unwrap_or_default(), p.container_port))
                    .collect(),
            ),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}
