//! Reconcile sequences against an in-memory API: the first pass writes, an unchanged second
//! pass writes nothing, a spec change writes only what changed, a kubelet refusal holds the
//! workload at 0 replicas without further writes until the spec changes.

mod fake_api;

use fake_api::FakeApi;
use msgbench_crds::{JetStreamCluster, MqttBroker};
use msgbench_operator::runtime::context::{Context, Readiness};
use msgbench_operator::server::reconcile::reconcile;
use serde_json::{json, Value};
use std::sync::Arc;

const JSC: &str = "/apis/msgbench.dev/v1alpha1/namespaces/bench/jetstreamclusters/demo";
const MQB: &str = "/apis/msgbench.dev/v1alpha1/namespaces/bench/mqttbrokers/mosq";
const STS: &str = "/apis/apps/v1/namespaces/bench/statefulsets/demo";

fn fixture(file: &str) -> Value {
    let path = format!("{}/tests/fixtures/{file}", env!("CARGO_MANIFEST_DIR"));
    serde_norway::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn ctx(api: &FakeApi) -> Arc<Context> {
    Arc::new(Context::new(
        api.client(),
        Arc::new(Readiness::new(1)),
        false,
    ))
}

async fn reconcile_jsc(api: &FakeApi, ctx: &Arc<Context>) -> Vec<(String, String)> {
    let obj: JetStreamCluster = serde_json::from_value(api.get(JSC).unwrap()).unwrap();
    reconcile(Arc::new(obj), ctx.clone())
        .await
        .expect("reconcile succeeds");
    api.take_writes()
}

fn condition(obj: &Value, type_: &str) -> Value {
    obj["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == type_)
        .cloned()
        .unwrap()
}

fn count(writes: &[(String, String)], needle: &str) -> usize {
    writes.iter().filter(|(_, p)| p.contains(needle)).count()
}

#[tokio::test]
async fn second_pass_of_unchanged_object_writes_nothing() {
    let api = FakeApi::default();
    api.insert(JSC, fixture("jsc-basic.yaml"));
    let ctx = ctx(&api);

    let first = reconcile_jsc(&api, &ctx).await;
    // ConfigMap, 2 Services, PDB, StatefulSet, status, events.
    assert_eq!(count(&first, "/configmaps/demo-config"), 1, "{first:?}");
    assert_eq!(count(&first, "/services/"), 2);
    assert_eq!(count(&first, "/poddisruptionbudgets/demo"), 1);
    assert_eq!(count(&first, "/statefulsets/demo"), 1);
    assert_eq!(count(&first, "/jetstreamclusters/demo/status"), 1);
    let status = api.get(JSC).unwrap();
    assert_eq!(status["status"]["observedGeneration"], 1);
    assert_eq!(condition(&status, "Ready")["status"], "False");
    assert_eq!(condition(&status, "Ready")["observedGeneration"], 1);
    assert_eq!(condition(&status, "Progressing")["reason"], "RollingOut");
    assert_eq!(status["status"]["url"], "nats://demo.bench.svc:4222");

    let second = reconcile_jsc(&api, &ctx).await;
    assert!(second.is_empty(), "second pass must not write: {second:?}");
    let third = reconcile_jsc(&api, &ctx).await;
    assert!(third.is_empty(), "third pass must not write: {third:?}");
}

#[tokio::test]
async fn drift_in_a_child_is_repaired_and_a_spec_change_touches_only_what_changed() {
    let api = FakeApi::default();
    api.insert(JSC, fixture("jsc-basic.yaml"));
    let ctx = ctx(&api);
    reconcile_jsc(&api, &ctx).await;

    // Someone scales the StatefulSet by hand: the operator puts it back.
    let mut sts = api.get(STS).unwrap();
    sts["spec"]["replicas"] = json!(7);
    api.insert(STS, sts);
    let repaired = reconcile_jsc(&api, &ctx).await;
    let objects: Vec<_> = repaired
        .iter()
        .filter(|(_, p)| !p.contains("/events"))
        .collect();
    assert_eq!(
        objects,
        vec![&("PATCH".to_string(), STS.to_string())],
        "{repaired:?}"
    );
    assert_eq!(
        count(&repaired, "/events"),
        1,
        "the repair is reported as an event"
    );
    assert_eq!(api.get(STS).unwrap()["spec"]["replicas"], 3);

    // A deleted child comes back.
    api.remove("/api/v1/namespaces/bench/services/demo");
    let recreated = reconcile_jsc(&api, &ctx).await;
    assert_eq!(count(&recreated, "/services/demo"), 1, "{recreated:?}");

    // Spec change: 3 -> 1 replicas changes nats.conf (no routes) and the StatefulSet only.
    let mut cr = api.get(JSC).unwrap();
    cr["spec"]["replicas"] = json!(1);
    cr["metadata"]["generation"] = json!(2);
    api.insert(JSC, cr);
    let changed = reconcile_jsc(&api, &ctx).await;
    assert_eq!(count(&changed, "/configmaps/demo-config"), 1, "{changed:?}");
    assert_eq!(count(&changed, "/statefulsets/demo"), 1);
    assert_eq!(count(&changed, "/services/"), 0);
    assert_eq!(count(&changed, "/poddisruptionbudgets/"), 0);
    assert_eq!(api.get(JSC).unwrap()["status"]["observedGeneration"], 2);
}

#[tokio::test]
async fn switching_persistence_replaces_the_workload_and_deletes_the_orphan() {
    let api = FakeApi::default();
    api.insert(MQB, fixture("mqb-basic.yaml"));
    let ctx = ctx(&api);
    let run = |api: FakeApi, ctx: Arc<Context>| async move {
        let obj: MqttBroker = serde_json::from_value(api.get(MQB).unwrap()).unwrap();
        reconcile(Arc::new(obj), ctx)
            .await
            .expect("reconcile succeeds");
        api.take_writes()
    };
    run(api.clone(), ctx.clone()).await;
    assert!(api
        .get("/apis/apps/v1/namespaces/bench/deployments/mosq")
        .is_some());

    let mut cr = api.get(MQB).unwrap();
    cr["spec"]["persistence"] = json!({"enabled": true, "size": "1Gi"});
    cr["metadata"]["generation"] = json!(2);
    api.insert(MQB, cr);
    let writes = run(api.clone(), ctx.clone()).await;
    assert!(
        writes.contains(&(
            "DELETE".into(),
            "/apis/apps/v1/namespaces/bench/deployments/mosq".into()
        )),
        "{writes:?}"
    );
    assert!(api
        .get("/apis/apps/v1/namespaces/bench/statefulsets/mosq")
        .is_some());
    assert!(api
        .get("/apis/apps/v1/namespaces/bench/deployments/mosq")
        .is_none());
    assert!(
        run(api.clone(), ctx.clone()).await.is_empty(),
        "stable after the switch"
    );
}

#[tokio::test]
async fn kubelet_refusal_scales_to_zero_and_stays_quiet_until_the_spec_changes() {
    let api = FakeApi::default();
    api.insert(JSC, fixture("jsc-basic.yaml"));
    let ctx = ctx(&api);
    reconcile_jsc(&api, &ctx).await;

    let pod = "/api/v1/namespaces/bench/pods/demo-0";
    let hash = api.get(STS).unwrap()["spec"]["template"]["metadata"]["annotations"]
        ["msgbench.dev/template-hash"]
        .clone();
    assert!(hash.is_string());
    let failed_pod = json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "demo-0", "namespace": "bench",
                   "annotations": {"msgbench.dev/template-hash": hash},
                   "labels": {
                   "app.kubernetes.io/name": "jetstreamcluster",
                   "app.kubernetes.io/instance": "demo",
                   "app.kubernetes.io/component": "server",
                   "app.kubernetes.io/managed-by": "msgbench-operator"}},
               "status": {"phase": "Failed", "reason": "SysctlForbidden",
                          "message": "Pod forbidden sysctl: \"net.core.somaxconn\" not allowlisted"}});
    api.insert(pod, failed_pod.clone());
    let held = reconcile_jsc(&api, &ctx).await;
    assert_eq!(count(&held, "/statefulsets/demo"), 1, "{held:?}");
    assert_eq!(api.get(STS).unwrap()["spec"]["replicas"], 0);
    let cr = api.get(JSC).unwrap();
    let degraded = condition(&cr, "Degraded");
    assert_eq!(degraded["status"], "True");
    assert_eq!(degraded["reason"], "SysctlForbidden");
    assert!(degraded["message"]
        .as_str()
        .unwrap()
        .contains("net.core.somaxconn"));
    assert!(
        held.iter()
            .any(|(v, p)| v == "POST" && p.ends_with("/events")),
        "warning event"
    );

    // The StatefulSet controller removes the pod; the hold persists without writes.
    api.remove(pod);
    let quiet = reconcile_jsc(&api, &ctx).await;
    assert!(quiet.is_empty(), "held object must not write: {quiet:?}");
    assert_eq!(api.get(STS).unwrap()["spec"]["replicas"], 0);

    // A new generation with a new pod template lifts the hold, even though a refused pod of
    // the old template is still around (Deployments keep them).
    api.insert(pod, failed_pod);
    let mut cr = api.get(JSC).unwrap();
    cr["metadata"]["generation"] = json!(2);
    cr["spec"]["tuning"] = json!({"threads": 1});
    api.insert(JSC, cr);
    reconcile_jsc(&api, &ctx).await;
    assert_eq!(api.get(STS).unwrap()["spec"]["replicas"], 3);
    assert_eq!(
        condition(&api.get(JSC).unwrap(), "Degraded")["status"],
        "False"
    );
}

