//! `bench-runner fault-agent` cutting the power against a stand-in lazy file system (a Unix
//! socket in a temp dir that speaks msgbench-lazyfs's one-line protocol and counts the asks)
//! and a stand-in server process: the report carries what the lazy file system discarded and
//! the server's pid; a repeated key gets the first report and never asks twice; a late request
//! does nothing; and each way it can fail (no socket, nobody listening, a reply not
//! understood, a declined one, no reply, no server process) has its status and its words.
mod support;
use bench_runner::fault_agent::FaultAgent;
use bench_runner::fault_power::LazyFsControl;
use runner_api::fault_agent::{
    AgentAction, FaultReport, FaultRequest, PowerLossDone, NO_REPORT_STATUS,
};
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::victim::victim;
use support::*;

/// A stand-in msgbench-lazyfs control socket.
struct FakeLazyFs {
    socket: PathBuf,
    /// `power-loss` lines received.
    asked: Arc<AtomicUsize>,
}

/// Listens at `dir/control.sock`; answers `power-loss` with `reply`, or never (`None`: it
/// reads the line and holds the connection open).
fn fake_lazyfs(dir: &Path, reply: Option<&'static str>) -> FakeLazyFs {
    let socket = dir.join("control.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let asked = Arc::new(AtomicUsize::new(0));
    let count = asked.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming() {
            let mut conn = conn.unwrap();
            let mut line = String::new();
            BufReader::new(&conn).read_line(&mut line).unwrap();
            if line == "power-loss\n" {
                // Counted before the reply: the agent's answer comes after it.
                count.fetch_add(1, Ordering::SeqCst);
            }
            match reply {
                Some(r) => conn.write_all(r.as_bytes()).unwrap(),
                None => held.push(conn),
            }
        }
    });
    FakeLazyFs { socket, asked }
}

fn power_loss(key: &str, not_after: u64, repeat: bool) -> String {
    serde_json::to_string(&FaultRequest {
        key: key.into(),
        action: AgentAction::PowerLoss,
        not_after_unix_ms: not_after,
        duration_ms: None,
        partition_from: None,
        repeat,
    })
    .unwrap()
}

/// A fault agent for the server process `name` that asks power losses of `socket`.
async fn agent(name: &str, socket: &Path, timeout: Duration) -> SocketAddr {
    let lazyfs = LazyFsControl {
        socket: socket.into(),
        timeout,
    };
    let proc = Path::new("/proc");
    serve_fault_agent(FaultAgent::with_lazyfs(
        name,
        proc,
        test_verifier(),
        None,
        lazyfs,
    ))
    .await
}

fn name(what: &str) -> String {
    format!("mbpl{what}{}", std::process::id() % 100_000)
}

#[tokio::test]
async fn a_power_loss_reports_the_discarded_bytes_and_the_server_and_is_asked_once_per_key() {
    let dir = tempfile::tempdir().unwrap();
    let name = name("ok");
    let mut server = victim(dir.path(), &name);
    let lazyfs = fake_lazyfs(dir.path(), Some("discarded_bytes=1234\n"));
    let addr = agent(&name, &lazyfs.socket, Duration::from_secs(5)).await;
    let until = now_ms() + 10_000;

    let (code, answer) = http(
        addr,
        "POST",
        "/faults",
        &power_loss("run/0/1", until, false),
    )
    .await;
    assert_eq!(code, 200, "{answer}");
    let report: FaultReport = serde_json::from_str(&answer).unwrap();
    assert_eq!(report.action, AgentAction::PowerLoss);
    assert_eq!(
        report.power_loss,
        Some(PowerLossDone {
            discarded_bytes: 1234
        })
    );
    let sent = report.signal.clone().unwrap();
    assert_eq!(
        (sent.pid as u32, sent.signal.as_str(), sent.process.as_str()),
        (server.id(), "SIGKILL", name.as_str())
    );
    assert_eq!(
        (report.partition.is_none(), report.until_unix_ms),
        (true, None)
    );
    assert!(report.at_unix_ms.abs_diff(now_ms()) < 5_000);
    assert_eq!(lazyfs.asked.load(Ordering::SeqCst), 1);
    // The kill is the wrapper's: the agent sends no signal of its own.
    std::thread::sleep(Duration::from_millis(100));
    assert!(server.try_wait().unwrap().is_none(), "the agent signalled");

    // The same key again, as a retry and as a repeat: the first report, no second ask.
    for repeat in [false, true] {
        let (code, again) = http(
            addr,
            "POST",
            "/faults",
            &power_loss("run/0/1", until, repeat),
        )
        .await;
        assert_eq!(
            (code, again.as_str()),
            (200, answer.as_str()),
            "repeat={repeat}"
        );
    }
    // A repeat of a key never done, and a new key past its last moment: nothing asked.
    let (code, why) = http(addr, "POST", "/faults", &power_loss("run/0/2", until, true)).await;
    assert_eq!(code, NO_REPORT_STATUS, "{why}");
    let late = power_loss("run/0/3", now_ms() - 1, false);
    let (code, why) = http(addr, "POST", "/faults", &late).await;
    assert_eq!(code, 409, "{why}");
    assert!(why.contains("past its last moment"), "{why}");
    assert_eq!(lazyfs.asked.load(Ordering::SeqCst), 1, "asked twice");
    server.kill().unwrap();
    server.wait().unwrap();
}

