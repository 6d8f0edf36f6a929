//! The gate as a CI job runs it: the binary's exit code and lines, on runs read from files, and
//! on runs read from a loopback "API server" whose answers change between reads (running, an
//! overloaded server, finished), so the waiting, the deadline and the errors are the real ones.
mod common;
#[path = "common/scripted_api.rs"]
mod scripted_api;
#[path = "common/states.rs"]
mod states;

use kubectl_msgbench::run_view::Run;
use msgbench_crds::benchmark_run::{Metric, Phase, Severity, ThresholdOp};
use scripted_api::{kubeconfig, status, ApiServer};
use states::*;
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

struct Gate {
    code: i32,
    stdout: String,
    stderr: String,
    took: Duration,
}

/// `kubectl-msgbench gate ARGS`, with `kubeconfig` as $KUBECONFIG (no proxy variables).
fn gate(args: &[&str], kubeconfig: Option<&Path>) -> Gate {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kubectl-msgbench"));
    cmd.arg("gate").args(args).env_remove("KUBECONFIG");
    for var in ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"] {
        cmd.env_remove(var);
    }
    if let Some(k) = kubeconfig {
        cmd.env("KUBECONFIG", k);
    }
    let start = Instant::now();
    let out = cmd.output().unwrap();
    Gate {
        code: out.status.code().unwrap(),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
        took: start.elapsed(),
    }
}

/// `run` as a BenchmarkRun file (or API answer) named `name`.
fn benchmark_run(name: &str, run: Run) -> serde_json::Value {
    let mut br = common::plain_run();
    br.metadata.name = Some(name.into());
    br.metadata.namespace = Some("ci".into());
    br.metadata.generation = run.generation;
    br.status = Some(run.status);
    serde_json::to_value(&br).unwrap()
}

#[test]
fn runs_read_from_files_exit_0_1_or_2() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, run: Run| {
        let path = dir.path().join(format!("{name}.yaml"));
        let text = serde_norway::to_string(&benchmark_run(name, run)).unwrap();
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let errors = threshold(
        Metric::Errors,
        ThresholdOp::Le,
        0.0,
        Some(2.0),
        Severity::Fail,
    );
    let passed = write("passed", judged(vec![]));
    let failed = write("failed", judged(vec![errors]));
    let running = write("running", running(fixture("plain-run.yaml"), 1));
    let (junit, md) = (dir.path().join("gate.xml"), dir.path().join("gate.md"));
    let (j, m) = (junit.to_str().unwrap(), md.to_str().unwrap());
    let g = gate(
        &[
            "-f",
            &passed,
            "--filename",
            &failed,
            "--junit",
            j,
            "--summary",
            m,
        ],
        None,
    );
    assert_eq!(g.code, 1, "{}", g.stderr);
    assert_eq!(
        g.stdout,
        "passed: Passed: ok\nfailed: Failed (ThresholdsNotMet): errors <= 0: observed 2, limit <= 0\n"
    );
    roxmltree::Document::parse(&std::fs::read_to_string(&junit).unwrap()).unwrap();
    let summary = std::fs::read_to_string(&md).unwrap();
    assert!(
        summary.contains("| errors \\<= 0 | 2 | fail | NOT HELD |"),
        "{summary}"
    );
    // The old spelling still works for one minor version, with a warning.
    let g = gate(&["--file", &passed], None);
    assert_eq!(g.code, 0, "{}", g.stderr);
    assert!(
        g.stderr.contains("warning: --file is deprecated") && g.stderr.contains("-f/--filename"),
        "{}",
        g.stderr
    );
    let g = gate(&["-f", &passed, "-f", &running], None);
    assert_eq!(g.code, 2);
    assert!(
        g.stdout.contains("running: not finished (phase Running"),
        "{}",
        g.stdout
    );
    let runner = common::fixture("runner-result.json");
    let g = gate(&["-f", runner.to_str().unwrap()], None);
    assert_eq!(g.code, 2);
    assert!(
        g.stdout
            .contains("is a bench-runner result: it has no verdict"),
        "{}",
        g.stdout
    );
    assert_eq!(gate(&["-f", "/nonexistent.yaml"], None).code, 2);
}

