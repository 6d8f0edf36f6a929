//! MqttBroker children: ConfigMap, Service, fence, and a StatefulSet (persistent) or Deployment.
//! One module per child (`config_map`, `service`, `workload`); `pod` builds the broker's pod
//! template and `secrets` what it takes from the user's Secrets.

mod config_map;
mod pod;
mod secrets;
mod service;
#[cfg(test)]
mod tests;
mod workload;

pub use config_map::config_name;
pub use pod::MOSQUITTO_UID;
pub use secrets::MOSQUITTO_PASSWD;

use super::broker_conf;
use crate::meta::Owner;
use crate::operands::OperandDefaults;
use crate::server::children::Children;
use crate::server::fence::{self, Fence, PeerPorts};
use msgbench_crds::mqtt_broker::{MqttBroker, MqttEngine};

pub fn build(
    mqb: &MqttBroker,
    owner: &Owner,
    replicas: i32,
    operands: &OperandDefaults,
) -> Children {
    let spec = &mqb.spec;
    let conf = broker_conf::render(spec);
    let ports = pod::container_ports(spec);
    let template = pod::template(spec, owner, conf.as_deref(), ports.clone(), operands);
    let fence = mqtt_fence(spec.engine, pod::client_ports(spec));
    let mut children = Children {
        config_maps: (conf.iter())
            .map(|c| config_map::config_map(owner, c))
            .collect(),
        services: vec![service::service(owner, &ports)],
        network_policies: vec![fence::network_policy(owner, &fence, &template, operands)],
        ..Children::default()
    };
    workload::add(&mut children, spec, owner, replicas, template);
    children
}

/// The listeners for clients; `$SYS` is read over them too. A custom engine may cluster on
/// ports msgbench does not know: its own pods reach each other on any port.
pub fn mqtt_fence(engine: MqttEngine, client_ports: Vec<i32>) -> Fence {
    Fence {
        client_ports,
        peer_ports: match engine {
            MqttEngine::Custom => PeerPorts::Every,
            MqttEngine::Mosquitto | MqttEngine::Rumqttd => PeerPorts::None,
        },
        monitor_ports: Vec::new(),
    }
}
