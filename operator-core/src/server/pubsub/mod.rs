//! PubSubServer controller: one Deployment configured through the contract env, one Service.
//! May: build objects from the spec (pure). May not: call the API server (the shared
//! `server::reconcile` applies what `build` returns).

pub mod build;
pub mod sockudo;

use crate::meta::Owner;
use crate::operands::OperandDefaults;
use crate::server::children::Children;
use crate::server::kind::ManagedServerKind;
use crate::server::validate::{check_tuning, SpecViolation};
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
    fn validate(&self) -> Vec<SpecViolation> {
        validate(self)
    }
    fn build(&self, owner: &Owner, replicas: i32, operands: &OperandDefaults) -> Children {
        build::build(self, owner, replicas, operands)
    }
    fn client_url(&self, owner: &Owner) -> String {
        let scheme = match self.spec.protocol {
            PubSubProtocol::Pusher => "ws",
            _ => "http",
        };
        format!(
            "{scheme}://{}.{}.svc:{}",
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
    if (spec.protocol == PubSubProtocol::Pusher) != spec.pusher.is_some() {
        v.push(SpecViolation::invalid(
            "spec.pusher",
            "required with protocol pusher, and only valid with it",
        ));
    }
    v.extend(check_tuning(&spec.tuning, &spec.resources));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pss(spec: serde_json::Value) -> PubSubServer {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "msgbench.dev/v1alpha1", "kind": "PubSubServer",
            "metadata": {"name": "s", "namespace": "bench"}, "spec": spec,
        }))
        .unwrap()
    }

    /// Protocol pusher needs its app Secret (whose keys the kubelet checks).
    #[test]
    fn a_pusher_server_needs_its_app_secret() {
        let without = pss(serde_json::json!({"protocol": "pusher"}));
        assert!(validate(&without).iter().any(|v| v.field == "spec.pusher"));
        let with = pss(serde_json::json!({"protocol": "pusher", "pusher": {"secretName": "app"}}));
        assert!(validate(&with).is_empty());
    }
}
