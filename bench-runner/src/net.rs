//! A client connection, plain TCP or TLS, for the hand-written clients. Plain connections keep
//! tokio's lock-free owned halves (the hot path of a benchmark client); TLS halves share the
//! session through `tokio::io::split`.
use crate::tls::TlsClient;
use runner_api::target::TargetUrl;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

type Tls = TlsStream<TcpStream>;

pub enum Stream {
    Plain(TcpStream),
    Tls(Box<Tls>),
}

pub enum ReadHalf {
    Plain(OwnedReadHalf),
    Tls(tokio::io::ReadHalf<Tls>),
}

pub enum WriteHalf {
    Plain(OwnedWriteHalf),
    Tls(tokio::io::WriteHalf<Tls>),
}

impl Stream {
    pub fn into_split(self) -> (ReadHalf, WriteHalf) {
        match self {
            Stream::Plain(s) => {
                let (r, w) = s.into_split();
                (ReadHalf::Plain(r), WriteHalf::Plain(w))
            }
            Stream::Tls(s) => {
                let (r, w) = tokio::io::split(*s);
                (ReadHalf::Tls(r), WriteHalf::Tls(w))
            }
        }
    }
}

/// A TCP connection to `target` (Nagle off), within `limit`; then TLS over it with `tls`.
/// Connection errors stay I/O errors (a target not up yet is retried); TLS failures are
/// refusals.
pub async fn dial(
    target: &TargetUrl,
    tls: Option<&TlsClient>,
    limit: Duration,
) -> anyhow::Result<Stream> {
    let s = tokio::time::timeout(limit, TcpStream::connect(target.addr()))
        .await
        .map_err(|_| anyhow::anyhow!("connect to {}: timed out", target.raw))??;
    s.set_nodelay(true)?;
    Ok(match tls {
        None => Stream::Plain(s),
        Some(t) => Stream::Tls(Box::new(t.connect(s).await?)),
    })
}

/// `AsyncRead` by delegating to whichever variant `$t` holds (all of them `Unpin`).
macro_rules! delegate_read {
    ($t:ty) => {
        impl AsyncRead for $t {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &mut ReadBuf<'_>,
            ) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    Self::Plain(s) => Pin::new(s).poll_read(cx, buf),
                    Self::Tls(s) => Pin::new(s).poll_read(cx, buf),
                }
            }
        }
    };
}

macro_rules! delegate_write {
    ($t:ty) => {
        impl AsyncWrite for $t {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                match self.get_mut() {
                    Self::Plain(s) => Pin::new(s).poll_write(cx, buf),
                    Self::Tls(s) => Pin::new(s).poll_write(cx, buf),
                }
            }
            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[io::IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                match self.get_mut() {
                    Self::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
                    Self::Tls(s) => Pin::new(s).poll_write_vectored(cx, bufs),
                }
            }
            fn is_write_vectored(&self) -> bool {
                match self {
                    Self::Plain(s) => s.is_write_vectored(),
                    Self::Tls(s) => s.is_write_vectored(),
                }
            }
            fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    Self::Plain(s) => Pin::new(s).poll_flush(cx),
                    Self::Tls(s) => Pin::new(s).poll_flush(cx),
                }
            }
            fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    Self::Plain(s) => Pin::new(s).poll_shutdown(cx),
                    Self::Tls(s) => Pin::new(s).poll_shutdown(cx),
                }
            }
        }
    };
}

delegate_read!(Stream);
delegate_write!(Stream);
delegate_read!(ReadHalf);
delegate_write!(WriteHalf);
