//! The server's one Service port, `http`.
use crate::meta::Owner;
use crate::server::builder::service_port;
use k8s_openapi::api::core::v1::{Service, ServiceSpec};

pub(super) fn service(owner: &Owner, port: i32) -> Service {
    Service {
        metadata: owner.child_meta(owner.name.as_str()),
        spec: Some(ServiceSpec {
            selector: Some(owner.selector_labels()),
            ports: Some(vec![service_port("http", port)]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}
