//! A fault against an in-memory API whose status write fails right after the server pod was
//! deleted: the next pass (a new leader, nothing cached) must record the fault as carried out,
//! on that pod, without deleting anything again, whether it comes late or at once.

mod fake_api;

use fake_api::FakeApi;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use msgbench_crds::BenchmarkRun;
use msgbench_operator::benchmark_run::reconcile::reconcile;
use msgbench_operator::runtime::context::{Context, Readiness};
use serde_json::{json, Value};
use std::sync::Arc;

const RUN: &str = "/apis/msgbench.dev/v1alpha1/namespaces/bench/benchmarkruns/flt";
const JSC: &str = "/apis/msgbench.dev/v1alpha1/namespaces/bench/jetstreamclusters/demo";
const STS: &str = "/apis/apps/v1/namespaces/bench/statefulsets/demo";
const JOB: &str = "/apis/batch/v1/namespaces/bench/jobs/flt-g1";
const PODS: &str = "/api/v1/namespaces/bench/pods";

fn at(offset_ms: i64) -> String {
    (Timestamp::now() + SignedDuration::from_millis(offset_ms)).to_string()
}

fn run_object() -> Value {
    json!({
        "apiVersion": "msgbench.dev/v1alpha1", "kind": "BenchmarkRun",
        "metadata": {"name": "flt", "namespace": "bench", "uid": "run-uid", "generation": 1,
                     "resourceVersion": "1"},
        "spec": {
            "target": {"serverRef": {"kind": "JetStreamCluster", "name": "demo"}},
            "workload": {"protocol": "jetstream", "durationSeconds": 30},
            "runners": {"count": 1},
            "faults": [{"afterSeconds": 10, "action": "kill", "pod": "ordinal", "ordinal": 0}]
        },
        "status": {
            "phase": "Running", "observedGeneration": 1, "jobName": "flt-g1",
            "startTime": at(-10_000),
            "faults": [{"fault": 0, "trial": 1, "server": "JetStreamCluster/demo",
                        "action": "kill", "plannedTime": at(-100)}]
        }
    })
}

fn owner(kind: &str, name: &str, uid: &str) -> Value {
    json!([{"apiVersion": "v1", "kind": kind, "name": name, "uid": uid, "controller": true}])
}

fn server_pod(name: &str, uid: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "bench", "uid": uid,
            "labels": {"app.kubernetes.io/name": "jetstreamcluster",
                       "app.kubernetes.io/instance": "demo",
                       "app.kubernetes.io/component": "server"},
            "ownerReferences": owner("StatefulSet", "demo", "sts-uid")},
        "spec": {"containers": [{"name": "nats", "image": "nats"}]},
        "status": {"phase": "Running"}
    })
}

/// A running run with one fault due now, its server (a StatefulSet it owns, three pods) and
/// its runner Job; status writes fail once a pod is deleted.
fn setup() -> FakeApi {
    let api = FakeApi::default();
    let path = format!(
        "{}/tests/fixtures/jsc-basic.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let jsc: Value = serde_norway::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let jsc_uid = jsc["metadata"]["uid"].as_str().unwrap().to_string();
    api.insert(JSC, jsc);
    api.insert(
        STS,
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
               "metadata": {"name": "demo", "namespace": "bench", "uid": "sts-uid",
                            "ownerReferences": owner("JetStreamCluster", "demo", &jsc_uid)}}),
    );
    for i in 0..3 {
        let name = format!("demo-{i}");
        api.insert(
            &format!("{PODS}/{name}"),
            server_pod(&name, &format!("pod-{i}")),
        );
    }
    api.insert(
        JOB,
        json!({"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": "flt-g1", "namespace": "bench", "uid": "job-uid",
                            "ownerReferences": owner("BenchmarkRun", "flt", "run-uid")},
               "status": {"active": 1}}),
    );
    api.insert(RUN, run_object());
    api.0.lock().unwrap().fail_status_after_pod_delete = true;
    api
}

fn leader(api: &FakeApi) -> Arc<Context> {
    let mut c = Context::new(api.client(), Arc::new(Readiness::new(1)), false);
    c.runs.allow_faults = true;
    Arc::new(c)
}

/// One pass by `ctx`: whether it succeeded, and the pod deletions it made.
async fn pass(api: &FakeApi, ctx: &Arc<Context>) -> (bool, Vec<String>) {
    let obj: BenchmarkRun = serde_json::from_value(api.get(RUN).unwrap()).unwrap();
    let ok = reconcile(Arc::new(obj), ctx.clone()).await.is_ok();
    let deletes = api
        .take_writes()
        .into_iter()
        .filter(|(verb, p)| verb == "DELETE" && p.starts_with(PODS))
        .map(|(_, p)| p)
        .collect();
    (ok, deletes)
}

fn fault(api: &FakeApi) -> Value {
    api.get(RUN).unwrap()["status"]["faults"][0].clone()
}

