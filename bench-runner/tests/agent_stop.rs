//! `POST /stop {afterTrial}` (the operator's `spec.stopWhen` decided): an agent waiting at a
//! later trial's barrier ends its plan there, holds the records it has as the whole plan (the
//! ack with that count ends the hold), keeps the first stop on a resend, and refuses a stop
//! behind a trial it already released.
mod support;
use bench_runner::agent;
use runner_api::agent::{AgentConfig, AgentProgress, AgentResults, RawJson, ResultLine};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use support::*;

fn config(port: u16, trials: u32) -> AgentConfig {
    AgentConfig {
        target: format!("nats://127.0.0.1:{port}"),
        workload: workload(
            "protocol: nats\npublishers: 1\nsubscribers: 1\npayloadBytes: 32\nratePerPublisher: 500\nmessagesPerPublisher: 100\ndrainSeconds: 1\n",
        ),
        trials,
        settle_seconds: 0,
        barrier_timeout_seconds: 60,
        connect_timeout_seconds: 30,
        schedule: vec![],
        trial_barrier: true,
        results_hold_seconds: 30,
        target_auth: vec![],
        target_tls: vec![],
        isolation: Some(runner_api::agent::RunIsolation {
            id: "s7o8p9g1".into(),
            tag: 5,
        }),
        // As the operator writes it: the run's runner count (ids 1 to 3 here).
        runners: 3,
    }
}

async fn wait_for(addr: SocketAddr, what: &str, ok: impl Fn(&AgentProgress) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let p = progress(addr).await;
        if ok(&p) {
            return;
        }
        assert!(Instant::now() < deadline, "agent never {what}: {p:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn release(addr: SocketAddr, trial: u32) {
    let body = format!("{{\"startAtUnixMs\":{},\"trial\":{trial}}}", now_ms());
    assert_eq!(http(addr, "POST", "/start", &body).await.0, 200);
}

async fn stop(addr: SocketAddr, after: u32) -> (u16, String) {
    http(
        addr,
        "POST",
        "/stop",
        &format!("{{\"afterTrial\":{after}}}"),
    )
    .await
}

/// Runs the agent; the task ends with its lines and whether the hold ended by an ack.
fn spawn_agent(
    cfg: AgentConfig,
    state: std::sync::Arc<agent::AgentState>,
) -> tokio::task::JoinHandle<anyhow::Result<(Vec<ResultLine>, bool)>> {
    tokio::spawn(async move {
        let mut lines = Vec::new();
        let mut emit = |l: &ResultLine| {
            lines.push(l.clone());
            Ok(())
        };
        agent::run(cfg, 1, state.clone(), &mut emit).await?;
        let acked = state.hold_results(Duration::from_secs(20)).await;
        anyhow::Ok((lines, acked))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_at_the_barrier_ends_the_plan_and_the_ack_takes_the_trials_that_ran() {
    let s = nats_server(false);
    let state = agent::AgentState::new(test_verifier());
    let addr = agent::serve("127.0.0.1:0".parse().unwrap(), state.clone())
        .await
        .unwrap();
    let run = spawn_agent(config(s.port, 4), state);
    wait_for(addr, "waited for trial 1", |p| p.waiting_for == 1).await;
    release(addr, 1).await;
    wait_for(addr, "waited for trial 2", |p| p.waiting_for == 2).await;
    release(addr, 2).await;
    wait_for(addr, "waited for trial 3", |p| p.waiting_for == 3).await;
    let sent = progress(addr).await.published;

    assert_eq!(stop(addr, 2).await, (200, r#"{"afterTrial":2}"#.into()));
    // A resend keeps the first stop, whatever it names.
    assert_eq!(stop(addr, 2).await, (200, r#"{"afterTrial":2}"#.into()));
    assert_eq!(stop(addr, 3).await, (200, r#"{"afterTrial":2}"#.into()));
    wait_for(addr, "finished", |p| p.finished).await;
    let p = progress(addr).await;
    assert_eq!((p.stopped_after, p.waiting_for), (2, 0), "{p:?}");
    assert_eq!(p.published, sent, "the stopped trial sent nothing");

    let (code, body) = http(addr, "GET", "/results", "").await;
    assert_eq!(code, 200);
    let r: AgentResults<RawJson> = serde_json::from_str(&body).unwrap();
    assert_eq!((r.trials, r.finished), (2, true), "the plan is what ran");
    let trials: Vec<u32> = r.records.iter().map(|l| l.trial).collect();
    assert_eq!(trials, [1, 2]);
    // The plan's count is no longer all of them; the count that ran is.
    let ack = |n: u32| format!("{{\"records\":{n}}}");
    assert_eq!(http(addr, "POST", "/results/ack", &ack(4)).await.0, 409);
    assert_eq!(http(addr, "POST", "/results/ack", &ack(2)).await.0, 200);
    let (lines, acked) = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("agent ended")
        .unwrap()
        .expect("a stop is not a failure");
    assert!(acked, "the hold ended by the ack");
    assert_eq!(lines.len(), 2);
    assert!(lines.iter().all(|l| l.result.measured.received == 100));
}

/// A stop behind a trial already released cannot be honoured: 409 naming that trial, and the
/// plan runs on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_behind_a_released_trial_is_refused() {
    let s = nats_server(false);
    let state = agent::AgentState::new(test_verifier());
    let addr = agent::serve("127.0.0.1:0".parse().unwrap(), state.clone())
        .await
        .unwrap();
    let run = spawn_agent(config(s.port, 2), state);
    wait_for(addr, "waited for trial 1", |p| p.waiting_for == 1).await;
    release(addr, 1).await;
    wait_for(addr, "waited for trial 2", |p| p.waiting_for == 2).await;
    release(addr, 2).await;
    assert_eq!(stop(addr, 1).await, (409, r#"{"afterTrial":2}"#.into()));
    wait_for(addr, "finished", |p| p.finished).await;
    assert_eq!(progress(addr).await.stopped_after, 0);
    let ack = http(addr, "POST", "/results/ack", r#"{"records":2}"#).await;
    assert_eq!(ack.0, 200);
    let (lines, _) = run.await.unwrap().unwrap();
    assert_eq!(lines.len(), 2);
}
