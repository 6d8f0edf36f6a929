//! `bench-runner delete-streams` against a real nats-server: it deletes exactly the streams of
//! one run (every generation and trial), keeps other runs' and unrelated streams, takes its
//! credentials from the environment, reports a delete the server refuses (exit 1), and fails
//! naming the URL when the server cannot be reached.
mod support;
use async_nats::jetstream::{self, stream};
use futures::TryStreamExt;
use runner_api::agent::{run_prefix, RunIsolation};
use runner_api::termination::{RunnerGaveUp, Termination};
use std::process::{Command, Output, Stdio};
use std::time::Duration;
use support::*;

const RUN_A: &str = "abcdef12-3456-7890-abcd-ef1234567890";
/// Differs from A in the last digit of the prefix only.
const RUN_B: &str = "abcdef13-3456-7890-abcd-ef1234567890";
const SECRET: &str = "sw33p-\"token\"";

/// A's streams (generations 1 and 2, trials 1 and 2), sorted.
fn streams_of_a() -> Vec<String> {
    let mut v: Vec<String> = [1, 2]
        .into_iter()
        .flat_map(|g| [1, 2].map(|t| RunIsolation::for_run(RUN_A, g).stream("MSGBENCH", t)))
        .collect();
    v.sort();
    v
}

/// Streams that must stay: B's, a hand-made one, and near misses of A's names.
fn others() -> Vec<String> {
    let mut v = vec![
        RunIsolation::for_run(RUN_B, 1).stream("MSGBENCH", 1),
        "ORDERS".to_string(),
        "MSGBENCH_ABCDEF12_T1".to_string(),
        "MSGBENCH_ABCDEF12G1_T1X".to_string(),
    ];
    v.sort();
    v
}

async fn context(port: u16, auth: async_nats::ConnectOptions) -> jetstream::Context {
    let c = auth
        .connect(format!("nats://127.0.0.1:{port}"))
        .await
        .expect("test client connects");
    jetstream::new(c)
}

/// Creates every stream in `names` (memory, one subject each).
async fn create(js: &jetstream::Context, names: &[String]) {
    for (i, name) in names.iter().enumerate() {
        js.create_stream(stream::Config {
            name: name.clone(),
            subjects: vec![format!("sweep.{i}.{}", name.len())],
            storage: stream::StorageType::Memory,
            ..Default::default()
        })
        .await
        .unwrap_or_else(|e| panic!("creating {name}: {e}"));
    }
}

async fn names(js: &jetstream::Context) -> Vec<String> {
    let mut v: Vec<String> = js.stream_names().try_collect().await.unwrap();
    v.sort();
    v
}

/// The real binary, with only the given credential variables in its environment.
fn delete_streams(port: u16, run: &str, env: &[(&str, &str)], log: &std::path::Path) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bench-runner"));
    for var in ["TOKEN", "NKEY_SEED", "USERNAME", "PASSWORD", "TLS_CA_FILE"] {
        cmd.env_remove(format!("MSGBENCH_{var}"));
    }
    cmd.args([
        "delete-streams",
        "--url",
        &format!("nats://127.0.0.1:{port}"),
    ])
    .args(["--run", run, "--connect-timeout-seconds", "5"])
    .arg("--termination-log")
    .arg(log)
    .envs(env.iter().copied())
    .stdin(Stdio::null())
    .output()
    .unwrap()
}

