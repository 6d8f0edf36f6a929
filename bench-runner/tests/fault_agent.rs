//! `bench-runner fault-agent` against a real process: only the operator's credential for this
//! server is obeyed, a crash is a SIGKILL of exactly the named process (which dies by signal 9,
//! running no handler), a repeated request gets the first report and never signals again (nor
//! does a restarted agent, which has no report: it refuses a `repeat`), a request past its last
//! moment does nothing, and two processes of one name are never guessed. A pause shows in the
//! agent's state, and a restarted agent resumes a server an earlier one left stopped.
mod support;
use bench_runner::fault_agent::FaultAgent;
use runner_api::control_auth::{ControlSigner, ControlVerifier};
use runner_api::fault_agent::{AgentAction, FaultReport, FaultRequest};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::Duration;
use support::victim::victim;
use support::*;

const SERVER_UID: &str = "server-uid-1";

fn request(key: &str, not_after: u64) -> String {
    crash(key, not_after, false)
}

fn crash(key: &str, not_after: u64, repeat: bool) -> String {
    serde_json::to_string(&FaultRequest {
        key: key.into(),
        action: AgentAction::Crash,
        not_after_unix_ms: not_after,
        duration_ms: None,
        partition_from: None,
        repeat,
    })
    .unwrap()
}

/// The state letter of `pid` in /proc/<pid>/stat (R, S, T for stopped, ...).
const PAUSE_MS: u64 = 2_000;

fn state(pid: u32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = stat.rsplit_once(") ").unwrap().1;
    after.chars().next().unwrap()
}

