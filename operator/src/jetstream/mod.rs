//! JetStreamCluster controller: validate, build (see `build`), and the kind's pipeline hooks.

pub mod build;
pub mod nats_conf;

use crate::apply::Children;
use crate::meta::Owner;
use crate::server_kind::ManagedServerKind;
use crate::validate::{check_secret, check_tuning, SecretFacts, SpecViolation};
use msgbench_crds::common::{Resources, ServerStatus, Tuning};
use msgbench_crds::jetstream_cluster::{JetStreamCluster, NatsAuthMode};

impl ManagedServerKind for JetStreamCluster {
    const KIND_LABEL: &'static str = "jetstreamcluster";
    const REPORTS_VARZ: bool = true;

    fn server_status(&self) -> Option<&ServerStatus> {
        self.status.as_ref()
    }
    fn tuning(&self) -> &Tuning {
        &self.spec.tuning
    }
    fn resources(&self) -> &Resources {
        &self.spec.resources
    }
    fn desired_replicas(&self) -> i32 {
        self.spec.replicas
    }
    fn secret_ref(&self) -> Option<&str> {
        self.spec.auth.as_ref().map(|a| a.secret_name.as_str())
    }
    fn validate(&self, secret: Option<&SecretFacts>) -> Vec<SpecViolation> {
        validate(self, secret)
    }
    fn build(&self, owner: &Owner, replicas: i32) -> Children {
        build::build(self, owner, replicas)
    }
    fn client_url(&self, owner: &Owner) -> String {
        format!(
            "nats://{}.{}.svc:{}",
            owner.name,
            owner.namespace,
            nats_conf::CLIENT_PORT
        )
    }
}

pub fn validate(jsc: &JetStreamCluster, secret: Option<&SecretFacts>) -> Vec<SpecViolation> {
    let spec = &jsc.spec;
    let mut v = Vec::new();
    if !(1..=5).contains(&spec.replicas) {
        v.push(SpecViolation::invalid(
            "spec.replicas",
            "must be between 1 and 5",
        ));
    }
    // Pod names (<name>-<i>) must stay valid DNS labels for the route addresses.
    if jsc.metadata.name.as_deref().is_some_and(|n| n.len() > 52) {
        v.push(SpecViolation::invalid(
            "metadata.name",
            "must be at most 52 characters",
        ));
    }
    v.extend(check_tuning(&spec.tuning, &spec.resources));
    if let (Some(auth), Some(facts)) = (&spec.auth, secret) {
        let keys: &[&str] = match auth.mode {
            NatsAuthMode::Token => &["token"],
            NatsAuthMode::UserPassword => &["username", "password"],
            NatsAuthMode::Nkey => &["nkey", "seed"],
        };
        v.extend(check_secret("spec.auth.secretName", facts, keys));
    }
    v
}
