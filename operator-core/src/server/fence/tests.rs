use super::*;
use crate::run::runners::runner_access::OperatorPeer;
use crate::server::children::Children;
use crate::server::kind::ManagedServerKind;
use k8s_openapi::api::networking::v1::IPBlock;
use msgbench_crds::{JetStreamCluster, MqttBroker, PubSubServer};
use std::collections::BTreeMap;

fn object<K: ManagedServerKind>(kind: &str, spec: &str) -> K {
    serde_norway::from_str(&format!(
        "apiVersion: msgbench.dev/v1alpha1\nkind: {kind}\n\
         metadata: {{name: s, namespace: bench, uid: u1, generation: 1}}\nspec: {spec}\n"
    ))
    .unwrap()
}

/// The operator's defaults with every fault agent allowed (the fence is what is tested), and
/// the operator's own pods known when `peer`.
fn operands(peer: bool) -> OperandDefaults {
    OperandDefaults {
        operator_peer: peer.then(|| OperatorPeer::parse("msgbench-system", "app=op").unwrap()),
        faults: crate::fault_policy::FaultPolicy {
            agents: true,
            network: true,
            power_loss: false,
        },
        ..OperandDefaults::default()
    }
}

fn built<K: ManagedServerKind>(obj: &K, operands: &OperandDefaults) -> Children {
    let owner = Owner::of(obj, K::KIND_LABEL).unwrap();
    obj.build(&owner, obj.desired_replicas(), operands)
}

fn policy(c: &Children) -> NetworkPolicySpec {
    assert_eq!(c.network_policies.len(), 1, "one policy per server");
    c.network_policies[0].spec.clone().unwrap()
}

/// Who may reach each port: `port -> sources`, a source being "namespace" (every pod of the
/// server's namespace), "own" (the server's pods), "operator", or "ipBlock <cidr>".
fn admitted(spec: &NetworkPolicySpec) -> BTreeMap<i32, Vec<String>> {
    let mut by_port = BTreeMap::<i32, Vec<String>>::new();
    for r in spec.ingress.iter().flatten() {
        let from = r
            .from
            .as_ref()
            .expect("a rule without `from` admits everyone");
        assert!(!from.is_empty(), "an empty `from` admits everyone: {r:?}");
        let sources: Vec<String> = from.iter().map(source).collect();
        let ports: Vec<i32> = match &r.ports {
            Some(ports) => (ports.iter())
                .map(|p| match p.port {
                    Some(IntOrString::Int(n)) => n,
                    ref other => panic!("numeric ports only: {other:?}"),
                })
                .collect(),
            None => vec![0], // every port
        };
        for p in ports {
            by_port.entry(p).or_default().extend(sources.clone());
        }
    }
    by_port
}

