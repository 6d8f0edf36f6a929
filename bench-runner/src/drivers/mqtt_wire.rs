//! MQTT 3.1.1 publishing spoken directly, for QoS 0 and 1: every message of a batch goes into
//! one buffer and one write, with at most `maxInFlight` QoS 1 publishes unacknowledged
//! (rumqttc writes and flushes each publish on its own, one syscall and one TCP segment per
//! message). PUBACK latency is timed per packet id from the message's intended send time.
//! Subscribers, QoS 2 and MQTT 5 stay on rumqttc.
use super::{record_error, Outgoing, Publisher};
use crate::payload::HEADER_BYTES;
use crate::recorder::{record_ack, Shared};
use bytes::{Buf, BytesMut};
use futures::future::BoxFuture;
use runner_api::target::TargetUrl;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
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

/// CONNECT (clean session) with `keep_alive` seconds.
pub fn connect_packet(client_id: &str, keep_alive: u16) -> Vec<u8> {
    let mut body = Vec::new();
    put_str(&mut body, b"MQTT");
    body.push(4); // protocol level 3.1.1
    body.push(0x02); // clean session
    body.extend_from_slice(&keep_alive.to_be_bytes());
    put_str(&mut body, client_id.as_bytes());
    let mut out = vec![0x10];
    put_len(&mut out, body.len());
    out.extend_from_slice(&body);
    out
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

/// One packet read from the broker: (type nibble, body), or None when more bytes are needed.
pub fn parse(buf: &mut BytesMut) -> Option<(u8, BytesMut)> {
    let (mut len, mut mult, mut i) = (0usize, 1usize, 1usize);
    loop {
        let b = *buf.get(i)?;
        len += usize::from(b & 0x7f) * mult;
        mult *= 128;
        i += 1;
        if b & 0x80 == 0 {
            break;
        }
        if i > 4 {
            return Some((0, BytesMut::new())); // malformed: reported as type 0
        }
    }
    if buf.len() < i + len {
        return None;
    }
    let kind = buf[0] >> 4;
    buf.advance(i);
    Some((kind, buf.split_to(len)))
}

/// (phase, intended µs) per packet id in flight.
type InFlight = Vec<Option<(u8, u64)>>;

pub struct WirePublisher {
    writer: Arc<tokio::sync::Mutex<OwnedWriteHalf>>,
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

impl WirePublisher {
    #[allow(clippy::too_many_arguments)]
    pub async fn connect(
        target: &TargetUrl,
        client_id: &str,
        keep_alive: u16,
        qos: u8,
        max_in_flight: u16,
        topics: Vec<Vec<u8>>,
        payload_bytes: usize,
        stats: Shared,
    ) -> anyhow::Result<Self> {
        let f = async {
            let s = TcpStream::connect(target.addr()).await?;
            s.set_nodelay(true)?;
            let (mut r, mut w) = s.into_split();
            w.write_all(&connect_packet(client_id, keep_alive)).await?;
            let mut buf = BytesMut::with_capacity(64 * 1024);
            let (kind, body) = loop {
                if let Some(p) = parse(&mut buf) {
                    break p;
                }
                if r.read_buf(&mut buf).await? == 0 {
                    anyhow::bail!("connection closed before CONNACK");
                }
            };
            if kind != 2 || body.len() < 2 || body[1] != 0 {
                anyhow::bail!(
                    "CONNACK refused (packet type {kind}, return code {:?})",
                    body.get(1)
                );
            }
            Ok((r, w, buf))
        };
        let (mut r, writer, mut buf) = tokio::time::timeout(Duration::from_secs(10), f)
            .await
            .map_err(|_| anyhow::anyhow!("connect to {}: no CONNACK within 10 s", target.raw))?
            .map_err(|e: anyhow::Error| anyhow::anyhow!("connect to {}: {e}", target.raw))?;
        let window = Arc::new(Semaphore::new(usize::from(max_in_flight)));
        let in_flight: Arc<Mutex<InFlight>> = Arc::new(Mutex::new(vec![None; 65_536]));
        let (win, fl, st) = (window.clone(), in_flight.clone(), stats.clone());
        let reader = tokio::spawn(async move {
            loop {
                while let Some((kind, body)) = parse(&mut buf) {
                    match kind {
                        4 if body.len() >= 2 => {
                            let id = u16::from_be_bytes([body[0], body[1]]);
                            let sent = fl.lock().expect("in-flight lock")[usize::from(id)].take();
                            match sent {
                                Some((phase, intended)) => {
                                    record_ack(&st, phase, intended);
                                    win.add_permits(1);
                                }
                                None => record_error(&st, u8::MAX, "pubackUnknownId"),
                            }
                        }
                        0 => record_error(&st, u8::MAX, "malformedPacket"),
                        _ => {} // PINGRESP and anything else
                    }
                }
                if buf.capacity() - buf.len() < 4096 {
                    buf.reserve(64 * 1024);
                }
                match r.read_buf(&mut buf).await {
                    Ok(0) | Err(_) => {
                        // Unblocks a publisher waiting for window slots that can never return.
                        win.close();
                        return;
                    }
                    Ok(_) => {}
                }
            }
        });
        let writer = Arc::new(tokio::sync::Mutex::new(writer));
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
                    fl[usize::from(id)] = Some((m.header.phase, m.header.intended_us));
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
        let c = connect_packet("id", 30);
        assert_eq!(&c[..2], &[0x10, 14], "6 + 1 + 1 + 2 + 2 + 2 bytes");
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
            while let Some((k, b)) = parse(&mut buf) {
                got.push((k, b.to_vec()));
            }
        }
        assert_eq!(got, [(2, vec![0, 0]), (4, vec![0x12, 0x34]), (13, vec![])]);
    }
}
