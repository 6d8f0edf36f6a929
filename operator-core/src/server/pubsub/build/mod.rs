//! PubSubServer children: Service, fence and Deployment with the contract env (PORT,
//! EMIT_MODE, DATABASE_FILE, CACHE_TTL_SECONDS, WORKER_THREADS, WS_MODE, RUST_LOG). One module
//! per child; `pod` builds the server's pod template.

mod deployment;
mod pod;
mod service;
#[cfg(test)]
mod tests;

pub use pod::{image, memory_budget, DATA_SIZE_LIMIT, TMP_SIZE_LIMIT};

use super::sockudo;
use crate::meta::Owner;
use crate::operands::OperandDefaults;
use crate::server::children::Children;
use crate::server::fence::{self, Fence, PeerPorts};
use msgbench_crds::pubsub_server::{PubSubProtocol, PubSubServer};

pub fn build(
    pss: &PubSubServer,
    owner: &Owner,
    replicas: i32,
    operands: &OperandDefaults,
) -> Children {
    let spec = &pss.spec;
    let pusher = spec.protocol == PubSubProtocol::Pusher;
    let template = pod::template(spec, owner, operands);
    let policy =
        fence::network_policy(owner, &pubsub_fence(spec.port, pusher), &template, operands);
    Children {
        services: vec![service::service(owner, spec.port)],
        deployments: vec![deployment::deployment(spec, owner, replicas, template)],
        network_policies: vec![policy],
        ..Children::default()
    }
}

/// One port for HTTP publishes and Socket.IO/WebSocket/Pusher clients; sockudo's metrics for
/// the operator only.
pub fn pubsub_fence(port: i32, pusher: bool) -> Fence {
    Fence {
        client_ports: vec![port],
        peer_ports: PeerPorts::None,
        monitor_ports: match pusher {
            true => vec![sockudo::METRICS_PORT],
            false => Vec::new(),
        },
    }
}
