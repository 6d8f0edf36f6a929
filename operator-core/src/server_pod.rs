//! The hardened pod template every server workload shares: contract labels, security contexts,
//! Guaranteed resources when pinned, sysctls, placement, and a config hash that rolls pods when
//! their configuration changes.

use crate::meta::{Owner, ANNOTATION_TEMPLATE_HASH};
use crate::operands::customize;
use crate::placement::pod_placement;
use crate::run::faults::agent_pod::{AgentNetwork, FaultAgentPod};
use crate::security::{container_security_context, pod_security_context};
use crate::tuning::{container_resources, pod_sysctls};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource, KeyToPath, PodSpec,
    PodTemplateSpec, SecretKeySelector, SecretVolumeSource, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use msgbench_crds::common::{Placement, Resources, Tuning};
use msgbench_crds::PodCustomization;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

pub const ANNOTATION_CONFIG_HASH: &str = "msgbench.dev/config-hash";
/// Non-root uid for images that do not name one.
pub const DEFAULT_UID: i64 = 65532;

pub struct ServerPod<'a> {
    pub owner: &'a Owner,
    /// Non-root uid (and gid/fsGroup) the server runs as.
    pub uid: i64,
    /// The server container; resources and security context are filled in here.
    pub container: Container,
    /// Run to completion before the server starts, with the server's resources (the pod keeps
    /// its QoS class) and security context.
    pub init_containers: Vec<Container>,
    pub volumes: Vec<Volume>,
    pub resources: &'a Resources,
    pub tuning: &'a Tuning,
    pub placement: &'a Placement,
    /// Content whose change must restart the pods (config file, env-relevant spec).
    pub config: Option<&'a str>,
    pub termination_grace_period_seconds: Option<i64>,
    /// The operator's defaults for server pods with the CR's `spec.pod` added.
    pub pod: PodCustomization,
    pub image_pull_policy: &'a str,
    /// A fault agent beside the server (`spec.faultInjection.enabled`, where the operator's
    /// install allows it); the pod then shares its process namespace.
    pub fault_agent: Option<FaultAgentPod>,
}

impl ServerPod<'_> {
    /// The fault agent for `process` that `spec` asks for, when the operator's fault policy
    /// allows all of it (`operands.faults`; a refusal is the status's business, not the
    /// pod's); `ports` are what a partition cuts.
    pub fn agent_if(
        spec: Option<&msgbench_crds::benchmark_run::FaultAgentSpec>,
        process: &str,
        ports: AgentNetwork,
        owner: &Owner,
        operands: &crate::operands::OperandDefaults,
    ) -> Option<FaultAgentPod> {
        let spec = operands.faults.admit(spec).ok().flatten()?;
        Some(FaultAgentPod {
            process: process.into(),
            image: operands.images.bench_runner.clone(),
            public_key: operands.control_public_key.clone(),
            server_uid: owner.owner_ref.uid.clone(),
            network: spec.network.then_some(ports),
            power_loss: spec.power_loss,
        })
    }
}

pub fn config_hash(content: &str) -> String {
    config_hash_bytes(content.as_bytes())
}

pub fn pod_template(p: ServerPod<'_>) -> PodTemplateSpec {
    let mut t = unhashed_pod_template(p);
    let digest = serde_json::to_vec(&t)
        .map(|b| config_hash_bytes(&b))
        .unwrap_or_default();
    t.metadata
        .get_or_insert_with(ObjectMeta::default)
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(ANNOTATION_TEMPLATE_HASH.into(), digest);
    t
}

fn config_hash_bytes(b: &[u8]) -> String {
    hex::encode(&Sha256::digest(b)[..16])
}

