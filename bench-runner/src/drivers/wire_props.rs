//! Property tests of the NATS and MQTT wire parsers: arbitrary byte streams, split anywhere,
//! never panic and never stall the reader; valid frames parse the same however they are split.
use super::mqtt_wire as mqtt;
use super::nats_wire as nats;
use bytes::BytesMut;
use proptest::prelude::*;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// Bytes and the points to cut them at, as a stream arrives in reads.
fn split(bytes: &[u8], cuts: &[prop::sample::Index]) -> Vec<Vec<u8>> {
    let mut at: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
    at.push(bytes.len());
    at.sort_unstable();
    let mut from = 0;
    at.into_iter()
        .map(|to| {
            let chunk = bytes[from..to].to_vec();
            from = to;
            chunk
        })
        .collect()
}

/// What the NATS parser makes of `chunks` read one after another: its frames (as text) and
/// the error that ended the stream, if any. Every frame must consume bytes, so this ends.
fn nats_frames(chunks: &[Vec<u8>], max: usize) -> (Vec<String>, Option<nats::ProtocolError>) {
    let (mut buf, mut out) = (BytesMut::new(), Vec::new());
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        loop {
            let before = buf.len();
            match nats::parse(&mut buf, max) {
                Ok(Some(f)) => {
                    assert!(buf.len() < before, "a frame consumed nothing");
                    out.push(match f {
                        nats::Frame::Msg(p) => format!("MSG {p:?}"),
                        nats::Frame::Ping => "PING".into(),
                        nats::Frame::Pong => "PONG".into(),
                        nats::Frame::Err(e) => e,
                        nats::Frame::Other => "?".into(),
                    });
                }
                Ok(None) => break,
                Err(e) => return (out, Some(e)),
            }
        }
    }
    (out, None)
}

/// The same for MQTT: (type, body) per packet.
fn mqtt_packets(chunks: &[Vec<u8>]) -> (Vec<(u8, Vec<u8>)>, Option<mqtt::Malformed>) {
    let (mut buf, mut out) = (BytesMut::new(), Vec::new());
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        loop {
            let before = buf.len();
            match mqtt::parse(&mut buf) {
                Ok(Some((k, b))) => {
                    assert!(buf.len() < before, "a packet consumed nothing");
                    out.push((k, b.to_vec()));
                }
                Ok(None) => break,
                Err(e) => return (out, Some(e)),
            }
        }
    }
    (out, None)
}

fn nats_frame() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(b"PING\r\n".to_vec()),
        Just(b"PONG\r\n".to_vec()),
        Just(b"+OK\r\n".to_vec()),
        "[a-z ']{0,20}".prop_map(|e| format!("-ERR {e}\r\n").into_bytes()),
        (
            proptest::collection::vec(any::<u8>(), 0..300),
            any::<bool>()
        )
            .prop_map(|(p, reply)| {
                let reply = if reply { " _INBOX.r" } else { "" };
                let mut f = format!("MSG t.1 9{reply} {}\r\n", p.len()).into_bytes();
                f.extend_from_slice(&p);
                f.extend_from_slice(b"\r\n");
                f
            }),
    ]
}

fn mqtt_packet() -> impl Strategy<Value = Vec<u8>> {
    (1u8..16, proptest::collection::vec(any::<u8>(), 0..400)).prop_map(|(kind, body)| {
        let mut p = vec![kind << 4];
        let mut n = body.len();
        loop {
            let b = (n % 128) as u8;
            n /= 128;
            p.push(if n > 0 { b | 0x80 } else { b });
            if n == 0 {
                break;
            }
        }
        p.extend_from_slice(&body);
        p
    })
}

fn cuts() -> impl Strategy<Value = Vec<prop::sample::Index>> {
    proptest::collection::vec(any::<prop::sample::Index>(), 0..12)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn nats_any_stream_parses_or_errs(bytes in proptest::collection::vec(any::<u8>(), 0..600), c in cuts()) {
        let whole = nats_frames(std::slice::from_ref(&bytes), 1024);
        let parts = nats_frames(&split(&bytes, &c), 1024);
        // Split or whole, the same frames come out, ended by the same error, if any.
        prop_assert_eq!(parts, whole);
    }

    #[test]
    fn nats_valid_frames_parse_the_same_however_split(
        frames in proptest::collection::vec(nats_frame(), 0..12),
        c in cuts(),
    ) {
        let bytes = frames.concat();
        let want = nats_frames(std::slice::from_ref(&bytes), nats::DEFAULT_MAX_PAYLOAD);
        prop_assert_eq!(want.0.len(), frames.len());
        prop_assert!(want.1.is_none());
        prop_assert_eq!(nats_frames(&split(&bytes, &c), nats::DEFAULT_MAX_PAYLOAD), want);
    }

    #[test]
    fn mqtt_any_stream_parses_or_errs(bytes in proptest::collection::vec(any::<u8>(), 0..600), c in cuts()) {
        let whole = mqtt_packets(std::slice::from_ref(&bytes));
        prop_assert_eq!(mqtt_packets(&split(&bytes, &c)), whole);
    }

    #[test]
    fn mqtt_valid_packets_parse_the_same_however_split(
        packets in proptest::collection::vec(mqtt_packet(), 0..12),
        c in cuts(),
    ) {
        let bytes = packets.concat();
        let want: Vec<(u8, Vec<u8>)> = packets.iter().map(|p| {
            let body_at = 1 + p[1..].iter().position(|b| b & 0x80 == 0).unwrap() + 1;
            (p[0] >> 4, p[body_at..].to_vec())
        }).collect();
        prop_assert_eq!(mqtt_packets(&split(&bytes, &c)), (want, None));
    }
}

/// Writes `chunks` to a loopback connection, one write each, then closes it; returns the
/// reading end.
async fn stream_of(chunks: Vec<Vec<u8>>) -> tokio::net::TcpStream {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        for c in chunks {
            if s.write_all(&c).await.is_err() {
                return;
            }
        }
    });
    tokio::net::TcpStream::connect(addr).await.unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// The NATS reader itself, on a socket fed arbitrary bytes in arbitrary reads, ends when
    /// the peer closes or the bytes break the protocol: it never spins or waits forever.
    #[test]
    fn nats_reader_always_ends(bytes in proptest::collection::vec(any::<u8>(), 0..2000), c in cuts()) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let (r, w) = crate::net::Stream::Plain(stream_of(split(&bytes, &c)).await).into_split();
            let writer = std::sync::Arc::new(tokio::sync::Mutex::new(w));
            let pong = std::sync::Arc::default();
            let read = nats::read_frames(r, BytesMut::new(), 1024, writer, pong, |_| {}, |_| {});
            let ended = tokio::time::timeout(Duration::from_secs(10), read).await;
            prop_assert!(ended.is_ok(), "the reader did not end");
            Ok(())
        })?;
    }
}