fn plain() -> Run {
    fixture("plain-run.yaml")
}

/// Running, then the API server overloaded once, then passed.
fn slow(n: usize) -> (u16, serde_json::Value) {
    match n {
        1 => (200, benchmark_run("slow", running(plain(), 1))),
        2 => (503, status(503, "ServiceUnavailable")),
        _ => {
            let done = finished(plain(), Phase::Succeeded, "Succeeded", "ok");
            (200, benchmark_run("slow", done))
        }
    }
}

fn failing(_: usize) -> (u16, serde_json::Value) {
    let run = finished(
        plain(),
        Phase::Failed,
        "BarrierTimeout",
        "1 of 2 runners reached the barrier",
    );
    (200, benchmark_run("failing", run))
}

fn forever(_: usize) -> (u16, serde_json::Value) {
    (200, benchmark_run("forever", running(plain(), 1)))
}

const FAST: [&str; 4] = ["--interval", "100ms", "--timeout", "60s"];

#[test]
fn the_gate_waits_through_a_running_run_and_an_overloaded_server_then_exits_0() {
    let api = ApiServer::start(&[("slow", slow)]);
    let g = gate(&[&["slow"][..], &FAST].concat(), Some(&api.kubeconfig));
    assert_eq!(
        (g.code, g.stdout.as_str()),
        (0, "slow: Passed: ok\n"),
        "{}",
        g.stderr
    );
    assert!(api.reads("slow") >= 3, "read until finished");
    assert!(
        g.stderr.contains("gate: slow: not finished (phase Running"),
        "{}",
        g.stderr
    );
}

#[test]
fn a_failed_run_is_1_and_a_missing_one_is_2_without_waiting() {
    let api = ApiServer::start(&[("failing", failing), ("forever", forever)]);
    let k = Some(api.kubeconfig.as_path());
    let g = gate(&[&["failing"][..], &FAST].concat(), k);
    assert_eq!(g.code, 1, "{}", g.stderr);
    assert_eq!(
        g.stdout,
        "failing: Failed (BarrierTimeout): 1 of 2 runners reached the barrier\n"
    );
    let g = gate(&[&["forever", "ghost"][..], &FAST].concat(), k);
    assert_eq!(g.code, 2, "{}", g.stderr);
    assert!(
        g.stdout
            .contains("ghost: missing: no BenchmarkRun ghost in namespace ci\n"),
        "{}",
        g.stdout
    );
    assert!(
        g.took < Duration::from_secs(20),
        "stopped at once: {:?}",
        g.took
    );
}

