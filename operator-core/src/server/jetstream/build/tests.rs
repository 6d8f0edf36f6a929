//! A cluster's route password: generated once, reached by reference only.
use super::*;
use crate::server::kind::ManagedServerKind;

fn built(replicas: i32) -> Children {
    let js: JetStreamCluster = serde_norway::from_str(&format!(
        "apiVersion: msgbench.dev/v1alpha1\nkind: JetStreamCluster\n\
         metadata: {{name: js, namespace: bench, uid: u1}}\nspec: {{replicas: {replicas}}}\n"
    ))
    .unwrap();
    let owner = Owner::of(&js, JetStreamCluster::KIND_LABEL).unwrap();
    js.build(&owner, replicas, &OperandDefaults::default())
}

/// A cluster's servers take the route password from the generated Secret by reference and
/// compose each route URL from it; the pod spec holds the variable's name only.
#[test]
fn a_cluster_gets_its_route_secret_by_reference_only() {
    let c = built(3);
    let secret = &c.generated_secrets[0];
    assert_eq!(secret.name(), "js-routes");
    assert_eq!(secret.key, "password");
    let owners = secret.metadata.owner_references.as_ref().unwrap();
    assert_eq!(owners[0].uid, "u1", "goes with its JetStreamCluster");
    let env = c.template().unwrap().spec.as_ref().unwrap().containers[0]
        .env
        .clone()
        .unwrap();
    let at = |name: &str| env.iter().position(|e| e.name == name).unwrap();
    let password = &env[at("ROUTE_PASSWORD")];
    assert_eq!(password.value, None);
    let r = password
        .value_from
        .as_ref()
        .unwrap()
        .secret_key_ref
        .as_ref();
    assert_eq!(
        r.map(|r| (r.name.as_str(), r.key.as_str())),
        Some(("js-routes", "password"))
    );
    // The kubelet expands $(ROUTE_PASSWORD) only when it is defined earlier.
    assert!(at("ROUTE_PASSWORD") < at("ROUTE_0"));
    assert_eq!(
        env[at("ROUTE_2")].value.as_deref(),
        Some("nats-route://route:$(ROUTE_PASSWORD)@js-2.js-headless.bench.svc:6222")
    );
    let one = built(1);
    assert!(one.generated_secrets.is_empty(), "one server: no routes");
    let env = &one.template().unwrap().spec.as_ref().unwrap().containers[0].env;
    assert!(!env.iter().flatten().any(|e| e.name.starts_with("ROUTE_")));
}
