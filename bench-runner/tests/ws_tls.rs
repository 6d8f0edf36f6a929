//! WebSocket (`wss://`) and Socket.IO (`https://`) over TLS with a token, through a TLS front
//! that checks the token as a server requiring one does (`support::gateway`), before the
//! in-test WebSocket echo server and the Node Socket.IO harness. The token goes in the header
//! or query parameter the target names (default `Authorization: Bearer`); a 401 fails at once
//! as TargetAuthFailed and a certificate from another CA as TargetTLSFailed, the token in no
//! error. Socket.IO's REST reads (`socketio.rest`) go the same way.
mod support;
use bench_runner::termination;
use bench_runner::tls::TlsFiles;
use bench_runner::{run, RunOptions};
use runner_api::target::{Credentials, TokenPlacement};
use runner_api::termination::RunnerGaveUp;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::gateway::{tls_token_gateway, Expect};
use support::pki::Ca;
use support::*;

const TOKEN: &str = "tok en/+&=s3cret";
/// [`TOKEN`] URL-encoded, as a query parameter carries it.
const TOKEN_IN_QUERY: &str = "tok%20en%2F%2B%26%3Ds3cret";
const ECHO: &str = "protocol: websocket\npublishers: 2\nsubscribers: 0\nratePerPublisher: 250\nmessagesPerPublisher: 100\nwebsocket: {mode: echo, path: /ws}\n";

fn opts(token: &str, placement: Option<TokenPlacement>, ca: &std::path::Path) -> RunOptions {
    RunOptions {
        runner_id: 7,
        connect_timeout: Duration::from_secs(20),
        credentials: Some(Credentials::Token(token.into())),
        token_placement: placement,
        tls: TlsFiles {
            ca_file: Some(ca.to_path_buf()),
            server_name: Some("ws.test".into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wss_carries_the_token_where_the_server_wants_it() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ws test CA");
    let cert = ca.issue(dir.path(), "ws", &["ws.test"]);
    let echo = ws_echo_server().await;
    let cases = [
        (
            None,
            Expect::Header("Authorization", format!("Bearer {TOKEN}")),
        ),
        (
            Some(TokenPlacement::Header("X-Api-Key".into())),
            Expect::Header("X-Api-Key", TOKEN.into()),
        ),
        (
            Some(TokenPlacement::Query("access_token".into())),
            Expect::Query("access_token", TOKEN_IN_QUERY.into()),
        ),
    ];
    for (placement, expect) in cases {
        let gw = tls_token_gateway(echo, &cert, expect.clone()).await;
        let url = format!("wss://127.0.0.1:{gw}");
        let r = run(
            workload(ECHO),
            &url,
            opts(TOKEN, placement.clone(), &ca.file),
        )
        .await
        .unwrap_or_else(|e| panic!("{placement:?}: {e:#}"));
        let m = &r.measured;
        assert_eq!((m.published, m.received), (200, 200), "{placement:?}");
        // The same token elsewhere is refused: it went where the server looks.
        let elsewhere = match placement {
            Some(TokenPlacement::Query(_)) => None,
            _ => Some(TokenPlacement::Query("access_token".into())),
        };
        let e = run(workload(ECHO), &url, opts(TOKEN, elsewhere, &ca.file))
            .await
            .expect_err("refused");
        assert_eq!(termination::of(&e).reason, RunnerGaveUp::TargetAuthFailed);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_401_or_an_untrusted_certificate_fails_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ws test CA");
    let other = Ca::new(dir.path(), "other CA");
    let cert = ca.issue(dir.path(), "ws", &["ws.test"]);
    let echo = ws_echo_server().await;
    let expect = Expect::Header("Authorization", format!("Bearer {TOKEN}"));
    let gw = tls_token_gateway(echo, &cert, expect).await;
    let url = format!("wss://127.0.0.1:{gw}");
    let cases = [
        (
            "wrong-token",
            &ca.file,
            RunnerGaveUp::TargetAuthFailed,
            "HTTP 401",
        ),
        (
            TOKEN,
            &other.file,
            RunnerGaveUp::TargetTLSFailed,
            "CN=ws test CA",
        ),
    ];
    for (token, ca_file, want, words) in cases {
        let t = Instant::now();
        let e = run(workload(ECHO), &url, opts(token, None, ca_file))
            .await
            .expect_err("refused");
        let shown = format!("{e:#}");
        assert_eq!(termination::of(&e).reason, want, "{shown}");
        assert!(t.elapsed() < Duration::from_secs(5), "{shown}");
        assert!(shown.contains(words) && shown.contains(&url), "{shown}");
        assert!(!shown.contains(token) && !shown.contains(TOKEN), "{shown}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socketio_over_https_with_a_token_delivers_exactly() {
    let start =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/pubsub/node-server/start");
    let port = free_port();
    let child = Command::new(&start)
        .arg(port.to_string())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut server = Server {
        child,
        port,
        _dir: tempfile::tempdir().unwrap(),
    };
    // First start installs node_modules once (cached).
    wait_listening(port, Duration::from_secs(240), &mut server.child);
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ws test CA");
    let cert = ca.issue(dir.path(), "pubsub", &["ws.test"]);
    let expect = Expect::Query("token", TOKEN_IN_QUERY.into());
    let gw = tls_token_gateway(port, &cert, expect).await;
    let url = format!("https://127.0.0.1:{gw}");
    let placement = Some(TokenPlacement::Query("token".into()));
    // `rest`: the REST reads go over the same TLS with the same token (the gateway refuses
    // any request without it, so an error here means the probe left it out).
    let yaml = "protocol: socketio\npublishers: 2\nsubscribers: 2\ntopics: 2\nratePerPublisher: 100\nmessagesPerPublisher: 100\nsocketio: {rest: {paths: [/health], ratePerSecond: 20}}\n";
    let r = run(workload(yaml), &url, opts(TOKEN, placement, &ca.file))
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let m = &r.measured;
    assert_eq!((m.published, m.received), (200, 200), "{:?}", m.errors);
    assert_eq!(m.ack_latency.len(), 200, "every HTTPS publish answered");
    let rest = &r.rest;
    assert!(
        rest.len() == 1 && rest[0].requests > 0 && rest[0].errors == 0,
        "REST reads over TLS with the token: {rest:?}"
    );
    let e = run(workload(yaml), &url, opts("nope", None, &ca.file))
        .await
        .expect_err("refused");
    assert_eq!(termination::of(&e).reason, RunnerGaveUp::TargetAuthFailed);
}
