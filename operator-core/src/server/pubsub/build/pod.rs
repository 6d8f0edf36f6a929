//! The server's pod template: the contract environment (or sockudo's), size-limited scratch
//! volumes and TCP probes on the client port.
use super::super::sockudo;
use crate::meta::Owner;
use crate::operands::{merged, DefaultImages, OperandDefaults};
use crate::server_pod::{
    container_port, empty_dir_limited, mount, pod_template, value_env, ServerPod, DEFAULT_UID,
};
use crate::tuning::threads;
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvVar, PodTemplateSpec, Probe, TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use msgbench_crds::common::Resources;
use msgbench_crds::pubsub_server::{DatabaseMode, PubSubProtocol, PubSubServerSpec};

const DATA_DIR: &str = "/data";

/// `sizeLimit` of the `/data` emptyDir that holds the `database: file` store. The spec has no
/// storage field, so this is fixed: far above what a benchmark's message store reaches, and a
/// runaway database gets the pod evicted instead of filling the node's disk.
pub const DATA_SIZE_LIMIT: &str = "1Gi";

/// `sizeLimit` of `/tmp` (nothing large is written there).
pub const TMP_SIZE_LIMIT: &str = "64Mi";

/// What the server may keep in memory (kept messages, page cache), from the container's memory
/// limit: 3/8 of it, which measured 75-80 MiB of RSS at 48 MiB of 128Mi with 1 MiB publishes
/// (copies in flight and the allocator take the rest), and never under the server's own
/// 16 MiB floor. No limit: the server's default.
pub fn memory_budget(res: &Resources) -> Option<u64> {
    let limit = crate::tuning::bytes(res.limits.as_ref()?.memory.as_ref()?)?;
    Some((limit / 8 * 3).max(16 << 20))
}

/// The image to run: the spec's, else the operator's default for the protocol (sockudo serves
/// pusher, the reference server everything else).
pub fn image(spec: &PubSubServerSpec, defaults: &DefaultImages) -> String {
    match (&spec.image, spec.protocol) {
        (Some(image), _) => image.clone(),
        (None, PubSubProtocol::Pusher) => defaults.sockudo.clone(),
        (None, _) => defaults.pubsub_server.clone(),
    }
}

pub(super) fn template(
    spec: &PubSubServerSpec,
    owner: &Owner,
    operands: &OperandDefaults,
) -> PodTemplateSpec {
    let pusher = spec.protocol == PubSubProtocol::Pusher;
    let container = Container {
        name: "pubsub-server".into(),
        image: Some(image(spec, &operands.images)),
        ports: Some(ports(spec.port, pusher)),
        env: Some(if pusher {
            sockudo::env(spec)
        } else {
            env(spec)
        }),
        volume_mounts: Some(vec![
            mount("data", DATA_DIR, false),
            mount("tmp", "/tmp", false),
        ]),
        startup_probe: Some(probe(1, 60)),
        readiness_probe: Some(probe(5, 3)),
        liveness_probe: Some(probe(20, 3)),
        ..Container::default()
    };
    pod_template(ServerPod {
        owner,
        uid: DEFAULT_UID,
        container,
        init_containers: Vec::new(),
        volumes: vec![
            empty_dir_limited("data", DATA_SIZE_LIMIT),
            empty_dir_limited("tmp", TMP_SIZE_LIMIT),
        ],
        resources: &spec.resources,
        tuning: &spec.tuning,
        placement: &spec.placement,
        config: None,
        termination_grace_period_seconds: Some(30),
        pod: merged(&operands.server_pods, &spec.pod),
        image_pull_policy: &operands.image_pull_policy,
        fault_agent: None,
    })
}

/// The reference server's contract environment.
fn env(spec: &PubSubServerSpec) -> Vec<EnvVar> {
    let database = match spec.database {
        DatabaseMode::Memory => ":memory:".to_string(),
        DatabaseMode::File => format!("{DATA_DIR}/pubsub.db"),
    };
    let mut env = vec![
        value_env("PORT", spec.port.to_string()),
        value_env("EMIT_MODE", enum_str(&spec.emit_mode)),
        value_env("DATABASE_FILE", database),
        value_env("CACHE_TTL_SECONDS", spec.cache_ttl_seconds.to_string()),
        value_env("RUST_LOG", enum_str(&spec.log_level)),
    ];
    if let Some(t) = threads(&spec.tuning, &spec.resources) {
        env.push(value_env("WORKER_THREADS", t.to_string()));
    }
    if let Some(b) = memory_budget(&spec.resources) {
        env.push(value_env("MEMORY_BUDGET_BYTES", b.to_string()));
    }
    if spec.protocol == PubSubProtocol::Websocket {
        env.push(value_env(
            "WS_MODE",
            enum_str(&spec.ws_mode.unwrap_or_default()),
        ));
    }
    env
}

fn enum_str<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The client port; sockudo serves its metrics apart (server usage reads them).
fn ports(port: i32, pusher: bool) -> Vec<ContainerPort> {
    let mut p = vec![container_port("http", port)];
    if pusher {
        p.push(container_port("metrics", sockudo::METRICS_PORT));
    }
    p
}

fn probe(period: i32, failures: i32) -> Probe {
    Probe {
        tcp_socket: Some(TCPSocketAction {
            port: IntOrString::String("http".into()),
            ..TCPSocketAction::default()
        }),
        period_seconds: Some(period),
        failure_threshold: Some(failures),
        ..Probe::default()
    }
}
