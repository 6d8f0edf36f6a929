//! The fault agent container (`spec.faultInjection.enabled`): `bench-runner fault-agent` beside
//! the server, in a pod that shares its process namespace, so the agent can SIGKILL the server
//! process (a `crash` fault) as the same non-root user, with no capability. It is driven only by
//! credentials the operator signs for this server object (`runner_api::control_auth`).
//!
//! With `spec.faultInjection.network` it also cuts the server's traffic (`partition`) with
//! nftables in the pod's network namespace: that takes CAP_NET_ADMIN, which Kubernetes grants a
//! non-root process only through file capabilities (and `allowPrivilegeEscalation: false` turns
//! those off), so this agent runs as uid 0 with exactly NET_ADMIN and KILL (to signal the
//! server's user), still without privilege escalation and with a read-only root.
//!
//! With `spec.faultInjection.powerLoss` the server runs under msgbench-lazyfs, whose control
//! socket (root's, mode 0600) the agent shares through an emptyDir: the agent then runs as uid 0
//! (the socket's owner) with no capability, and asks it for the power loss.
//!
//! Its port is fenced with the server's own ports, in the server's one NetworkPolicy
//! (`server::fence`): only the operator reaches it.
use crate::security::container_security_context;
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EnvVar, HTTPGetAction, Probe, ResourceRequirements,
    SecurityContext, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use runner_api::control_auth::PUBLIC_KEY_ENV;
use runner_api::fault_agent::{CONTAINER, FAULT_AGENT_PORT, LAZYFS_CONTROL_DIR, SERVER_UID_ENV};
use std::collections::BTreeMap;

/// What a server pod needs to carry a fault agent.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultAgentPod {
    /// The server process's name as the kernel knows it (`/proc/<pid>/comm`).
    pub process: String,
    /// The bench-runner image (the agent is one of its commands).
    pub image: String,
    /// The operator's control public keys (comma-separated: current, then previous).
    pub public_key: String,
    /// The server object's uid: the only scope whose credentials the agent obeys.
    pub server_uid: String,
    /// Set: the agent may also partition the server (`spec.faultInjection.network`).
    pub network: Option<AgentNetwork>,
    /// The server runs under msgbench-lazyfs (`spec.faultInjection.powerLoss`): the agent
    /// mounts [`LAZYFS_CONTROL_VOLUME`] to reach its control socket.
    pub power_loss: bool,
}

/// The emptyDir the server container (msgbench-lazyfs) and the agent share, at
/// [`LAZYFS_CONTROL_DIR`] in both.
pub const LAZYFS_CONTROL_VOLUME: &str = "lazyfs-control";

/// The server's ports a partition cuts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AgentNetwork {
    /// Ports the server's peers use (JetStream: the route port). Empty: a server without peers.
    pub peer_ports: Vec<i32>,
    /// Ports its clients connect to.
    pub client_ports: Vec<i32>,
}

fn port_list(ports: &[i32]) -> String {
    ports
        .iter()
        .map(i32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Non-root without capabilities; with network faults uid 0 with NET_ADMIN and KILL only; with
/// power loss alone uid 0 with no capability (to open the wrapper's root-owned socket).
fn agent_security_context(network: bool, power_loss: bool) -> SecurityContext {
    let mut sc = container_security_context();
    if power_loss && !network {
        sc.run_as_user = Some(0);
        sc.run_as_non_root = Some(false);
    }
    if network {
        sc.run_as_user = Some(0);
        sc.run_as_non_root = Some(false);
        sc.capabilities = Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            add: Some(vec!["NET_ADMIN".into(), "KILL".into()]),
        });
    }
    sc
}

/// The agent container: idle but for a request now and then, so a small fixed share (requests
/// equal limits: a pinned, Guaranteed server pod stays Guaranteed).
pub fn container(a: &FaultAgentPod, pull_policy: &str) -> Container {
    let amounts = BTreeMap::from([
        ("cpu".to_string(), Quantity("20m".into())),
        ("memory".to_string(), Quantity("32Mi".into())),
    ]);
    let env = |name: &str, value: &str| EnvVar {
        name: name.into(),
        value: Some(value.into()),
        ..EnvVar::default()
    };
    Container {
        name: CONTAINER.into(),
        image: Some(a.image.clone()),
        image_pull_policy: Some(pull_policy.into()),
        args: Some(args(a)),
        env: Some(vec![
            env(PUBLIC_KEY_ENV, &a.public_key),
            env(SERVER_UID_ENV, &a.server_uid),
        ]),
        ports: Some(vec![ContainerPort {
            name: Some("fault-agent".into()),
            container_port: FAULT_AGENT_PORT.into(),
            ..ContainerPort::default()
        }]),
        readiness_probe: Some(Probe {
            http_get: Some(HTTPGetAction {
                path: Some("/ready".into()),
                port: IntOrString::Int(FAULT_AGENT_PORT.into()),
                ..HTTPGetAction::default()
            }),
            period_seconds: Some(10),
            ..Probe::default()
        }),
        resources: Some(ResourceRequirements {
            requests: Some(amounts.clone()),
            limits: Some(amounts),
            ..ResourceRequirements::default()
        }),
        security_context: Some(agent_security_context(a.network.is_some(), a.power_loss)),
        volume_mounts: a.power_loss.then(|| {
            vec![VolumeMount {
                name: LAZYFS_CONTROL_VOLUME.into(),
                mount_path: LAZYFS_CONTROL_DIR.into(),
                ..VolumeMount::default()
            }]
        }),
        ..Container::default()
    }
}

