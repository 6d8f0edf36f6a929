//! `spec.stopWhen` end to end against an in-memory API and one fake runner agent on loopback:
//! trials 20, minRounds 3. Rounds 1 and 2 are released unread; at round 3's end the records
//! so far are read, the interval is tight, the stop is stored in status before the runner
//! hears it, an operator restart then sends it from status, and the run ends Succeeded with 3
//! rounds, the runner's 3 records acknowledged.

mod fake_agent;
mod fake_api;

use fake_agent::{agent_app, Shared};
use fake_api::FakeApi;
use msgbench_crds::BenchmarkRun;
use msgbench_operator::benchmark_run::reconcile::reconcile;
use msgbench_operator::runtime::context::{Context, Readiness};
use serde_json::{json, Value};
use std::sync::Arc;

const RUN: &str = "/apis/msgbench.dev/v1alpha1/namespaces/bench/benchmarkruns/early";
const JOB: &str = "/apis/batch/v1/namespaces/bench/jobs/early-g1";
const PODS: &str = "/api/v1/namespaces/bench/pods";
const IP: &str = "127.0.0.41";

fn run_object() -> Value {
    json!({
        "apiVersion": "msgbench.dev/v1alpha1", "kind": "BenchmarkRun",
        "metadata": {"name": "early", "namespace": "bench", "uid": "run-uid", "generation": 1,
                     "resourceVersion": "1"},
        "spec": {
            "target": {"endpoint": {"protocol": "nats", "url": "nats://127.0.0.1:4222"}},
            "workload": {"protocol": "nats", "payloadBytes": 64, "ratePerPublisher": 100,
                         "durationSeconds": 1},
            "trials": 20,
            "stopWhen": {"intervalWithinPercent": 5, "minRounds": 3}
        }
    })
}

fn runner_pod(job_uid: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "early-g1-0-abc", "namespace": "bench",
            "labels": {"app.kubernetes.io/name": "benchmarkrun", "app.kubernetes.io/instance": "early",
                       "msgbench.dev/generation": "1",
                       "batch.kubernetes.io/job-completion-index": "0"},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "early-g1",
                                 "uid": job_uid, "controller": true}]},
        "spec": {"containers": [{"name": "runner", "image": "bench-runner"}]},
        "status": {"phase": "Running", "podIP": IP,
                   "conditions": [{"type": "Ready", "status": "True"}]}
    })
}

fn context(api: &FakeApi, port: u16) -> Arc<Context> {
    let mut c = Context::new(api.client(), Arc::new(Readiness::new(1)), false);
    // The key from the operator's Secret: the same after a restart.
    c.control = Arc::new(fake_agent::operator_key());
    c.runs.agent_port = port;
    Arc::new(c)
}

async fn pass(api: &FakeApi, ctx: &Arc<Context>) {
    let obj: BenchmarkRun = serde_json::from_value(api.get(RUN).unwrap()).unwrap();
    reconcile(Arc::new(obj), ctx.clone())
        .await
        .expect("reconcile succeeds");
}

fn status(api: &FakeApi, pointer: &str) -> Value {
    api.get(RUN).unwrap()["status"]
        .pointer(pointer)
        .cloned()
        .unwrap_or(Value::Null)
}

/// The agent finished `trial - 1` trials (each 100 msg/s, ±2 %) and waits for `trial`.
fn wait_at(a: &Shared, trial: u32) {
    let mut a = a.lock().unwrap();
    let done = trial - 1;
    let n = [100, 102, 99, 101][done as usize % 4];
    let started = 1_700_000_000_000 + u64::from(done) * 10_000;
    let line = runner_api::testing::record(1, done, &vec![2_000; n], n as u64, started);
    a.records.push(line);
    a.progress.trial = trial;
    a.progress.waiting_for = trial;
    a.progress.trial_start_unix_ms = 0;
}

#[tokio::test]
async fn a_run_whose_interval_is_tight_after_three_rounds_stops_and_succeeds() {
    let (agent, port) = agent_app(IP, 0, 20).await;
    let api = FakeApi::default();
    api.insert(RUN, run_object());
    let ctx = context(&api, port);
    pass(&api, &ctx).await; // accepted
    pass(&api, &ctx).await; // Job created
    let job = api.get(JOB).expect("the Job")["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    api.insert(&format!("{PODS}/early-g1-0-abc"), runner_pod(&job));
    agent.lock().unwrap().progress.ready = true;
    pass(&api, &ctx).await; // start chosen
    pass(&api, &ctx).await; // and sent
    assert_eq!(status(&api, "/phase"), "Running");
    {
        let mut a = agent.lock().unwrap();
        let start = a.starts[&1];
        (a.progress.started, a.progress.trial) = (true, 1);
        a.progress.trial_start_unix_ms = start;
    }

    // Rounds 1 and 2 end below minRounds: the next is released, nothing read.
    for trial in [2, 3] {
        wait_at(&agent, trial);
        pass(&api, &ctx).await;
        assert!(agent.lock().unwrap().starts.contains_key(&trial));
    }
    assert_eq!(agent.lock().unwrap().results_reads, 0);

    // After round 3 the records so far are read; the interval is tight: the stop is stored
    // and nobody is told yet.
    wait_at(&agent, 4);
    pass(&api, &ctx).await;
    assert_eq!(status(&api, "/stop/reason"), "IntervalReached");
    assert_eq!(status(&api, "/stop/rounds"), 3);
    assert!(status(&api, "/stop/intervalPercent").as_f64().unwrap() <= 5.0);
    {
        let a = agent.lock().unwrap();
        assert_eq!((a.results_reads, a.stops.len()), (1, 0));
        assert!(!a.starts.contains_key(&4), "trial 4 is never released");
    }

    // The operator restarts: the stop is sent from status.
    let ctx = context(&api, port);
    pass(&api, &ctx).await;
    assert_eq!(agent.lock().unwrap().stops, [3]);
    assert!(!agent.lock().unwrap().starts.contains_key(&4));
    {
        let mut a = agent.lock().unwrap();
        a.progress.waiting_for = 0;
        a.progress.stopped_after = 3;
        a.progress.finished = true;
    }
    pass(&api, &ctx).await;
    let st = api.get(RUN).unwrap()["status"].clone();
    assert_eq!(status(&api, "/phase"), "Succeeded", "{st}");
    assert_eq!(st["trials"].as_array().unwrap().len(), 3);
    assert_eq!(st["statistics"]["trials"], 3);
    assert_eq!(st["progress"]["trials"], 3);
    assert_eq!(st["result"]["received"], 102 + 99 + 101);
    let said = st["verdict"]["message"].as_str().unwrap();
    assert!(said.contains("stopWhen after 3 of 20 rounds"), "{said}");
    assert_eq!(agent.lock().unwrap().stops, [3], "sent once");

    pass(&api, &ctx).await;
    assert_eq!(agent.lock().unwrap().acked, Some(3), "the trials that ran");
    // Every request (progress, starts, the stop, reads, the ack) carried a credential of its
    // own, across the restart: none was refused.
    assert_eq!(agent.lock().unwrap().refused, Vec::<String>::new());
}
