//! The NATS client protocol spoken directly for core publish/subscribe: every message of a
//! batch goes into one buffer and one write (async-nats routes each publish through a channel,
//! which caps one publisher near 1.7 M msg/s; the server takes far more when writes are
//! batched). Only PUB/SUB/MSG/PING/PONG are needed; request/reply and JetStream use async-nats.
use bytes::{Buf, BytesMut};
use runner_api::target::TargetUrl;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{Mutex, Notify};

/// One NATS connection after the CONNECT handshake.
pub struct Conn {
    pub reader: OwnedReadHalf,
    pub writer: Arc<Mutex<OwnedWriteHalf>>,
    /// Bytes read past the handshake.
    pub buf: BytesMut,
}

pub async fn connect(target: &TargetUrl, name: &str) -> anyhow::Result<Conn> {
    let f = async {
        let s = TcpStream::connect(target.addr()).await?;
        s.set_nodelay(true)?;
        let (mut r, mut w) = s.into_split();
        let mut buf = BytesMut::with_capacity(64 * 1024);
        let info = read_line(&mut r, &mut buf).await?;
        if !info.starts_with("INFO ") {
            anyhow::bail!("expected INFO, got {info:?}");
        }
        let connect = format!(
            "CONNECT {{\"verbose\":false,\"pedantic\":false,\"name\":\"{name}\",\"lang\":\"rust-msgbench\",\"version\":\"0.1.0\",\"protocol\":1,\"echo\":true}}\r\nPING\r\n"
        );
        w.write_all(connect.as_bytes()).await?;
        loop {
            let l = read_line(&mut r, &mut buf).await?;
            match l.as_str() {
                "PONG" => break,
                "+OK" => {}
                l if l.starts_with("INFO ") => {}
                l => anyhow::bail!("handshake: {l}"),
            }
        }
        Ok(Conn {
            reader: r,
            writer: Arc::new(Mutex::new(w)),
            buf,
        })
    };
    tokio::time::timeout(Duration::from_secs(10), f)
        .await
        .map_err(|_| anyhow::anyhow!("connect to {}: no PONG within 10 s", target.raw))?
        .map_err(|e: anyhow::Error| anyhow::anyhow!("connect to {}: {e}", target.raw))
}

async fn read_line(r: &mut OwnedReadHalf, buf: &mut BytesMut) -> anyhow::Result<String> {
    loop {
        if let Some(i) = find_crlf(buf) {
            let line = String::from_utf8_lossy(&buf[..i]).into_owned();
            buf.advance(i + 2);
            return Ok(line);
        }
        if r.read_buf(buf).await? == 0 {
            anyhow::bail!("connection closed");
        }
    }
}

fn find_crlf(b: &[u8]) -> Option<usize> {
    b.windows(2).position(|w| w == b"\r\n")
}

/// Appends `PUB <subject> <len>\r\n<payload>\r\n`.
pub fn put_pub(out: &mut Vec<u8>, subject: &[u8], payload: &[u8]) {
    out.extend_from_slice(b"PUB ");
    out.extend_from_slice(subject);
    out.push(b' ');
    let n = itoa_buf(payload.len());
    out.extend_from_slice(n.as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(payload);
    out.extend_from_slice(b"\r\n");
}

struct Digits([u8; 20], usize);
impl Digits {
    fn as_bytes(&self) -> &[u8] {
        &self.0[self.1..]
    }
}
fn itoa_buf(mut n: usize) -> Digits {
    let mut d = Digits([0; 20], 20);
    loop {
        d.1 -= 1;
        d.0[d.1] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return d;
        }
    }
}

/// What the parser found in the read buffer.
pub enum Frame {
    /// A MSG payload (without the trailing CRLF).
    Msg(bytes::Bytes),
    Ping,
    Pong,
    Err(String),
    Other,
}

/// Parses one frame from the front of `buf`, or None when more bytes are needed.
pub fn parse(buf: &mut BytesMut) -> Option<Frame> {
    let i = find_crlf(buf)?;
    let line = &buf[..i];
    if line.starts_with(b"MSG ") {
        // MSG <subject> <sid> [reply-to] <#bytes>
        let len: usize = std::str::from_utf8(line.rsplit(|&c| c == b' ').next()?)
            .ok()?
            .parse()
            .ok()?;
        if buf.len() < i + 2 + len + 2 {
            return None;
        }
        buf.advance(i + 2);
        let payload = buf.split_to(len).freeze();
        buf.advance(2);
        return Some(Frame::Msg(payload));
    }
    let f = match line {
        b"PING" => Frame::Ping,
        b"PONG" => Frame::Pong,
        l if l.starts_with(b"-ERR") => Frame::Err(String::from_utf8_lossy(l).into_owned()),
        _ => Frame::Other,
    };
    buf.advance(i + 2);
    Some(f)
}

/// Reads frames until the connection closes, answering PINGs and signalling PONGs.
pub async fn read_frames(
    mut conn_reader: OwnedReadHalf,
    mut buf: BytesMut,
    writer: Arc<Mutex<OwnedWriteHalf>>,
    pong: Arc<Notify>,
    mut on_msg: impl FnMut(bytes::Bytes),
    mut on_err: impl FnMut(String),
) {
    loop {
        while let Some(f) = parse(&mut buf) {
            match f {
                Frame::Msg(p) => on_msg(p),
                Frame::Ping => {
                    let _ = writer.lock().await.write_all(b"PONG\r\n").await;
                }
                Frame::Pong => pong.notify_one(),
                Frame::Err(e) => on_err(e),
                Frame::Other => {}
            }
        }
        if buf.capacity() - buf.len() < 16 * 1024 {
            buf.reserve(64 * 1024);
        }
        match conn_reader.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_parse_across_partial_reads() {
        let mut out = Vec::new();
        put_pub(&mut out, b"a.1", b"hello");
        assert_eq!(out, b"PUB a.1 5\r\nhello\r\n");
        let wire = b"PING\r\nMSG a.1 1 5\r\nhello\r\nMSG a.1 1 _INBOX.x 3\r\nabc\r\n-ERR 'x'\r\n";
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for chunk in wire.chunks(7) {
            buf.extend_from_slice(chunk);
            while let Some(f) = parse(&mut buf) {
                got.push(match f {
                    Frame::Msg(p) => String::from_utf8(p.to_vec()).unwrap(),
                    Frame::Ping => "PING".into(),
                    Frame::Pong => "PONG".into(),
                    Frame::Err(e) => e,
                    Frame::Other => "?".into(),
                });
            }
        }
        assert_eq!(got, ["PING", "hello", "abc", "-ERR 'x'"]);
        assert!(buf.is_empty());
    }
}
