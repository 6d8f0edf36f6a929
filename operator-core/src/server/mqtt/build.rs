//! MqttBroker children: ConfigMap, Service, and a StatefulSet (persistent) or Deployment.

use super::broker_conf::{self, MOSQUITTO_DATA_DIR};
use crate::fault_agent_pod::AgentNetwork;
use crate::meta::Owner;
use crate::operands::{merged, OperandDefaults};
use crate::server::children::Children;
use crate::server::fence::{self, Fence, PeerPorts};
use crate::server::jetstream::build::value_env;
use crate::server_pod::{empty_dir, pod_template, ServerPod};
use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, DeploymentStrategy, StatefulSet, StatefulSetSpec,
};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, PersistentVolumeClaim,
    PersistentVolumeClaimSpec, Probe, Service, ServicePort, ServiceSpec, TCPSocketAction, Volume,
    VolumeMount, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use msgbench_crds::mqtt_broker::{MqttBroker, MqttEngine};
use std::collections::BTreeMap;

pub const MOSQUITTO_UID: i64 = 1883;
/// Non-root uid for images that do not name one.
pub const DEFAULT_UID: i64 = 65532;
const CONFIG_KEY: &str = "broker.conf";

pub fn config_name(name: &str) -> String {
    format!("{name}-config")
}

