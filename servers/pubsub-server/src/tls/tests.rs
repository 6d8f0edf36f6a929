//! TLS: configuration errors, and real handshakes against the server served in process with a
//! throwaway CA: wss echo and broadcast, HTTPS REST, a wrong-CA or silent client next to good
//! ones, the connection cap and graceful shutdown over TLS.
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::*;
use crate::test_server::*;

#[test]
fn cert_and_key_go_together() {
    for var in ["TLS_CERT_FILE", "TLS_KEY_FILE"] {
        let err = config(&[(var, "/etc/tls/x.pem")]).unwrap_err().to_string();
        assert!(err.starts_with(&format!("{var}=")), "{err}");
        assert!(
            err.contains("TLS_CERT_FILE and TLS_KEY_FILE"),
            "names both: {err}"
        );
    }
    assert!(config(&[]).unwrap().tls.is_none());
}

#[test]
fn unreadable_or_wrong_files_name_their_variable() {
    let pki = Pki::new();
    let other = Pki::new();
    let files = |cert: &std::path::Path, key: &std::path::Path| TlsFiles {
        cert: cert.to_str().unwrap().into(),
        key: key.to_str().unwrap().into(),
    };
    let missing = pki.dir.path().join("missing.pem");
    let cases = [
        (files(&missing, &pki.key), "TLS_CERT_FILE", "cannot be read"),
        (files(&pki.cert, &missing), "TLS_KEY_FILE", "cannot be read"),
        (
            files(&pki.key, &pki.key),
            "TLS_CERT_FILE",
            "PEM certificate",
        ),
        (files(&pki.cert, &pki.cert), "TLS_KEY_FILE", "private key"),
        (files(&pki.cert, &other.key), "TLS_KEY_FILE", "does not fit"),
    ];
    for (f, var, rule) in cases {
        let err = acceptor(&f).err().expect("refused").to_string();
        assert!(err.starts_with(&format!("{var}=")), "{err}");
        assert!(err.contains(rule), "{err}");
    }
    assert!(acceptor(&files(&pki.cert, &pki.key)).is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wss_echo_and_https_rest_with_a_throwaway_ca() {
    let pki = Pki::new();
    let server = start_tls(&pki, &[]).await;
    let client = pki.client();
    let mut ws = ws(server.addr, Some(&client), "/ws", &[]).await.unwrap();
    for i in 0..3 {
        send_text(&mut ws, &format!("hello {i}")).await;
        assert_eq!(next_text(&mut ws).await, format!("hello {i}"));
    }
    let body = r#"{"topic":"t","payload":1}"#;
    let (status, v) = request(server.addr, Some(&client), "POST", "/publish", &[], body).await;
    assert_eq!(status, 200, "{v}");
    let (status, _) = request(server.addr, Some(&client), "GET", "/health", &[], "").await;
    assert_eq!(status, 200);
    // Plain HTTP on the TLS port gets no HTTP answer; it is a failed handshake, counted.
    let mut plain = TcpStream::connect(server.addr).await.unwrap();
    plain
        .write_all(b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(WAIT, plain.read_to_end(&mut answer)).await;
    assert!(!String::from_utf8_lossy(&answer).contains("HTTP/1.1"));
    let failed = &server.app.metrics.tls_handshake_failed;
    until("the failed handshake is counted", || failed.get() == 1).await;
    server.stop().await;
}

/// Two wss clients of `server`, returned once both are registered.
async fn two_clients(server: &Running, client: &TlsConnector) -> (Ws, Ws) {
    let a = ws(server.addr, Some(client), "/ws", &[]).await.unwrap();
    let b = ws(server.addr, Some(client), "/ws", &[]).await.unwrap();
    let clients = &server.app.metrics.ws_clients;
    until("two wss clients", || clients.get() == 2).await;
    (a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wss_broadcast_reaches_every_client() {
    let pki = Pki::new();
    let server = start_tls(&pki, &[("WS_MODE", "broadcast")]).await;
    let (mut a, mut b) = two_clients(&server, &pki.client()).await;
    send_text(&mut a, "from a").await;
    assert_eq!(next_text(&mut a).await, "from a");
    assert_eq!(next_text(&mut b).await, "from a");
    server.stop().await;
}

/// A client with the wrong CA and one that never speaks: each fails alone; an open client
/// goes on and new ones connect meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_handshake_affects_no_other_client() {
    let (pki, stranger) = (Pki::new(), Pki::new());
    let server = start_tls(&pki, &[]).await;
    let good = pki.client();
    let mut open = ws(server.addr, Some(&good), "/ws", &[]).await.unwrap();

    let _silent = TcpStream::connect(server.addr).await.unwrap(); // never says hello
    let since = tokio::time::Instant::now();
    let err = connect(server.addr, Some(&stranger.client()))
        .await
        .err()
        .expect("a client that does not trust the server's CA fails its handshake");
    assert!(err.to_string().contains("certificate"), "{err}");

    send_text(&mut open, "still here").await;
    assert_eq!(next_text(&mut open).await, "still here");
    let mut fresh = ws(server.addr, Some(&good), "/ws", &[]).await.unwrap();
    send_text(&mut fresh, "new").await;
    assert_eq!(next_text(&mut fresh).await, "new");
    assert!(
        since.elapsed() < HANDSHAKE_TIMEOUT / 2,
        "the new client waited for the silent one's handshake"
    );
    let failed = &server.app.metrics.tls_handshake_failed;
    until("the stranger's handshake is counted", || failed.get() >= 1).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_the_cap_an_https_client_reads_the_503() {
    let pki = Pki::new();
    let server = start_tls(&pki, &[("MAX_CONNECTIONS", "1")]).await;
    let client = pki.client();
    let mut held = ws(server.addr, Some(&client), "/ws", &[]).await.unwrap();
    let (status, body) = request(server.addr, Some(&client), "GET", "/health", &[], "").await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("MAX_CONNECTIONS"), "{body}");
    send_text(&mut held, "unaffected").await;
    assert_eq!(next_text(&mut held).await, "unaffected");
    assert_eq!(server.app.metrics.connections_rejected.get(), 1);
    server.stop().await;
}

/// SIGTERM's path over TLS: an open wss client is sent a Close and `serve` returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_closes_wss_clients() {
    use futures::StreamExt;
    let pki = Pki::new();
    let server = start_tls(&pki, &[]).await;
    let mut open = ws(server.addr, Some(&pki.client()), "/ws", &[])
        .await
        .unwrap();
    send_text(&mut open, "x").await;
    assert_eq!(next_text(&mut open).await, "x");
    server.stop().await;
    let closed = tokio::time::timeout(WAIT, async {
        while let Some(Ok(m)) = open.next().await {
            if m.is_close() {
                return;
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the client was not closed");
}
