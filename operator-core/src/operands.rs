//! What the operator puts into the pods it creates when a CR leaves it open: the default image
//! of each server kind and of the runners, the pull policy, and default pod additions (pull
//! secrets, service account, priority class, labels, annotations) for runner and server pods.
//!
//! It comes from the operator's own configuration (the chart renders `operands.yaml` from its
//! `images` and `runnerPods`/`serverPods` values), never from the CRD schema: a team that
//! mirrors the images to its own registry changes one chart value, not every CR. Without a
//! file (a local `cargo run`) the built-in defaults below apply, the same as the chart's.
//!
//! Pure: reading the file is the caller's business (`main`).
use crate::run::runners::runner_access::OperatorPeer;
use k8s_openapi::api::core::v1::{LocalObjectReference, PodSpec, PodTemplateSpec};
use k8s_openapi::api::networking::v1::NetworkPolicyPeer;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use msgbench_crds::mqtt_broker::MqttEngine;
use msgbench_crds::pod_customization::{PodCustomization, PullSecret};
use serde::Deserialize;
use std::collections::BTreeMap;

/// msgbench's own images are tagged with the version they were released with (the chart's
/// appVersion, which is this crate's version).
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The operator's configuration of the pods it creates.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OperandDefaults {
    #[serde(default)]
    pub images: DefaultImages,
    /// `imagePullPolicy` of every runner and server container.
    #[serde(default = "if_not_present")]
    pub image_pull_policy: String,
    /// Added to every runner pod (a run's `spec.runners.pod` adds to these and wins per key).
    #[serde(default)]
    pub runner_pods: PodCustomization,
    /// Added to every server pod (a server's `spec.pod` adds to these and wins per key).
    #[serde(default)]
    pub server_pods: PodCustomization,
    /// Who else may reach the servers' ports (`server::fence`; the chart's
    /// `serverPods.networkPolicy`).
    #[serde(default)]
    pub server_network_policy: ServerNetworkPolicy,
    /// The operator's runner/fault-agent control public keys, as agents get them (comma-separated:
    /// current, then previous during a key rotation; set at start, not configured).
    #[serde(skip)]
    pub control_public_key: String,
    /// Which fault agents server pods may carry (set at start from `--allow-faults` and
    /// `--allow-network-faults`, not configured here): none by default.
    #[serde(skip)]
    pub faults: crate::fault_policy::FaultPolicy,
    /// The operator's own pods, admitted to the servers' monitoring and fault-agent ports (set
    /// at start from its environment, not configured; None outside a cluster).
    #[serde(skip)]
    pub operator_peer: Option<OperatorPeer>,
}

/// Sources admitted to every server beyond the defaults (the server's own namespace to the
/// client ports, the operator to the monitoring ports).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServerNetworkPolicy {
    /// Also admitted to the client ports (e.g. clients in another namespace).
    #[serde(default)]
    pub clients_from: Vec<NetworkPolicyPeer>,
    /// Also admitted to the monitoring ports (e.g. a Prometheus namespace).
    #[serde(default)]
    pub monitoring_from: Vec<NetworkPolicyPeer>,
}

/// Default image of each operand: a full reference (`registry/repository:tag[@digest]`).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DefaultImages {
    pub bench_runner: String,
    pub pubsub_server: String,
    pub sockudo: String,
    pub nats: String,
    pub mosquitto: String,
    pub rumqttd: String,
}

impl Default for DefaultImages {
    fn default() -> Self {
        Self {
            bench_runner: format!("ghcr.io/msgbench/bench-runner:{VERSION}"),
            pubsub_server: format!("ghcr.io/msgbench/pubsub-server:{VERSION}"),
            sockudo: "ghcr.io/msgbench/sockudo:5.2.0".into(),
            nats: "ghcr.io/msgbench/nats-server:2.15.2".into(),
            mosquitto: "ghcr.io/msgbench/mosquitto:2.0.11-1.2_deb12u2".into(),
            rumqttd: "ghcr.io/msgbench/rumqttd:0.19.0".into(),
        }
    }
}

