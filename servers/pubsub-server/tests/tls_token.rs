//! The binary with TLS and a token: it announces `https://`, serves wss to a client with the
//! token and refuses one without, stops cleanly on SIGTERM, and writes neither the token nor a
//! wrong one to its output, even at RUST_LOG=trace.
mod common;

use std::fs::File;
use std::process::Stdio;
use std::sync::Arc;

use common::*;
use futures::{SinkExt, StreamExt};
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{Error, Message};

const TOKEN: &str = "log-probe-7f3a9c";
const WRONG: &str = "wrong-probe-51d2e8";

/// A CA and a `localhost` certificate it signs, written into `dir`; a client that trusts the CA.
fn pki(dir: &std::path::Path) -> (String, String, TlsConnector) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .signed_by(&key, &ca_cert, &ca_key)
        .unwrap();
    let (cert_file, key_file) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert_file, cert.pem()).unwrap();
    std::fs::write(&key_file, key.serialize_pem()).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca_cert.der().clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let path = |p: std::path::PathBuf| p.to_str().unwrap().to_owned();
    (
        path(cert_file),
        path(key_file),
        TlsConnector::from(Arc::new(client)),
    )
}

type Wss = tokio_tungstenite::WebSocketStream<tokio_rustls::client::TlsStream<TcpStream>>;

async fn wss(port: u16, tls: &TlsConnector, path: &str, auth: Option<&str>) -> Result<Wss, Error> {
    let mut req = format!("wss://localhost:{port}{path}")
        .into_client_request()
        .unwrap();
    if let Some(a) = auth {
        req.headers_mut()
            .insert("authorization", a.parse().unwrap());
    }
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let stream = tls.connect(name, tcp).await.unwrap();
    Ok(tokio_tungstenite::client_async(req, stream).await?.0)
}

fn status(r: Result<Wss, Error>) -> u16 {
    match r {
        Err(Error::Http(res)) => res.status().as_u16(),
        other => panic!("expected a refusal: {:?}", other.map(|_| ())),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_wss_with_a_token_and_never_logs_it() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, tls) = pki(dir.path());
    let log = dir.path().join("stderr.log");
    let env = [
        ("TLS_CERT_FILE", cert.as_str()),
        ("TLS_KEY_FILE", key.as_str()),
        ("AUTH_TOKEN", TOKEN),
        ("AUTH_QUERY", "token"),
        ("RUST_LOG", "trace"),
    ];
    let server = Server::start_with_stderr(&env, Stdio::from(File::create(&log).unwrap()));
    assert!(
        server.base.starts_with("https://127.0.0.1:"),
        "{}",
        server.base
    );
    let port = server.port;

    let mut ws = wss(port, &tls, &format!("/ws?token={TOKEN}"), None)
        .await
        .unwrap();
    ws.send(Message::text("over tls")).await.unwrap();
    let echo = ws.next().await.unwrap().unwrap();
    assert_eq!(echo.into_text().unwrap().as_str(), "over tls");
    let bearer = format!("Bearer {TOKEN}");
    assert!(wss(port, &tls, "/ws", Some(&bearer)).await.is_ok());
    assert_eq!(status(wss(port, &tls, "/ws", Some(WRONG)).await), 401);
    let query = format!("/socket.io/?EIO=4&transport=websocket&token={WRONG}");
    assert_eq!(status(wss(port, &tls, &query, None).await), 401);

    assert_eq!(server.terminate(), Some(0));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("serving"), "the log was written: {text}");
    assert!(
        text.contains("refused: no valid token"),
        "debug lines too: {text}"
    );
    assert!(!text.contains(TOKEN), "the token is in the log");
    assert!(!text.contains(WRONG), "a presented token is in the log");
}
