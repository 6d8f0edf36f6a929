//! Pure builders for a run's children: the agent ConfigMap and the Indexed Job of runner pods.
//! Runners need no API access (no service-account token), run Pod Security "restricted", and keep off the
//! target's server nodes where the cluster allows it.
// Re-exported: most of the run controller names them through the builders.
use crate::meta::{LABEL_COMPONENT, LABEL_INSTANCE, LABEL_NAME};
use crate::operands::{customize, merged, OperandDefaults};
use crate::placement::pod_placement;
pub use crate::run::identity::{RunIdentity, KIND_LABEL, LABEL_GENERATION};
use crate::run::target::target_auth::RunnerSecrets;
use crate::security::container_security_context;
use crate::tuning::container_resources;
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Affinity, ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, EnvVar, HTTPGetAction,
    PodAffinityTerm, PodAntiAffinity, PodSecurityContext, PodSpec, PodTemplateSpec, Probe,
    SeccompProfile, Volume, VolumeMount, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use msgbench_crds::benchmark_run::{BenchmarkRunSpec, ServerKind};
use msgbench_crds::common::Tuning;
use msgbench_crds::PodCustomization;
use runner_api::agent::{AgentConfig, RunIsolation, AGENT_PORT, METRICS_PORT, METRICS_PORT_NAME};
use std::collections::BTreeMap;

pub const CONFIG_FILE: &str = "agent.yaml";
const CONFIG_DIR: &str = "/etc/msgbench";
/// The distroless nonroot user of the bench-runner image.
const RUNNER_UID: i64 = 65532;

pub fn agent_config(spec: &BenchmarkRunSpec, target_url: &str) -> AgentConfig {
    AgentConfig {
        target: target_url.into(),
        workload: spec.workload.clone(),
        trials: spec.trials.max(1) as u32,
        settle_seconds: spec.settle_seconds.max(0) as u32,
        barrier_timeout_seconds: spec.barrier_timeout_seconds.max(1) as u32,
        connect_timeout_seconds: spec.connect_timeout_seconds.max(1) as u32,
        schedule: Vec::new(),
        // One runner needs no barrier between trials; several start each trial together. With
        // faults the operator releases every trial, so it knows when each one's fault is due;
        // with stopWhen, so the runners wait between rounds while it decides.
        trial_barrier: spec.runners.count > 1
            || !spec.faults.is_empty()
            || spec.stop_when.is_some(),
        results_hold_seconds: spec.runners.results_hold_seconds.max(0) as u32,
        target_auth: Vec::new(),
        target_tls: Vec::new(),
        isolation: None,
        runners: spec.runners.count.max(1) as u32,
    }
}

/// A run's wire identity, from its uid (random) and spec generation: trial `n` of this run
/// uses subjects `<prefix>-<id>-t<n>` and its own payload tag, so runs sharing a server never
/// see each other's messages, nor a generation its predecessor's.
pub fn run_isolation(uid: &str, generation: i64) -> RunIsolation {
    // In runner-api, beside the stream matcher the runner's stream sweep uses.
    RunIsolation::for_run(uid, generation)
}

pub fn config_map(id: &RunIdentity, cfg: &AgentConfig) -> Result<ConfigMap, serde_norway::Error> {
    Ok(ConfigMap {
        metadata: id.meta(),
        data: Some(BTreeMap::from([(
            CONFIG_FILE.to_string(),
            serde_norway::to_string(cfg)?,
        )])),
        ..ConfigMap::default()
    })
}

/// Labels of the target's server pods (for anti-affinity and the environment report).
pub fn server_selector(kind: ServerKind, name: &str) -> BTreeMap<String, String> {
    let kind_label = match kind {
        ServerKind::JetStreamCluster => "jetstreamcluster",
        ServerKind::MqttBroker => "mqttbroker",
        ServerKind::PubSubServer => "pubsubserver",
    };
    BTreeMap::from([
        (LABEL_NAME.to_string(), kind_label.to_string()),
        (LABEL_INSTANCE.to_string(), name.to_string()),
        (LABEL_COMPONENT.to_string(), "server".to_string()),
    ])
}

