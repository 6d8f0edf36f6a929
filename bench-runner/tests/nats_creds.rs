//! NATS decentralized auth: a nats-server in operator mode (`operator`, `resolver: MEMORY`,
//! `resolver_preload`; JWTs made in `support::nats_jwt`) benchmarked with a `.creds` file's
//! content, on both core-NATS client paths and JetStream. Wrong credentials fail within
//! seconds as TargetAuthFailed (never retried to the end of the connect window), and no
//! seed or JWT reaches an error, stderr or the termination message.
mod support;
use bench_runner::termination;
use bench_runner::{run, ClientPath, RunOptions};
use runner_api::target::Credentials;
use runner_api::termination::{RunnerGaveUp, Termination};
use std::process::Command;
use std::time::{Duration, Instant};
use support::nats_jwt::{user_creds_signed_by, Operator};
use support::*;

const CORE: &str =
    "protocol: nats\nsubscribers: 1\nratePerPublisher: 500\nmessagesPerPublisher: 200\n";
const JS: &str = "protocol: jetstream\nratePerPublisher: 500\nmessagesPerPublisher: 200\njetstream: {stream: creds, storage: memory}\n";

fn operator_server(op: &Operator) -> Server {
    let (port, dir) = (free_port(), tempfile::tempdir().unwrap());
    let conf = dir.path().join("nats.conf");
    let js = dir.path().join("js");
    let text = format!(
        "listen: 127.0.0.1:{port}\njetstream {{ store_dir: {js:?} }}\n{}",
        op.config()
    );
    std::fs::write(&conf, text).unwrap();
    serve_with_config("nats-server", port, dir, &conf)
}

fn opts(creds: &str, client: ClientPath) -> RunOptions {
    RunOptions {
        runner_id: 5,
        // Long: a refusal must end the run at once, not when this window ends.
        connect_timeout: Duration::from_secs(20),
        credentials: Some(Credentials::Creds(creds.into())),
        client,
        ..Default::default()
    }
}

const PATHS: [(&str, ClientPath); 3] = [
    (CORE, ClientPath::Wire),
    (CORE, ClientPath::Library),
    (JS, ClientPath::Wire),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creds_deliver_exactly_on_both_core_paths_and_jetstream() {
    let op = Operator::new();
    let s = operator_server(&op);
    let (creds, _) = op.user_creds();
    let url = format!("nats://127.0.0.1:{}", s.port);
    for (yaml, client) in PATHS {
        let r = run(workload(yaml), &url, opts(&creds, client))
            .await
            .unwrap_or_else(|e| panic!("{client:?} {yaml}: {e:#}"));
        let m = &r.measured;
        assert_eq!((m.published, m.received), (200, 200), "{client:?} {yaml}");
        assert!(m.errors.is_empty(), "{client:?}: {:?}", m.errors);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_creds_fail_at_once_as_target_auth_failed() {
    let op = Operator::new();
    let s = operator_server(&op);
    let url = format!("nats://127.0.0.1:{}", s.port);
    // A user of an account the server does not know; the right JWT signed with another seed;
    // a file that is no creds file at all.
    let (stranger, stranger_seed) = user_creds_signed_by(&nkeys::KeyPair::new_account());
    let (good, good_seed) = op.user_creds();
    let other_seed = nkeys::KeyPair::new_user().seed().unwrap();
    let swapped = good.replace(&good_seed, &other_seed);
    let jwt_of = |c: &str| c.lines().nth(1).unwrap().to_string();
    let cases = [
        (stranger.clone(), vec![stranger_seed, jwt_of(&stranger)]),
        (
            swapped.clone(),
            vec![other_seed, good_seed, jwt_of(&swapped)],
        ),
        ("not a creds file".to_string(), vec![]),
    ];
    for (creds, secrets) in &cases {
        for (yaml, client) in PATHS {
            let t = Instant::now();
            let e = run(workload(yaml), &url, opts(creds, client))
                .await
                .expect_err("refused");
            let took = t.elapsed();
            let term = termination::of(&e);
            let shown = format!("{e:#}");
            assert_eq!(
                term.reason,
                RunnerGaveUp::TargetAuthFailed,
                "{client:?}: {shown}"
            );
            assert!(
                took < Duration::from_secs(5),
                "{client:?}: {took:?}: {shown}"
            );
            assert!(shown.contains(&url), "names the target: {shown}");
            for s in secrets {
                assert!(
                    !shown.contains(s.as_str()),
                    "{client:?}: a secret in {shown}"
                );
            }
        }
    }
}

/// The standalone command: MSGBENCH_CREDS from the environment, a refusal written as the
/// termination message with its reason, and the seed in neither that nor stderr.
#[test]
fn the_command_reports_a_refusal_and_never_the_seed() {
    let op = Operator::new();
    let s = operator_server(&op);
    let (creds, seed) = user_creds_signed_by(&nkeys::KeyPair::new_account());
    let dir = tempfile::tempdir().unwrap();
    let (f, log) = (
        dir.path().join("w.yaml"),
        dir.path().join("termination-log"),
    );
    std::fs::write(&f, CORE).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_bench-runner"))
        .args(["run", "-f"])
        .arg(&f)
        .args(["--target", &format!("nats://127.0.0.1:{}", s.port)])
        .env("MSGBENCH_CREDS", &creds)
        .env("MSGBENCH_TERMINATION_LOG", &log)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let t = Termination::parse(&std::fs::read_to_string(&log).unwrap()).expect("written");
    assert_eq!(t.reason, RunnerGaveUp::TargetAuthFailed, "{}", t.message);
    assert!(
        t.message.contains("Authorization Violation"),
        "{}",
        t.message
    );
    for text in [stderr.as_ref(), t.message.as_str()] {
        assert!(
            !text.contains(&seed) && !text.contains(&creds[30..80]),
            "{text}"
        );
    }
}

/// `delete-streams` connects as the runs do: with the creds it lists (nothing to delete here),
/// with a stranger's it is refused at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_sweep_authenticates_with_creds() {
    use bench_runner::stream_sweep::{sweep, target};
    let op = Operator::new();
    let s = operator_server(&op);
    let url = format!("nats://127.0.0.1:{}", s.port);
    let window = bench_runner::connect::ConnectWindow::new(&url, Duration::from_secs(20));
    let (good, _) = op.user_creds();
    let t = target(&url, Some(Credentials::Creds(good)), &Default::default()).unwrap();
    let done = sweep(&t, "abcdef12", &window).await.unwrap();
    assert!(
        done.deleted.is_empty() && done.failed.is_empty(),
        "{done:?}"
    );
    let (stranger, _) = user_creds_signed_by(&nkeys::KeyPair::new_account());
    let t = target(
        &url,
        Some(Credentials::Creds(stranger)),
        &Default::default(),
    )
    .unwrap();
    let e = sweep(&t, "abcdef12", &window).await.unwrap_err();
    assert_eq!(
        termination::of(&e).reason,
        RunnerGaveUp::TargetAuthFailed,
        "{e:#}"
    );
}
