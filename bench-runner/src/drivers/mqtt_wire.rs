//! MQTT 3.1.1 publishing spoken directly, for QoS 0 and 1: every message of a batch goes into
//! one buffer and one write, with at most `maxInFlight` QoS 1 publishes unacknowledged
//! (rumqttc writes and flushes each publish on its own, one syscall and one TCP segment per
//! message). PUBACK latency is timed per packet id from the message's intended send time.
//! Subscribers, QoS 2 and MQTT 5 stay on rumqttc.
use super::{record_error, Outgoing, Publisher};
use crate::net::{ReadHalf, WriteHalf};
use crate::payload::{Header, HEADER_BYTES};
use crate::recorder::{note_sent, record_ack, Shared};
use crate::refusal::{self, TargetRefused};
use crate::tls::TlsClient;
use bytes::{Buf, BytesMut};
use futures::future::BoxFuture;
use runner_api::target::{Credentials, TargetUrl};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

/// Appends an MQTT remaining-length varint.
fn put_len(out: &mut Vec<u8>, mut n: usize) {
    loop {
        let mut b = (n % 128) as u8;
        n /= 128;
        if n > 0 {
            b |= 0x80;
        }
        out.push(b);
        if n == 0 {
            return;
        }
    }
}

fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(&(s.len() as u16).to_be_bytes());
    out.extend_from_slice(s);
}

/// CONNECT (clean session) with `keep_alive` seconds, and a user name and password when the
/// broker requires them.
pub fn connect_packet(client_id: &str, keep_alive: u16, login: Option<(&str, &str)>) -> Vec<u8> {
    let mut body = Vec::new();
    put_str(&mut body, b"MQTT");
    body.push(4); // protocol level 3.1.1
                  // Clean session; user name and password flags (0x80, 0x40) with a login.
    body.push(if login.is_some() { 0xC2 } else { 0x02 });
    body.extend_from_slice(&keep_alive.to_be_bytes());
    put_str(&mut body, client_id.as_bytes());
    if let Some((user, password)) = login {
        put_str(&mut body, user.as_bytes());
        put_str(&mut body, password.as_bytes());
    }
    let mut out = vec![0x10];
    put_len(&mut out, body.len());
    out.extend_from_slice(&body);
    out
}

/// The user name and password a target's credentials give (only those: the driver refuses
/// others before connecting).
pub fn login(target: &TargetUrl) -> Option<(&str, &str)> {
    match &target.auth {
        Some(Credentials::UserPassword { username, password }) => Some((username, password)),
        _ => None,
    }
}

/// Appends PUBLISH (QoS 0 without a packet id, QoS 1 with one).
pub fn put_publish(out: &mut Vec<u8>, topic: &[u8], qos: u8, pkid: u16, payload: &[u8]) {
    out.push(0x30 | (qos << 1));
    let id_len = if qos > 0 { 2 } else { 0 };
    put_len(out, 2 + topic.len() + id_len + payload.len());
    put_str(out, topic);
    if qos > 0 {
        out.extend_from_slice(&pkid.to_be_bytes());
    }
    out.extend_from_slice(payload);
}

/// Largest remaining length accepted from the broker. A publisher only ever receives CONNACK,
/// PUBACK and PINGRESP (2 to 4 bytes of body); 64 KiB leaves room for whatever a broker adds,
/// while MQTT's own limit (268,435,455 bytes) would let a hostile broker make the runner
/// buffer 256 MiB per connection.
pub const MAX_PACKET_BYTES: usize = 64 * 1024;

/// Why bytes from the broker are not an MQTT packet; the stream cannot be read past them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Malformed {
    /// The remaining length continued past the 4 bytes MQTT 3.1.1 allows.
    LengthOverFourBytes,
    /// A remaining length above [`MAX_PACKET_BYTES`].
    TooLarge(usize),
    /// Packet type 0, which MQTT reserves.
    ReservedType,
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Malformed::LengthOverFourBytes => {
                f.write_str("remaining length continues past 4 bytes")
            }
            Malformed::TooLarge(n) => write!(
                f,
                "packet of {n} bytes, more than the {MAX_PACKET_BYTES} a publisher accepts"
            ),
            Malformed::ReservedType => f.write_str("reserved packet type 0"),
        }
    }
}

