//! JetStreamCluster controller: validate, build (see `build`), and the kind's pipeline hooks.
//! May: build objects and nats.conf from the spec (pure). May not: call the API server (the
//! operator's `server::reconcile` applies what `build` returns).

pub mod build;
pub mod nats_conf;

use crate::meta::Owner;
use crate::operands::OperandDefaults;
use crate::server::children::Children;
use crate::server::kind::ManagedServerKind;
use crate::server::validate::{check_tuning, SpecViolation};
use msgbench_crds::common::{Resources, ServerStatus, Tuning};
use msgbench_crds::jetstream_cluster::JetStreamCluster;

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
    fn validate(&self) -> Vec<SpecViolation> {
        validate(self)
    }
    fn build(&self, owner: &Owner, replicas: i32, operands: &OperandDefaults) -> Children {
        build::build(self, owner, replicas, operands)
    }
    fn fault_injection(&self) -> Option<&msgbench_crds::benchmark_run::FaultAgentSpec> {
        self.spec.fault_injection.as_ref()
    }
    fn client_url(&self, owner: &Owner) -> String {
        let scheme = if self.spec.tls.is_some() {
            "tls"
        } else {
            "nats"
        };
        format!(
            "{scheme}://{}.{}.svc:{}",
            owner.name,
            owner.namespace,
            nats_conf::CLIENT_PORT
        )
    }
}

pub fn validate(jsc: &JetStreamCluster) -> Vec<SpecViolation> {
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
    v
}

/// The servers mount `tls.crt` and `tls.key`; the runners `ca.crt`.
pub const TLS_SECRET_KEYS: [&str; 3] = ["tls.crt", "tls.key", "ca.crt"];
