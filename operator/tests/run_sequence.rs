//! A whole BenchmarkRun against an in-memory API and two fake runner agents on loopback, with
//! an operator restart between storing the common start and sending it. Counts API writes: a
//! pass with nothing new writes nothing.

mod fake_agent;
mod fake_api;

use fake_agent::{agent_app, Shared};
use fake_api::FakeApi;
use msgbench_crds::BenchmarkRun;
use msgbench_operator::benchmark_run::reconcile::reconcile;
use msgbench_operator::runtime::context::{Context, Readiness};
use runner_api::agent::ResultLine;
use serde_json::{json, Value};
use std::sync::Arc;

const RUN: &str = "/apis/msgbench.dev/v1alpha1/namespaces/bench/benchmarkruns/seq";
const JOB: &str = "/apis/batch/v1/namespaces/bench/jobs/seq-g1";
const PODS: &str = "/api/v1/namespaces/bench/pods";

fn record(runner: u16, trial: u32, started_ms: u64) -> ResultLine {
    runner_api::testing::record(runner, trial, &[2_000; 100], 100, started_ms)
}

fn run_object() -> Value {
    json!({
        "apiVersion": "msgbench.dev/v1alpha1", "kind": "BenchmarkRun",
        "metadata": {"name": "seq", "namespace": "bench", "uid": "run-uid", "generation": 1,
                     "resourceVersion": "1"},
        "spec": {
            "target": {"endpoint": {"protocol": "nats", "url": "nats://127.0.0.1:4222"}},
            "workload": {"protocol": "nats", "payloadBytes": 64, "ratePerPublisher": 100,
                         "durationSeconds": 1},
            "runners": {"count": 2},
            "trials": 2
        }
    })
}

/// A ready runner pod of the Job with uid `job_uid`, as the Job controller makes it.
fn runner_pod(name: &str, index: u32, ip: &str, job_uid: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "bench",
            "labels": {"app.kubernetes.io/name": "benchmarkrun", "app.kubernetes.io/instance": "seq",
                       "msgbench.dev/generation": "1",
                       "batch.kubernetes.io/job-completion-index": index.to_string()},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "seq-g1",
                                 "uid": job_uid, "controller": true}]},
        "spec": {"containers": [{"name": "runner", "image": "bench-runner"}]},
        "status": {"phase": "Running", "podIP": ip,
                   "conditions": [{"type": "Ready", "status": "True"}]}
    })
}