fn unhashed_pod_template(p: ServerPod<'_>) -> PodTemplateSpec {
    let harden = |mut c: Container| {
        c.resources = container_resources(p.resources, p.tuning);
        // A container that set its own (the lazy file system's privileged wrapper) keeps it.
        c.security_context
            .get_or_insert_with(container_security_context);
        c.image_pull_policy = Some(p.image_pull_policy.into());
        c
    };
    let container = harden(p.container);
    let init_containers: Vec<Container> = p.init_containers.into_iter().map(harden).collect();
    let placement = pod_placement(Some(p.placement), &p.owner.selector_labels());
    let annotations: BTreeMap<String, String> = p
        .config
        .map(|c| BTreeMap::from([(ANNOTATION_CONFIG_HASH.to_string(), config_hash(c))]))
        .unwrap_or_default();
    let mut t = PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(p.owner.labels()),
            annotations: (!annotations.is_empty()).then_some(annotations),
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            share_process_namespace: p.fault_agent.is_some().then_some(true),
            init_containers: (!init_containers.is_empty()).then_some(init_containers),
            containers: std::iter::once(container)
                .chain(
                    (p.fault_agent.iter())
                        .map(|a| crate::run::faults::agent_pod::container(a, p.image_pull_policy)),
                )
                .collect(),
            volumes: (!p.volumes.is_empty()).then_some(p.volumes),
            security_context: Some(pod_security_context(p.uid, pod_sysctls(p.tuning))),
            // Servers never talk to the API server.
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            termination_grace_period_seconds: p.termination_grace_period_seconds,
            node_selector: placement.node_selector,
            tolerations: placement.tolerations,
            affinity: placement.affinity,
            ..PodSpec::default()
        }),
    };
    customize(&mut t, &p.pod);
    t
}

pub fn empty_dir(name: &str, in_memory: bool) -> Volume {
    Volume {
        name: name.into(),
        empty_dir: Some(EmptyDirVolumeSource {
            medium: in_memory.then(|| "Memory".to_string()),
            ..EmptyDirVolumeSource::default()
        }),
        ..Volume::default()
    }
}

/// A disk emptyDir the kubelet evicts the pod over, instead of letting it fill the node's disk.
pub fn empty_dir_limited(name: &str, size_limit: &str) -> Volume {
    let mut v = empty_dir(name, false);
    if let Some(d) = v.empty_dir.as_mut() {
        d.size_limit = Some(Quantity(size_limit.into()));
    }
    v
}

/// [`secret_volume`] that mounts what there is: for a Secret whose presence and keys the
/// kubelet checks through environment references of the same container.
pub fn optional_secret_volume(name: &str, secret: &str, keys: &[&str]) -> Volume {
    let mut v = secret_volume(name, secret, keys);
    if let Some(s) = v.secret.as_mut() {
        s.optional = Some(true);
    }
    v
}

/// References to the public parts of the TLS Secret: the certificate and the CA the runners
/// verify it with. A missing Secret or key of a volume shows only in Events, which the operator
/// cannot read (it may read neither Secrets nor Events); of an environment reference it shows in
/// the container status (CreateContainerConfigError: `secret "x" not found`, `couldn't find key
/// ca.crt in Secret ns/x`), which the operator reports. The servers ignore these variables.
pub fn tls_env(secret: &str) -> Vec<EnvVar> {
    [
        ("MSGBENCH_TLS_CERT", "tls.crt"),
        ("MSGBENCH_TLS_CA", "ca.crt"),
    ]
    .into_iter()
    .map(|(var, key)| secret_env(var, secret, key))
    .collect()
}

/// Volume `name` with only `keys` of Secret `secret` (each a file of its own name), readable by
/// the pod's group (fsGroup) and nobody else; a missing Secret or key keeps the pod from
/// starting instead of running without it.
pub fn secret_volume(name: &str, secret: &str, keys: &[&str]) -> Volume {
    Volume {
        name: name.into(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret.into()),
            items: Some(
                keys.iter()
                    .map(|k| KeyToPath {
                        key: (*k).into(),
                        path: (*k).into(),
                        ..KeyToPath::default()
                    })
                    .collect(),
            ),
            default_mode: Some(0o440),
            optional: Some(false),
        }),
        ..Volume::default()
    }
}

pub fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        read_only: read_only.then_some(true),
        ..VolumeMount::default()
    }
}

/// `name` set to `value` in the pod spec.
pub fn value_env(name: &str, value: String) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value),
        ..EnvVar::default()
    }
}

/// `name` from `key` of Secret `secret` (required), never a value.
pub fn secret_env(name: &str, secret: &str, key: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.into(),
                key: key.into(),
                optional: Some(false),
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

/// A named container port: probes, Services and the fence refer to it by name.
pub fn container_port(name: &str, port: i32) -> ContainerPort {
    ContainerPort {
        name: Some(name.into()),
        container_port: port,
        ..ContainerPort::default()
    }
}
