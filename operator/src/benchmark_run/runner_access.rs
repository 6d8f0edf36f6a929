//! Only the operator drives a run's runners. Two layers:
//! - a per-run token in a Secret owned by the run, mounted into the runner pods and presented
//!   by the operator on every control request (never in a ConfigMap, a log or status);
//! - a NetworkPolicy admitting only the operator's pods to the runners' control port, where
//!   the operator knows its own pods (in-cluster: `OPERATOR_NAMESPACE` and
//!   `OPERATOR_POD_LABELS`, set by the chart). Clusters whose network plugin does not enforce
//!   NetworkPolicy still have the token.
use super::identity::{RunIdentity, KIND_LABEL, LABEL_GENERATION};
use crate::meta::{LABEL_INSTANCE, LABEL_MANAGED_BY, LABEL_NAME, MANAGED_BY};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
    NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::ByteString;
use runner_api::agent::AGENT_PORT;
use std::collections::BTreeMap;

/// Key of the token in the run's Secret (and the file name in the runner pod).
pub const TOKEN_KEY: &str = "token";
/// Where runner pods find the token file's directory.
pub const TOKEN_DIR: &str = "/var/run/secrets/msgbench";

/// The operator's own pods, as a NetworkPolicy peer.
#[derive(Clone, Debug, PartialEq)]
pub struct OperatorPeer {
    pub namespace: String,
    pub labels: BTreeMap<String, String>,
}

impl OperatorPeer {
    /// From `OPERATOR_NAMESPACE` and `OPERATOR_POD_LABELS` (`k=v,k=v`); None when either is
    /// missing or malformed (e.g. an operator run outside the cluster).
    pub fn from_env() -> Option<Self> {
        let ns = std::env::var("OPERATOR_NAMESPACE").ok()?;
        Self::parse(&ns, &std::env::var("OPERATOR_POD_LABELS").ok()?)
    }

    pub fn parse(namespace: &str, labels: &str) -> Option<Self> {
        let labels: Option<BTreeMap<String, String>> = labels
            .split(',')
            .filter(|kv| !kv.trim().is_empty())
            .map(|kv| {
                let (k, v) = kv.split_once('=')?;
                Some((k.trim().to_string(), v.trim().to_string()))
            })
            .collect();
        let labels = labels.filter(|l| !l.is_empty())?;
        (!namespace.is_empty()).then(|| OperatorPeer {
            namespace: namespace.into(),
            labels,
        })
    }
}

/// The run's token Secret name: one per run (generations share it), gone with the run.
pub fn secret_name(run: &str) -> String {
    let base: String = run.chars().take(240).collect();
    format!("{}-runner-token", base.trim_end_matches(['-', '.']))
}

fn run_labels(id: &RunIdentity) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_NAME.into(), KIND_LABEL.into()),
        (LABEL_INSTANCE.into(), id.name.clone()),
        (LABEL_MANAGED_BY.into(), MANAGED_BY.into()),
    ])
}

/// A fresh token: 32 random bytes, hex.
pub fn new_token() -> String {
    let bytes: [u8; 32] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn token_secret(id: &RunIdentity, token: &str) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(secret_name(&id.name)),
            namespace: Some(id.namespace.clone()),
            labels: Some(run_labels(id)),
            owner_references: Some(vec![id.owner_ref.clone()]),
            ..ObjectMeta::default()
        },
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([(
            TOKEN_KEY.to_string(),
            ByteString(token.as_bytes().to_vec()),
        )])),
        immutable: Some(true),
        ..Secret::default()
    }
}

/// Ingress to this generation's runner pods: only the control port, only from the operator.
pub fn network_policy(id: &RunIdentity, peer: &OperatorPeer) -> NetworkPolicy {
    let mut selector = run_labels(id);
    selector.remove(LABEL_MANAGED_BY);
    selector.insert(LABEL_GENERATION.into(), id.generation.to_string());
    let from = NetworkPolicyPeer {
        namespace_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([(
                "kubernetes.io/metadata.name".to_string(),
                peer.namespace.clone(),
            )])),
            ..LabelSelector::default()
        }),
        pod_selector: Some(LabelSelector {
            match_labels: Some(peer.labels.clone()),
            ..LabelSelector::default()
        }),
        ..NetworkPolicyPeer::default()
    };
    NetworkPolicy {
        metadata: ObjectMeta {
            name: Some(id.job_name()),
            namespace: Some(id.namespace.clone()),
            labels: Some(id.labels()),
            owner_references: Some(vec![id.owner_ref.clone()]),
            ..ObjectMeta::default()
        },
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(selector),
                ..LabelSelector::default()
            }),
            policy_types: Some(vec!["Ingress".into()]),
            ingress: Some(vec![NetworkPolicyIngressRule {
                from: Some(vec![from]),
                ports: Some(vec![NetworkPolicyPort {
                    port: Some(IntOrString::Int(AGENT_PORT.into())),
                    protocol: Some("TCP".into()),
                    ..NetworkPolicyPort::default()
                }]),
            }]),
            ..NetworkPolicySpec::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn id() -> RunIdentity {
        RunIdentity {
            name: "js-r1".into(),
            namespace: "bench".into(),
            generation: 3,
            owner_ref: OwnerReference {
                uid: "u-1".into(),
                ..OwnerReference::default()
            },
        }
    }

    #[test]
    fn operator_peer_needs_namespace_and_labels() {
        let p = OperatorPeer::parse("msgbench-system", "a=b, c=d").unwrap();
        assert_eq!(p.labels.len(), 2);
        assert!(OperatorPeer::parse("", "a=b").is_none());
        assert!(OperatorPeer::parse("ns", "").is_none());
        assert!(OperatorPeer::parse("ns", "a").is_none());
    }

    #[test]
    fn tokens_are_long_random_hex() {
        let (a, b) = (new_token(), new_token());
        assert_eq!(a.len(), 64);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn the_secret_is_owned_immutable_and_carries_only_the_token() {
        let s = token_secret(&id(), "t0k");
        assert_eq!(s.metadata.name.as_deref(), Some("js-r1-runner-token"));
        assert_eq!(s.immutable, Some(true));
        assert_eq!(s.metadata.owner_references.unwrap()[0].uid, "u-1");
        assert_eq!(s.data.unwrap()[TOKEN_KEY].0, b"t0k");
        assert!(secret_name(&"x".repeat(253)).len() <= 253);
    }

    #[test]
    fn only_the_operator_reaches_this_generations_control_port() {
        let peer = OperatorPeer::parse("msgbench-system", "app=op").unwrap();
        let np = network_policy(&id(), &peer);
        let spec = np.spec.unwrap();
        let sel = spec.pod_selector.unwrap().match_labels.unwrap();
        assert_eq!(sel[LABEL_GENERATION], "3");
        assert_eq!(sel[LABEL_INSTANCE], "js-r1");
        assert_eq!(spec.policy_types.unwrap(), ["Ingress"]);
        let rule = &spec.ingress.unwrap()[0];
        assert_eq!(
            rule.ports.as_ref().unwrap()[0].port,
            Some(IntOrString::Int(9090))
        );
        let from = &rule.from.as_ref().unwrap()[0];
        assert_eq!(
            from.namespace_selector
                .as_ref()
                .unwrap()
                .match_labels
                .as_ref()
                .unwrap()["kubernetes.io/metadata.name"],
            "msgbench-system"
        );
        assert_eq!(
            from.pod_selector
                .as_ref()
                .unwrap()
                .match_labels
                .as_ref()
                .unwrap()["app"],
            "op"
        );
    }
}