/// The operator never reads the Secret a spec names: the servers are built, and when the kubelet
/// cannot start one for want of it, that becomes the Degraded reason, with the kubelet's words.
#[tokio::test]
async fn missing_secret_is_a_condition_not_an_error() {
    let api = FakeApi::default();
    let mut cr = fixture("jsc-pinned.yaml");
    cr["metadata"]["name"] = json!("demo");
    api.insert(JSC, cr);
    let ctx = ctx(&api);
    let writes = reconcile_jsc(&api, &ctx).await;
    assert_eq!(count(&writes, "/statefulsets/demo"), 1, "{writes:?}");
    let hash = api.get(STS).unwrap()["spec"]["template"]["metadata"]["annotations"]
        ["msgbench.dev/template-hash"]
        .clone();
    let refused = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "demo-0", "namespace": "bench",
            "annotations": {"msgbench.dev/template-hash": hash},
            "labels": {"app.kubernetes.io/name": "jetstreamcluster",
                "app.kubernetes.io/instance": "demo", "app.kubernetes.io/component": "server",
                "app.kubernetes.io/managed-by": "msgbench-operator"}},
        "status": {"phase": "Pending", "containerStatuses": [{"name": "nats", "image": "nats",
            "imageID": "", "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": "CreateContainerConfigError",
                "message": "secret \"nats-auth\" not found"}}}]}});
    api.insert("/api/v1/namespaces/bench/pods/demo-0", refused);
    reconcile_jsc(&api, &ctx).await;
    let degraded = condition(&api.get(JSC).unwrap(), "Degraded");
    assert_eq!(
        (&degraded["status"], &degraded["reason"]),
        (&json!("True"), &json!("SecretNotFound"))
    );
    let message = degraded["message"].as_str().unwrap();
    assert!(
        message.contains("secret \"nats-auth\" not found"),
        "{message}"
    );
    let reads = api.0.lock().unwrap().reads.clone();
    assert!(
        !reads.iter().any(|p| p.contains("/secrets")),
        "a Secret was read: {reads:?}"
    );
}