fn job_uid(api: &FakeApi) -> String {
    api.get(JOB).expect("the Job exists")["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string()
}

fn context(api: &FakeApi, port: u16) -> Arc<Context> {
    let mut c = Context::new(api.client(), Arc::new(Readiness::new(1)), false);
    // The key from the operator's Secret: the same after a restart.
    c.control = Arc::new(fake_agent::operator_key());
    c.runs.agent_port = port;
    Arc::new(c)
}

/// One pass; returns the API writes it made, events left out.
async fn pass(api: &FakeApi, ctx: &Arc<Context>) -> Vec<(String, String)> {
    let raw = api.get(RUN).unwrap();
    let obj: BenchmarkRun =
        serde_json::from_value(raw.clone()).unwrap_or_else(|e| panic!("{e}: {raw}"));
    reconcile(Arc::new(obj), ctx.clone())
        .await
        .expect("reconcile succeeds");
    api.take_writes()
        .into_iter()
        .filter(|(_, p)| !p.contains("/events"))
        .collect()
}

fn status(api: &FakeApi, pointer: &str) -> Value {
    api.get(RUN).unwrap()["status"]
        .pointer(pointer)
        .cloned()
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn a_whole_run_survives_a_restart_between_storing_and_sending_the_start() {
    let (a1, port) = agent_app("127.0.0.21", 0, 2).await;
    let (a2, _) = agent_app("127.0.0.22", port, 2).await;
    let api = FakeApi::default();
    api.insert(RUN, run_object());
    let ctx = context(&api, port);

    let accepted = pass(&api, &ctx).await;
    assert_eq!(
        accepted,
        vec![("PATCH".to_string(), format!("{RUN}/status"))]
    );
    assert_eq!(status(&api, "/phase"), "Pending");

    let created = pass(&api, &ctx).await;
    let paths: Vec<&str> = created.iter().map(|(_, p)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/api/v1/namespaces/bench/configmaps/seq-g1",
            JOB,
            &format!("{RUN}/status"),
        ],
        "config and Job, then one status write: no Secret"
    );
    assert_eq!(status(&api, "/phase"), "Starting");
    // The first look at the starting runners records progress and the server-usage source ...
    let first = pass(&api, &ctx).await;
    assert_eq!(first, vec![("PATCH".to_string(), format!("{RUN}/status"))]);
    assert_eq!(status(&api, "/progress/runnersReady"), 0);
    // ... after that, while no runner is ready, nothing is written.
    assert!(
        pass(&api, &ctx).await.is_empty(),
        "no runner ready: nothing to write"
    );

    let job = job_uid(&api);
    for (i, ip) in ["127.0.0.21", "127.0.0.22"].into_iter().enumerate() {
        let name = format!("seq-g1-{i}-abc");
        api.insert(
            &format!("{PODS}/{name}"),
            runner_pod(&name, i as u32, ip, &job),
        );
    }
    for a in [&a1, &a2] {
        a.lock().unwrap().progress.ready = true;
    }
    let chosen = pass(&api, &ctx).await;
    assert_eq!(chosen, vec![("PATCH".to_string(), format!("{RUN}/status"))]);
    assert_eq!(
        status(&api, "/phase"),
        "Starting",
        "Running once the runners have it"
    );
    let start = status(&api, "/startTime");
    assert!(start.is_string());
    assert_eq!(
        a1.lock().unwrap().start_calls,
        0,
        "stored before it is sent"
    );

    // The operator restarts: a new context, nothing cached.
    let ctx = context(&api, port);
    let released = pass(&api, &ctx).await;
    assert_eq!(
        released,
        vec![("PATCH".to_string(), format!("{RUN}/status"))]
    );
    assert_eq!(status(&api, "/phase"), "Running");
    let start_ms = start
        .as_str()
        .unwrap()
        .parse::<k8s_openapi::jiff::Timestamp>()
        .unwrap()
        .as_millisecond() as u64;
    for a in [&a1, &a2] {
        assert_eq!(
            a.lock().unwrap().starts.get(&1),
            Some(&start_ms),
            "the stored time"
        );
        let mut a = a.lock().unwrap();
        a.progress.started = true;
        a.progress.trial = 1;
        a.progress.trial_start_unix_ms = start_ms;
    }
    // Trial 1 running is news (progress); the same again is not.
    assert_eq!(pass(&api, &ctx).await.len(), 1);
    assert_eq!(status(&api, "/progress/trial"), 1);
    assert!(
        pass(&api, &ctx).await.is_empty(),
        "nothing new: nothing written"
    );
    assert_eq!(
        a1.lock().unwrap().start_calls,
        1,
        "a started runner is not sent again"
    );

    // Both wait for trial 2: released together, in one pass.
    for a in [&a1, &a2] {
        let mut a = a.lock().unwrap();
        a.progress.trial = 2;
        a.progress.waiting_for = 2;
        a.progress.trial_start_unix_ms = 0;
    }
    pass(&api, &ctx).await;
    let t2 = a1
        .lock()
        .unwrap()
        .starts
        .get(&2)
        .copied()
        .expect("trial 2 released");
    assert_eq!(
        a2.lock().unwrap().starts.get(&2),
        Some(&t2),
        "one time for both"
    );

    // Both finish and hold their records.
    for (i, a) in [&a1, &a2].into_iter().enumerate() {
        let mut a = a.lock().unwrap();
        a.progress.waiting_for = 0;
        a.progress.finished = true;
        a.records = vec![
            record(i as u16 + 1, 1, start_ms),
            record(i as u16 + 1, 2, t2),
        ];
    }
    let verdict = pass(&api, &ctx).await;
    assert_eq!(
        verdict,
        vec![("PATCH".to_string(), format!("{RUN}/status"))]
    );
    assert_eq!(
        status(&api, "/phase"),
        "Succeeded",
        "{}",
        api.get(RUN).unwrap()["status"]
    );
    assert_eq!(status(&api, "/result/received"), 400);
    assert_eq!(
        a1.lock().unwrap().acked,
        None,
        "acked only after the status is stored"
    );

    assert!(pass(&api, &ctx).await.is_empty());
    assert_eq!(a1.lock().unwrap().acked, Some(2));
    assert_eq!(a2.lock().unwrap().acked, Some(2));
    // Every call carried a credential of its own that the runner pods' key and run uid accept
    // for that very request (a real agent refuses a credential it has seen).
    for a in [&a1, &a2] {
        let a = a.lock().unwrap();
        assert_eq!(a.refused, Vec::<String>::new());
        // Progress reads, starts and results reads, and the ack besides.
        assert!(a.accepted > a.progress_calls + a.start_calls + a.results_reads);
    }
    let reads = api.0.lock().unwrap().reads.clone();
    assert!(
        !reads
            .iter()
            .any(|p| p.contains("/secrets") || p.ends_with("/log")),
        "a Secret or a pod log was read: {reads:?}"
    );
}

/// One runner's run, Starting: its Job created, no pod yet; agents at .31 (for the Job's pod)
/// and .32 (for a stale one).
async fn starting_run() -> (FakeApi, Arc<Context>, Shared, Shared) {
    let (mine, port) = agent_app("127.0.0.31", 0, 2).await;
    let (stale, _) = agent_app("127.0.0.32", port, 2).await;
    let api = FakeApi::default();
    let mut run = run_object();
    run["spec"]["runners"]["count"] = json!(1);
    api.insert(RUN, run);
    let ctx = context(&api, port);
    pass(&api, &ctx).await;
    pass(&api, &ctx).await;
    assert_eq!(status(&api, "/phase"), "Starting");
    (api, ctx, mine, stale)
}

/// The run was deleted and created again under the same name while its old runners still
/// terminate: they carry the same labels, but another Job (uid) controls them.
#[tokio::test]
async fn a_failed_pod_of_another_job_with_the_runs_labels_does_not_fail_the_run() {
    let (api, ctx, _, _) = starting_run().await;
    let mut failed = runner_pod("seq-g1-0-old", 0, "127.0.0.33", "old-job-uid");
    failed["status"] = json!({"phase": "Failed", "reason": "Error"});
    api.insert(&format!("{PODS}/seq-g1-0-old"), failed);
    pass(&api, &ctx).await;
    assert_eq!(
        status(&api, "/phase"),
        "Starting",
        "{}",
        api.get(RUN).unwrap()["status"]
    );
}

#[tokio::test]
async fn a_running_pod_of_another_job_with_the_runs_labels_is_never_sent_a_credential() {
    let (api, ctx, mine, stale) = starting_run().await;
    let old = runner_pod("seq-g1-0-old", 0, "127.0.0.32", "old-job-uid");
    api.insert(&format!("{PODS}/seq-g1-0-old"), old);
    stale.lock().unwrap().progress.ready = true;
    pass(&api, &ctx).await;
    assert_eq!(
        status(&api, "/progress/runnersReady"),
        0,
        "not a ready runner"
    );

    let pod = runner_pod("seq-g1-0-new", 0, "127.0.0.31", &job_uid(&api));
    api.insert(&format!("{PODS}/seq-g1-0-new"), pod);
    mine.lock().unwrap().progress.ready = true;
    pass(&api, &ctx).await; // the start is chosen and stored
    pass(&api, &ctx).await; // ... and sent; the agents are polled with a credential
    assert_eq!(status(&api, "/phase"), "Running");
    assert!(mine.lock().unwrap().progress_calls > 0);
    let s = stale.lock().unwrap();
    assert_eq!(
        (s.progress_calls, s.start_calls),
        (0, 0),
        "never sent a credential"
    );
}