/// Status and words of a fresh agent's answer to one power loss (one expected to fail).
async fn failure(name: &str, socket: &Path, timeout: Duration) -> (u16, String) {
    let addr = agent(name, socket, timeout).await;
    let body = power_loss("run/0/1", now_ms() + 10_000, false);
    http(addr, "POST", "/faults", &body).await
}

#[tokio::test]
async fn replies_not_understood_and_declined_ones_are_told_apart() {
    let dir = tempfile::tempdir().unwrap();
    let name = name("bad");
    let mut server = victim(dir.path(), &name);
    for (reply, status, words) in [
        ("discarded_bytes=lots\n", 502, "replied \"discarded_bytes=lots\" to power-loss, not discarded_bytes=<u64>; the power may have been cut"),
        ("", 502, "closed the connection without replying to power-loss; the power may have been cut"),
        ("error=unknown command\n", 422, "declined power-loss (\"error=unknown command\"); nothing done"),
    ] {
        let sub = tempfile::tempdir_in(dir.path()).unwrap();
        let lazyfs = fake_lazyfs(sub.path(), Some(reply));
        let (code, why) = failure(&name, &lazyfs.socket, Duration::from_secs(5)).await;
        assert_eq!(code, status, "{reply:?}: {why}");
        assert!(why.contains(words), "{reply:?}: {why}");
        assert_eq!(lazyfs.asked.load(Ordering::SeqCst), 1, "{reply:?}");
    }
    server.kill().unwrap();
    server.wait().unwrap();
}

#[tokio::test]
async fn no_socket_nobody_listening_and_no_reply_have_their_own_words() {
    let dir = tempfile::tempdir().unwrap();
    let name = name("gone");
    let mut server = victim(dir.path(), &name);

    // No socket: the server does not run under the lazy file system (the agent runs anyway).
    let absent = dir.path().join("absent/control.sock");
    let (code, why) = failure(&name, &absent, Duration::from_secs(5)).await;
    assert_eq!(code, 422, "{why}");
    assert!(
        why.contains(
            "does not run under msgbench-lazyfs (spec.faultInjection.powerLoss is not set"
        ),
        "{why}"
    );

    // A socket left behind, nobody listening: the wrapper is not running.
    let stale = dir.path().join("stale.sock");
    drop(UnixListener::bind(&stale).unwrap());
    let (code, why) = failure(&name, &stale, Duration::from_secs(5)).await;
    assert_eq!(code, 409, "{why}");
    assert!(
        why.contains("refused the connection: msgbench-lazyfs is not running"),
        "{why}"
    );

    // Asked, never answered: bounded by the agent's timeout.
    let silent = fake_lazyfs(dir.path(), None);
    let start = std::time::Instant::now();
    let (code, why) = failure(&name, &silent.socket, Duration::from_millis(300)).await;
    assert_eq!(code, 504, "{why}");
    assert!(
        why.contains("no reply to power-loss from")
            && why.contains("within 300 ms; the power may have been cut"),
        "{why}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(silent.asked.load(Ordering::SeqCst), 1);
    server.kill().unwrap();
    server.wait().unwrap();
}

/// Without the one server process the report would name, the power is not cut.
#[tokio::test]
async fn without_the_server_process_the_lazy_file_system_is_not_asked() {
    let dir = tempfile::tempdir().unwrap();
    let lazyfs = fake_lazyfs(dir.path(), Some("discarded_bytes=1\n"));
    let (code, why) = failure(&name("none"), &lazyfs.socket, Duration::from_secs(5)).await;
    assert_eq!(code, 404, "{why}");
    assert!(why.contains("no process named"), "{why}");
    assert_eq!(lazyfs.asked.load(Ordering::SeqCst), 0);
}
