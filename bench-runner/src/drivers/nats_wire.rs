//! The NATS client protocol spoken directly for core publish/subscribe: every message of a
//! batch goes into one buffer and one write (async-nats routes each publish through a channel,
//! which caps one publisher near 1.7 M msg/s; the server takes far more when writes are
//! batched). Only PUB/SUB/MSG/PING/PONG are needed; request/reply and JetStream use async-nats.
//! Plain TCP or TLS (see [`crate::net`]), with every kind of NATS credentials.
use crate::net::{ReadHalf, WriteHalf};
use bytes::{Buf, BytesMut};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{Mutex, Notify};

/// Largest MSG payload accepted when the server's INFO names no `max_payload`: the most a
/// nats-server can be configured to (64 MB), so a hostile length cannot size a buffer in GBs.
pub const DEFAULT_MAX_PAYLOAD: usize = 64 * 1024 * 1024;
/// Longest protocol line (INFO, MSG, -ERR ...) accepted: well above the server's own 4 KiB
/// control line and the INFO of a large cluster, so a stream without CRLF cannot grow forever.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// Why the server's bytes are not the NATS protocol; the stream cannot be read past them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProtocolError {
    /// No CRLF within [`MAX_LINE_BYTES`].
    LineTooLong,
    /// A MSG line whose last field is not a byte count (the line, shortened).
    BadMsgLine(String),
    /// A MSG payload length (as sent) above the limit.
    PayloadTooLarge { len: String, max: usize },
    /// The bytes after a MSG payload are not CRLF: the length was wrong.
    NoCrlfAfterPayload,
}

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProtocolError::LineTooLong => {
                write!(f, "no line end within {MAX_LINE_BYTES} bytes")
            }
            ProtocolError::BadMsgLine(l) => write!(f, "MSG line without a byte count: {l:?}"),
            ProtocolError::PayloadTooLarge { len, max } => {
                write!(f, "MSG payload of {len} bytes, more than max_payload {max}")
            }
            ProtocolError::NoCrlfAfterPayload => f.write_str("MSG payload not followed by CRLF"),
        }
    }
}

impl std::error::Error for ProtocolError {}

fn find_crlf(b: &[u8]) -> Option<usize> {
    b.windows(2).position(|w| w == b"\r\n")
}