impl std::error::Error for Malformed {}

/// The remaining length after the fixed header's first byte and the bytes the varint took, or
/// None when more bytes are needed.
fn remaining_length(buf: &[u8]) -> Result<Option<(usize, usize)>, Malformed> {
    let mut len = 0usize;
    for k in 0..4 {
        let Some(&b) = buf.get(1 + k) else {
            return Ok(None);
        };
        len |= usize::from(b & 0x7f) << (7 * k);
        if b & 0x80 == 0 {
            return Ok(Some((len, k + 1)));
        }
    }
    Err(Malformed::LengthOverFourBytes)
}

/// One packet read from the broker: (type nibble, body), or None when more bytes are needed.
/// Nothing is consumed on an error: the connection is unusable past it.
pub fn parse(buf: &mut BytesMut) -> Result<Option<(u8, BytesMut)>, Malformed> {
    let Some((len, varint)) = remaining_length(buf)? else {
        return Ok(None);
    };
    let kind = buf[0] >> 4;
    if kind == 0 {
        return Err(Malformed::ReservedType);
    }
    if len > MAX_PACKET_BYTES {
        return Err(Malformed::TooLarge(len));
    }
    if buf.len() < 1 + varint + len {
        return Ok(None);
    }
    buf.advance(1 + varint);
    Ok(Some((kind, buf.split_to(len))))
}

/// Header of the publish in flight per packet id.
type InFlight = Vec<Option<Header>>;

/// What the reader needs to match PUBACKs to publishes in flight.
struct Acks {
    window: Arc<Semaphore>,
    in_flight: Arc<Mutex<InFlight>>,
    stats: Shared,
}

impl Acks {
    /// Reads packets until the connection ends (Ok) or a packet is malformed (Err).
    async fn read(&self, r: &mut ReadHalf, mut buf: BytesMut) -> Result<(), Malformed> {
        loop {
            while let Some((kind, body)) = parse(&mut buf)? {
                // PUBACK; PINGRESP and anything else need nothing.
                if kind == 4 && body.len() >= 2 {
                    self.on_puback(u16::from_be_bytes([body[0], body[1]]));
                }
            }
            if buf.capacity() - buf.len() < 4096 {
                buf.reserve(64 * 1024);
            }
            match r.read_buf(&mut buf).await {
                Ok(0) | Err(_) => return Ok(()),
                Ok(_) => {}
            }
        }
    }

    fn on_puback(&self, id: u16) {
        let sent = self.in_flight.lock().expect("in-flight lock")[usize::from(id)].take();
        match sent {
            Some(h) => {
                record_ack(&self.stats, &h);
                self.window.add_permits(1);
            }
            None => record_error(&self.stats, u8::MAX, "pubackUnknownId"),
        }
    }
}

pub struct WirePublisher {
    writer: Arc<tokio::sync::Mutex<WriteHalf>>,
    qos: u8,
    topics: Vec<Vec<u8>>,
    scratch: Vec<u8>,
    out: Vec<u8>,
    window: Arc<Semaphore>,
    max_in_flight: u32,
    in_flight: Arc<Mutex<InFlight>>,
    next_id: u16,
    stats: Shared,
    reader: JoinHandle<()>,
    pinger: JoinHandle<()>,
}

/// What a wire publisher connects with.
pub struct WireSetup<'a> {
    pub client_id: &'a str,
    pub keep_alive: u16,
    pub qos: u8,
    pub max_in_flight: u16,
    pub topics: Vec<Vec<u8>>,
    pub payload_bytes: usize,
}

