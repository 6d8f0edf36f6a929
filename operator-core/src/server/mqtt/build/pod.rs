//! The broker's pod template: the engine's image and command, its volumes, probes and
//! environment, hardened by `server_pod`.
use super::super::broker_conf::{self, broker_process, MOSQUITTO_DATA_DIR};
use super::{config_map, secrets};
use crate::meta::Owner;
use crate::operands::{merged, OperandDefaults};
use crate::run::faults::agent_pod::AgentNetwork;
use crate::server_pod::{
    container_port, empty_dir, pod_template, value_env, ServerPod, DEFAULT_UID,
};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, PodTemplateSpec, Probe, TCPSocketAction, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use msgbench_crds::mqtt_broker::{MqttBrokerSpec, MqttEngine};

pub const MOSQUITTO_UID: i64 = 1883;

/// How the engine runs: what the spec or the operator's defaults name.
struct Engine {
    image: String,
    command: Option<Vec<String>>,
    args: Option<Vec<String>>,
    uid: i64,
}

/// The listeners as named container ports (`mqtt`, and `websocket` when configured).
pub(super) fn container_ports(spec: &MqttBrokerSpec) -> Vec<ContainerPort> {
    let mut ports = vec![container_port("mqtt", spec.listeners.mqtt_port)];
    if let Some(ws) = &spec.listeners.websocket {
        ports.push(container_port("websocket", ws.port));
    }
    ports
}

/// The listeners' ports: MQTT, and WebSocket when configured.
pub(super) fn client_ports(spec: &MqttBrokerSpec) -> Vec<i32> {
    std::iter::once(spec.listeners.mqtt_port)
        .chain(spec.listeners.websocket.as_ref().map(|ws| ws.port))
        .collect()
}

pub(super) fn template(
    spec: &MqttBrokerSpec,
    owner: &Owner,
    conf: Option<&str>,
    ports: Vec<ContainerPort>,
    operands: &OperandDefaults,
) -> PodTemplateSpec {
    let config_path = broker_conf::config_path(spec);
    let (mut volumes, mut mounts) = storage(spec, owner, conf.is_some(), &config_path);
    let engine = engine(spec, &config_path, operands);
    let (init_containers, env) =
        secrets::secret_material(spec, &engine.image, &mut volumes, &mut mounts);
    let env = [env, threads_env(spec)].concat();
    let container = Container {
        name: "broker".into(),
        image: Some(engine.image),
        command: engine.command,
        args: engine.args,
        ports: Some(ports),
        env: (!env.is_empty()).then_some(env),
        volume_mounts: Some(mounts),
        startup_probe: Some(probe(2, 60)),
        readiness_probe: Some(probe(5, 3)),
        liveness_probe: Some(probe(20, 3)),
        ..Container::default()
    };
    pod_template(ServerPod {
        owner,
        uid: engine.uid,
        container,
        init_containers,
        volumes,
        resources: &spec.resources,
        tuning: &spec.tuning,
        placement: &spec.placement,
        config: conf,
        termination_grace_period_seconds: Some(30),
        pod: merged(&operands.server_pods, &spec.pod),
        image_pull_policy: &operands.image_pull_policy,
        fault_agent: ServerPod::agent_if(
            (spec.fault_injection.as_ref()).filter(|_| spec.engine != MqttEngine::Custom),
            broker_process(spec.engine),
            AgentNetwork {
                peer_ports: Vec::new(), // brokers are independent: no peer traffic
                client_ports: client_ports(spec),
            },
            owner,
            operands,
        ),
    })
}

/// The configuration file (when there is one), the data directory (an emptyDir unless a
/// claim provides it) and `/tmp` (read-only root filesystem).
fn storage(
    spec: &MqttBrokerSpec,
    owner: &Owner,
    has_config: bool,
    config_path: &str,
) -> (Vec<Volume>, Vec<VolumeMount>) {
    let (mut volumes, mut mounts) = (Vec::new(), Vec::new());
    if has_config {
        volumes.push(config_map::volume(owner));
        mounts.push(config_map::mount(config_path));
    }
    if !spec.persistence.enabled {
        volumes.push(empty_dir("data", false));
    }
    let data_dir = match spec.engine {
        MqttEngine::Mosquitto => MOSQUITTO_DATA_DIR,
        _ => "/data",
    };
    mounts.push(plain_mount("data", data_dir));
    volumes.push(empty_dir("tmp", false));
    mounts.push(plain_mount("tmp", "/tmp"));
    (volumes, mounts)
}

fn plain_mount(name: &str, path: &str) -> VolumeMount {
    VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        ..VolumeMount::default()
    }
}

fn engine(spec: &MqttBrokerSpec, config_path: &str, operands: &OperandDefaults) -> Engine {
    let image_or = |default: &String| spec.image.clone().unwrap_or_else(|| default.clone());
    let command = |program: &str, flag: &str| {
        Some(vec![program.to_string(), flag.into(), config_path.into()])
    };
    match spec.engine {
        MqttEngine::Mosquitto => Engine {
            image: image_or(&operands.images.mosquitto),
            command: command("/usr/sbin/mosquitto", "-c"),
            args: None,
            uid: MOSQUITTO_UID,
        },
        MqttEngine::Rumqttd => Engine {
            image: image_or(&operands.images.rumqttd),
            command: command("rumqttd", "--config"),
            args: None,
            uid: DEFAULT_UID,
        },
        MqttEngine::Custom => {
            let custom = spec.custom.clone().unwrap_or_default();
            Engine {
                image: spec.image.clone().unwrap_or_default(),
                command: (!custom.command.is_empty()).then_some(custom.command),
                args: (!custom.args.is_empty()).then_some(custom.args),
                uid: DEFAULT_UID,
            }
        }
    }
}

fn threads_env(spec: &MqttBrokerSpec) -> Vec<k8s_openapi::api::core::v1::EnvVar> {
    (spec.tuning.threads.iter())
        .map(|t| value_env("THREADS", t.to_string()))
        .collect()
}

/// A TCP probe on the MQTT listener (TLS or not, a connect says the broker listens).
fn probe(period: i32, failures: i32) -> Probe {
    Probe {
        tcp_socket: Some(TCPSocketAction {
            port: IntOrString::String("mqtt".into()),
            ..TCPSocketAction::default()
        }),
        period_seconds: Some(period),
        failure_threshold: Some(failures),
        ..Probe::default()
    }
}
