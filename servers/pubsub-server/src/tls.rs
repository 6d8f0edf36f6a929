//! TLS (TLS_CERT_FILE + TLS_KEY_FILE, PEM): HTTPS and WSS on the one port, every route.
//!
//! Why not axum-server: its TLS acceptor replaces axum's `Listener`, so the connection cap
//! (`conns::Capped`, an axum `Listener`) and `axum::serve`'s upgrades and graceful shutdown would
//! have to be rebuilt around it. Instead [`Handshakes`] is a `Listener` over the capped one: each
//! handshake runs on its own task with a deadline (a slow, silent or failing client never holds
//! up accept or anyone else; it is counted and closed), and axum gets the finished streams.
//! rustls runs with the ring provider only, passed explicitly (the workspace avoids aws-lc-rs).
use std::sync::Arc;
use std::time::Duration;

use axum::serve::Listener;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::task::JoinSet;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::config_error::{ConfigError, Lookup};
use crate::metrics::Metrics;

/// Longest a client may take to finish its handshake; its connection slot is held meanwhile.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: String,
    pub key: String,
}

/// TLS_CERT_FILE and TLS_KEY_FILE: both or neither.
pub fn files(get: Lookup) -> Result<Option<TlsFiles>, ConfigError> {
    let both = "TLS_CERT_FILE and TLS_KEY_FILE go together: set both (TLS) or neither";
    match (get("TLS_CERT_FILE"), get("TLS_KEY_FILE")) {
        (Some(cert), Some(key)) => Ok(Some(TlsFiles { cert, key })),
        (None, None) => Ok(None),
        (Some(v), None) => Err(ConfigError {
            var: "TLS_CERT_FILE",
            value: v,
            rule: both.into(),
        }),
        (None, Some(v)) => Err(ConfigError {
            var: "TLS_KEY_FILE",
            value: v,
            rule: both.into(),
        }),
    }
}

fn read(var: &'static str, path: &str) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path).map_err(|e| ConfigError {
        var,
        value: path.into(),
        rule: format!("cannot be read: {e}").into(),
    })
}

/// Reads and checks the certificate chain and key (at start: a bad file stops the server).
pub fn acceptor(files: &TlsFiles) -> Result<TlsAcceptor, ConfigError> {
    let bad = |var, path: &str, rule: String| ConfigError {
        var,
        value: path.into(),
        rule: rule.into(),
    };
    let pem = read("TLS_CERT_FILE", &files.cert)?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| bad("TLS_CERT_FILE", &files.cert, format!("bad PEM: {e}")))?;
    if chain.is_empty() {
        let rule = "must hold a PEM certificate (the server's first, then its chain)".into();
        return Err(bad("TLS_CERT_FILE", &files.cert, rule));
    }
    let key = PrivateKeyDer::from_pem_slice(&read("TLS_KEY_FILE", &files.key)?).map_err(|e| {
        let rule = format!("must hold a PEM private key (PKCS#8, PKCS#1 or SEC1): {e}");
        bad("TLS_KEY_FILE", &files.key, rule)
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(chain, key))
        .map_err(|e| {
            let rule = format!("does not fit the certificate in TLS_CERT_FILE: {e}");
            bad("TLS_KEY_FILE", &files.key, rule)
        })?;
    // HTTP/1.1 only: the server speaks no HTTP/2, and WebSocket upgrades need HTTP/1.1.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// A connection whose handshake finished, and its peer.
type Ready<L> = (TlsStream<<L as Listener>::Io>, <L as Listener>::Addr);

/// A `Listener` that yields connections of `inner` once their TLS handshake has finished.
pub struct Handshakes<L: Listener> {
    inner: L,
    acceptor: TlsAcceptor,
    pending: JoinSet<Option<Ready<L>>>,
    metrics: Arc<Metrics>,
}

impl<L: Listener> Handshakes<L> {
    pub fn new(inner: L, acceptor: TlsAcceptor, metrics: Arc<Metrics>) -> Self {
        Handshakes {
            inner,
            acceptor,
            pending: JoinSet::new(),
            metrics,
        }
    }
}

async fn handshake<Io, A>(
    acceptor: TlsAcceptor,
    io: Io,
    addr: A,
    metrics: Arc<Metrics>,
) -> Option<(TlsStream<Io>, A)>
where
    Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    A: std::fmt::Debug,
{
    let error = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(io)).await {
        Ok(Ok(stream)) => return Some((stream, addr)),
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!("no handshake within {HANDSHAKE_TIMEOUT:?}"),
    };
    // Debug, not warn: a scanner or a client with the wrong CA must not flood the log.
    metrics.tls_handshake_failed.inc();
    tracing::debug!(peer = ?addr, %error, "TLS handshake failed");
    None
}

impl<L> Listener for Handshakes<L>
where
    L: Listener,
    L::Addr: std::fmt::Debug + 'static,
{
    type Io = TlsStream<L::Io>;
    type Addr = L::Addr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            // Both branches are cancel-safe: a connection accepted is spawned before the next
            // await, a finished handshake stays in the set until joined.
            tokio::select! {
                (io, addr) = self.inner.accept() => {
                    let h = handshake(self.acceptor.clone(), io, addr, self.metrics.clone());
                    self.pending.spawn(h);
                }
                Some(done) = self.pending.join_next(), if !self.pending.is_empty() => {
                    if let Ok(Some(conn)) = done {
                        return conn;
                    }
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

#[cfg(test)]
mod tests;
