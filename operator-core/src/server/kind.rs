//! What the generic reconcile pipeline needs from each server kind. `validate` and `build` are
//! pure: everything they need from the cluster is handed in.

use crate::meta::Owner;
use crate::operands::OperandDefaults;
use crate::server::children::Children;
use crate::server::validate::SpecViolation;
use k8s_openapi::NamespaceResourceScope;
use kube::Resource;
use msgbench_crds::benchmark_run::FaultAgentSpec;
use msgbench_crds::common::{Resources, ServerStatus, Tuning};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt::Debug;

/// A server kind this operator deploys and keeps running (a CRD type with its children). Not
/// `msgbench_crds::benchmark_run::ServerKind`, the enum a run's target names.
pub trait ManagedServerKind:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// `app.kubernetes.io/name` of the children, e.g. `jetstreamcluster`.
    const KIND_LABEL: &'static str;
    /// Read `cores`/`gomaxprocs` from nats-server's monitoring endpoint.
    const REPORTS_VARZ: bool = false;

    fn server_status(&self) -> Option<&ServerStatus>;
    fn tuning(&self) -> &Tuning;
    fn resources(&self) -> &Resources;
    fn desired_replicas(&self) -> i32;
    /// Spec rules admission cannot check. Secrets the spec names are not read (the operator
    /// has no access to them): a missing one or key shows as the kubelet's refusal to start
    /// the server container (`pod_observer`: SecretNotFound, SecretKeyMissing).
    fn validate(&self) -> Vec<SpecViolation>;
    /// Desired children. `replicas` may be 0 when the operator holds the workload; `operands`
    /// fills in what the spec leaves to the operator (default image, pod additions).
    fn build(&self, owner: &Owner, replicas: i32, operands: &OperandDefaults) -> Children;
    /// Thread count the server will use (default: derived from the CPU limit).
    fn configured_threads(&self) -> Option<u16> {
        crate::tuning::threads(self.tuning(), self.resources())
    }
    /// Client URL through the client Service's DNS name.
    fn client_url(&self, owner: &Owner) -> String;
    /// The fault agent the spec asks for (`spec.faultInjection`); kinds without one: `None`.
    fn fault_injection(&self) -> Option<&FaultAgentSpec> {
        None
    }
}
