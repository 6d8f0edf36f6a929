//! MqttBroker children: ConfigMap, Service, and a StatefulSet (persistent) or Deployment.

use super::broker_conf::{
    self, MOSQUITTO_AUTH_DIR, MOSQUITTO_DATA_DIR, MOSQUITTO_PASSWORD_FILE, MOSQUITTO_TLS_DIR,
};
use crate::fault_agent_pod::AgentNetwork;
use crate::meta::Owner;
use crate::operands::{merged, OperandDefaults};
use crate::run::target_auth::secret_env;
use crate::server::children::Children;
use crate::server::fence::{self, Fence, PeerPorts};
use crate::server::jetstream::build::value_env;
use crate::server_pod::{
    empty_dir, mount, optional_secret_volume, pod_template, tls_env, ServerPod,
};
use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, DeploymentStrategy, StatefulSet, StatefulSetSpec,
};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, EnvVar, PersistentVolumeClaim,
    PersistentVolumeClaimSpec, Probe, Service, ServicePort, ServiceSpec, TCPSocketAction, Volume,
    VolumeMount, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use msgbench_crds::mqtt_broker::{MqttBroker, MqttBrokerSpec, MqttEngine};
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
    let (init_containers, mut env) = secret_material(spec, &image, &mut volumes, &mut mounts);
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
        init_containers,
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

const AUTH_VOLUME: &str = "auth";
const TLS_VOLUME: &str = "tls";

/// What the broker pod takes from its Secrets, by reference only (the operator never reads
/// them): with `auth`, the init container that hashes the user into the password file, and its
/// in-memory volume; with `tls` (`super::serves_tls`), `tls.crt` and `tls.key` mounted
/// read-only (never `ca.crt`: clients present no certificate) and environment references to
/// the public parts, through which the kubelet names a missing Secret or key in the container
/// status (`server_pod::tls_env`). Returns the init containers and the environment.
fn secret_material(
    spec: &MqttBrokerSpec,
    image: &str,
    volumes: &mut Vec<Volume>,
    mounts: &mut Vec<VolumeMount>,
) -> (Vec<Container>, Vec<EnvVar>) {
    let mut init = Vec::new();
    if let Some(a) = (spec.auth.as_ref()).filter(|_| spec.engine == MqttEngine::Mosquitto) {
        volumes.push(empty_dir(AUTH_VOLUME, true));
        mounts.push(mount(AUTH_VOLUME, MOSQUITTO_AUTH_DIR, true));
        init.push(password_file(image, &a.secret_name));
    }
    let mut env = Vec::new();
    if let Some(t) = (spec.tls.as_ref()).filter(|_| super::serves_tls(spec)) {
        let keys = ["tls.crt", "tls.key"];
        volumes.push(optional_secret_volume(TLS_VOLUME, &t.secret_name, &keys));
        mounts.push(mount(TLS_VOLUME, MOSQUITTO_TLS_DIR, true));
        env.extend(tls_env(&t.secret_name));
    }
    (init, env)
}
/// mosquitto_passwd where both the official image (Alpine) and Debian's package put it.
pub const MOSQUITTO_PASSWD: &str = "/usr/bin/mosquitto_passwd";