fn source(p: &NetworkPolicyPeer) -> String {
    if let Some(b) = &p.ip_block {
        return format!("ipBlock {}", b.cidr);
    }
    let pods = p
        .pod_selector
        .as_ref()
        .and_then(|s| s.match_labels.as_ref());
    match (&p.namespace_selector, pods) {
        (Some(ns), Some(l)) if l.get("app").map(String::as_str) == Some("op") => {
            let ns = ns.match_labels.as_ref().unwrap();
            assert_eq!(ns["kubernetes.io/metadata.name"], "msgbench-system");
            "operator".into()
        }
        (None, Some(l)) if l.get("app.kubernetes.io/instance").is_some() => "own".into(),
        (None, None) if p.pod_selector.is_some() => "namespace".into(),
        _ => format!("{p:?}"),
    }
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn jetstream_clients_from_the_namespace_routes_from_its_pods_monitoring_from_the_operator() {
    let js: JetStreamCluster = object("JetStreamCluster", "{replicas: 3}");
    let spec = policy(&built(&js, &operands(true)));
    let sel = spec.pod_selector.clone().unwrap().match_labels.unwrap();
    assert_eq!(sel["app.kubernetes.io/instance"], "s");
    assert_eq!(sel["app.kubernetes.io/component"], "server");
    assert_eq!(spec.policy_types, Some(vec!["Ingress".to_string()]));
    let got = admitted(&spec);
    assert_eq!(got[&4222], strs(&["namespace", "operator"]));
    assert_eq!(
        got[&6222],
        strs(&["own"]),
        "routes only between its servers"
    );
    assert_eq!(
        got[&8222],
        strs(&["operator"]),
        "monitoring only for the operator"
    );
    assert_eq!(got.len(), 3, "no other port: {got:?}");
}

#[test]
fn an_operator_outside_the_cluster_leaves_monitoring_closed_not_open() {
    let js: JetStreamCluster = object("JetStreamCluster", "{replicas: 3}");
    let got = admitted(&policy(&built(&js, &operands(false))));
    assert_eq!(got[&4222], strs(&["namespace"]));
    assert_eq!(got[&6222], strs(&["own"]));
    assert!(!got.contains_key(&8222), "{got:?}");
}

#[test]
fn the_chart_widens_clients_and_monitoring_and_nothing_else() {
    let block = |cidr: &str| NetworkPolicyPeer {
        ip_block: Some(IPBlock {
            cidr: cidr.into(),
            except: None,
        }),
        ..NetworkPolicyPeer::default()
    };
    let mut o = operands(true);
    o.server_network_policy.clients_from = vec![block("10.1.0.0/16")];
    o.server_network_policy.monitoring_from = vec![block("10.2.0.0/16")];
    let js: JetStreamCluster = object("JetStreamCluster", "{replicas: 3}");
    let got = admitted(&policy(&built(&js, &o)));
    assert_eq!(
        got[&4222],
        strs(&["namespace", "operator", "ipBlock 10.1.0.0/16"])
    );
    assert_eq!(got[&6222], strs(&["own"]));
    assert_eq!(got[&8222], strs(&["operator", "ipBlock 10.2.0.0/16"]));
}

/// The agent's port is the operator's alone, and no rule admits the server's ports from
/// anywhere (the agent's old policy did).
#[test]
fn the_fault_agent_port_is_the_operators_and_widens_nothing() {
    let spec = "{replicas: 3, faultInjection: {enabled: true, network: true}}";
    let js: JetStreamCluster = object("JetStreamCluster", spec);
    let c = built(&js, &operands(true));
    let got = admitted(&policy(&c));
    let agent = i32::from(FAULT_AGENT_PORT);
    assert_eq!(got[&agent], strs(&["operator"]));
    assert_eq!(got[&4222], strs(&["namespace", "operator"]));
    assert_eq!(got[&6222], strs(&["own"]));
    let bare = admitted(&policy(&built(&js, &operands(false))));
    assert!(!bare.contains_key(&agent), "no operator known: closed");
}

#[test]
fn mqtt_listeners_are_client_ports_and_brokers_have_no_peers() {
    let spec = "{listeners: {mqttPort: 1883, websocket: {port: 8083}}}";
    let mqb: MqttBroker = object("MqttBroker", spec);
    let got = admitted(&policy(&built(&mqb, &operands(true))));
    assert_eq!(got[&1883], strs(&["namespace", "operator"]));
    assert_eq!(got[&8083], strs(&["namespace", "operator"]));
    assert_eq!(got.len(), 2, "{got:?}");
    let spec = "{engine: custom, image: r/b:1, replicas: 3, custom: {configPath: /etc/b.conf}}";
    let custom: MqttBroker = object("MqttBroker", spec);
    let got = admitted(&policy(&built(&custom, &operands(true))));
    assert_eq!(got[&1883], strs(&["namespace", "operator"]));
    assert_eq!(
        got[&0],
        strs(&["own"]),
        "custom clustering: any port among its pods"
    );
}

#[test]
fn pubsub_serves_one_client_port_and_sockudo_metrics_only_to_the_operator() {
    let pss: PubSubServer = object("PubSubServer", "{port: 3000}");
    let got = admitted(&policy(&built(&pss, &operands(true))));
    assert_eq!(got[&3000], strs(&["namespace", "operator"]));
    assert_eq!(got.len(), 1, "{got:?}");
    let spec = "{protocol: pusher, port: 6001, pusher: {secretName: app}}";
    let pusher: PubSubServer = object("PubSubServer", spec);
    let got = admitted(&policy(&built(&pusher, &operands(true))));
    assert_eq!(got[&6001], strs(&["namespace", "operator"]));
    assert_eq!(got[&9601], strs(&["operator"]));
}

/// Every port a server pod declares is fenced by exactly one rule, so a port added to a
/// builder without a place in its fence fails here (a custom engine's peers: any port).
#[test]
fn every_declared_port_has_exactly_one_rule() {
    let agent = "faultInjection: {enabled: true}";
    let cases: Vec<Children> = vec![
        built(
            &object::<JetStreamCluster>("JetStreamCluster", &format!("{{replicas: 3, {agent}}}")),
            &operands(true),
        ),
        built(
            &object::<MqttBroker>(
                "MqttBroker",
                &format!("{{listeners: {{websocket: {{port: 8083}}}}, {agent}}}"),
            ),
            &operands(true),
        ),
        built(
            &object::<PubSubServer>(
                "PubSubServer",
                "{protocol: pusher, pusher: {secretName: a}}",
            ),
            &operands(true),
        ),
    ];
    for c in &cases {
        let spec = policy(c);
        let declared: Vec<i32> = (c.template().unwrap().spec.iter())
            .flat_map(|s| &s.containers)
            .flat_map(|c| c.ports.iter().flatten())
            .map(|p| p.container_port)
            .collect();
        assert!(declared.len() >= 2, "{declared:?}");
        for port in declared {
            let rules = (spec.ingress.iter().flatten())
                .filter(|r| {
                    (r.ports.iter().flatten()).any(|p| p.port == Some(IntOrString::Int(port)))
                })
                .count();
            assert_eq!(rules, 1, "port {port}: {spec:?}");
        }
    }
}