/// TCP (and TLS for `mqtts://`), CONNECT, CONNACK: the halves and the bytes read past it. A
/// CONNACK refusing the login or the protocol version is a [`TargetRefused`].
async fn handshake(
    target: &TargetUrl,
    tls: Option<&TlsClient>,
    client_id: &str,
    keep_alive: u16,
) -> anyhow::Result<(ReadHalf, WriteHalf, BytesMut)> {
    let f = async {
        let (mut r, mut w) = crate::net::dial(target, tls, Duration::from_secs(10))
            .await?
            .into_split();
        w.write_all(&connect_packet(client_id, keep_alive, login(target)))
            .await?;
        let mut buf = BytesMut::with_capacity(64 * 1024);
        let (kind, body) = loop {
            if let Some(p) = parse(&mut buf)? {
                break p;
            }
            if r.read_buf(&mut buf).await? == 0 {
                anyhow::bail!("connection closed before CONNACK");
            }
        };
        let code = (kind == 2 && body.len() >= 2).then(|| body[1]);
        if let Some((why, text)) = code.and_then(refusal::mqtt_connack_refusal) {
            return Err(TargetRefused::new(why, &target.raw, text).into());
        }
        if code != Some(0) {
            anyhow::bail!("CONNACK refused (packet type {kind}, return code {code:?})");
        }
        Ok((r, w, buf))
    };
    let e = match tokio::time::timeout(Duration::from_secs(10), f).await {
        Ok(Ok(conn)) => return Ok(conn),
        Ok(Err(e)) => e,
        Err(_) => anyhow::bail!("connect to {}: no CONNACK within 10 s", target.raw),
    };
    // A TLS 1.3 broker refusing the client certificate says so on the first read.
    if refusal::refusal_of(&e).is_none() {
        if let Some(why) = crate::tls::failure_in(&e) {
            return Err(TargetRefused::tls(&target.raw, why).into());
        }
    }
    Err(refusal::keep_refusal(e, |e| {
        anyhow::anyhow!("connect to {}: {e}", target.raw)
    }))
}

impl WirePublisher {
    pub async fn connect(
        target: &TargetUrl,
        tls: Option<&TlsClient>,
        setup: WireSetup<'_>,
        stats: Shared,
    ) -> anyhow::Result<Self> {
        let WireSetup {
            client_id,
            keep_alive,
            qos,
            max_in_flight,
            topics,
            payload_bytes,
        } = setup;
        let (mut r, writer, buf) = handshake(target, tls, client_id, keep_alive).await?;
        let window = Arc::new(Semaphore::new(usize::from(max_in_flight)));
        let in_flight: Arc<Mutex<InFlight>> = Arc::new(Mutex::new(vec![None; 65_536]));
        let writer = Arc::new(tokio::sync::Mutex::new(writer));
        let acks = Acks {
            window: window.clone(),
            in_flight: in_flight.clone(),
            stats: stats.clone(),
        };
        let w = writer.clone();
        let reader = tokio::spawn(async move {
            if let Err(e) = acks.read(&mut r, buf).await {
                // Past a malformed packet the stream cannot be read: count it and close the
                // connection, so later publishes fail as errors instead of going unanswered.
                record_error(&acks.stats, u8::MAX, &format!("malformedPacket: {e}"));
                let _ = w.lock().await.shutdown().await;
            }
            // Unblocks a publisher waiting for window slots that can never return.
            acks.window.close();
        });
        // Keep-alive: a PINGREQ every half period, so pauses between sessions never let the
        // broker drop the connection (publishes alone would stop during a pause).
        let (w, period) = (
            writer.clone(),
            Duration::from_secs(u64::from(keep_alive.max(2)) / 2),
        );
        let pinger = tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.tick().await;
            loop {
                tick.tick().await;
                if w.lock().await.write_all(&[0xC0, 0x00]).await.is_err() {
                    return;
                }
            }
        });
        Ok(WirePublisher {
            writer,
            qos,
            topics,
            scratch: vec![b'x'; payload_bytes.max(HEADER_BYTES)],
            out: Vec::with_capacity(64 * 1024),
            window,
            max_in_flight: u32::from(max_in_flight),
            in_flight,
            next_id: 0,
            stats,
            reader,
            pinger,
        })
    }

    fn take_id(&mut self, fl: &mut InFlight) -> u16 {
        loop {
            self.next_id = self.next_id.wrapping_add(1).max(1);
            if fl[usize::from(self.next_id)].is_none() {
                return self.next_id;
            }
        }
    }

    async fn write_out(&mut self, phase: u8) -> bool {
        if self.out.is_empty() {
            return true;
        }
        let ok = self.writer.lock().await.write_all(&self.out).await.is_ok();
        self.out.clear();
        if !ok {
            record_error(&self.stats, phase, "write");
        }
        ok
    }
}