#[test]
fn a_run_still_running_at_the_deadline_is_2_with_a_timeout_in_junit() {
    let api = ApiServer::start(&[("forever", forever)]);
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("gate.xml");
    let args = [
        "forever",
        "--timeout",
        "1s",
        "--interval",
        "200ms",
        "--junit",
        junit.to_str().unwrap(),
    ];
    let g = gate(&args, Some(&api.kubeconfig));
    assert_eq!(g.code, 2, "{}", g.stderr);
    assert!(
        g.stdout
            .starts_with("forever: timed out: not finished at the deadline (phase Running"),
        "{}",
        g.stdout
    );
    assert!(g.took >= Duration::from_secs(1), "{:?}", g.took);
    assert!(
        api.reads("forever") >= 3,
        "read during the wait and at the deadline"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let error = doc.descendants().find(|n| n.has_tag_name("error")).unwrap();
    assert_eq!(error.attribute("type"), Some("Timeout"));
}

#[test]
fn no_api_server_is_2_at_once() {
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let dir = tempfile::tempdir().unwrap();
    let k = kubeconfig(dir.path(), &url);
    let g = gate(&[&["slow"][..], &FAST].concat(), Some(&k));
    assert_eq!(g.code, 2, "{}", g.stderr);
    assert!(
        g.stdout
            .starts_with("slow: error: reading BenchmarkRun slow in namespace ci: "),
        "{}",
        g.stdout
    );
    assert!(
        g.took < Duration::from_secs(20),
        "not retried for the timeout: {:?}",
        g.took
    );
}

/// Two nightly runs (`generateName`): running on the first list, then one passed and one failed.
fn nightly(n: usize) -> (u16, serde_json::Value) {
    let (a, b) = if n < 2 {
        (running(plain(), 1), running(plain(), 1))
    } else {
        let failed = finished(plain(), Phase::Failed, "ThresholdsNotMet", "p99 too high");
        (
            finished(plain(), Phase::Succeeded, "Succeeded", "ok"),
            failed,
        )
    };
    let items = vec![
        benchmark_run("nightly-x7k2p", a),
        benchmark_run("nightly-q9f3d", b),
    ];
    (200, scripted_api::list(items))
}

fn nightly_passed(_: usize) -> (u16, serde_json::Value) {
    let ok = || finished(plain(), Phase::Succeeded, "Succeeded", "ok");
    let items = vec![
        benchmark_run("nightly-a", ok()),
        benchmark_run("nightly-b", ok()),
    ];
    (200, scripted_api::list(items))
}

fn nothing(_: usize) -> (u16, serde_json::Value) {
    (200, scripted_api::list(vec![]))
}

/// `gate -l`: every matching run is gated (one failed: 1), one JUnit testsuite per run; the
/// selector reaches the API server as a label selector.
#[test]
fn a_selector_gates_every_matching_run() {
    let api = ApiServer::start(&[(scripted_api::LIST, nightly)]);
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("gate.xml");
    let sel = [
        "-l",
        "msgbench.dev/benchmark=nightly",
        "--junit",
        junit.to_str().unwrap(),
    ];
    let g = gate(&[&sel[..], &FAST].concat(), Some(&api.kubeconfig));
    assert_eq!(g.code, 1, "{}", g.stderr);
    assert_eq!(
        g.stdout,
        "nightly-q9f3d: Failed (ThresholdsNotMet): p99 too high\nnightly-x7k2p: Passed: ok\n"
    );
    assert!(api.reads(scripted_api::LIST) >= 2, "listed until finished");
    let q = api.queries();
    assert!(
        q[0].contains("labelSelector=msgbench.dev%2Fbenchmark%3Dnightly"),
        "{q:?}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let suites: Vec<_> = (doc.descendants())
        .filter(|n| n.has_tag_name("testsuite"))
        .filter_map(|n| n.attribute("name"))
        .collect();
    assert_eq!(suites.len(), 2, "{xml}");

    let api = ApiServer::start(&[(scripted_api::LIST_ALL, nightly_passed)]);
    let sel = ["-A", "-l", "msgbench.dev/benchmark=nightly"];
    let g = gate(&[&sel[..], &FAST].concat(), Some(&api.kubeconfig));
    assert_eq!(g.code, 0, "{}", g.stderr);
    assert_eq!(
        g.stdout,
        "ci/nightly-a: Passed: ok\nci/nightly-b: Passed: ok\n"
    );
}

/// A selector that matches nothing never passes: 2 at once, saying so.
#[test]
fn a_selector_matching_nothing_is_2() {
    let api = ApiServer::start(&[(scripted_api::LIST, nothing)]);
    let g = gate(
        &[&["-l", "app=none"][..], &FAST].concat(),
        Some(&api.kubeconfig),
    );
    assert_eq!(g.code, 2, "{}", g.stderr);
    assert!(
        g.stderr
            .contains("no BenchmarkRun matches -l app=none in namespace ci"),
        "{}",
        g.stderr
    );
}
