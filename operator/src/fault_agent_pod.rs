//! The fault agent container (`spec.faultInjection.enabled`): `bench-runner fault-agent` beside
//! the server, in a pod that shares its process namespace, so the agent can SIGKILL the server
//! process (a `crash` fault) as the same non-root user, with no capability. It is driven only by
//! credentials the operator signs for this server object (`runner_api::control_auth`).
use crate::security::container_security_context;
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvVar, HTTPGetAction, Probe, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use runner_api::control_auth::PUBLIC_KEY_ENV;
use runner_api::fault_agent::{CONTAINER, FAULT_AGENT_PORT, SERVER_UID_ENV};
use std::collections::BTreeMap;

/// What a server pod needs to carry a fault agent.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultAgentPod {
    /// The server process's name as the kernel knows it (`/proc/<pid>/comm`).
    pub process: String,
    /// The bench-runner image (the agent is one of its commands).
    pub image: String,
    /// The operator's control public key.
    pub public_key: String,
    /// The server object's uid: the only scope whose credentials the agent obeys.
    pub server_uid: String,
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
        args: Some(vec![
            "fault-agent".into(),
            "--process".into(),
            a.process.clone(),
            "--listen".into(),
            format!("0.0.0.0:{FAULT_AGENT_PORT}"),
        ]),
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
        security_context: Some(container_security_context()),
        ..Container::default()
    }
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
        let r = c.resources.unwrap();
        assert_eq!(r.requests, r.limits, "keeps a Guaranteed pod Guaranteed");
    }
}
