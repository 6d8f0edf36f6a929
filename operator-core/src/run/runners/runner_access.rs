//! Only the operator drives a run's runners. Two layers:
//! - a credential the operator signs for the run and for each control request
//!   (`runner_api::control_auth`: method, path, seconds of validity, used once); runner pods
//!   know only the public keys and their run's uid, so there is no per-run secret to create,
//!   read or leak;
//! - a NetworkPolicy admitting only the operator's pods to the runners' control port, where
//!   the operator knows its own pods (in-cluster: `OPERATOR_NAMESPACE` and
//!   `OPERATOR_POD_LABELS`, set by the chart). Clusters whose network plugin does not enforce
//!   NetworkPolicy still have the signature check.
//!
//! The live metrics port is open to every source: it serves counts only, and where Prometheus
//! runs differs between clusters.
use crate::meta::{LABEL_INSTANCE, LABEL_MANAGED_BY, LABEL_NAME, MANAGED_BY};
use crate::run::identity::{RunIdentity, KIND_LABEL, LABEL_GENERATION};
use k8s_openapi::api::core::v1::EnvVar;
use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
    NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use runner_api::agent::{AGENT_PORT, METRICS_PORT};
use runner_api::control_auth;
use std::collections::BTreeMap;

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

/// What a runner pod needs to check the operator's credentials: the public keys (current, and
/// previous during a rotation) and the run's uid (neither is secret). Without them the agent
/// does not start.
pub fn control_env(public_keys: &str, run_uid: &str) -> Vec<EnvVar> {
    [
        (control_auth::PUBLIC_KEY_ENV, public_keys),
        (control_auth::RUN_UID_ENV, run_uid),
    ]
    .into_iter()
    .map(|(name, value)| EnvVar {
        name: name.into(),
        value: Some(value.into()),
        ..EnvVar::default()
    })
    .collect()
}

fn run_labels(id: &RunIdentity) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_NAME.into(), KIND_LABEL.into()),
        (LABEL_INSTANCE.into(), id.name.clone()),
        (LABEL_MANAGED_BY.into(), MANAGED_BY.into()),
    ])
}

/// The operator's pods as a NetworkPolicy peer (its namespace by name, its pod labels).
pub fn operator_peer(peer: &OperatorPeer) -> NetworkPolicyPeer {
    NetworkPolicyPeer {
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
    }
}

/// Ingress to this generation's runner pods: the control port only from the operator; the
/// metrics port (read-only counts) from anywhere, so Prometheus can scrape it.
pub fn network_policy(id: &RunIdentity, peer: &OperatorPeer) -> NetworkPolicy {
    let mut selector = run_labels(id);
    selector.remove(LABEL_MANAGED_BY);
    selector.insert(LABEL_GENERATION.into(), id.generation.to_string());
    let from = operator_peer(peer);
    let tcp = |port: u16| {
        Some(vec![NetworkPolicyPort {
            port: Some(IntOrString::Int(port.into())),
            protocol: Some("TCP".into()),
            ..NetworkPolicyPort::default()
        }])
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
            ingress: Some(vec![
                NetworkPolicyIngressRule {
                    from: Some(vec![from]),
                    ports: tcp(AGENT_PORT),
                },
                NetworkPolicyIngressRule {
                    from: None,
                    ports: tcp(METRICS_PORT),
                },
            ]),
            ..NetworkPolicySpec::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::Owner;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn id() -> RunIdentity {
        RunIdentity {
            owner: Owner {
                kind_label: KIND_LABEL,
                name: "js-r1".into(),
                namespace: "bench".into(),
                owner_ref: OwnerReference {
                    uid: "u-1".into(),
                    ..OwnerReference::default()
                },
            },
            generation: 3,
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
    fn runner_pods_get_the_public_key_and_their_runs_uid() {
        let env = control_env("cHVi", "u-1");
        let got: Vec<_> = env
            .iter()
            .map(|e| (e.name.as_str(), e.value.as_deref().unwrap()))
            .collect();
        assert_eq!(
            got,
            [
                (control_auth::PUBLIC_KEY_ENV, "cHVi"),
                (control_auth::RUN_UID_ENV, "u-1")
            ]
        );
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
        let rules = spec.ingress.unwrap();
        let rule = &rules[0];
        assert_eq!(
            rule.ports.as_ref().unwrap()[0].port,
            Some(IntOrString::Int(9090))
        );
        // Scrapes reach the metrics port from anywhere; only that port.
        assert_eq!(rules.len(), 2);
        assert_eq!(rules[1].from, None);
        let metrics_ports = rules[1].ports.as_ref().unwrap();
        assert_eq!(metrics_ports.len(), 1);
        assert_eq!(metrics_ports[0].port, Some(IntOrString::Int(9102)));
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
