//! `bench-runner fault-agent` partitions, against a stand-in `nft` that keeps the table it is
//! given (a file) and logs every call: the rules for the chosen ports are applied in one
//! transaction, removed by the agent's own timer after the duration and not before, one at a
//! time, and refused by an agent without network faults or for ports the server does not have;
//! an agent that cannot remove a partition ends with an error (its restart heals it); the
//! agent's state shows the table while it is in place, and a restarted agent, which removes
//! the leftover, shows when it did (the trace of a partition whose report it lost).
//! The real `nft` in a real pod is the e2e test `crash_fault`.
mod support;
use bench_runner::fault_agent::{FaultAgent, NetFaults};
use bench_runner::fault_net::{self, Nft};
use runner_api::fault_agent::{AgentAction, FaultReport, FaultRequest, PartitionFrom};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::*;

const PARTITION_MS: u64 = 1_500;

/// An `nft` that stores the ruleset of `-f -` in `<dir>/table` and deletes it on
/// `delete table`, failing as nft does when there is none.
fn fake_nft(dir: &Path) -> Nft {
    nft_script(dir, "rm {d}/table; exit 0")
}

/// An `nft` that applies a table but can never delete it (as when the kernel refuses).
fn stuck_nft(dir: &Path) -> Nft {
    nft_script(dir, "echo 'Error: Operation not permitted' >&2; exit 1")
}

