//! Connection cap: at most MAX_CONNECTIONS client connections (HTTP, Socket.IO, /ws all arrive
//! as TCP connections on the one port) are served at once. One more is answered with a 503
//! `{"error": "connections: ..."}` and closed, and counted; the ones already open are untouched.
//! With TLS the refusal is answered inside a handshake too, so an HTTPS client reads the 503
//! instead of a TLS error.
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::serve::Listener;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_rustls::TlsAcceptor;

use crate::metrics::Metrics;

/// Refusals in progress at once; beyond that a connection is closed without an answer, so a
/// flood cannot turn the refusals themselves into unbounded work.
const MAX_REFUSING: usize = 64;
/// How long a refusal waits for the request head before answering (read first, so closing
/// does not reset the connection under a request the client is still sending).
const REFUSE_READ: Duration = Duration::from_secs(2);

pub struct Capped<L> {
    inner: L,
    slots: Arc<Semaphore>,
    refusing: Arc<Semaphore>,
    max: usize,
    metrics: Arc<Metrics>,
    tls: Option<TlsAcceptor>,
}

impl<L: Listener> Capped<L> {
    pub fn new(inner: L, max: usize, metrics: Arc<Metrics>) -> Self {
        Capped {
            inner,
            slots: Arc::new(Semaphore::new(max)),
            refusing: Arc::new(Semaphore::new(MAX_REFUSING)),
            max,
            metrics,
            tls: None,
        }
    }

    /// Refusals are answered over TLS (the served connections' handshakes are `tls::Handshakes`').
    pub fn with_tls(mut self, tls: Option<TlsAcceptor>) -> Self {
        self.tls = tls;
        self
    }

    fn refuse(&self, io: L::Io) {
        self.metrics.connections_rejected.inc();
        let Ok(turn) = self.refusing.clone().try_acquire_owned() else {
            return; // dropped: closed at once
        };
        let body = format!(
            r#"{{"error":"connections: at most {} open at once (MAX_CONNECTIONS)"}}"#,
            self.max
        );
        let tls = self.tls.clone();
        tokio::spawn(async move {
            let _turn = turn;
            match tls {
                None => refuse(io, &body).await,
                Some(tls) => {
                    if let Ok(Ok(io)) = tokio::time::timeout(REFUSE_READ, tls.accept(io)).await {
                        refuse(io, &body).await;
                    }
                }
            }
        });
    }
}

async fn refuse<S: AsyncRead + AsyncWrite + Unpin>(mut io: S, body: &str) {
    let mut head = [0u8; 4096];
    let mut seen = 0;
    let _ = tokio::time::timeout(REFUSE_READ, async {
        while seen < head.len() && !head[..seen].windows(4).any(|w| w == b"\r\n\r\n") {
            match io.read(&mut head[seen..]).await {
                Ok(0) | Err(_) => break,
                Ok(n) => seen += n,
            }
        }
    })
    .await;
    let res = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\nretry-after: 1\r\n\r\n{body}",
        body.len()
    );
    let _ = io.write_all(res.as_bytes()).await;
    let _ = io.shutdown().await;
}

impl<L: Listener> Listener for Capped<L> {
    type Io = Counted<L::Io>;
    type Addr = L::Addr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let (io, addr) = self.inner.accept().await;
            match self.slots.clone().try_acquire_owned() {
                Ok(slot) => {
                    self.metrics.connections.inc();
                    let metrics = self.metrics.clone();
                    return (
                        Counted {
                            io,
                            _slot: slot,
                            metrics,
                        },
                        addr,
                    );
                }
                Err(_) => self.refuse(io),
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// A served connection; its slot frees when the server drops it.
pub struct Counted<S> {
    io: S,
    _slot: OwnedSemaphorePermit,
    metrics: Arc<Metrics>,
}

impl<S> Drop for Counted<S> {
    fn drop(&mut self) {
        self.metrics.connections.dec();
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}