impl DefaultImages {
    pub fn mqtt(&self, engine: MqttEngine) -> Option<&str> {
        match engine {
            MqttEngine::Mosquitto => Some(&self.mosquitto),
            MqttEngine::Rumqttd => Some(&self.rumqttd),
            MqttEngine::Custom => None,
        }
    }
}

fn if_not_present() -> String {
    "IfNotPresent".into()
}

impl Default for OperandDefaults {
    fn default() -> Self {
        Self {
            images: DefaultImages::default(),
            image_pull_policy: if_not_present(),
            runner_pods: PodCustomization::default(),
            server_pods: PodCustomization::default(),
            server_network_policy: ServerNetworkPolicy::default(),
            control_public_key: String::new(),
            faults: crate::fault_policy::FaultPolicy::default(),
            operator_peer: None,
        }
    }
}

/// The pull policies a container may have.
const PULL_POLICIES: &[&str] = &["Always", "IfNotPresent", "Never"];

impl OperandDefaults {
    /// Parses the operator's `operands.yaml`; an error names the field and the rule.
    pub fn parse(text: &str) -> Result<Self, String> {
        let d: Self = serde_norway::from_str(text).map_err(|e| e.to_string())?;
        if !PULL_POLICIES.contains(&d.image_pull_policy.as_str()) {
            return Err(format!(
                "imagePullPolicy: {:?} is not one of {}",
                d.image_pull_policy,
                PULL_POLICIES.join(", ")
            ));
        }
        let images = [
            ("benchRunner", &d.images.bench_runner),
            ("pubsubServer", &d.images.pubsub_server),
            ("sockudo", &d.images.sockudo),
            ("nats", &d.images.nats),
            ("mosquitto", &d.images.mosquitto),
            ("rumqttd", &d.images.rumqttd),
        ];
        if let Some((field, _)) = images
            .iter()
            .find(|(_, r)| r.is_empty() || r.chars().any(char::is_whitespace))
        {
            return Err(format!(
                "images.{field}: must be an image reference without spaces"
            ));
        }
        let np = &d.server_network_policy;
        for (field, peers) in [
            ("clientsFrom", &np.clients_from),
            ("monitoringFrom", &np.monitoring_from),
        ] {
            // An empty peer is refused by the API server, and would fail every apply.
            if let Some(i) = peers
                .iter()
                .position(|p| *p == NetworkPolicyPeer::default())
            {
                return Err(format!(
                    "serverNetworkPolicy.{field}[{i}]: needs podSelector, namespaceSelector \
                     or ipBlock"
                ));
            }
        }
        Ok(d)
    }
}

/// The CR's additions on top of the operator's defaults: maps merge (the CR wins per key), pull
/// secrets add up (each once), a service account or priority class in the CR replaces the
/// default.
pub fn merged(defaults: &PodCustomization, cr: &PodCustomization) -> PodCustomization {
    let merge = |a: &BTreeMap<String, String>, b: &BTreeMap<String, String>| {
        let mut m = a.clone();
        m.extend(b.iter().map(|(k, v)| (k.clone(), v.clone())));
        m
    };
    let mut secrets: Vec<PullSecret> = defaults.image_pull_secrets.clone();
    for s in &cr.image_pull_secrets {
        if !secrets.contains(s) {
            secrets.push(s.clone());
        }
    }
    PodCustomization {
        labels: merge(&defaults.labels, &cr.labels),
        annotations: merge(&defaults.annotations, &cr.annotations),
        image_pull_secrets: secrets,
        service_account_name: cr
            .service_account_name
            .clone()
            .or_else(|| defaults.service_account_name.clone()),
        priority_class_name: cr
            .priority_class_name
            .clone()
            .or_else(|| defaults.priority_class_name.clone()),
    }
}

