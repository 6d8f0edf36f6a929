//! The `bench-runner` command line: bad input fails clearly, a real run writes a result that
//! `report` reads back.
mod support;
use std::process::Command;
use support::*;

fn br() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bench-runner"))
}

#[test]
fn a_bad_workload_fails_naming_the_field_and_the_rule() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("w.yaml");
    std::fs::write(
        &f,
        "protocol: mqtt\npayloadBytes: 0\ndurationSeconds: 5\nmqtt: {qos: 3}\n",
    )
    .unwrap();
    let out = br()
        .args(["run", "-f"])
        .arg(&f)
        .args(["--target", "mqtt://127.0.0.1:1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("workload.payloadBytes: must be between 16 and 1048576"),
        "{err}"
    );
    assert!(
        err.contains("workload.mqtt.qos: must be 0, 1 or 2"),
        "{err}"
    );

    std::fs::write(&f, "protocol: nats\nrate: 5\n").unwrap();
    let out = br()
        .args(["run", "-f"])
        .arg(&f)
        .args(["--target", "nats://127.0.0.1:1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown field `rate`"), "{err}");
}

#[test]
fn run_writes_a_result_that_report_reads() {
    let s = nats_server(false);
    let dir = tempfile::tempdir().unwrap();
    let (f, o) = (dir.path().join("w.yaml"), dir.path().join("r.json"));
    std::fs::write(
        &f,
        "protocol: nats\nratePerPublisher: 1000\nmessagesPerPublisher: 500\n",
    )
    .unwrap();
    let out = br()
        .args(["run", "-f"])
        .arg(&f)
        .args([
            "--target",
            &format!("nats://127.0.0.1:{}", s.port),
            "--output",
        ])
        .arg(&o)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: runner_api::result::RunnerResult =
        serde_json::from_slice(&std::fs::read(&o).unwrap()).unwrap();
    assert_eq!(r.format, "msgbench.dev/bench-result/v1");
    assert_eq!((r.measured.published, r.measured.received), (500, 500));
    let rep = br().arg("report").arg(&o).output().unwrap();
    let table = String::from_utf8_lossy(&rep.stdout);
    assert!(
        table.contains("measured") && table.contains("500"),
        "{table}"
    );
    // No progress bar when stderr is not a terminal.
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains('['),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An agent (runner or fault agent) without the operator's key or its scope does not start: it
/// exits non-zero naming the missing variable, before reading anything else. (It used to serve
/// an open control endpoint: the runner agent fell back to no auth.)
#[test]
fn an_agent_without_its_control_key_or_scope_refuses_to_start() {
    use runner_api::control_auth::{PUBLIC_KEY_ENV, RUN_UID_ENV};
    use runner_api::fault_agent::SERVER_UID_ENV;
    let key = test_signer().public_keys();
    let agent = ["agent", "-f", "/nonexistent/agent.yaml", "--runner-id", "1"];
    let fault_agent = ["fault-agent", "--process", "nats-server"];
    let cases: [(&[&str], Option<&str>, &str); 4] = [
        (&agent, None, PUBLIC_KEY_ENV),
        (&agent, Some(&key), RUN_UID_ENV),
        (&fault_agent, None, PUBLIC_KEY_ENV),
        (&fault_agent, Some(&key), SERVER_UID_ENV),
    ];
    for (args, public_key, missing) in cases {
        let mut cmd = br();
        cmd.args(args).args(["--listen", "127.0.0.1:0"]);
        for v in [PUBLIC_KEY_ENV, RUN_UID_ENV, SERVER_UID_ENV] {
            cmd.env_remove(v);
        }
        if let Some(k) = public_key {
            cmd.env(PUBLIC_KEY_ENV, k);
        }
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(&format!("{missing} is not set")),
            "{args:?}: {err}"
        );
        assert!(!err.contains("/nonexistent"), "{args:?}: {err}");
    }
}
