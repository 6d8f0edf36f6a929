//! Fenced by default: one NetworkPolicy per server object, admitting each port only from those
//! who use it. Client ports: pods of the server's own namespace (a run's runners live there),
//! the operator (it samples pubsub-server `/health` and mosquitto `$SYS` over them) and the
//! chart's `serverPods.networkPolicy.clientsFrom`. Peer ports (NATS routes): the server's own
//! pods only. Monitoring ports and the fault agent: the operator only (plus the chart's
//! `monitoringFrom` for monitoring). Egress stays open (DNS, routes to peers).
//!
//! A rule whose `from` were empty would admit every source, so a rule without peers is left
//! out instead: an operator that does not know its own pods (run outside the cluster) leaves
//! the monitoring and agent ports closed to pods (the kubelet's probes are not subject to
//! NetworkPolicy).
use crate::meta::Owner;
use crate::operands::OperandDefaults;
use crate::run::runners::runner_access::operator_peer;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
    NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use runner_api::fault_agent::{CONTAINER as AGENT_CONTAINER, FAULT_AGENT_PORT};

/// Which ports a server kind listens on, by who may use them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Fence {
    /// What clients connect to (the TLS variant uses the same port).
    pub client_ports: Vec<i32>,
    /// What the server's own pods use among themselves.
    pub peer_ports: PeerPorts,
    /// Read by the operator only (nats `/varz` and `/jsz`, sockudo `/metrics`).
    pub monitor_ports: Vec<i32>,
}

/// Traffic between a server's own pods.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum PeerPorts {
    /// Independent servers: no peer traffic.
    #[default]
    None,
    /// These ports only (NATS: the route port).
    Listed(Vec<i32>),
    /// Any port: a custom image whose clustering ports msgbench does not know.
    Every,
}

fn tcp(ports: &[i32]) -> Option<Vec<NetworkPolicyPort>> {
    Some(
        (ports.iter())
            .map(|p| NetworkPolicyPort {
                port: Some(IntOrString::Int(*p)),
                protocol: Some("TCP".into()),
                ..NetworkPolicyPort::default()
            })
            .collect(),
    )
}

fn pods(selector: LabelSelector) -> NetworkPolicyPeer {
    NetworkPolicyPeer {
        pod_selector: Some(selector),
        ..NetworkPolicyPeer::default()
    }
}

/// `ports` from `from`; None when nobody is admitted (an empty `from` would admit everyone).
fn rule(from: Vec<NetworkPolicyPeer>, ports: &[i32]) -> Option<NetworkPolicyIngressRule> {
    (!from.is_empty() && !ports.is_empty()).then(|| NetworkPolicyIngressRule {
        from: Some(from),
        ports: tcp(ports),
    })
}

/// The server's NetworkPolicy. `template`: the pod template built, to see whether its pods
/// carry the fault agent (whose port only the operator may reach).
pub fn network_policy(
    owner: &Owner,
    fence: &Fence,
    template: &PodTemplateSpec,
    operands: &OperandDefaults,
) -> NetworkPolicy {
    let extra = &operands.server_network_policy;
    let operator: Vec<NetworkPolicyPeer> =
        operands.operator_peer.iter().map(operator_peer).collect();
    let own = LabelSelector {
        match_labels: Some(owner.selector_labels()),
        ..LabelSelector::default()
    };
    // An empty pod selector without a namespace selector: every pod of this namespace.
    let mut clients = vec![pods(LabelSelector::default())];
    clients.extend(operator.iter().cloned());
    clients.extend(extra.clients_from.iter().cloned());
    let mut monitors = operator.clone();
    monitors.extend(extra.monitoring_from.iter().cloned());
    let has_agent = (template.spec.iter())
        .flat_map(|s| &s.containers)
        .any(|c| c.name == AGENT_CONTAINER);
    let agent_ports: Vec<i32> = has_agent
        .then_some(FAULT_AGENT_PORT.into())
        .into_iter()
        .collect();
    let peers = match &fence.peer_ports {
        PeerPorts::None => None,
        PeerPorts::Listed(ports) => rule(vec![pods(own.clone())], ports),
        PeerPorts::Every => Some(NetworkPolicyIngressRule {
            from: Some(vec![pods(own.clone())]),
            ports: None,
        }),
    };
    let ingress = [
        rule(clients, &fence.client_ports),
        peers,
        rule(monitors, &fence.monitor_ports),
        rule(operator, &agent_ports),
    ];
    NetworkPolicy {
        metadata: owner.child_meta(&owner.name),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(own),
            policy_types: Some(vec!["Ingress".into()]),
            ingress: Some(ingress.into_iter().flatten().collect()),
            ..NetworkPolicySpec::default()
        }),
    }
}

#[cfg(test)]
mod tests;