impl Publisher for WirePublisher {
    fn send_batch<'a>(&'a mut self, batch: &'a [Outgoing]) -> BoxFuture<'a, usize> {
        Box::pin(async move {
            let phase = batch.first().map_or(u8::MAX, |m| m.header.phase);
            let mut sent = 0;
            let mut queued = 0;
            for m in batch {
                if self.qos > 0 {
                    // A full window: write what is queued, then wait for a PUBACK.
                    if self.window.available_permits() == 0 {
                        if !self.write_out(phase).await {
                            return sent;
                        }
                        sent += queued;
                        queued = 0;
                    }
                    match self.window.acquire().await {
                        Ok(p) => p.forget(),
                        Err(_) => {
                            record_error(&self.stats, phase, "connectionClosed");
                            return sent;
                        }
                    }
                }
                m.header.encode(&mut self.scratch[..HEADER_BYTES]);
                let id = if self.qos > 0 {
                    let fl = self.in_flight.clone();
                    let mut fl = fl.lock().expect("in-flight lock");
                    let id = self.take_id(&mut fl);
                    fl[usize::from(id)] = Some(m.header);
                    note_sent(&self.stats, m.header.phase, 1);
                    id
                } else {
                    0
                };
                let topic = &self.topics[m.topic as usize];
                put_publish(&mut self.out, topic, self.qos, id, &self.scratch);
                queued += 1;
            }
            if self.write_out(phase).await {
                sent += queued;
            }
            sent
        })
    }

    fn finish(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            // Every QoS 1 publish acknowledged (all window slots back), bounded.
            if self.qos > 0 {
                let all = tokio::time::timeout(
                    Duration::from_secs(10),
                    self.window.acquire_many(self.max_in_flight),
                )
                .await;
                match all {
                    Ok(Ok(p)) => drop(p),
                    _ => record_error(&self.stats, u8::MAX, "acksOutstandingAtEnd"),
                }
            }
            self.pinger.abort();
            let _ = self.writer.lock().await.write_all(&[0xE0, 0x00]).await; // DISCONNECT
        })
    }
}