/// The runner Job: Indexed (index + 1 = runner id), no retries (a failed runner fails the run,
/// never a silent re-run), bounded by `deadline_seconds`.
/// `secrets`: what the runners take from the targets' Secrets, by reference (see `target_auth`).
/// `operands`: the runner image and pod additions a spec leaves to the operator.
pub fn job(
    id: &RunIdentity,
    spec: &BenchmarkRunSpec,
    server: Option<&BTreeMap<String, String>>,
    deadline_seconds: i64,
    secrets: &RunnerSecrets,
    operands: &OperandDefaults,
) -> Job {
    let r = &spec.runners;
    Job {
        metadata: id.meta(),
        spec: Some(JobSpec {
            completion_mode: Some("Indexed".into()),
            completions: Some(r.count),
            parallelism: Some(r.count),
            backoff_limit: Some(0),
            active_deadline_seconds: Some(deadline_seconds),
            template: runner_pod(id, spec, server, secrets, operands),
            ..JobSpec::default()
        }),
        ..Job::default()
    }
}

/// Labels and annotations that keep the common service meshes' sidecars out of runner pods
/// (Istio, Kuma: labels; Linkerd, Consul, Open Service Mesh: annotations). A proxy in the path
/// would change the latency being measured and sit in front of the runner's control port. The
/// operator's defaults and the run's `spec.runners.pod` may override each key.
pub fn mesh_opt_out() -> PodCustomization {
    let map = |kv: &[(&str, &str)]| {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    PodCustomization {
        labels: map(&[
            ("sidecar.istio.io/inject", "false"),
            ("kuma.io/sidecar-injection", "disabled"),
        ]),
        annotations: map(&[
            ("linkerd.io/inject", "disabled"),
            ("consul.hashicorp.com/connect-inject", "false"),
            ("openservicemesh.io/sidecar-injection", "disabled"),
        ]),
        ..PodCustomization::default()
    }
}

fn runner_pod(
    id: &RunIdentity,
    spec: &BenchmarkRunSpec,
    server: Option<&BTreeMap<String, String>>,
    secrets: &RunnerSecrets,
    operands: &OperandDefaults,
) -> PodTemplateSpec {
    let r = &spec.runners;
    let place = pod_placement(Some(&r.placement), &id.labels());
    let mut t = PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(id.labels()),
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            restart_policy: Some("Never".into()),
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            security_context: Some(runner_security_context()),
            node_selector: place.node_selector,
            tolerations: place.tolerations,
            affinity: avoid_servers(place.affinity, r.avoid_server_nodes, server),
            containers: vec![runner_container(spec, secrets, operands)],
            volumes: Some(runner_volumes(id, secrets)),
            ..PodSpec::default()
        }),
    };
    let defaults = merged(&mesh_opt_out(), &operands.runner_pods);
    customize(&mut t, &merged(&defaults, &r.pod));
    t
}

/// Runners prefer nodes without the target's servers (when asked and the target is known).
fn avoid_servers(
    affinity: Option<Affinity>,
    avoid: bool,
    server: Option<&BTreeMap<String, String>>,
) -> Option<Affinity> {
    let mut affinity = affinity.unwrap_or_default();
    if let (true, Some(server)) = (avoid, server) {
        let anti = affinity
            .pod_anti_affinity
            .get_or_insert_with(PodAntiAffinity::default);
        anti.preferred_during_scheduling_ignored_during_execution
            .get_or_insert_with(Vec::new)
            .push(WeightedPodAffinityTerm {
                weight: 100,
                pod_affinity_term: PodAffinityTerm {
                    label_selector: Some(LabelSelector {
                        match_labels: Some(server.clone()),
                        ..LabelSelector::default()
                    }),
                    topology_key: "kubernetes.io/hostname".into(),
                    ..PodAffinityTerm::default()
                },
            });
    }
    (affinity != Affinity::default()).then_some(affinity)
}

pub(crate) fn runner_security_context() -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(RUNNER_UID),
        run_as_group: Some(RUNNER_UID),
        // The token file is group-readable for this group only.
        fs_group: Some(RUNNER_UID),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".into(),
            ..SeccompProfile::default()
        }),
        ..PodSecurityContext::default()
    }
}

