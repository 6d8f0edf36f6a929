//! JetStreamCluster children: ConfigMap (nats.conf), headless and client Services, StatefulSet,
//! PodDisruptionBudget, fence, and the route password's Secret. One module per child; `pod`
//! builds the servers' pod template and `env` their environment.

mod config_map;
mod env;
mod lazy_store;
mod pdb;
mod pod;
mod service;
mod statefulset;
#[cfg(test)]
mod tests;

pub use config_map::config_name;
pub use pod::NATS_UID;
pub use service::headless_name;

use super::nats_conf::{self, CLIENT_PORT, CLUSTER_PORT, MONITOR_PORT};
use crate::meta::Owner;
use crate::operands::OperandDefaults;
use crate::server::children::{Children, GeneratedSecret};
use crate::server::fence::{self, Fence, PeerPorts};
use msgbench_crds::jetstream_cluster::JetStreamCluster;

pub fn build(
    jsc: &JetStreamCluster,
    owner: &Owner,
    replicas: i32,
    operands: &OperandDefaults,
) -> Children {
    let spec = &jsc.spec;
    let conf = nats_conf::render(&owner.name, &owner.namespace, spec);
    let template = pod::template(spec, owner, &conf, operands);
    let policy = fence::network_policy(owner, &jetstream_fence(), &template, operands);
    Children {
        config_maps: vec![config_map::config_map(owner, conf)],
        services: vec![service::headless(owner), service::client(owner)],
        pod_disruption_budgets: vec![pdb::pod_disruption_budget(owner)],
        stateful_sets: vec![statefulset::stateful_set(spec, owner, replicas, template)],
        deployments: vec![],
        network_policies: vec![policy],
        generated_secrets: (spec.replicas > 1)
            .then(|| route_secret(owner))
            .into_iter()
            .collect(),
    }
}

/// Clients on 4222 (TLS or not), routes on 6222 among the servers only, monitoring on 8222
/// for the operator only.
pub fn jetstream_fence() -> Fence {
    Fence {
        client_ports: vec![CLIENT_PORT],
        peer_ports: PeerPorts::Listed(vec![CLUSTER_PORT]),
        monitor_ports: vec![MONITOR_PORT],
    }
}

/// The route password's Secret: the operator creates it once, the servers read it by reference.
fn route_secret(owner: &Owner) -> GeneratedSecret {
    GeneratedSecret {
        metadata: owner.child_meta(nats_conf::route_secret_name(&owner.name)),
        key: nats_conf::ROUTE_SECRET_KEY.into(),
    }
}