/// The first pass deletes demo-0 and then cannot write the status.
async fn delete_then_lose_the_status_write(api: &FakeApi) {
    let (ok, deletes) = pass(api, &leader(api)).await;
    assert!(!ok, "the status write after the delete failed");
    assert_eq!(deletes, [format!("{PODS}/demo-0")]);
    // A kill is not a forced deletion (grace 0 would start the replacement on the same volume
    // while the old server still runs), and deletes only the pod it chose.
    let (path, options) = api
        .0
        .lock()
        .unwrap()
        .delete_options
        .pop()
        .expect("a DELETE");
    assert_eq!(path, format!("{PODS}/demo-0"));
    assert_eq!(options["gracePeriodSeconds"], 1, "{options}");
    assert!(options["preconditions"]["uid"].is_string(), "{options}");
    api.heal_status_writes();
}

fn assert_carried_out_on_demo_0(api: &FakeApi) {
    let f = fault(api);
    assert!(f["executedTime"].is_string(), "recorded as done: {f}");
    assert_eq!(f["pod"], "demo-0", "{f}");
    assert!(f["message"].as_str().unwrap().starts_with("killed"), "{f}");
    assert_eq!(f["injecting"], Value::Null, "settled: {f}");
    assert_eq!(api.get(RUN).unwrap()["status"]["phase"], "Running");
}

#[tokio::test]
async fn a_fault_whose_status_write_was_lost_is_recorded_done_by_a_late_next_pass() {
    let api = setup();
    delete_then_lose_the_status_write(&api).await;
    // The retry comes past the lateness limit (an error backoff is ≥ 5 s): move the due time.
    let mut run = api.get(RUN).unwrap();
    run["status"]["faults"][0]["plannedTime"] = json!(at(-10_000));
    api.insert(RUN, run);

    let (ok, deletes) = pass(&api, &leader(&api)).await;
    assert!(ok);
    assert!(deletes.is_empty(), "nothing deleted again: {deletes:?}");
    assert_carried_out_on_demo_0(&api);
}

#[tokio::test]
async fn a_fault_whose_pod_was_replaced_is_not_carried_out_a_second_time() {
    let api = setup();
    delete_then_lose_the_status_write(&api).await;
    // The StatefulSet brings demo-0 back at once, under a new uid.
    api.insert(&format!("{PODS}/demo-0"), server_pod("demo-0", "pod-0-new"));

    let (ok, deletes) = pass(&api, &leader(&api)).await;
    assert!(ok);
    assert!(
        deletes.is_empty(),
        "the new demo-0 is not deleted: {deletes:?}"
    );
    assert_carried_out_on_demo_0(&api);
}

#[tokio::test]
async fn a_recorded_choice_whose_pod_is_still_there_in_time_is_deleted_once() {
    let api = setup();
    api.0.lock().unwrap().fail_status_after_pod_delete = false;
    // A leader recorded its choice, then lost the lease before the delete.
    let mut run = api.get(RUN).unwrap();
    run["status"]["faults"][0]["injecting"] = json!({"pod": "demo-2", "podUid": "pod-2",
        "startedTime": at(-50), "how": "ordinal 2"});
    api.insert(RUN, run);

    let (ok, deletes) = pass(&api, &leader(&api)).await;
    assert!(ok);
    assert_eq!(
        deletes,
        [format!("{PODS}/demo-2")],
        "the recorded pod, not ordinal 0"
    );
    assert_eq!(fault(&api)["pod"], "demo-2");
    assert!(fault(&api)["executedTime"].is_string());
}

/// Faults due together are carried out together: every pod is chosen and the choices go out in
/// one status write, then every pod is acted on, so the last is not hit a status write per
/// fault after the first (a crashed server could be back by then).
#[tokio::test]
async fn faults_due_together_are_recorded_in_one_write_and_then_all_carried_out() {
    let api = setup();
    api.0.lock().unwrap().fail_status_after_pod_delete = false;
    let mut run = api.get(RUN).unwrap();
    let one =
        |o: i64| json!({"afterSeconds": 10, "action": "kill", "pod": "ordinal", "ordinal": o});
    run["spec"]["faults"] = json!([one(0), one(1), one(2)]);
    let rec = |f: i64| {
        json!({"fault": f, "trial": 1, "server": "JetStreamCluster/demo", "action": "kill",
               "plannedTime": at(-100)})
    };
    run["status"]["faults"] = json!([rec(0), rec(1), rec(2)]);
    api.insert(RUN, run);

    let obj: BenchmarkRun = serde_json::from_value(api.get(RUN).unwrap()).unwrap();
    assert!(reconcile(Arc::new(obj), leader(&api)).await.is_ok());
    let writes = api.take_writes();
    let status_write = |(verb, p): &(String, String)| verb != "DELETE" && p.ends_with("/status");
    let deletes: Vec<usize> = (writes.iter().enumerate())
        .filter(|(_, (verb, p))| verb == "DELETE" && p.starts_with(PODS))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(deletes.len(), 3, "every pod deleted: {writes:?}");
    let intents = writes[..deletes[0]]
        .iter()
        .filter(|w| status_write(w))
        .count();
    let between = writes[deletes[0]..=deletes[2]]
        .iter()
        .filter(|w| status_write(w))
        .count();
    assert_eq!(
        (intents, between),
        (1, 0),
        "one intent write, then the deletes: {writes:?}"
    );
    let faults = api.get(RUN).unwrap()["status"]["faults"].clone();
    for (i, f) in faults.as_array().unwrap().iter().enumerate() {
        assert_eq!(f["pod"], format!("demo-{i}"), "{f}");
        assert!(f["executedTime"].is_string(), "{f}");
    }
}