/// Where the first line ends (its CRLF), None while more bytes may complete it.
pub(super) fn line_end(b: &[u8]) -> Result<Option<usize>, ProtocolError> {
    match find_crlf(&b[..b.len().min(MAX_LINE_BYTES + 2)]) {
        Some(i) => Ok(Some(i)),
        None if b.len() >= MAX_LINE_BYTES + 2 => Err(ProtocolError::LineTooLong),
        None => Ok(None),
    }
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

/// One topic's whole `PUB` frame with a placeholder payload, and where the payload starts:
/// a publisher copies it once per message and writes the header in place (one copy instead
/// of five small appends; those were half of a publish-only runner's CPU in perf).
pub fn pub_template(subject: &[u8], payload: &[u8]) -> (Vec<u8>, usize) {
    let mut out = Vec::new();
    put_pub(&mut out, subject, payload);
    let at = out.len() - payload.len() - 2;
    (out, at)
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

/// Parses one frame from the front of `buf`, or None when more bytes are needed. MSG
/// payloads above `max_payload` are refused before anything is buffered for them.
pub fn parse(buf: &mut BytesMut, max_payload: usize) -> Result<Option<Frame>, ProtocolError> {
    Ok(match parse_in_place(buf, max_payload)? {
        None => None,
        Some(Parsed::Msg { at, len }) => {
            buf.advance(at);
            let payload = buf.split_to(len).freeze();
            buf.advance(2);
            Some(Frame::Msg(payload))
        }
        Some(Parsed::Other(f)) => Some(f),
    })
}

/// A parsed frame; a MSG is left in the buffer, its payload at `at..at + len` (then CRLF).
enum Parsed {
    Msg { at: usize, len: usize },
    Other(Frame),
}

/// [`parse`] without copying a MSG payload out: the reader hands it on as a slice and then
/// consumes it (a `Bytes` per message was ~10 % of a fast subscriber's CPU in perf).
fn parse_in_place(buf: &mut BytesMut, max_payload: usize) -> Result<Option<Parsed>, ProtocolError> {
    let Some(i) = line_end(buf)? else {
        return Ok(None);
    };
    let line = &buf[..i];
    if line.starts_with(b"MSG ") {
        let len = msg_len(line, max_payload)?;
        // len <= max_payload <= 64 MiB: no overflow.
        if buf.len() < i + 2 + len + 2 {
            return Ok(None);
        }
        if &buf[i + 2 + len..i + 2 + len + 2] != b"\r\n" {
            return Err(ProtocolError::NoCrlfAfterPayload);
        }
        return Ok(Some(Parsed::Msg { at: i + 2, len }));
    }
    let f = match line {
        b"PING" => Frame::Ping,
        b"PONG" => Frame::Pong,
        l if l.starts_with(b"-ERR") => Frame::Err(String::from_utf8_lossy(l).into_owned()),
        _ => Frame::Other,
    };
    buf.advance(i + 2);
    Ok(Some(Parsed::Other(f)))
}

/// The byte count of `MSG <subject> <sid> [reply-to] <#bytes>`, at most `max_payload`.
fn msg_len(line: &[u8], max_payload: usize) -> Result<usize, ProtocolError> {
    let field = line.rsplit(|&c| c == b' ').next().unwrap_or_default();
    if field.is_empty() || !field.iter().all(u8::is_ascii_digit) {
        let shown = String::from_utf8_lossy(&line[..line.len().min(80)]).into_owned();
        return Err(ProtocolError::BadMsgLine(shown));
    }
    let too_large = || ProtocolError::PayloadTooLarge {
        len: String::from_utf8_lossy(&field[..field.len().min(24)]).into_owned(),
        max: max_payload,
    };
    // All digits: parsing fails only on overflow, which is too large as well.
    let len: usize = std::str::from_utf8(field)
        .ok()
        .and_then(|t| t.parse().ok())
        .ok_or_else(too_large)?;
    if len > max_payload {
        return Err(too_large());
    }
    Ok(len)
}

/// Reads frames until the connection closes (Ok), answering PINGs and signalling PONGs. Bytes
/// that are not the protocol end the connection: the write half is shut, so publishes fail as
/// errors, and the error says why.
pub async fn read_frames(
    mut conn_reader: ReadHalf,
    mut buf: BytesMut,
    max_payload: usize,
    writer: Arc<Mutex<WriteHalf>>,
    pong: Arc<Notify>,
    mut on_msg: impl FnMut(&[u8]),
    mut on_err: impl FnMut(String),
) -> Result<(), ProtocolError> {
    loop {
        let frame = match parse_in_place(&mut buf, max_payload) {
            Ok(f) => f,
            Err(e) => {
                let _ = writer.lock().await.shutdown().await;
                return Err(e);
            }
        };
        let Some(f) = frame else {
            if buf.capacity() - buf.len() < 16 * 1024 {
                buf.reserve(64 * 1024);
            }
            match conn_reader.read_buf(&mut buf).await {
                Ok(0) | Err(_) => return Ok(()),
                Ok(_) => continue,
            }
        };
        match f {
            Parsed::Msg { at, len } => {
                on_msg(&buf[at..at + len]);
                buf.advance(at + len + 2);
            }
            Parsed::Other(Frame::Ping) => {
                let _ = writer.lock().await.write_all(b"PONG\r\n").await;
            }
            Parsed::Other(Frame::Pong) => pong.notify_one(),
            Parsed::Other(Frame::Err(e)) => on_err(e),
            // A MSG comes as Parsed::Msg; nothing else matters to a benchmark client.
            Parsed::Other(Frame::Msg(_) | Frame::Other) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_with_the_payload_written_in_place_is_the_frame() {
        let (mut frame, at) = pub_template(b"t.12", b"xxxxxxxx");
        frame[at..at + 3].copy_from_slice(b"abc");
        let mut want = Vec::new();
        put_pub(&mut want, b"t.12", b"abcxxxxx");
        assert_eq!(frame, want);
    }

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
            while let Some(f) = parse(&mut buf, DEFAULT_MAX_PAYLOAD).unwrap() {
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

    fn parse_one(bytes: &[u8], max: usize) -> Result<Option<usize>, ProtocolError> {
        let mut buf = BytesMut::from(bytes);
        parse(&mut buf, max).map(|f| {
            f.map(|f| match f {
                Frame::Msg(p) => p.len(),
                _ => 0,
            })
        })
    }

    /// A byte count past the limit is an error, not a panic: `i + 2 + len + 2` overflowed for
    /// a length near usize::MAX (and split_to panicked in release), and a merely huge one made
    /// the reader buffer that much.
    #[test]
    fn a_huge_msg_length_is_an_error_not_a_panic() {
        for len in [
            "18446744073709551615",
            "99999999999999999999999",
            "1000000000000",
        ] {
            let line = format!("MSG a 1 {len}\r\n");
            let err = ProtocolError::PayloadTooLarge {
                len: len.chars().take(24).collect(),
                max: DEFAULT_MAX_PAYLOAD,
            };
            assert_eq!(parse_one(line.as_bytes(), DEFAULT_MAX_PAYLOAD), Err(err));
        }
        // The server's own max_payload is the limit when it gave one.
        let err = ProtocolError::PayloadTooLarge {
            len: "1025".into(),
            max: 1024,
        };
        assert_eq!(parse_one(b"MSG a 1 1025\r\n", 1024), Err(err.clone()));
        assert_eq!(
            err.to_string(),
            "MSG payload of 1025 bytes, more than max_payload 1024"
        );
        let mut at_max = b"MSG a 1 1024\r\n".to_vec();
        at_max.extend_from_slice(&[b'x'; 1024]);
        assert_eq!(parse_one(&at_max, 1024), Ok(None), "waits for the CRLF");
        at_max.extend_from_slice(b"\r\n");
        assert_eq!(parse_one(&at_max, 1024), Ok(Some(1024)));
    }

    /// Lines that cannot be framed end the connection instead of stalling it: a MSG line
    /// without a count used to read as "need more bytes" forever, as did a line without CRLF.
    #[test]
    fn unframeable_input_is_an_error() {
        let bad = |l: &str| Err(ProtocolError::BadMsgLine(l.into()));
        assert_eq!(parse_one(b"MSG a 1 x\r\n", 10), bad("MSG a 1 x"));
        assert_eq!(parse_one(b"MSG \r\n", 10), bad("MSG "));
        assert_eq!(parse_one(b"MSG a 1 -3\r\n", 10), bad("MSG a 1 -3"));
        let no_crlf = Err(ProtocolError::NoCrlfAfterPayload);
        assert_eq!(parse_one(b"MSG a 1 2\r\nabcd\r\n", 10), no_crlf);
        let long = vec![b'+'; MAX_LINE_BYTES + 1];
        assert_eq!(parse_one(&long, 10), Ok(None), "could still end in CRLF");
        let longer = vec![b'+'; MAX_LINE_BYTES + 2];
        assert_eq!(parse_one(&longer, 10), Err(ProtocolError::LineTooLong));
    }
}