fn runner_container(
    spec: &BenchmarkRunSpec,
    secrets: &RunnerSecrets,
    operands: &OperandDefaults,
) -> Container {
    let r = &spec.runners;
    let image = r
        .image
        .clone()
        .unwrap_or_else(|| operands.images.bench_runner.clone());
    let mount = |name: &str, path: &str| VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        read_only: Some(true),
        ..VolumeMount::default()
    };
    Container {
        name: "runner".into(),
        image: Some(image),
        image_pull_policy: Some(operands.image_pull_policy.clone()),
        args: Some(vec![
            "agent".into(),
            "--config".into(),
            format!("{CONFIG_DIR}/{CONFIG_FILE}"),
            "--listen".into(),
            format!("0.0.0.0:{AGENT_PORT}"),
        ]),
        env: Some(
            [EnvVar {
                name: "RUST_LOG".into(),
                value: Some(r.log_level.as_filter().into()),
                ..EnvVar::default()
            }]
            .into_iter()
            .chain(secrets.env.iter().cloned())
            .collect(),
        ),
        // The runner serves /metrics on METRICS_PORT by default; no flag is passed, so a run
        // naming an older runner image still starts. The chart's PodMonitor scrapes the name.
        ports: Some(vec![
            ContainerPort {
                name: Some("agent".into()),
                container_port: AGENT_PORT.into(),
                ..ContainerPort::default()
            },
            ContainerPort {
                name: Some(METRICS_PORT_NAME.into()),
                container_port: METRICS_PORT.into(),
                ..ContainerPort::default()
            },
        ]),
        readiness_probe: Some(Probe {
            http_get: Some(HTTPGetAction {
                path: Some("/ready".into()),
                port: IntOrString::Int(AGENT_PORT.into()),
                ..HTTPGetAction::default()
            }),
            period_seconds: Some(1),
            failure_threshold: Some(1),
            ..Probe::default()
        }),
        resources: container_resources(&r.resources, &Tuning::default()),
        security_context: Some(container_security_context()),
        // The last log lines become the termination message of a failed runner.
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        volume_mounts: Some(
            [mount("config", CONFIG_DIR)]
                .into_iter()
                .chain(secrets.mounts.iter().cloned())
                .collect(),
        ),
        ..Container::default()
    }
}

