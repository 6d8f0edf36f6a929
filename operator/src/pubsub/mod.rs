//! PubSubServer controller: one Deployment configured through the contract env, one Service.

pub mod build;

use crate::apply::Children;
use crate::meta::Owner;
use crate::server_kind::ManagedServerKind;
use crate::validate::{check_tuning, SecretFacts, SpecViolation};
use msgbench_crds::common::{Resources, ServerStatus, Tuning};
use msgbench_crds::pubsub_server::{PubSubProtocol, PubSubServer};

impl ManagedServerKind for PubSubServer {
    const KIND_LABEL: &'static str = "pubsubserver";

    fn server_status(&self) -> Option<&ServerStatus> {
        self.status.as_ref()
    }
    fn tuning(&self) -> &Tuning {
        &self.spec.tuning
    }
    fn resources(&self) -> &Resources {
        &self.spec.resources
    }
    /// Rooms live in the server's memory: exactly one replica.
    fn desired_replicas(&self) -> i32 {
        1
    }
    fn validate(&self, _secret: Option<&SecretFacts>) -> Vec<SpecViolation> {
        validate(self)
    }
    fn build(&self, owner: &Owner, replicas: i32) -> Children {
        build::build(self, owner, replicas)
    }
    fn client_url(&self, owner: &Owner) -> String {
        format!(
            "http://{}.{}.svc:{}",
            owner.name, owner.namespace, self.spec.port
        )
    }
}

pub fn validate(pss: &PubSubServer) -> Vec<SpecViolation> {
    let spec = &pss.spec;
    let mut v = Vec::new();
    if !(1024..=65535).contains(&spec.port) {
        v.push(SpecViolation::invalid(
            "spec.port",
            "must be between 1024 and 65535 (non-root)",
        ));
    }
    if !(0..=3600).contains(&spec.cache_ttl_seconds) {
        v.push(SpecViolation::invalid(
            "spec.cacheTtlSeconds",
            "must be between 0 and 3600",
        ));
    }
    if spec.ws_mode.is_some() && spec.protocol != PubSubProtocol::Websocket {
        v.push(SpecViolation::invalid(
            "spec.wsMode",
            "only valid with protocol websocket",
        ));
    }
    v.extend(check_tuning(&spec.tuning, &spec.resources));
    v
}
