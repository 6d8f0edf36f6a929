//! PubSubServer children: Service and Deployment with the contract env
//! (PORT, EMIT_MODE, DATABASE_FILE, CACHE_TTL_SECONDS, WORKER_THREADS, WS_MODE, RUST_LOG).

use crate::meta::Owner;
use crate::operands::{merged, DefaultImages, OperandDefaults};
use crate::server::children::Children;
use crate::server::fence::{self, Fence, PeerPorts};
use crate::server::jetstream::build::value_env;
use crate::server::mqtt::build::{recreate_when_pinned, DEFAULT_UID};
use crate::server_pod::{empty_dir_limited, mount, pod_template, ServerPod};
use crate::tuning::threads;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, Probe, Service, ServicePort, ServiceSpec, TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use msgbench_crds::common::Resources;
use msgbench_crds::pubsub_server::{DatabaseMode, PubSubProtocol, PubSubServer, PubSubServerSpec};

const DATA_DIR: &str = "/data";

/// `sizeLimit` of the `/data` emptyDir that holds the `database: file` store. The spec has no
/// storage field, so this is fixed: far above what a benchmark's message store reaches, and a
/// runaway database gets the pod evicted instead of filling the node's disk.
pub const DATA_SIZE_LIMIT: &str = "1Gi";

/// `sizeLimit` of `/tmp` (nothing large is written there).
pub const TMP_SIZE_LIMIT: &str = "64Mi";

fn enum_str<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// What the server may keep in memory (kept messages, page cache), from the container's memory
/// limit: 3/8 of it, which measured 75-80 MiB of RSS at 48 MiB of 128Mi with 1 MiB publishes
/// (copies in flight and the allocator take the rest), and never under the server's own
/// 16 MiB floor. No limit: the server's default.
pub fn memory_budget(res: &Resources) -> Option<u64> {
    let limit = crate::tuning::bytes(res.limits.as_ref()?.memory.as_ref()?)?;
    Some((limit / 8 * 3).max(16 << 20))
}

/// The client port; sockudo serves its metrics apart (server usage reads them).
fn ports(port: i32, pusher: bool) -> Vec<ContainerPort> {
    let named = |name: &str, container_port| ContainerPort {
        name: Some(name.into()),
        container_port,
        ..ContainerPort::default()
    };
    let mut p = vec![named("http", port)];
    if pusher {
        p.push(named("metrics", super::sockudo::METRICS_PORT));
    }
    p
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

pub fn build(
    pss: &PubSubServer,
    owner: &Owner,
    replicas: i32,
    operands: &OperandDefaults,
) -> Children {
    let spec = &pss.spec;
    let name = owner.name.as_str();
    let service = Service {
        metadata: owner.child_meta(name),
        spec: Some(ServiceSpec {
            selector: Some(owner.selector_labels()),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: spec.port,
                target_port: Some(IntOrString::String("http".into())),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    };
    let database = match spec.database {
        DatabaseMode::Memory => ":memory:".to_string(),
        DatabaseMode::File => format!("{DATA_DIR}/pubsub.db"),
    };
    let pusher = spec.protocol == PubSubProtocol::Pusher;
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
    if pusher {
        env = super::sockudo::env(spec);
    }
    let probe = |period: i32, failures: i32| Probe {
        tcp_socket: Some(TCPSocketAction {
            port: IntOrString::String("http".into()),
            ..TCPSocketAction::default()
        }),
        period_seconds: Some(period),
        failure_threshold: Some(failures),
        ..Probe::default()
    };
    let container = Container {
        name: "pubsub-server".into(),
        image: Some(image(spec, &operands.images)),
        ports: Some(ports(spec.port, pusher)),
        env: Some(env),
        volume_mounts: Some(vec![
            mount("data", DATA_DIR, false),
            mount("tmp", "/tmp", false),
        ]),
        startup_probe: Some(probe(1, 60)),
        readiness_probe: Some(probe(5, 3)),
        liveness_probe: Some(probe(20, 3)),
        ..Container::default()
    };
    let template = pod_template(ServerPod {
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
    });
    let policy =
        fence::network_policy(owner, &pubsub_fence(spec.port, pusher), &template, operands);
    let deployment = Deployment {
        metadata: owner.child_meta(name),
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(owner.selector_labels()),
                ..LabelSelector::default()
            },
            template,
            strategy: Some(recreate_when_pinned(spec.tuning.cpu_pinning)),
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    };
    Children {
        services: vec![service],
        deployments: vec![deployment],
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
            true => vec![super::sockudo::METRICS_PORT],
            false => Vec::new(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server_pod::empty_dir;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use msgbench_crds::common::ResourceAmounts;

    fn limited(memory: &str) -> Resources {
        Resources {
            requests: None,
            limits: Some(ResourceAmounts {
                cpu: None,
                memory: Some(Quantity(memory.into())),
            }),
        }
    }

    #[test]
    fn the_memory_budget_follows_the_limit_with_a_floor() {
        assert_eq!(memory_budget(&limited("128Mi")), Some(48 << 20));
        assert_eq!(memory_budget(&limited("1Gi")), Some(384 << 20));
        assert_eq!(memory_budget(&limited("32Mi")), Some(16 << 20));
        assert_eq!(memory_budget(&Resources::default()), None);
    }

    #[test]
    fn the_file_database_volume_has_a_size_limit() {
        let mut pss = PubSubServer::new(
            "p",
            serde_json::from_value(serde_json::json!({"database": "file"})).unwrap(),
        );
        pss.metadata.namespace = Some("bench".into());
        pss.metadata.uid = Some("u1".into());
        let owner = Owner::of(&pss, "pubsubserver").unwrap();
        let children = build(&pss, &owner, 1, &OperandDefaults::default());
        let pod = children.deployments[0]
            .spec
            .as_ref()
            .unwrap()
            .template
            .clone();
        let volumes = pod.spec.unwrap().volumes.unwrap();
        let limit = |name: &str| {
            let v = volumes.iter().find(|v| v.name == name).unwrap();
            v.empty_dir.as_ref().unwrap().size_limit.clone()
        };
        assert_eq!(limit("data"), Some(Quantity(DATA_SIZE_LIMIT.into())));
        assert_eq!(limit("tmp"), Some(Quantity(TMP_SIZE_LIMIT.into())));
        assert_eq!(empty_dir("x", false).empty_dir.unwrap().size_limit, None);
    }
}