/// A stand-in `nft`; `delete` of an existing table runs `on_delete` (`{d}`: the directory).
fn nft_script(dir: &Path, on_delete: &str) -> Nft {
    let program = dir.join("nft");
    let d = dir.display();
    let on_delete = on_delete.replace("{d}", &d.to_string());
    let script = format!(
        "#!/bin/sh\necho \"$*\" >> {d}/calls\n\
         if [ \"$1\" = -f ]; then cat > {d}/table; exit 0; fi\n\
         if [ \"$1\" = list ]; then\n  [ -e {d}/table ] && exit 0\n  echo 'Error: No such file or directory' >&2; exit 1\nfi\n\
         if [ \"$1\" = delete ]; then\n  [ -e {d}/table ] || {{ echo 'Error: No such file or directory' >&2; exit 1; }}\n  \
         {on_delete}\nfi\nexit 2\n"
    );
    // Written by a child, never through a descriptor of this process: a concurrent test's fork
    // would inherit it until its exec, and running a file open for writing fails (ETXTBSY).
    let mut sh = Command::new("sh")
        .arg("-c")
        .arg(r#"cat > "$1" && chmod 755 "$1""#)
        .arg("sh")
        .arg(&program)
        .stdin(Stdio::piped())
        .spawn()
        .expect("sh");
    sh.stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    assert!(
        sh.wait().unwrap().success(),
        "writing {}",
        program.display()
    );
    Nft { program }
}

fn request(key: &str, from: PartitionFrom) -> String {
    serde_json::to_string(&FaultRequest {
        key: key.into(),
        action: AgentAction::Partition,
        not_after_unix_ms: now_ms() + 10_000,
        duration_ms: Some(PARTITION_MS),
        partition_from: Some(from),
        repeat: false,
    })
    .unwrap()
}

fn agent(dir: &Path, peer_ports: Vec<u16>) -> std::sync::Arc<FaultAgent> {
    let net = NetFaults {
        nft: fake_nft(dir),
        peer_ports,
        client_ports: vec![4222],
    };
    FaultAgent::new(
        "nats-server",
        Path::new("/proc"),
        test_verifier(),
        Some(net),
    )
}

#[tokio::test]
async fn a_partition_drops_the_chosen_ports_and_the_agent_heals_it_on_time() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("table");
    let agent = agent(dir.path(), vec![6222]);
    agent
        .heal_leftover()
        .await
        .expect("no leftover is not an error");
    let addr = serve_fault_agent(agent).await;

    let (code, answer) = http(
        addr,
        "POST",
        "/faults",
        &request("r/0/1", PartitionFrom::Peers),
    )
    .await;
    assert_eq!(code, 200, "{answer}");
    let r: FaultReport = serde_json::from_str(&answer).unwrap();
    let applied = r.partition.clone().expect("the rules are reported");
    assert_eq!(applied.ports, [6222]);
    assert_eq!(applied.rules, fault_net::ruleset(&[6222]));
    assert_eq!(std::fs::read_to_string(&table).unwrap(), applied.rules);
    assert_eq!(r.until_unix_ms, Some(r.at_unix_ms + PARTITION_MS));
    assert!(r.signal.is_none());

    // One partition at a time: a second would be healed by the first one's timer.
    let (code, why) = http(
        addr,
        "POST",
        "/faults",
        &request("r/0/2", PartitionFrom::Both),
    )
    .await;
    assert_eq!(code, 409, "{why}");

    let deadline = Instant::now() + Duration::from_secs(5);
    while table.exists() {
        assert!(Instant::now() < deadline, "never healed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(now_ms() >= r.at_unix_ms + PARTITION_MS, "healed early");
    let calls = std::fs::read_to_string(dir.path().join("calls")).unwrap();
    assert_eq!(
        calls.lines().collect::<Vec<_>>(),
        [
            "delete table inet msgbench_fault", // the leftover check at start
            "-f -",
            "delete table inet msgbench_fault",
        ]
    );

    // Healed: the next one is taken, with both sets of ports. The same key again: the first
    // report, nothing applied twice.
    let both = request("r/0/3", PartitionFrom::Both);
    let (code, answer) = http(addr, "POST", "/faults", &both).await;
    assert_eq!(code, 200, "{answer}");
    let r3: FaultReport = serde_json::from_str(&answer).unwrap();
    assert_eq!(r3.partition.as_ref().unwrap().ports, [6222, 4222]);
    let (code, again) = http(addr, "POST", "/faults", &both).await;
    assert_eq!(
        (code, serde_json::from_str::<FaultReport>(&again).unwrap()),
        (200, r3)
    );
    let calls = std::fs::read_to_string(dir.path().join("calls")).unwrap();
    assert_eq!(calls.lines().filter(|l| *l == "-f -").count(), 2, "{calls}");
}

#[tokio::test]
async fn a_partition_is_refused_without_network_faults_or_without_the_ports() {
    let dir = tempfile::tempdir().unwrap();
    let no_net = FaultAgent::new("nats-server", Path::new("/proc"), test_verifier(), None);
    let addr = serve_fault_agent(no_net).await;
    let (code, why) = http(
        addr,
        "POST",
        "/faults",
        &request("r/0/1", PartitionFrom::Peers),
    )
    .await;
    assert_eq!(code, 422, "{why}");
    assert!(why.contains("spec.faultInjection.network"), "{why}");

    // A single broker has no peers.
    let addr = serve_fault_agent(agent(dir.path(), vec![])).await;
    let (code, why) = http(
        addr,
        "POST",
        "/faults",
        &request("r/0/1", PartitionFrom::Peers),
    )
    .await;
    assert_eq!(code, 422, "{why}");
    assert!(why.contains("no peer ports"), "{why}");
    assert!(!dir.path().join("calls").exists(), "nft was never run");
}

#[tokio::test]
async fn an_agent_that_cannot_heal_a_partition_exits_with_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let net = NetFaults {
        nft: stuck_nft(dir.path()),
        peer_ports: vec![6222],
        client_ports: vec![4222],
    };
    let agent = FaultAgent::new(
        "nats-server",
        Path::new("/proc"),
        test_verifier(),
        Some(net),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let served = tokio::spawn(bench_runner::fault_agent::serve_on(listener, agent));
    let (code, answer) = http(
        addr,
        "POST",
        "/faults",
        &request("r/0/1", PartitionFrom::Peers),
    )
    .await;
    assert_eq!(code, 200, "{answer}");
    // The partition ends after PARTITION_MS; ten failed deletes 200 ms apart follow.
    let ended = tokio::time::timeout(Duration::from_secs(10), served)
        .await
        .expect("the agent ends once it gives up healing")
        .unwrap();
    let why = format!(
        "{:#}",
        ended.expect_err("ends with an error: the process exits non-zero")
    );
    assert!(
        why.contains("could not be healed") && why.contains("Operation not permitted"),
        "{why}"
    );
    let calls = std::fs::read_to_string(dir.path().join("calls")).unwrap();
    let deletes = calls.lines().filter(|l| l.starts_with("delete")).count();
    assert_eq!(
        deletes,
        1 + 10,
        "the leftover check, then ten tries: {calls}"
    );
}

/// The table is the evidence of a partition whose report is lost: the state shows it while in
/// place; a restarted agent (its reports gone) removes it at its start and says when, refuses a
/// repeated ask of the key it has no report of, and applies nothing.
#[tokio::test]
async fn the_state_shows_the_table_and_a_restarted_agent_the_leftover_it_removed() {
    use runner_api::fault_agent::{AgentState, NO_REPORT_STATUS};
    let dir = tempfile::tempdir().unwrap();
    let addr = serve_fault_agent(agent(dir.path(), vec![6222])).await;
    let state = |addr| async move {
        let (code, body) = http(addr, "GET", "/faults/state", "").await;
        assert_eq!(code, 200, "{body}");
        serde_json::from_str::<AgentState>(&body).unwrap()
    };
    assert_eq!(state(addr).await.partition_table, Some(false));
    let ask = request("r/0/1", PartitionFrom::Peers);
    assert_eq!(http(addr, "POST", "/faults", &ask).await.0, 200);
    let before = state(addr).await;
    assert_eq!(before.partition_table, Some(true));
    assert_eq!(before.leftover_partition_removed_unix_ms, None);

    // The agent restarts mid-partition: the new one heals the leftover as it starts.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let again = listener.local_addr().unwrap();
    let restarted = agent(dir.path(), vec![6222]);
    tokio::spawn(bench_runner::fault_agent::serve_on(listener, restarted));
    let after = state(again).await;
    assert_eq!(after.partition_table, Some(false));
    let removed = after.leftover_partition_removed_unix_ms.expect("the trace");
    assert!(removed >= after.started_unix_ms && after.started_unix_ms >= before.started_unix_ms);
    let repeat = ask.replace("\"partitionFrom\"", "\"repeat\":true,\"partitionFrom\"");
    let (code, why) = http(again, "POST", "/faults", &repeat).await;
    assert_eq!(code, NO_REPORT_STATUS, "{why}");
    assert!(why.contains("no report for r/0/1"), "{why}");
    assert!(!dir.path().join("table").exists(), "nothing applied again");
}