/// The one JSON line on stdout.
fn json_line(out: &Output) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "stdout: {stdout}");
    serde_json::from_str(lines[0]).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn strings(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_runs_streams_are_deleted_and_listed() {
    let s = nats_server(true);
    let js = context(s.port, async_nats::ConnectOptions::new()).await;
    create(&js, &[streams_of_a(), others()].concat()).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("termination-log");
    let run = run_prefix(RUN_A);
    assert_eq!(run, "abcdef12");

    let out = delete_streams(s.port, &run, &[], &log);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let v = json_line(&out);
    assert_eq!(v["run"], "abcdef12");
    assert_eq!(strings(&v["deleted"]), streams_of_a());
    assert_eq!(v["failed"], serde_json::json!([]));
    assert_eq!(names(&js).await, others());
    let note = std::fs::read_to_string(&log).unwrap();
    assert_eq!(note, "deleted 4 streams of run abcdef12");

    // Again: nothing left to delete is a success too. The run may be given in upper case.
    let out = delete_streams(s.port, "ABCDEF12", &[], &log);
    assert_eq!(out.status.code(), Some(0));
    let v = json_line(&out);
    assert_eq!(
        (v["run"].as_str(), strings(&v["deleted"])),
        (Some("abcdef12"), vec![])
    );
    assert_eq!(names(&js).await, others());

    // B's sweep takes B's one stream.
    let b = RunIsolation::for_run(RUN_B, 1).stream("MSGBENCH", 1);
    let out = delete_streams(s.port, &run_prefix(RUN_B), &[], &log);
    assert_eq!(strings(&json_line(&out)["deleted"]), vec![b.clone()]);
    let rest: Vec<String> = others().into_iter().filter(|n| *n != b).collect();
    assert_eq!(names(&js).await, rest);
}

/// A stream gone between the listing and the delete counts as deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_already_gone_counts_as_deleted() {
    let s = nats_server(true);
    let js = context(s.port, async_nats::ConnectOptions::new()).await;
    bench_runner::stream_sweep::delete_stream(&js, "NEVER_ABCDEF12G1_T1")
        .await
        .expect("not found is deleted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_server_is_swept_with_the_token_from_the_environment() {
    let port = free_port();
    let _s = nats_server_with(port, true, &["--auth", SECRET]);
    let js = context(port, async_nats::ConnectOptions::with_token(SECRET.into())).await;
    create(&js, &[streams_of_a(), others()].concat()).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("termination-log");

    // Without the token: refused at once, naming the URL, nothing deleted.
    let out = delete_streams(port, "abcdef12", &[], &log);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("nats://127.0.0.1:{port}")), "{err}");
    assert!(err.to_lowercase().contains("auth"), "{err}");
    assert!(out.stdout.is_empty());
    assert_eq!(names(&js).await.len(), 8);

    let out = delete_streams(port, "abcdef12", &[("MSGBENCH_TOKEN", SECRET)], &log);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(strings(&json_line(&out)["deleted"]), streams_of_a());
    assert_eq!(names(&js).await, others());
    for text in [err.to_string(), String::from_utf8_lossy(&out.stdout).into()] {
        assert!(!text.contains(SECRET), "the token is never printed: {text}");
    }
}

/// A JetStream nats-server with two users: `admin` may do anything, `sweeper` may list
/// streams but not delete them.
fn server_refusing_deletes() -> Server {
    let (port, dir) = (free_port(), tempfile::tempdir().unwrap());
    let conf = dir.path().join("nats.conf");
    std::fs::write(
        &conf,
        format!(
            "listen: 127.0.0.1:{port}\njetstream {{ store_dir: {:?} }}\nauthorization {{\n  users: [\n    {{user: admin, password: a}}\n    {{user: sweeper, password: s, permissions: {{publish: {{deny: [\"$JS.API.STREAM.DELETE.>\"]}}}}}}\n  ]\n}}\n",
            dir.path().join("js")
        ),
    )
    .unwrap();
    serve_with_config("nats-server", port, dir, &conf)
}

/// A delete the server refuses is listed under `failed`, exit 1, and the termination message
/// says so; user and password come from the environment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_delete_is_reported_and_exits_1() {
    let s = server_refusing_deletes();
    let admin = async_nats::ConnectOptions::with_user_and_password("admin".into(), "a".into());
    let js = context(s.port, admin).await;
    let mine = RunIsolation::for_run(RUN_A, 1).stream("MSGBENCH", 1);
    create(&js, std::slice::from_ref(&mine)).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("termination-log");
    let env = [("MSGBENCH_USERNAME", "sweeper"), ("MSGBENCH_PASSWORD", "s")];

    let out = delete_streams(s.port, "abcdef12", &env, &log);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let v = json_line(&out);
    assert_eq!(strings(&v["deleted"]), Vec::<String>::new());
    assert_eq!(v["failed"][0]["stream"], mine.as_str());
    assert!(!v["failed"][0]["error"].as_str().unwrap().is_empty(), "{v}");
    assert_eq!(names(&js).await, vec![mine.clone()]);
    let t = Termination::parse(&std::fs::read_to_string(&log).unwrap()).expect("a failure");
    assert_eq!(t.reason, RunnerGaveUp::RunnerFailed);
    assert!(
        t.message
            .starts_with("deleted 0 streams of run abcdef12; 1 failed, first ")
            && t.message.contains(&mine),
        "{t:?}"
    );
}

#[test]
fn an_unreachable_server_fails_naming_the_url() {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("termination-log");
    let url = format!("nats://127.0.0.1:{port}");
    let t = std::time::Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_bench-runner"))
        .args(["delete-streams", "--url", &url, "--run", "abcdef12"])
        .args(["--connect-timeout-seconds", "1", "--termination-log"])
        .arg(&log)
        .output()
        .unwrap();
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&url) && err.contains("unreachable"), "{err}");
    let t = Termination::parse(&std::fs::read_to_string(&log).unwrap()).unwrap();
    assert_eq!(t.reason, RunnerGaveUp::TargetUnreachable);
    assert!(t.message.contains(&url), "{t:?}");
}

#[test]
fn a_bad_run_or_url_is_refused_before_connecting() {
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_bench-runner"))
            .arg("delete-streams")
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&["--url", "nats://127.0.0.1:1", "--run", "abcdef1"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a run prefix"), "{err}");
    let out = run(&["--url", "mqtt://127.0.0.1:1", "--run", "abcdef12"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("mqtt://127.0.0.1:1"), "{err}");
}