pub fn build(
    mqb: &MqttBroker,
    owner: &Owner,
    replicas: i32,
    operands: &OperandDefaults,
) -> Children {
    let spec = &mqb.spec;
    let name = owner.name.as_str();
    let conf = broker_conf::render(spec);
    let config_path = broker_conf::config_path(spec);
    let data_dir = match spec.engine {
        MqttEngine::Mosquitto => MOSQUITTO_DATA_DIR,
        _ => "/data",
    };

    let mut ports = vec![port("mqtt", spec.listeners.mqtt_port)];
    let mut client_ports = vec![spec.listeners.mqtt_port];
    if let Some(ws) = &spec.listeners.websocket {
        ports.push(port("websocket", ws.port));
        client_ports.push(ws.port);
    }
    let service = Service {
        metadata: owner.child_meta(name),
        spec: Some(ServiceSpec {
            selector: Some(owner.selector_labels()),
            ports: Some(
                ports
                    .iter()
                    .map(|p| ServicePort {
                        name: p.name.clone(),
                        port: p.container_port,
                        target_port: Some(IntOrString::String(p.name.clone().unwrap_or_default())),
                        ..ServicePort::default()
                    })
                    .collect(),
            ),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    };

    let mut volumes = Vec::new();
    let mut mounts = Vec::new();
    let mut config_maps = Vec::new();
    if let Some(conf) = &conf {
        config_maps.push(ConfigMap {
            metadata: owner.child_meta(config_name(name)),
            data: Some(BTreeMap::from([(CONFIG_KEY.to_string(), conf.clone())])),
            ..ConfigMap::default()
        });
        volumes.push(Volume {
            name: "config".into(),
            config_map: Some(ConfigMapVolumeSource {
                name: config_name(name),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        });
        // subPath: the file alone, so the image's other files in that directory stay visible.
        mounts.push(VolumeMount {
            name: "config".into(),
            mount_path: config_path.clone(),
            sub_path: Some(CONFIG_KEY.into()),
            read_only: Some(true),
            ..VolumeMount::default()
        });
    }
    if !spec.persistence.enabled {
        volumes.push(empty_dir("data", false));
    }
    mounts.push(VolumeMount {
        name: "data".into(),
        mount_path: data_dir.into(),
        ..VolumeMount::default()
    });
    volumes.push(empty_dir("tmp", false));
    mounts.push(VolumeMount {
        name: "tmp".into(),
        mount_path: "/tmp".into(),
        ..VolumeMount::default()
    });

    let (image, command, args, uid) = match spec.engine {
        MqttEngine::Mosquitto => (
            spec.image
                .clone()
                .unwrap_or_else(|| operands.images.mosquitto.clone()),
            Some(vec![
                "/usr/sbin/mosquitto".to_string(),
                "-c".into(),
                config_path.clone(),
            ]),
            None,
            MOSQUITTO_UID,
        ),
        MqttEngine::Rumqttd => (
            spec.image
                .clone()
                .unwrap_or_else(|| operands.images.rumqttd.clone()),
            Some(vec![
                "rumqttd".to_string(),
                "--config".into(),
                config_path.clone(),
            ]),
            None,
            DEFAULT_UID,
        ),
        MqttEngine::Custom => {
            let custom = spec.custom.clone().unwrap_or_default();
            (
                spec.image.clone().unwrap_or_default(),
                (!custom.command.is_empty()).then_some(custom.command),
                (!custom.args.is_empty()).then_some(custom.args),
                DEFAULT_UID,
            )
        }
    };
    let mut env = Vec::new();
    if let Some(t) = mqb.spec.tuning.threads {
        env.push(value_env("THREADS", t.to_string()));
    }
    let probe = |period: i32, failures: i32| Probe {
        tcp_socket: Some(TCPSocketAction {
            port: IntOrString::String("mqtt".into()),
            ..TCPSocketAction::default()
        }),
        period_seconds: Some(period),
        failure_threshold: Some(failures),
        ..Probe::default()
    };
    let container = Container {
        name: "broker".into(),
        image: Some(image),
        command,
        args,
        ports: Some(ports),
        env: (!env.is_empty()).then_some(env),
        volume_mounts: Some(mounts),
        startup_probe: Some(probe(2, 60)),
        readiness_probe: Some(probe(5, 3)),
        liveness_probe: Some(probe(20, 3)),
        ..Container::default()
    };
    let template = pod_template(ServerPod {
        owner,
        uid,
        container,
        volumes,
        resources: &spec.resources,
        tuning: &spec.tuning,
        placement: &spec.placement,
        config: conf.as_deref(),
        termination_grace_period_seconds: Some(30),
        pod: merged(&operands.server_pods, &spec.pod),
        image_pull_policy: &operands.image_pull_policy,
        fault_agent: ServerPod::agent_if(
            (spec.fault_injection.as_ref()).filter(|_| spec.engine != MqttEngine::Custom),
            super::broker_process(spec.engine),
            AgentNetwork {
                peer_ports: Vec::new(), // brokers are independent: no peer traffic
                client_ports: client_ports.clone(),
            },
            owner,
            operands,
        ),
    });
    let selector = LabelSelector {
        match_labels: Some(owner.selector_labels()),
        ..LabelSelector::default()
    };
    let fence = mqtt_fence(spec.engine, client_ports);
    let mut children = Children {
        config_maps,
        services: vec![service],
        network_policies: vec![fence::network_policy(owner, &fence, &template, operands)],
        ..Children::default()
    };
    if spec.persistence.enabled {
        children.stateful_sets.push(StatefulSet {
            metadata: owner.child_meta(name),
            spec: Some(StatefulSetSpec {
                replicas: Some(replicas),
                service_name: Some(name.into()),
                selector,
                template,
                volume_claim_templates: Some(vec![PersistentVolumeClaim {
                    metadata: ObjectMeta {
                        name: Some("data".into()),
                        labels: Some(owner.labels()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(PersistentVolumeClaimSpec {
                        access_modes: Some(vec!["ReadWriteOnce".into()]),
                        storage_class_name: spec.persistence.storage_class_name.clone(),
                        resources: Some(VolumeResourceRequirements {
                            requests: Some(BTreeMap::from([(
                                "storage".to_string(),
                                spec.persistence.size.clone(),
                            )])),
                            ..VolumeResourceRequirements::default()
                        }),
                        ..PersistentVolumeClaimSpec::default()
                    }),
                    ..PersistentVolumeClaim::default()
                }]),
                persistent_volume_claim_retention_policy: Some(
                    crate::server::jetstream::build::pvc_retention(),
                ),
                ..StatefulSetSpec::default()
            }),
            ..StatefulSet::default()
        });
    } else {
        children.deployments.push(Deployment {
            metadata: owner.child_meta(name),
            spec: Some(DeploymentSpec {
                replicas: Some(replicas),
                selector,
                template,
                strategy: Some(recreate_when_pinned(spec.tuning.cpu_pinning)),
                ..DeploymentSpec::default()
            }),
            ..Deployment::default()
        });
    }
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

/// A rolling update of a pinned pod needs a second set of exclusive CPUs, which small nodes
/// do not have: pinned servers are replaced, not surged.
pub fn recreate_when_pinned(pinned: bool) -> DeploymentStrategy {
    DeploymentStrategy {
        type_: Some(if pinned { "Recreate" } else { "RollingUpdate" }.into()),
        ..DeploymentStrategy::default()
    }
}

fn port(name: &str, port: i32) -> ContainerPort {
    ContainerPort {
        name: Some(name.into()),
        container_port: port,
        ..ContainerPort::default()
    }
}