/// Hashes the Secret's user into mosquitto's password file, in the broker's image before the
/// broker starts. The credentials come from the Secret through `secretKeyRef` and reach the
/// command line by the kubelet's `$(VAR)` expansion: the pod spec names only the variables,
/// the operator never reads the Secret, and the file holds a salted hash. A missing Secret or
/// key stops this container with the kubelet naming it, which the server's status reports.
fn password_file(image: &str, secret: &str) -> Container {
    Container {
        name: "password-file".into(),
        image: Some(image.into()),
        command: Some(
            [
                MOSQUITTO_PASSWD,
                "-b",
                "-c",
                MOSQUITTO_PASSWORD_FILE,
                "$(MQTT_USERNAME)",
                "$(MQTT_PASSWORD)",
            ]
            .map(String::from)
            .to_vec(),
        ),
        env: Some(vec![
            secret_env("MQTT_USERNAME", secret, "username"),
            secret_env("MQTT_PASSWORD", secret, "password"),
        ]),
        volume_mounts: Some(vec![mount(AUTH_VOLUME, MOSQUITTO_AUTH_DIR, false)]),
        ..Container::default()
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::kind::ManagedServerKind;

    fn built(spec: &str) -> (MqttBroker, Children) {
        let mqb: MqttBroker = serde_norway::from_str(&format!(
            "apiVersion: msgbench.dev/v1alpha1\nkind: MqttBroker\n\
             metadata: {{name: mq, namespace: bench, uid: u1}}\nspec: {spec}\n"
        ))
        .unwrap();
        let owner = Owner::of(&mqb, MqttBroker::KIND_LABEL).unwrap();
        let c = mqb.build(&owner, 1, &OperandDefaults::default());
        (mqb, c)
    }

    /// With `auth`: mosquitto refuses anonymous clients and reads a password file that an init
    /// container of the same image hashes from the Secret, referenced by name only; the broker
    /// mounts it read-only and the ConfigMap names the file, never the Secret or a credential.
    #[test]
    fn auth_hashes_the_secret_into_a_password_file_at_pod_start() {
        let (mqb, c) = built("{auth: {secretName: mq-user}}");
        assert!(mqb.validate().is_empty(), "{:?}", mqb.validate());
        let conf = &c.config_maps[0].data.as_ref().unwrap()[CONFIG_KEY];
        assert!(
            conf.contains("allow_anonymous false\npassword_file /mosquitto/auth/passwd\n"),
            "{conf}"
        );
        assert!(!conf.contains("mq-user") && !conf.contains("allow_anonymous true"));
        let pod = c.template().unwrap().spec.clone().unwrap();
        let [init] = pod.init_containers.as_deref().unwrap() else {
            panic!("one init container")
        };
        let broker = &pod.containers[0];
        assert_eq!(init.image, broker.image, "the broker's own image");
        assert_eq!(init.security_context, broker.security_context);
        assert_eq!(init.resources, broker.resources, "the pod keeps its QoS");
        let cmd = init.command.clone().unwrap();
        assert_eq!(cmd[0], MOSQUITTO_PASSWD);
        assert_eq!(&cmd[4..], ["$(MQTT_USERNAME)", "$(MQTT_PASSWORD)"]);
        let refs: Vec<(&str, &str, &str)> = (init.env.iter().flatten())
            .map(|e| {
                assert!(e.value.is_none(), "{} has a value", e.name);
                let r = e.value_from.as_ref().unwrap().secret_key_ref.as_ref();
                let r = r.unwrap();
                (e.name.as_str(), r.name.as_str(), r.key.as_str())
            })
            .collect();
        assert_eq!(
            refs,
            [
                ("MQTT_USERNAME", "mq-user", "username"),
                ("MQTT_PASSWORD", "mq-user", "password")
            ]
        );
        let mounted = |c: &Container| {
            let m = c.volume_mounts.iter().flatten().find(|m| m.name == "auth");
            m.map(|m| (m.mount_path.clone(), m.read_only == Some(true)))
        };
        assert_eq!(mounted(init), Some((MOSQUITTO_AUTH_DIR.into(), false)));
        assert_eq!(mounted(broker), Some((MOSQUITTO_AUTH_DIR.into(), true)));
        let vol = pod.volumes.iter().flatten().find(|v| v.name == "auth");
        let medium = vol.and_then(|v| v.empty_dir.as_ref()?.medium.clone());
        assert_eq!(
            medium.as_deref(),
            Some("Memory"),
            "the hash never hits disk"
        );
    }

    /// Without `auth` nothing changes: anonymous clients, no init container.
    #[test]
    fn without_auth_the_broker_admits_anonymous_clients() {
        let (_, c) = built("{}");
        let conf = &c.config_maps[0].data.as_ref().unwrap()[CONFIG_KEY];
        assert!(conf.contains("allow_anonymous true\n") && !conf.contains("password_file"));
        let pod = c.template().unwrap().spec.clone().unwrap();
        assert!(pod.init_containers.is_none());
        assert!(!pod.volumes.iter().flatten().any(|v| v.name == "auth"));
    }

    /// Only mosquitto's password file is written: another engine with `auth` is refused (the
    /// CRD's rule says the same) and built without it.
    #[test]
    fn auth_on_another_engine_is_refused() {
        let (mqb, c) = built("{engine: rumqttd, auth: {secretName: mq-user}}");
        let v = mqb.validate();
        assert!(v.iter().any(|v| v.field == "spec.auth"), "{v:?}");
        let pod = c.template().unwrap().spec.clone().unwrap();
        assert!(pod.init_containers.is_none());
    }

    /// With `tls`: the MQTT listener serves TLS with the certificate and key of the Secret,
    /// mounted read-only (never `ca.crt`, never the Secret's name in the ConfigMap), the kubelet
    /// checks the Secret through references to its public parts, the probes stay TCP on the
    /// same port, and the client URL says `mqtts://`.
    #[test]
    fn tls_serves_the_secrets_certificate_on_the_mqtt_listener() {
        let (mqb, c) = built("{tls: {secretName: mq-tls}}");
        assert!(mqb.validate().is_empty(), "{:?}", mqb.validate());
        let conf = &c.config_maps[0].data.as_ref().unwrap()[CONFIG_KEY];
        assert!(
            conf.contains(
                "listener 1883 0.0.0.0\nprotocol mqtt\n\
                 certfile /mosquitto/tls/tls.crt\nkeyfile /mosquitto/tls/tls.key\n"
            ),
            "{conf}"
        );
        assert!(
            !conf.contains("mq-tls") && !conf.contains("cafile"),
            "{conf}"
        );
        let pod = c.template().unwrap().spec.clone().unwrap();
        let vol = pod.volumes.iter().flatten().find(|v| v.name == "tls");
        let secret = vol.and_then(|v| v.secret.clone()).expect("a Secret volume");
        let keys: Vec<String> = secret
            .items
            .iter()
            .flatten()
            .map(|i| i.key.clone())
            .collect();
        assert_eq!(secret.secret_name.as_deref(), Some("mq-tls"));
        assert_eq!(keys, ["tls.crt", "tls.key"], "the key and certificate only");
        assert_eq!(secret.default_mode, Some(0o440), "the pod's group only");
        let broker = &pod.containers[0];
        let m = broker
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.name == "tls");
        let m = m.expect("mounted in the broker");
        assert_eq!(m.mount_path, MOSQUITTO_TLS_DIR);
        assert_eq!(m.read_only, Some(true));
        let refs: Vec<(&str, &str)> = (broker.env.iter().flatten())
            .filter_map(|e| {
                let r = e.value_from.as_ref()?.secret_key_ref.as_ref()?;
                (r.name == "mq-tls").then_some((e.name.as_str(), r.key.as_str()))
            })
            .collect();
        assert_eq!(
            refs,
            [
                ("MSGBENCH_TLS_CERT", "tls.crt"),
                ("MSGBENCH_TLS_CA", "ca.crt")
            ]
        );
        let tcp = |p: &Option<Probe>| p.as_ref()?.tcp_socket.as_ref().map(|t| t.port.clone());
        for p in [
            &broker.startup_probe,
            &broker.readiness_probe,
            &broker.liveness_probe,
        ] {
            assert_eq!(tcp(p), Some(IntOrString::String("mqtt".into())));
        }
        let owner = Owner::of(&mqb, MqttBroker::KIND_LABEL).unwrap();
        assert_eq!(mqb.client_url(&owner), "mqtts://mq.bench.svc:1883");
    }

    /// A WebSocket listener serves TLS too: no plain way into a broker that requires TLS.
    #[test]
    fn tls_covers_the_websocket_listener_too() {
        let (_, c) = built("{tls: {secretName: mq-tls}, listeners: {websocket: {port: 8083}}}");
        let conf = &c.config_maps[0].data.as_ref().unwrap()[CONFIG_KEY];
        assert!(
            conf.contains(
                "listener 8083 0.0.0.0\nprotocol websockets\n\
                 certfile /mosquitto/tls/tls.crt\nkeyfile /mosquitto/tls/tls.key\n"
            ),
            "{conf}"
        );
        assert_eq!(conf.matches("certfile ").count(), 2, "{conf}");
    }

    /// TLS and a login together: the password file's init container as without TLS (it needs
    /// no certificate), the TLS listener, and still no anonymous clients.
    #[test]
    fn tls_and_auth_together() {
        let (mqb, c) = built("{auth: {secretName: mq-user}, tls: {secretName: mq-tls}}");
        assert!(mqb.validate().is_empty(), "{:?}", mqb.validate());
        let conf = &c.config_maps[0].data.as_ref().unwrap()[CONFIG_KEY];
        assert!(conf.contains("keyfile /mosquitto/tls/tls.key\n"), "{conf}");
        assert!(
            conf.contains("allow_anonymous false\npassword_file "),
            "{conf}"
        );
        let pod = c.template().unwrap().spec.clone().unwrap();
        let [init] = pod.init_containers.as_deref().unwrap() else {
            panic!("one init container")
        };
        let mounts: Vec<&str> = (init.volume_mounts.iter().flatten())
            .map(|m| m.name.as_str())
            .collect();
        assert_eq!(mounts, ["auth"]);
        let broker_mounts: Vec<&str> = (pod.containers[0].volume_mounts.iter().flatten())
            .map(|m| m.name.as_str())
            .collect();
        assert!(broker_mounts.contains(&"auth") && broker_mounts.contains(&"tls"));
    }

    /// Without `tls` nothing of it appears, and the URL stays `mqtt://`.
    #[test]
    fn without_tls_the_broker_is_plain() {
        let (mqb, c) = built("{listeners: {websocket: {port: 8083}}}");
        let conf = &c.config_maps[0].data.as_ref().unwrap()[CONFIG_KEY];
        assert!(
            !conf.contains("certfile") && !conf.contains("keyfile"),
            "{conf}"
        );
        let pod = c.template().unwrap().spec.clone().unwrap();
        assert!(!pod.volumes.iter().flatten().any(|v| v.name == "tls"));
        assert!(pod.containers[0].env.is_none());
        let owner = Owner::of(&mqb, MqttBroker::KIND_LABEL).unwrap();
        assert_eq!(mqb.client_url(&owner), "mqtt://mq.bench.svc:1883");
    }

    /// Only mosquitto's listeners are configured: another engine with `tls` is refused (the
    /// CRD's rule says the same) and built without it, advertising no `mqtts://` it would not
    /// serve.
    #[test]
    fn tls_on_another_engine_is_refused() {
        let (mqb, c) = built("{engine: rumqttd, tls: {secretName: mq-tls}}");
        let v = mqb.validate();
        assert!(v.iter().any(|v| v.field == "spec.tls"), "{v:?}");
        let pod = c.template().unwrap().spec.clone().unwrap();
        assert!(!pod.volumes.iter().flatten().any(|v| v.name == "tls"));
        let owner = Owner::of(&mqb, MqttBroker::KIND_LABEL).unwrap();
        assert_eq!(mqb.client_url(&owner), "mqtt://mq.bench.svc:1883");
    }
}
