//! PubSubServer controller: one Deployment configured through the contract env, one Service.

pub mod build;
pub mod sockudo;

use crate::apply::Children;
use crate::meta::Owner;
use crate::operands::OperandDefaults;
use crate::server_kind::ManagedServerKind;
use crate::validate::{check_secret, check_tuning, SecretFacts, SpecViolation};
use msgbench_crds::common::{Resources, ServerStatus, Tuning};
use msgbench_crds::pubsub_server::{PubSubProtocol, PubSubServer, PUSHER_SECRET_KEYS};

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
    fn secret_refs(&self) -> Vec<&str> {
        self.spec
            .pusher
            .iter()
            .map(|p| p.secret_name.as_str())
            .collect()
    }
    fn validate(&self, secrets: &[SecretFacts]) -> Vec<SpecViolation> {
        let mut v = validate(self);
        if let Some(facts) = secrets.first() {
            v.extend(check_secret(
                "spec.pusher.secretName",
                facts,
                &PUSHER_SECRET_KEYS,
            ));
        }
        v
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

    /// Protocol pusher needs its app Secret, and the Secret all three keys.
    #[test]
    fn a_pusher_server_needs_its_app_secret_with_every_key() {
        let without = pss(serde_json::json!({"protocol": "pusher"}));
        assert!(validate(&without).iter().any(|v| v.field == "spec.pusher"));
        let with = pss(serde_json::json!({"protocol": "pusher", "pusher": {"secretName": "app"}}));
        assert!(validate(&with).is_empty());
        assert_eq!(with.secret_refs(), ["app"]);
        let facts = SecretFacts {
            name: "app".into(),
            keys: Some(vec!["appId".into(), "key".into()]),
        };
        let v = with.validate(&[facts]);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].reason, "SecretKeyMissing");
        assert!(v[0].rule.contains("\"secret\""), "{}", v[0].rule);
    }
}