/// A pause stops the process (state T) and the agent itself resumes it after the duration.
/// A stop takes effect when the target is next scheduled, so the test waits for state T
/// (bounded well inside the pause) rather than reading it once.
#[tokio::test]
async fn a_pause_stops_the_process_and_the_agent_resumes_it_on_time() {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("mbpause{}", std::process::id() % 100_000);
    let mut child = victim(dir.path(), &name);
    let addr = serve_fault_agent(FaultAgent::new(
        &name,
        Path::new("/proc"),
        test_verifier(),
        None,
    ))
    .await;
    let body = serde_json::to_string(&FaultRequest {
        key: "run/0/1".into(),
        action: AgentAction::Pause,
        not_after_unix_ms: now_ms() + 10_000,
        duration_ms: Some(PAUSE_MS),
        partition_from: None,
        repeat: false,
    })
    .unwrap();
    let (code, answer) = http(addr, "POST", "/faults", &body).await;
    assert_eq!(code, 200, "{answer}");
    let r: FaultReport = serde_json::from_str(&answer).unwrap();
    assert_eq!(r.signal.unwrap().signal, "SIGSTOP");
    assert_eq!(r.until_unix_ms, Some(r.at_unix_ms + PAUSE_MS));
    let stop_by = std::time::Instant::now() + Duration::from_millis(PAUSE_MS / 2);
    while state(child.id()) != 'T' {
        assert!(std::time::Instant::now() < stop_by, "never stopped");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while state(child.id()) == 'T' {
        assert!(std::time::Instant::now() < deadline, "never resumed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(now_ms() >= r.at_unix_ms + PAUSE_MS, "resumed early");
    // A pause without its length is refused.
    let bad = body
        .replace(&format!("\"durationMs\":{PAUSE_MS}"), "\"durationMs\":0")
        .replace("run/0/1", "run/0/2");
    assert_eq!(http(addr, "POST", "/faults", &bad).await.0, 422);
    child.kill().unwrap();
    child.wait().unwrap();
}

#[tokio::test]
async fn a_crash_is_one_sigkill_of_the_named_process_for_the_operator_only() {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("mbcrash{}", std::process::id() % 100_000);
    let mut child = victim(dir.path(), &name);
    let signer = ControlSigner::from_seed([4; 32]);
    let verifier = ControlVerifier::new(&signer.public_keys(), SERVER_UID).unwrap();
    let agent = FaultAgent::new(&name, Path::new("/proc"), verifier, None);
    let addr = serve_fault_agent(agent).await;
    let until = now_ms() + 10_000;
    let body = request("run/0/1", until);
    let signed = |key: &ControlSigner, scope: &str| credential(key, scope, "POST", "/faults");

    // Nobody else: no credential, another key, the operator's credential for another server
    // or for another path of this one.
    assert_eq!(http_open(addr, "POST", "/faults", &body).await.0, 401);
    let other_key = signed(&ControlSigner::from_seed([5; 32]), SERVER_UID);
    let other_server = signed(&signer, "another-server");
    let other_path = credential(&signer, SERVER_UID, "POST", "/faults?x");
    for c in [other_key, other_server, other_path] {
        assert_eq!(
            http_as(addr, Some(&c), "POST", "/faults", &body).await.0,
            403
        );
    }
    assert!(
        child.try_wait().unwrap().is_none(),
        "a refused request killed"
    );

    let cred = signed(&signer, SERVER_UID);
    let (code, answer) = http_as(addr, Some(&cred), "POST", "/faults", &body).await;
    assert_eq!(code, 200, "{answer}");
    let report: FaultReport = serde_json::from_str(&answer).unwrap();
    let sent = report.signal.clone().unwrap();
    assert_eq!(
        (sent.pid as u32, sent.signal.as_str(), sent.process.as_str()),
        (child.id(), "SIGKILL", name.as_str())
    );
    assert!(report.at_unix_ms.abs_diff(now_ms()) < 5_000);
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(9), "died by SIGKILL: {status:?}");

    // The same fault again (an unanswered request retried): the first report, nothing signalled
    // (a new process of that name lives on).
    let mut second = victim(dir.path(), &name);
    // Replaying the request as seen on the wire is refused: its credential is used up.
    let (code, why) = http_as(addr, Some(&cred), "POST", "/faults", &body).await;
    assert_eq!(code, 403, "{why}");
    assert!(why.contains("already used"), "{why}");
    let retry = signed(&signer, SERVER_UID);
    let (code, again) = http_as(addr, Some(&retry), "POST", "/faults", &body).await;
    assert_eq!(
        (code, serde_json::from_str::<FaultReport>(&again).unwrap()),
        (200, report)
    );
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        second.try_wait().unwrap().is_none(),
        "a repeat signalled again"
    );

    // A new fault past its last moment is not done.
    let late = request("run/0/2", now_ms() - 1);
    let cred = signed(&signer, SERVER_UID);
    let (code, why) = http_as(addr, Some(&cred), "POST", "/faults", &late).await;
    assert_eq!(code, 409, "{why}");
    assert!(why.contains("past its last moment"), "{why}");
    assert!(second.try_wait().unwrap().is_none());

    // Two processes of one name: the agent refuses to choose.
    let mut third = victim(dir.path(), &name);
    let both = request("run/0/3", now_ms() + 10_000);
    let cred = signed(&signer, SERVER_UID);
    let (code, why) = http_as(addr, Some(&cred), "POST", "/faults", &both).await;
    assert_eq!(code, 404, "{why}");
    assert!(why.contains("2 processes named"), "{why}");
    for c in [&mut second, &mut third] {
        assert!(c.try_wait().unwrap().is_none());
        c.kill().unwrap();
        c.wait().unwrap();
    }
}

/// The agent's reports live in its memory. A repeated ask (the operator recorded an earlier
/// one) of a key it has no report of is refused with [`NO_REPORT_STATUS`] and signals nothing:
/// the earlier ask may have been carried out by the agent before a restart. A first ask of the
/// same key is carried out; a repeat then gets its report.
#[tokio::test]
async fn a_repeated_ask_without_a_report_does_nothing_before_or_after_a_restart() {
    use runner_api::fault_agent::NO_REPORT_STATUS;
    let dir = tempfile::tempdir().unwrap();
    let name = format!("mbrepeat{}", std::process::id() % 100_000);
    let mut child = victim(dir.path(), &name);
    let agent = || FaultAgent::new(&name, Path::new("/proc"), test_verifier(), None);
    let addr = serve_fault_agent(agent()).await;
    let until = now_ms() + 10_000;
    let (code, why) = http(addr, "POST", "/faults", &crash("run/0/1", until, true)).await;
    assert_eq!(code, NO_REPORT_STATUS, "{why}");
    assert!(why.contains("no report for run/0/1"), "{why}");
    std::thread::sleep(Duration::from_millis(100));
    assert!(child.try_wait().unwrap().is_none(), "a repeat signalled");

    let (code, answer) = http(addr, "POST", "/faults", &crash("run/0/1", until, false)).await;
    assert_eq!(code, 200, "{answer}");
    assert_eq!(child.wait().unwrap().signal(), Some(9));
    let (code, again) = http(addr, "POST", "/faults", &crash("run/0/1", until, true)).await;
    assert_eq!((code, again), (200, answer), "the report, to a repeat too");

    // Restarted (a new agent, no reports): the repeat of that very key does nothing.
    let mut second = victim(dir.path(), &name);
    let restarted = serve_fault_agent(agent()).await;
    let (code, why) = http(restarted, "POST", "/faults", &crash("run/0/1", until, true)).await;
    assert_eq!(code, NO_REPORT_STATUS, "{why}");
    std::thread::sleep(Duration::from_millis(100));
    assert!(second.try_wait().unwrap().is_none(), "signalled twice");
    second.kill().unwrap();
    second.wait().unwrap();
}

/// A pause shows as the server stopped in the agent's state; an agent restarted mid-pause (its
/// SIGCONT timer gone) resumes the server as it starts and keeps the time as the pause's trace.
#[tokio::test]
async fn the_state_shows_a_pause_and_a_restarted_agent_resumes_the_server() {
    use runner_api::fault_agent::AgentState;
    let dir = tempfile::tempdir().unwrap();
    let name = format!("mbstate{}", std::process::id() % 100_000);
    let mut child = victim(dir.path(), &name);
    let agent = || FaultAgent::new(&name, Path::new("/proc"), test_verifier(), None);
    let addr = serve_fault_agent(agent()).await;
    let state = |addr| async move {
        let (code, body) = http(addr, "GET", "/faults/state", "").await;
        assert_eq!(code, 200, "{body}");
        serde_json::from_str::<AgentState>(&body).unwrap()
    };
    let s = state(addr).await;
    assert_eq!((s.server_stopped, s.partition_table), (Some(false), None));
    let body = serde_json::to_string(&FaultRequest {
        key: "run/0/1".into(),
        action: AgentAction::Pause,
        not_after_unix_ms: now_ms() + 10_000,
        duration_ms: Some(60_000),
        partition_from: None,
        repeat: false,
    })
    .unwrap();
    assert_eq!(http(addr, "POST", "/faults", &body).await.0, 200);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while state(addr).await.server_stopped != Some(true) {
        assert!(std::time::Instant::now() < deadline, "never shown stopped");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Without a credential the state is not shown.
    assert_eq!(http_open(addr, "GET", "/faults/state", "").await.0, 401);

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let again = listener.local_addr().unwrap();
    tokio::spawn(bench_runner::fault_agent::serve_on(listener, agent()));
    let s = state(again).await;
    assert!(s.leftover_pause_resumed_unix_ms.is_some(), "{s:?}");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while state(again).await.server_stopped != Some(false) {
        assert!(std::time::Instant::now() < deadline, "never resumed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
}
