//! JetStreamCluster children: ConfigMap (nats.conf), headless + client Services, StatefulSet, PDB.

use super::nats_conf::{self, CLIENT_PORT, CLUSTER_PORT, MONITOR_PORT, PID_FILE, TLS_DIR};
use crate::fault_agent_pod::AgentNetwork;
use crate::meta::Owner;
use crate::operands::{merged, OperandDefaults};
use crate::server::children::{Children, GeneratedSecret};
use crate::server::fence::{self, Fence, PeerPorts};
use crate::server_pod::{
    empty_dir, mount, optional_secret_volume, pod_template, tls_env, ServerPod,
};
use crate::tuning::{bytes, threads};
use k8s_openapi::api::apps::v1::{
    StatefulSet, StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetSpec,
};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, EnvVar, EnvVarSource, ExecAction,
    HTTPGetAction, Lifecycle, LifecycleHandler, ObjectFieldSelector, PersistentVolumeClaim,
    PersistentVolumeClaimSpec, Probe, SecretKeySelector, Service, ServicePort, ServiceSpec, Volume,
    VolumeResourceRequirements,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use msgbench_crds::jetstream_cluster::{JetStreamCluster, NatsAuthMode, StorageType};
use std::collections::BTreeMap;

/// The image runs as root by default; the operator runs it as this uid.
pub const NATS_UID: i64 = 1000;
const CONFIG_FILE: &str = "nats.conf";

pub fn headless_name(name: &str) -> String {
    format!("{name}-headless")
}
pub fn config_name(name: &str) -> String {
    format!("{name}-config")
}

