//! The servers' pod template: nats-server with its config, pid, data and TLS volumes, HTTP
//! probes on the monitoring port, and lame duck mode on stop.
use super::super::nats_conf::{self, CLIENT_PORT, CLUSTER_PORT, MONITOR_PORT, PID_FILE, TLS_DIR};
use super::config_map::{config_name, CONFIG_FILE};
use super::env;
use super::service::headless_name;
use crate::meta::Owner;
use crate::operands::{merged, OperandDefaults};
use crate::run::faults::agent_pod::AgentNetwork;
use crate::server_pod::{
    container_port, empty_dir, mount, optional_secret_volume, pod_template, ServerPod,
};
use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, Container, ExecAction, HTTPGetAction, Lifecycle, LifecycleHandler,
    PodTemplateSpec, Probe, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use msgbench_crds::jetstream_cluster::{JetStreamClusterSpec, StorageType};

/// The image runs as root by default; the operator runs it as this uid.
pub const NATS_UID: i64 = 1000;

pub(super) fn template(
    spec: &JetStreamClusterSpec,
    owner: &Owner,
    conf: &str,
    operands: &OperandDefaults,
) -> PodTemplateSpec {
    let (mut volumes, mut mounts) = volumes(spec, owner);
    let lazy = (operands.faults.admit(spec.fault_injection.as_ref()))
        .is_ok_and(|s| s.is_some_and(|s| s.power_loss));
    let mut nats = container(spec, owner, Vec::new(), operands);
    if lazy && spec.jetstream.storage.type_ == StorageType::File {
        super::lazy_store::wrap(&mut nats, &mut volumes, &mut mounts);
    }
    nats.volume_mounts = Some([mounts, nats.volume_mounts.take().unwrap_or_default()].concat());
    pod_template(ServerPod {
        owner,
        uid: NATS_UID,
        container: nats,
        init_containers: Vec::new(),
        volumes,
        resources: &spec.resources,
        tuning: &spec.tuning,
        placement: &spec.placement,
        config: Some(conf),
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
    })
}

fn container(
    spec: &JetStreamClusterSpec,
    owner: &Owner,
    mounts: Vec<VolumeMount>,
    operands: &OperandDefaults,
) -> Container {
    let (name, namespace) = (owner.name.as_str(), owner.namespace.as_str());
    let headless = headless_name(name);
    Container {
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
                env::env(spec, &headless, namespace),
                env::route_env(name, namespace, &headless, spec.replicas),
            ]
            .concat(),
        ),
        volume_mounts: Some(mounts),
        startup_probe: Some(http_probe("/healthz", 2, 90)),
        readiness_probe: Some(http_probe("/healthz?js-enabled-only=true", 5, 3)),
        liveness_probe: Some(http_probe("/healthz?js-enabled-only=true", 30, 3)),
        lifecycle: Some(lame_duck_on_stop()),
        ..Container::default()
    }
}

/// nats.conf, the pid file's directory, the store (a claim for file storage, else memory) and
/// the TLS certificate.
fn volumes(spec: &JetStreamClusterSpec, owner: &Owner) -> (Vec<Volume>, Vec<VolumeMount>) {
    let mut volumes = vec![
        Volume {
            name: "config".into(),
            config_map: Some(ConfigMapVolumeSource {
                name: config_name(&owner.name),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        },
        empty_dir("pid", false),
    ];
    if spec.jetstream.storage.type_ != StorageType::File {
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
        // of `env` and names what is missing in the container status (see `tls_env`).
        volumes.push(optional_secret_volume(
            "tls",
            &tls.secret_name,
            &["tls.crt", "tls.key"],
        ));
        mounts.push(mount("tls", TLS_DIR, true));
    }
    (volumes, mounts)
}

/// Lame duck on stop. The image has no shell: the nats-server binary signals the server
/// through its pid file; SIGTERM is then ignored while lame duck runs.
fn lame_duck_on_stop() -> Lifecycle {
    Lifecycle {
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