impl Drop for WirePublisher {
    fn drop(&mut self) {
        self.reader.abort();
        self.pinger.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packets_encode_and_parse_across_partial_reads() {
        let mut out = Vec::new();
        put_publish(&mut out, b"a/1", 1, 0x0102, &[7; 200]);
        // Type 3 QoS 1, remaining length 2+3+2+200 = 207 = varint [0xCF, 0x01].
        assert_eq!(&out[..3], &[0x32, 0xCF, 0x01]);
        assert_eq!(&out[3..10], b"\x00\x03a/1\x01\x02");
        let c = connect_packet("id", 30, None);
        assert_eq!(&c[..2], &[0x10, 14], "6 + 1 + 1 + 2 + 2 + 2 bytes");
        let c = connect_packet("id", 30, Some(("u", "pw")));
        assert_eq!(
            &c[..2],
            &[0x10, 14 + 3 + 4],
            "and the user name and password"
        );
        assert_eq!(c[9], 0xC2, "user name, password and clean session flags");
        assert_eq!(&c[16..], b"\x00\x01u\x00\x02pw");
        let wire = [
            &[0x20, 0x02, 0x00, 0x00][..],
            &[0x40, 0x02, 0x12, 0x34],
            &[0xD0, 0x00],
        ]
        .concat();
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for chunk in wire.chunks(3) {
            buf.extend_from_slice(chunk);
            while let Some((k, b)) = parse(&mut buf).unwrap() {
                got.push((k, b.to_vec()));
            }
        }
        assert_eq!(got, [(2, vec![0, 0]), (4, vec![0x12, 0x34]), (13, vec![])]);
    }

    #[test]
    fn lengths_past_the_limits_are_refused_and_nothing_is_consumed() {
        let parse_all = |bytes: &[u8]| {
            let mut buf = BytesMut::from(bytes);
            let r = parse(&mut buf).map(|p| p.map(|(k, b)| (k, b.len())));
            (r, buf.len())
        };
        // 5 bytes of length: refused at the 4th continuation, before a 5th byte arrives.
        let five = [0x40, 0xFF, 0xFF, 0xFF, 0xFF];
        assert_eq!(parse_all(&five), (Err(Malformed::LengthOverFourBytes), 5));
        assert_eq!(
            parse_all(&[0x40, 0xFF, 0xFF, 0xFF, 0x7F]),
            (Err(Malformed::TooLarge(268_435_455)), 5)
        );
        assert_eq!(parse_all(&[0x40, 0xFF, 0xFF]), (Ok(None), 3));
        assert_eq!(parse_all(&[0x00, 0x00]), (Err(Malformed::ReservedType), 2));
        // The largest accepted packet parses; one byte more is refused.
        let mut max = vec![0x30];
        put_len(&mut max, MAX_PACKET_BYTES);
        max.resize(max.len() + MAX_PACKET_BYTES, 0);
        assert_eq!(parse_all(&max), (Ok(Some((3, MAX_PACKET_BYTES))), 0));
        let mut over = vec![0x30];
        put_len(&mut over, MAX_PACKET_BYTES + 1);
        let too_large = Err(Malformed::TooLarge(MAX_PACKET_BYTES + 1));
        assert_eq!(parse_all(&over), (too_large, over.len()));
    }

    /// A broker that accepts one client, answers its CONNECT with CONNACK, sends `then`, and
    /// keeps the connection open (so only the runner can end it).
    async fn broker_sending(then: &'static [u8]) -> TargetUrl {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut scratch = [0u8; 1024];
            let _ = s.read(&mut scratch).await;
            s.write_all(&[&[0x20, 0x02, 0x00, 0x00][..], then].concat())
                .await
                .unwrap();
            while s.read(&mut scratch).await.is_ok_and(|n| n > 0) {}
        });
        TargetUrl::parse(&format!("mqtt://127.0.0.1:{port}")).unwrap()
    }

    fn test_stats() -> Shared {
        let names = ["warmup".to_string(), "measured".to_string()];
        let s = crate::recorder::TaskStats::new(&names, 1, Default::default(), 0);
        Arc::new(Mutex::new(s))
    }

    /// A remaining length longer than 4 bytes, or one announcing a packet far beyond anything
    /// a broker sends a publisher, ends the connection with a counted error: before, the first
    /// made the reader spin on the same bytes forever and the second made it wait (buffering)
    /// for up to 256 MiB, and either way a QoS 1 publisher waited forever for its window.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_malformed_length_ends_the_connection() {
        let cases: [&'static [u8]; 2] = [
            &[0x40, 0xFF, 0xFF, 0xFF, 0xFF, 0x01],
            &[0x40, 0xFF, 0xFF, 0xFF, 0x7F],
        ];
        for junk in cases {
            let target = broker_sending(junk).await;
            let stats = test_stats();
            let topics = vec![b"t".to_vec()];
            let setup = WireSetup {
                client_id: "t",
                keep_alive: 30,
                qos: 1,
                max_in_flight: 1,
                topics,
                payload_bytes: 16,
            };
            let mut p = WirePublisher::connect(&target, None, setup, stats.clone())
                .await
                .unwrap();
            let header = crate::payload::Header {
                run: 0,
                runner: 1,
                phase: 1,
                publisher: 0,
                seq: 0,
                intended_us: 0,
            };
            let batch = [Outgoing { topic: 0, header }; 2];
            // One window slot: the second publish needs a PUBACK that can never come, so only
            // the reader giving up on the connection lets the batch end.
            let sent = tokio::time::timeout(Duration::from_secs(10), p.send_batch(&batch))
                .await
                .unwrap_or_else(|_| panic!("{junk:02x?}: the reader neither ended nor gave up"));
            // The first may go out before the reader sees the junk; the second never can.
            assert!(sent < 2, "{junk:02x?}: {sent} sent");
            let errors = stats.lock().unwrap().phases[1].errors.clone();
            assert!(
                errors.keys().any(|k| k.starts_with("malformedPacket")),
                "{junk:02x?}: {errors:?}"
            );
        }
    }
}