fn runner_volumes(id: &RunIdentity, secrets: &RunnerSecrets) -> Vec<Volume> {
    [Volume {
        name: "config".into(),
        config_map: Some(ConfigMapVolumeSource {
            name: id.job_name(),
            ..ConfigMapVolumeSource::default()
        }),
        ..Volume::default()
    }]
    .into_iter()
    .chain(secrets.volumes.iter().cloned())
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use msgbench_crds::benchmark_run::BenchmarkRun;

    pub fn sample() -> BenchmarkRun {
        serde_norway::from_str(
            r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata: {name: js-r1, namespace: bench, uid: u-1, generation: 2}
spec:
  target: {serverRef: {kind: JetStreamCluster, name: js3}}
  workload:
    protocol: jetstream
    payloadBytes: 128
    ratePerPublisher: 1000
    durationSeconds: 5
    jetstream: {stream: r1, replicas: 1, publish: async, maxInFlight: 200}
  runners: {count: 2, resources: {requests: {cpu: 20m, memory: 32Mi}, limits: {memory: 128Mi}}}
  trials: 3
"#,
        )
        .unwrap()
    }

    pub fn identity(br: &BenchmarkRun) -> RunIdentity {
        use kube::Resource;
        RunIdentity {
            owner: crate::meta::Owner {
                kind_label: KIND_LABEL,
                name: "js-r1".into(),
                namespace: "bench".into(),
                owner_ref: br.controller_owner_ref(&()).unwrap(),
            },
            generation: 2,
        }
    }

    #[test]
    fn runner_job_and_config_snapshot() {
        let br = sample();
        let id = identity(&br);
        let server = server_selector(ServerKind::JetStreamCluster, "js3");
        let cfg = agent_config(&br.spec, "nats://js3.bench.svc:4222");
        insta::assert_yaml_snapshot!("runner_config_map", config_map(&id, &cfg).unwrap());
        insta::assert_yaml_snapshot!(
            "runner_job",
            job(
                &id,
                &br.spec,
                Some(&server),
                300,
                &RunnerSecrets::default(),
                &OperandDefaults::default(),
            )
        );
    }

    #[test]
    fn runner_pods_are_restricted_and_tokenless() {
        let br = sample();
        let server = server_selector(ServerKind::JetStreamCluster, "js3");
        let j = job(
            &identity(&br),
            &br.spec,
            Some(&server),
            300,
            &RunnerSecrets::default(),
            &OperandDefaults::default(),
        );
        let spec = j.spec.unwrap();
        assert_eq!(spec.backoff_limit, Some(0), "no silent re-runs");
        assert_eq!(spec.completions, Some(2));
        let pod = spec.template.spec.unwrap();
        assert_eq!(pod.automount_service_account_token, Some(false));
        let sc = pod.containers[0].security_context.clone().unwrap();
        assert_eq!(sc.allow_privilege_escalation, Some(false));
        assert_eq!(sc.read_only_root_filesystem, Some(true));
        assert_eq!(sc.capabilities.unwrap().drop, Some(vec!["ALL".to_string()]));
        assert_eq!(pod.security_context.unwrap().run_as_non_root, Some(true));
        // The live metrics port, by the name the chart's PodMonitor scrapes.
        let ports = pod.containers[0].ports.clone().unwrap();
        assert!(ports
            .iter()
            .any(|p| p.name.as_deref() == Some("metrics") && p.container_port == 9102));
        // Runners prefer nodes without the target's server pods.
        let terms = pod.affinity.unwrap().pod_anti_affinity.unwrap();
        let terms = terms
            .preferred_during_scheduling_ignored_during_execution
            .unwrap();
        assert!(terms.iter().any(|t| t
            .pod_affinity_term
            .label_selector
            .as_ref()
            .unwrap()
            .match_labels
            .as_ref()
            == Some(&server)));
    }

    #[test]
    fn runner_pods_take_the_operators_defaults_and_the_runs_additions() {
        let mut br = sample();
        let mut operands = OperandDefaults::default();
        operands.images.bench_runner = "r.example/x/msgbench/bench-runner:9".into();
        operands.image_pull_policy = "Always".into();
        operands.runner_pods.image_pull_secrets = vec![msgbench_crds::PullSecret {
            name: "chart-pull".into(),
        }];
        operands.runner_pods.priority_class_name = Some("bench".into());
        br.spec.runners.pod.labels = BTreeMap::from([
            ("team".to_string(), "platform".to_string()),
            // A run may let its mesh in on purpose.
            ("sidecar.istio.io/inject".to_string(), "true".to_string()),
        ]);
        br.spec.runners.pod.service_account_name = Some("runner-sa".into());
        let j = job(
            &identity(&br),
            &br.spec,
            None,
            300,
            &RunnerSecrets::default(),
            &operands,
        );
        let t = j.spec.unwrap().template;
        let meta = t.metadata.unwrap();
        let (labels, annotations) = (meta.labels.unwrap(), meta.annotations.unwrap());
        assert_eq!(labels["team"], "platform");
        assert_eq!(labels["sidecar.istio.io/inject"], "true");
        assert_eq!(labels["kuma.io/sidecar-injection"], "disabled");
        assert_eq!(labels[LABEL_INSTANCE], "js-r1", "the selector labels stay");
        assert_eq!(annotations["linkerd.io/inject"], "disabled");
        let pod = t.spec.unwrap();
        let c = &pod.containers[0];
        assert_eq!(
            c.image.as_deref(),
            Some("r.example/x/msgbench/bench-runner:9")
        );
        assert_eq!(c.image_pull_policy.as_deref(), Some("Always"));
        assert_eq!(pod.image_pull_secrets.unwrap()[0].name, "chart-pull");
        assert_eq!(pod.priority_class_name.as_deref(), Some("bench"));
        assert_eq!(pod.service_account_name.as_deref(), Some("runner-sa"));
        assert_eq!(
            pod.automount_service_account_token,
            Some(false),
            "still no token"
        );
        // The run's own image wins over the default.
        br.spec.runners.image = Some("own/runner:1".into());
        let j = job(
            &identity(&br),
            &br.spec,
            None,
            300,
            &RunnerSecrets::default(),
            &operands,
        );
        let pod = j.spec.unwrap().template.spec.unwrap();
        assert_eq!(pod.containers[0].image.as_deref(), Some("own/runner:1"));
    }

    #[test]
    fn job_names_fit_the_job_name_label() {
        let br = sample();
        let mut id = identity(&br);
        id.owner.name = "a".repeat(253);
        id.generation = 12345;
        let n = id.job_name();
        assert!(n.len() <= 63, "{n}");
        assert!(n.ends_with("-g12345"));
    }
}
