//! NATS targets that require auth: the runner sends a token or user/password from
//! `RunOptions::credentials` (the agent fills it from the pod's environment), on both NATS
//! clients (the hand-written core path and async-nats for JetStream), and never prints it.
mod support;
use bench_runner::{run, RunOptions};
use runner_api::target::Credentials;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::*;

const SECRET: &str = "s3cret-\"quoted\"-token";

fn opts(credentials: Option<Credentials>) -> RunOptions {
    RunOptions {
        runner_id: 3,
        connect_timeout: Duration::from_secs(2),
        credentials,
        ..Default::default()
    }
}

async fn run_with(yaml: &str, port: u16, c: Option<Credentials>) -> anyhow::Result<u64> {
    let r = run(workload(yaml), &format!("nats://127.0.0.1:{port}"), opts(c)).await?;
    Ok(r.measured.received)
}

const CORE: &str = "protocol: nats\nratePerPublisher: 500\nmessagesPerPublisher: 200\n";
const JS: &str = "protocol: jetstream\nratePerPublisher: 500\nmessagesPerPublisher: 200\njetstream: {stream: auth, storage: memory}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_server_is_benchmarked_with_the_token_and_refused_without() {
    let port = free_port();
    let _s = nats_server_with(port, true, &["--auth", SECRET]);
    let token = || Some(Credentials::Token(SECRET.into()));
    assert_eq!(run_with(CORE, port, token()).await.unwrap(), 200);
    assert_eq!(run_with(JS, port, token()).await.unwrap(), 200);
    for (yaml, c) in [(CORE, None), (JS, Some(Credentials::Token("wrong".into())))] {
        let e = format!("{:#}", run_with(yaml, port, c).await.unwrap_err());
        assert!(e.to_lowercase().contains("auth"), "{e}");
        assert!(!e.contains(SECRET), "the secret is never in an error: {e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_password_server_is_benchmarked_on_both_clients() {
    let port = free_port();
    let _s = nats_server_with(port, true, &["--user", "bench", "--pass", SECRET]);
    let up = |password: &str| {
        Some(Credentials::UserPassword {
            username: "bench".into(),
            password: password.into(),
        })
    };
    assert_eq!(run_with(CORE, port, up(SECRET)).await.unwrap(), 200);
    assert_eq!(run_with(JS, port, up(SECRET)).await.unwrap(), 200);
    let e = format!("{:#}", run_with(CORE, port, up("nope")).await.unwrap_err());
    assert!(e.to_lowercase().contains("auth"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_for_a_protocol_that_does_not_use_them_are_refused() {
    let e = run(
        workload("protocol: mqtt\nratePerPublisher: 10\nmessagesPerPublisher: 1\n"),
        "mqtt://127.0.0.1:1",
        opts(Some(Credentials::Token("t".into()))),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("only sent to nats, jetstream, websocket and socketio"),
        "{e}"
    );
}

/// A JetStream nats-server whose one user is an NKey, configured as the operator writes it
/// (`users: [{nkey: $NATS_NKEY}]`, the public key from the environment).
fn nkey_server(public_key: &str) -> Server {
    let (port, dir) = (free_port(), tempfile::tempdir().unwrap());
    let conf = dir.path().join("nats.conf");
    std::fs::write(
        &conf,
        format!(
            "listen: 127.0.0.1:{port}\njetstream {{ store_dir: {:?} }}\nauthorization {{\n  users: [{{nkey: $NATS_NKEY}}]\n}}\n",
            dir.path().join("js")
        ),
    )
    .unwrap();
    let mut child = Command::new(tool("nats-server"))
        .arg("-c")
        .arg(&conf)
        .env("NATS_NKEY", public_key)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_listening(port, Duration::from_secs(15), &mut child);
    Server {
        child,
        port,
        _dir: dir,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_nkey_user_signs_the_nonce_on_both_clients() {
    let user = nkeys::KeyPair::new_user();
    let s = nkey_server(&user.public_key());
    let seed = || {
        Some(Credentials::Nkey {
            seed: user.seed().unwrap(),
        })
    };
    assert_eq!(run_with(CORE, s.port, seed()).await.unwrap(), 200);
    assert_eq!(run_with(JS, s.port, seed()).await.unwrap(), 200);
    // Another user's seed signs too, but is not the configured key.
    let other = nkeys::KeyPair::new_user().seed().unwrap();
    let e = format!(
        "{:#}",
        run_with(
            CORE,
            s.port,
            Some(Credentials::Nkey {
                seed: other.clone()
            })
        )
        .await
        .unwrap_err()
    );
    assert!(e.to_lowercase().contains("auth"), "{e}");
    assert!(!e.contains(&other), "the seed is never in an error: {e}");
}