pub fn build(
    jsc: &JetStreamCluster,
    owner: &Owner,
    replicas: i32,
    operands: &OperandDefaults,
) -> Children {
    let spec = &jsc.spec;
    let name = owner.name.as_str();
    let headless = headless_name(name);
    let conf = nats_conf::render(name, &owner.namespace, spec);

    let config_map = ConfigMap {
        metadata: owner.child_meta(config_name(name)),
        data: Some(BTreeMap::from([(CONFIG_FILE.to_string(), conf.clone())])),
        ..ConfigMap::default()
    };
    let ports = vec![
        port("client", CLIENT_PORT),
        port("cluster", CLUSTER_PORT),
        port("monitor", MONITOR_PORT),
    ];
    let headless_svc = Service {
        metadata: owner.child_meta(&headless),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            // Routes must resolve before pods are ready, or the cluster never forms.
            publish_not_ready_addresses: Some(true),
            selector: Some(owner.selector_labels()),
            ports: Some(ports.clone()),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    };
    let client_svc = Service {
        metadata: owner.child_meta(name),
        spec: Some(ServiceSpec {
            selector: Some(owner.selector_labels()),
            ports: Some(vec![
                port("client", CLIENT_PORT),
                port("monitor", MONITOR_PORT),
            ]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    };
    let pdb = PodDisruptionBudget {
        metadata: owner.child_meta(name),
        spec: Some(PodDisruptionBudgetSpec {
            // JetStream R3 streams keep quorum with one server down.
            max_unavailable: Some(IntOrString::Int(1)),
            selector: Some(LabelSelector {
                match_labels: Some(owner.selector_labels()),
                ..LabelSelector::default()
            }),
            ..PodDisruptionBudgetSpec::default()
        }),
        ..PodDisruptionBudget::default()
    };

    let file_storage = spec.jetstream.storage.type_ == StorageType::File;
    let mut volumes = vec![
        Volume {
            name: "config".into(),
            config_map: Some(ConfigMapVolumeSource {
                name: config_name(name),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        },
        empty_dir("pid", false),
    ];
    if !file_storage {
        // Memory storage: the store dir still has to be writable (read-only root fs).
        volumes.push(empty_dir("data", true));
    }
    let mut mounts = vec![
        mount("config", "/etc/nats", true),
        mount("pid", "/var/run/nats", false),
        mount("data", "/data", false),
    ];
    if let Some(tls) = &spec.tls {
        // The servers need the certificate and key, never the CA (no client certificates).
        // Optional: the kubelet then checks the Secret through the environment references
        // below and names what is missing in the container status (see `tls_env`).
        volumes.push(optional_secret_volume(
            "tls",
            &tls.secret_name,
            &["tls.crt", "tls.key"],
        ));
        mounts.push(mount("tls", TLS_DIR, true));
    }
    let container = Container {
        name: "nats".into(),
        image: Some(
            spec.image
                .clone()
                .unwrap_or_else(|| operands.images.nats.clone()),
        ),
        args: Some(vec!["--config".into(), format!("/etc/nats/{CONFIG_FILE}")]),
        ports: Some(vec![
            container_port("client", CLIENT_PORT),
            container_port("cluster", CLUSTER_PORT),
            container_port("monitor", MONITOR_PORT),
        ]),
        env: Some(
            [
                env(jsc, &headless, &owner.namespace),
                route_env(name, &owner.namespace, &headless, spec.replicas),
            ]
            .concat(),
        ),
        volume_mounts: Some(mounts),
        startup_probe: Some(http_probe("/healthz", 2, 90)),
        readiness_probe: Some(http_probe("/healthz?js-enabled-only=true", 5, 3)),
        liveness_probe: Some(http_probe("/healthz?js-enabled-only=true", 30, 3)),
        // Lame duck on stop. The image has no shell: the nats-server binary signals the
        // server through its pid file; SIGTERM is then ignored while lame duck runs.
        lifecycle: Some(Lifecycle {
            pre_stop: Some(LifecycleHandler {
                exec: Some(ExecAction {
                    command: Some(vec![
                        "/nats-server".into(),
                        "--signal".into(),
                        format!("ldm={PID_FILE}"),
                    ]),
                }),
                ..LifecycleHandler::default()
            }),
            ..Lifecycle::default()
        }),
        ..Container::default()
    };
    let template = pod_template(ServerPod {
        owner,
        uid: NATS_UID,
        container,
        init_containers: Vec::new(),
        volumes,
        resources: &spec.resources,
        tuning: &spec.tuning,
        placement: &spec.placement,
        config: Some(&conf),
        termination_grace_period_seconds: Some(
            nats_conf::LAME_DUCK_DURATION_SECS + nats_conf::LAME_DUCK_GRACE_SECS + 20,
        ),
        pod: merged(&operands.server_pods, &spec.pod),
        image_pull_policy: &operands.image_pull_policy,
        fault_agent: ServerPod::agent_if(
            spec.fault_injection.as_ref(),
            "nats-server",
            AgentNetwork {
                peer_ports: vec![CLUSTER_PORT],
                client_ports: vec![CLIENT_PORT],
            },
            owner,
            operands,
        ),
    });
    let claims = file_storage.then(|| {
        vec![PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("data".into()),
                labels: Some(owner.labels()),
                ..ObjectMeta::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                storage_class_name: spec.jetstream.storage.storage_class_name.clone(),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(BTreeMap::from([(
                        "storage".to_string(),
                        spec.jetstream.storage.size.clone(),
                    )])),
                    ..VolumeResourceRequirements::default()
                }),
                ..PersistentVolumeClaimSpec::default()
            }),
            ..PersistentVolumeClaim::default()
        }]
    });
    let policy = fence::network_policy(owner, &jetstream_fence(), &template, operands);
    let sts = StatefulSet {
        metadata: owner.child_meta(name),
        spec: Some(StatefulSetSpec {
            replicas: Some(replicas),
            service_name: Some(headless.clone()),
            // All servers start together: routes need peers, and ordered start only slows it.
            pod_management_policy: Some("Parallel".into()),
            selector: LabelSelector {
                match_labels: Some(owner.selector_labels()),
                ..LabelSelector::default()
            },
            template,
            volume_claim_templates: claims,
            persistent_volume_claim_retention_policy: Some(pvc_retention()),
            ..StatefulSetSpec::default()
        }),
        ..StatefulSet::default()
    };
    Children {
        config_maps: vec![config_map],
        services: vec![headless_svc, client_svc],
        pod_disruption_budgets: vec![pdb],
        stateful_sets: vec![sts],
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

/// The route password by reference, then every route's URL with it (`nats_conf::route_url`).
/// None for a single server (no cluster block).
fn route_env(name: &str, namespace: &str, headless: &str, replicas: i32) -> Vec<EnvVar> {
    if replicas <= 1 {
        return Vec::new();
    }
    let password = crate::run::target_auth::secret_env(
        nats_conf::ROUTE_PASSWORD_ENV,
        &nats_conf::route_secret_name(name),
        nats_conf::ROUTE_SECRET_KEY,
    );
    let routes = (0..replicas).map(|i| {
        value_env(
            &nats_conf::route_env(i),
            nats_conf::route_url(name, namespace, headless, i),
        )
    });
    std::iter::once(password).chain(routes).collect()
}

fn env(jsc: &JetStreamCluster, headless: &str, namespace: &str) -> Vec<EnvVar> {
    let spec = &jsc.spec;
    let mut env = vec![
        EnvVar {
            name: "SERVER_NAME".into(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: "metadata.name".into(),
                    ..ObjectFieldSelector::default()
                }),
                ..EnvVarSource::default()
            }),
            ..EnvVar::default()
        },
        value_env(
            "CLUSTER_ADVERTISE",
            format!("$(SERVER_NAME).{headless}.{namespace}.svc:{CLUSTER_PORT}"),
        ),
    ];
    // nats-server once ignored the CPU limit (nats-server #2586): say it explicitly.
    if let Some(t) = threads(&spec.tuning, &spec.resources) {
        env.push(value_env("GOMAXPROCS", t.to_string()));
    }
    // Let the Go GC work harder before the container hits its memory limit.
    let mem_limit = spec
        .resources
        .limits
        .as_ref()
        .and_then(|l| l.memory.as_ref())
        .and_then(bytes);
    if let Some(m) = mem_limit {
        env.push(value_env("GOMEMLIMIT", (m / 10 * 9).to_string()));
    }
    if let Some(tls) = &spec.tls {
        env.extend(tls_env(&tls.secret_name));
    }
    if let Some(auth) = &spec.auth {
        let keys: &[(&str, &str)] = match auth.mode {
            NatsAuthMode::Token => &[("NATS_TOKEN", "token")],
            NatsAuthMode::UserPassword => {
                &[("NATS_USER", "username"), ("NATS_PASSWORD", "password")]
            }
            // The servers need the public key only; the seed stays with the clients.
            NatsAuthMode::Nkey => &[("NATS_NKEY", "nkey")],
        };
        for (var, key) in keys {
            env.push(EnvVar {
                name: (*var).into(),
                value_from: Some(EnvVarSource {
                    secret_key_ref: Some(SecretKeySelector {
                        name: auth.secret_name.clone(),
                        key: (*key).into(),
                        optional: Some(false),
                    }),
                    ..EnvVarSource::default()
                }),
                ..EnvVar::default()
            });
        }
    }
    env
}