/// Adds `custom` to a pod template the operator has built. The operator's own labels and
/// annotations stay as they are (selectors, hashes): admission refuses them in a CR, and a
/// default from the chart cannot replace them either.
pub fn customize(t: &mut PodTemplateSpec, custom: &PodCustomization) {
    let meta = t.metadata.get_or_insert_with(ObjectMeta::default);
    let under = |own: &mut Option<BTreeMap<String, String>>, extra: &BTreeMap<String, String>| {
        if extra.is_empty() {
            return;
        }
        let mut m = extra.clone();
        m.extend(own.take().unwrap_or_default());
        *own = Some(m);
    };
    under(&mut meta.labels, &custom.labels);
    under(&mut meta.annotations, &custom.annotations);
    let spec = t.spec.get_or_insert_with(PodSpec::default);
    if !custom.image_pull_secrets.is_empty() {
        spec.image_pull_secrets = Some(
            custom
                .image_pull_secrets
                .iter()
                .map(|s| LocalObjectReference {
                    name: s.name.clone(),
                })
                .collect(),
        );
    }
    spec.service_account_name = custom.service_account_name.clone();
    spec.priority_class_name = custom.priority_class_name.clone();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chart_rendered_file_parses_and_a_wrong_field_is_named() {
        let d = OperandDefaults::parse(
            "images:\n  benchRunner: r.example/x/msgbench/bench-runner:0.1.0\n  \
             pubsubServer: r.example/x/msgbench/pubsub-server:0.1.0\n  \
             sockudo: r.example/x/msgbench/sockudo:5.2.0\n  nats: r.example/x/msgbench/nats-server:2.15.2\n  \
             mosquitto: r.example/x/msgbench/mosquitto:2.0.11-1.2_deb12u2\n  \
             rumqttd: r.example/x/msgbench/rumqttd:0.19.0\n\
             imagePullPolicy: Always\n\
             runnerPods:\n  imagePullSecrets: [{name: pull}]\n  priorityClassName: bench\n",
        )
        .unwrap();
        assert_eq!(d.images.nats, "r.example/x/msgbench/nats-server:2.15.2");
        assert_eq!(d.image_pull_policy, "Always");
        assert_eq!(d.runner_pods.image_pull_secrets[0].name, "pull");
        assert_eq!(d.server_pods, PodCustomization::default());

        let bad = OperandDefaults::parse("imagePullPolicy: Sometimes\n").unwrap_err();
        assert!(
            bad.contains("imagePullPolicy") && bad.contains("IfNotPresent"),
            "{bad}"
        );
        let unknown = OperandDefaults::parse("imagez: {}\n").unwrap_err();
        assert!(unknown.contains("imagez"), "{unknown}");
        let partial = OperandDefaults::parse("images:\n  nats: n\n").unwrap_err();
        assert!(partial.contains("benchRunner"), "{partial}");
        let empty = OperandDefaults::parse(
            "images: {benchRunner: '', pubsubServer: p, sockudo: s, nats: n, mosquitto: m, rumqttd: r}\n",
        )
        .unwrap_err();
        assert!(empty.starts_with("images.benchRunner"), "{empty}");
    }

    /// The chart's `serverPods.networkPolicy` reaches the fence as NetworkPolicy peers; a peer
    /// that names nothing (which the API server would refuse on every apply) is named instead.
    #[test]
    fn server_network_policy_peers_parse_and_an_empty_one_is_refused() {
        let d = OperandDefaults::parse(
            "serverNetworkPolicy:\n  clientsFrom:\n  - namespaceSelector: {matchLabels: {team: a}}\n  \
             - ipBlock: {cidr: 10.0.0.0/8}\n  monitoringFrom: []\n",
        )
        .unwrap();
        let from = &d.server_network_policy.clients_from;
        assert_eq!(from.len(), 2);
        assert_eq!(from[1].ip_block.as_ref().unwrap().cidr, "10.0.0.0/8");
        assert!(d.server_network_policy.monitoring_from.is_empty());
        assert_eq!(
            OperandDefaults::default().server_network_policy,
            ServerNetworkPolicy::default()
        );
        let empty =
            OperandDefaults::parse("serverNetworkPolicy: {monitoringFrom: [{}]}\n").unwrap_err();
        assert!(
            empty.starts_with("serverNetworkPolicy.monitoringFrom[0]"),
            "{empty}"
        );
        let unknown =
            OperandDefaults::parse("serverNetworkPolicy: {clientFrom: []}\n").unwrap_err();
        assert!(unknown.contains("clientFrom"), "{unknown}");
    }

    #[test]
    fn built_in_defaults_follow_this_version() {
        let d = OperandDefaults::default();
        assert_eq!(
            d.images.bench_runner,
            format!(
                "ghcr.io/msgbench/bench-runner:{}",
                env!("CARGO_PKG_VERSION")
            )
        );
        assert_eq!(d.image_pull_policy, "IfNotPresent");
        assert_eq!(d.images.mqtt(MqttEngine::Custom), None);
    }

    #[test]
    fn a_cr_adds_to_the_defaults_and_wins_per_key() {
        let defaults = PodCustomization {
            labels: BTreeMap::from([("team".into(), "a".into()), ("tier".into(), "x".into())]),
            annotations: BTreeMap::from([("note".into(), "d".into())]),
            image_pull_secrets: vec![PullSecret { name: "d".into() }],
            service_account_name: Some("default-sa".into()),
            priority_class_name: Some("low".into()),
        };
        let cr = PodCustomization {
            labels: BTreeMap::from([("team".into(), "b".into())]),
            image_pull_secrets: vec![
                PullSecret { name: "d".into() },
                PullSecret { name: "own".into() },
            ],
            priority_class_name: Some("high".into()),
            ..PodCustomization::default()
        };
        let m = merged(&defaults, &cr);
        assert_eq!(m.labels["team"], "b");
        assert_eq!(m.labels["tier"], "x");
        assert_eq!(m.annotations["note"], "d");
        let names: Vec<&str> = m
            .image_pull_secrets
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(names, ["d", "own"]);
        assert_eq!(m.service_account_name.as_deref(), Some("default-sa"));
        assert_eq!(m.priority_class_name.as_deref(), Some("high"));
        assert_eq!(
            merged(&PodCustomization::default(), &PodCustomization::default()),
            PodCustomization::default()
        );
    }

    #[test]
    fn customizing_never_replaces_the_operators_own_labels() {
        let own = BTreeMap::from([("app.kubernetes.io/instance".to_string(), "run".to_string())]);
        let mut t = PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(own.clone()),
                ..ObjectMeta::default()
            }),
            spec: Some(PodSpec::default()),
        };
        let custom = PodCustomization {
            labels: BTreeMap::from([
                ("app.kubernetes.io/instance".into(), "other".into()),
                ("team".into(), "a".into()),
            ]),
            image_pull_secrets: vec![PullSecret {
                name: "pull".into(),
            }],
            service_account_name: Some("bench".into()),
            ..PodCustomization::default()
        };
        customize(&mut t, &custom);
        let labels = t.metadata.as_ref().unwrap().labels.as_ref().unwrap();
        assert_eq!(labels["app.kubernetes.io/instance"], "run");
        assert_eq!(labels["team"], "a");
        let spec = t.spec.unwrap();
        assert_eq!(spec.image_pull_secrets.unwrap()[0].name, "pull");
        assert_eq!(spec.service_account_name.as_deref(), Some("bench"));
        assert_eq!(spec.priority_class_name, None);
        assert_eq!(
            t.metadata.unwrap().annotations,
            None,
            "nothing added, nothing set"
        );
    }
}
