//! In-process harness for tests over real sockets: the server built from an environment and
//! served by `crate::serve` on a free port, a throwaway CA (rcgen) and raw HTTP/WebSocket clients
//! that can speak TLS (tokio-rustls, ring) and add headers.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_rustls::TlsConnector;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::WebSocketStream;

use crate::app::{Runtime, SharedApp};
use crate::config::Config;
use crate::{build, serve, tls};

pub const WAIT: Duration = Duration::from_secs(10);

pub fn config(env: &[(&str, &str)]) -> Result<Config, crate::config_error::ConfigError> {
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Config::from_lookup(&move |k| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
}

/// A CA and a certificate it signs for `localhost`, as PEM files in a temporary directory.
pub struct Pki {
    pub dir: tempfile::TempDir,
    pub ca: CertificateDer<'static>,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Pki {
    pub fn new() -> Pki {
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_key = KeyPair::generate().unwrap();
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .signed_by(&key, &ca_cert, &ca_key)
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (cert_file, key_file) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        std::fs::write(&cert_file, cert.pem()).unwrap();
        std::fs::write(&key_file, key.serialize_pem()).unwrap();
        Pki {
            ca: ca_cert.der().clone(),
            dir,
            cert: cert_file,
            key: key_file,
        }
    }

    /// TLS_CERT_FILE and TLS_KEY_FILE for this certificate.
    pub fn env(&self) -> [(&'static str, String); 2] {
        [
            ("TLS_CERT_FILE", self.cert.to_str().unwrap().to_owned()),
            ("TLS_KEY_FILE", self.key.to_str().unwrap().to_owned()),
        ]
    }

    /// A client that trusts this CA only.
    pub fn client(&self) -> TlsConnector {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca.clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        TlsConnector::from(Arc::new(config))
    }
}

/// A server served in this process; `stop` drains it as SIGTERM does.
pub struct Running {
    pub addr: SocketAddr,
    pub app: SharedApp,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<std::io::Result<()>>,
}

pub async fn start(env: &[(&str, &str)]) -> Running {
    let cfg = config(env).expect("valid configuration");
    let acceptor = cfg.tls.as_ref().map(|f| tls::acceptor(f).unwrap());
    let runtime = Runtime {
        worker_threads: 1,
        cpus_allowed: 1,
        cpu_limit: None,
    };
    let built = build(cfg, runtime).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel();
    let (app, io, flag) = (built.app.clone(), built.io.clone(), built.stop);
    let drain = async move {
        let _ = stopped.await;
        let _ = flag.send(true);
        io.close().await;
    };
    let task = tokio::spawn({
        let app = app.clone();
        async move { serve(listener, built.router, &app, acceptor, drain).await }
    });
    Running {
        addr,
        app,
        stop: Some(stop),
        task,
    }
}

/// `start` with `pki`'s certificate and key, and `env`.
pub async fn start_tls(pki: &Pki, env: &[(&str, &str)]) -> Running {
    let files = pki.env();
    let mut all: Vec<(&str, &str)> = files.iter().map(|(k, v)| (*k, v.as_str())).collect();
    all.extend_from_slice(env);
    start(&all).await
}

impl Running {
    /// Graceful stop: open connections are told to close, then `serve` returns.
    pub async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        let task = &mut self.task;
        let res = tokio::time::timeout(WAIT, task).await;
        res.expect("drained in time")
            .unwrap()
            .expect("serve ended cleanly");
    }
}

pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// A connection to `addr`, over TLS (SNI `localhost`) when `tls` is given.
pub async fn connect(addr: SocketAddr, tls: Option<&TlsConnector>) -> std::io::Result<Box<dyn Io>> {
    let tcp = TcpStream::connect(addr).await?;
    let io: Box<dyn Io> = match tls {
        None => Box::new(tcp),
        Some(c) => {
            let name = ServerName::try_from("localhost").unwrap();
            Box::new(tokio::time::timeout(WAIT, c.connect(name, tcp)).await??)
        }
    };
    Ok(io)
}

/// One HTTP/1.1 request on a new connection: (status, body).
pub async fn request(
    addr: SocketAddr,
    tls: Option<&TlsConnector>,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let mut conn = connect(addr, tls).await.expect("connect");
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head += &format!("{k}: {v}\r\n");
    }
    conn.write_all(format!("{head}\r\n{body}").as_bytes())
        .await
        .unwrap();
    let mut raw = Vec::new();
    // Until the server closes (a TLS peer may close without close_notify: keep what came).
    let _ = tokio::time::timeout(WAIT, conn.read_to_end(&mut raw)).await;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP answer to {method} {path}: {text:?}"));
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    (status, body)
}

pub type Ws = WebSocketStream<Box<dyn Io>>;

/// A WebSocket handshake on `path` with `headers`; a refusal is `tungstenite::Error::Http`.
pub async fn ws(
    addr: SocketAddr,
    tls: Option<&TlsConnector>,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<Ws, tungstenite::Error> {
    let scheme = if tls.is_some() { "wss" } else { "ws" };
    let mut req = format!("{scheme}://localhost{path}")
        .into_client_request()
        .unwrap();
    for (k, v) in headers {
        let name = tungstenite::http::HeaderName::from_bytes(k.as_bytes()).unwrap();
        req.headers_mut().insert(name, v.parse().unwrap());
    }
    let conn = connect(addr, tls).await?;
    let (ws, _) = tokio::time::timeout(WAIT, tokio_tungstenite::client_async(req, conn))
        .await
        .expect("ws handshake in time")?;
    Ok(ws)
}

/// The status a refused WebSocket handshake was answered with.
pub fn refused_status(r: Result<Ws, tungstenite::Error>) -> u16 {
    match r {
        Err(tungstenite::Error::Http(res)) => res.status().as_u16(),
        Err(e) => panic!("expected an HTTP refusal, got {e}"),
        Ok(_) => panic!("expected an HTTP refusal, the upgrade succeeded"),
    }
}

/// The next text frame.
pub async fn next_text(ws: &mut Ws) -> String {
    use futures::StreamExt;
    loop {
        let m = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("frame in time")
            .expect("open")
            .expect("frame");
        match m {
            Message::Text(t) => return t.to_string(),
            Message::Close(c) => panic!("closed: {c:?}"),
            _ => continue,
        }
    }
}

pub async fn send_text(ws: &mut Ws, text: &str) {
    use futures::SinkExt;
    ws.send(Message::text(text)).await.unwrap();
}

/// Polls `check` until it holds; panics naming `what` after `WAIT`.
pub async fn until(what: &str, check: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