pub(crate) fn value_env(name: &str, value: String) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value),
        ..EnvVar::default()
    }
}

fn port(name: &str, port: i32) -> ServicePort {
    ServicePort {
        name: Some(name.into()),
        port,
        target_port: Some(IntOrString::String(name.into())),
        ..ServicePort::default()
    }
}

/// Deleting the CR frees its volumes (benchmark data is disposable and a local pool is small);
/// scaling down keeps them, so scaling back up finds a server's stream data again.
pub fn pvc_retention() -> StatefulSetPersistentVolumeClaimRetentionPolicy {
    StatefulSetPersistentVolumeClaimRetentionPolicy {
        when_deleted: Some("Delete".into()),
        when_scaled: Some("Retain".into()),
    }
}

fn container_port(name: &str, port: i32) -> ContainerPort {
    ContainerPort {
        name: Some(name.into()),
        container_port: port,
        ..ContainerPort::default()
    }
}

fn http_probe(path: &str, period: i32, failures: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::Int(MONITOR_PORT),
            ..HTTPGetAction::default()
        }),
        period_seconds: Some(period),
        failure_threshold: Some(failures),
        timeout_seconds: Some(3),
        ..Probe::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::kind::ManagedServerKind;

    fn built(replicas: i32) -> Children {
        let js: JetStreamCluster = serde_norway::from_str(&format!(
            "apiVersion: msgbench.dev/v1alpha1\nkind: JetStreamCluster\n\
             metadata: {{name: js, namespace: bench, uid: u1}}\nspec: {{replicas: {replicas}}}\n"
        ))
        .unwrap();
        let owner = Owner::of(&js, JetStreamCluster::KIND_LABEL).unwrap();
        js.build(&owner, replicas, &OperandDefaults::default())
    }

    /// A cluster's servers take the route password from the generated Secret by reference and
    /// compose each route URL from it; the pod spec holds the variable's name only.
    #[test]
    fn a_cluster_gets_its_route_secret_by_reference_only() {
        let c = built(3);
        let secret = &c.generated_secrets[0];
        assert_eq!(secret.name(), "js-routes");
        assert_eq!(secret.key, "password");
        let owners = secret.metadata.owner_references.as_ref().unwrap();
        assert_eq!(owners[0].uid, "u1", "goes with its JetStreamCluster");
        let env = c.template().unwrap().spec.as_ref().unwrap().containers[0]
            .env
            .clone()
            .unwrap();
        let at = |name: &str| env.iter().position(|e| e.name == name).unwrap();
        let password = &env[at("ROUTE_PASSWORD")];
        assert_eq!(password.value, None);
        let r = password
            .value_from
            .as_ref()
            .unwrap()
            .secret_key_ref
            .as_ref();
        assert_eq!(
            r.map(|r| (r.name.as_str(), r.key.as_str())),
            Some(("js-routes", "password"))
        );
        // The kubelet expands $(ROUTE_PASSWORD) only when it is defined earlier.
        assert!(at("ROUTE_PASSWORD") < at("ROUTE_0"));
        assert_eq!(
            env[at("ROUTE_2")].value.as_deref(),
            Some("nats-route://route:$(ROUTE_PASSWORD)@js-2.js-headless.bench.svc:6222")
        );
        let one = built(1);
        assert!(one.generated_secrets.is_empty(), "one server: no routes");
        let env = &one.template().unwrap().spec.as_ref().unwrap().containers[0].env;
        assert!(!env.iter().flatten().any(|e| e.name.starts_with("ROUTE_")));
    }
}