fn args(a: &FaultAgentPod) -> Vec<String> {
    let mut args = vec![
        "fault-agent".into(),
        "--process".into(),
        a.process.clone(),
        "--listen".into(),
        format!("0.0.0.0:{FAULT_AGENT_PORT}"),
    ];
    if let Some(n) = &a.network {
        args.push("--network".into());
        for (flag, ports) in [
            ("--peer-ports", &n.peer_ports),
            ("--client-ports", &n.client_ports),
        ] {
            if !ports.is_empty() {
                args.extend([flag.to_string(), port_list(ports)]);
            }
        }
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_gets_the_key_the_scope_and_nothing_more() {
        let a = FaultAgentPod {
            process: "nats-server".into(),
            image: "r/bench-runner:1".into(),
            public_key: "cHVi".into(),
            server_uid: "u-9".into(),
            network: None,
            power_loss: false,
        };
        let c = container(&a, "IfNotPresent");
        let args = c.args.clone().unwrap();
        assert_eq!(args[..3], ["fault-agent", "--process", "nats-server"]);
        let env: Vec<_> = (c.env.iter().flatten())
            .map(|e| (e.name.as_str(), e.value.as_deref().unwrap()))
            .collect();
        assert_eq!(env, [(PUBLIC_KEY_ENV, "cHVi"), (SERVER_UID_ENV, "u-9")]);
        let sc = c.security_context.unwrap();
        assert_eq!(sc.privileged, None);
        assert_eq!(sc.read_only_root_filesystem, Some(true));
        assert_eq!(sc.run_as_non_root, Some(true));
        assert_eq!(sc.capabilities.unwrap().add, None);
        assert!(!args.contains(&"--network".to_string()));
        let r = c.resources.unwrap();
        assert_eq!(r.requests, r.limits, "keeps a Guaranteed pod Guaranteed");
    }

    #[test]
    fn a_network_agent_is_root_with_net_admin_and_kill_only_and_knows_the_ports() {
        let a = FaultAgentPod {
            process: "nats-server".into(),
            image: "r/bench-runner:1".into(),
            public_key: "cHVi".into(),
            server_uid: "u-9".into(),
            network: Some(AgentNetwork {
                peer_ports: vec![6222],
                client_ports: vec![4222, 8080],
            }),
            power_loss: false,
        };
        let c = container(&a, "IfNotPresent");
        let args = c.args.unwrap();
        assert_eq!(
            args[5..],
            [
                "--network",
                "--peer-ports",
                "6222",
                "--client-ports",
                "4222,8080"
            ]
        );
        let sc = c.security_context.unwrap();
        assert_eq!((sc.run_as_user, sc.run_as_non_root), (Some(0), Some(false)));
        let caps = sc.capabilities.unwrap();
        assert_eq!(caps.drop, Some(vec!["ALL".to_string()]));
        assert_eq!(
            caps.add,
            Some(vec!["NET_ADMIN".to_string(), "KILL".to_string()])
        );
        assert_eq!(sc.allow_privilege_escalation, Some(false));
        assert_eq!(sc.read_only_root_filesystem, Some(true));
        assert_eq!(sc.privileged, None);
    }

    #[test]
    fn a_power_loss_agent_is_root_without_capabilities_and_mounts_the_control_dir() {
        let a = FaultAgentPod {
            process: "nats-server".into(),
            image: "r/bench-runner:1".into(),
            public_key: "cHVi".into(),
            server_uid: "u-9".into(),
            network: None,
            power_loss: true,
        };
        let c = container(&a, "IfNotPresent");
        let sc = c.security_context.unwrap();
        assert_eq!((sc.run_as_user, sc.run_as_non_root), (Some(0), Some(false)));
        assert_eq!(sc.capabilities.and_then(|c| c.add), None);
        assert_eq!(sc.privileged, None);
        assert_eq!(sc.allow_privilege_escalation, Some(false));
        let mounts = c.volume_mounts.unwrap();
        assert_eq!(
            (mounts[0].name.as_str(), mounts[0].mount_path.as_str()),
            (LAZYFS_CONTROL_VOLUME, LAZYFS_CONTROL_DIR)
        );
    }
}
