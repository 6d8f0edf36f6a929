//! NATS core: publish/subscribe on the batched wire path (nats_wire.rs) or, with
//! `--client library`, through async-nats; request/reply always with async-nats (subscribers
//! answer in a queue group).
use super::nats_handshake as handshake;
use super::nats_wire as wire;
use super::{record_error, Driver, Outgoing, PayloadBuf, Publisher, Stop, DISCONNECTED};
use crate::clock;
use crate::options::ClientPath;
use crate::payload::Header;
use crate::recorder::{register_subscription, ReceiveRecorder, Shared};
use crate::tls::TlsClient;
use async_nats::Subject;
use futures::future::BoxFuture;
use futures::StreamExt;
use msgbench_crds::workload::Workload;
use runner_api::result::Delivery;
use runner_api::target::TargetUrl;
use std::sync::Arc;
use tokio::io::AsyncWriteExt;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

pub struct NatsDriver {
    w: Arc<Workload>,
    target: TargetUrl,
    /// Also for `nats://` URLs: a server may require TLS in its INFO.
    tls: Arc<TlsClient>,
    subjects: Vec<Subject>,
    client: ClientPath,
}

impl NatsDriver {
    pub fn new(w: Arc<Workload>, target: TargetUrl, client: ClientPath) -> anyhow::Result<Self> {
        let subjects = subjects(&w);
        Ok(NatsDriver {
            tls: TlsClient::for_target(&target)?,
            w,
            target,
            subjects,
            client,
        })
    }
    fn request_reply(&self) -> bool {
        self.w.nats.as_ref().is_some_and(|n| n.request_reply)
    }
    /// Plain publish/subscribe on the hand-written wire path.
    fn wire(&self) -> bool {
        !self.request_reply() && self.client == ClientPath::Wire
    }
}

pub fn subjects(w: &Workload) -> Vec<Subject> {
    (0..w.topics)
        .map(|t| Subject::from(format!("{}.{t}", w.topic_prefix)))
        .collect()
}

pub use super::nats_client::connect;

impl Driver for NatsDriver {
    fn closed_loop_batch(&self) -> u64 {
        if self.request_reply() {
            128
        } else {
            512
        }
    }

    fn delivery(&self) -> Delivery {
        if self.request_reply() {
            Delivery::RoundTrip
        } else {
            Delivery::FanOut
        }
    }

    fn subscribe(
        &self,
        idx: u32,
        topics: Vec<u32>,
        mut rec: ReceiveRecorder,
        mut stop: Stop,
    ) -> BoxFuture<'_, anyhow::Result<JoinHandle<()>>> {
        Box::pin(async move {
            if self.wire() {
                return self.wire_subscribe(idx, topics, rec, stop).await;
            }
            let counted = Some(rec.stats().clone());
            let client = connect(
                &self.target,
                &self.tls,
                format!("msgbench-sub-{idx}"),
                counted,
            )
            .await?;
            let rr = self.request_reply();
            let mut subs = Vec::new();
            for &t in &topics {
                let s = self.subjects[t as usize].clone();
                subs.push(if rr {
                    client
                        .queue_subscribe(s, "msgbench-responders".into())
                        .await?
                } else {
                    client.subscribe(s).await?
                });
            }
            // Subscriptions are registered once the server has processed them.
            client.flush().await?;
            if !rr {
                register_subscription(rec_stats(&rec), &topics);
            }
            let mut all = futures::stream::select_all(subs);
            Ok(tokio::spawn(async move {
                loop {
                    tokio::select! {
                        m = all.next() => {
                            let Some(m) = m else { break };
                            if rr {
                                if let Some(reply) = m.reply {
                                    if client.publish(reply, m.payload).await.is_err() {
                                        rec.on_error("replyFailed");
                                    }
                                }
                            } else {
                                let now = clock::now_us();
                                rec.on_payload(Header::decode(&m.payload), now);
                            }
                        }
                        _ = stop.changed() => break,
                    }
                }
                let _ = client.flush().await;
            }))
        })
    }

    fn publisher(
        &self,
        idx: u32,
        stats: Shared,
        rec: ReceiveRecorder,
        _stop: Stop,
    ) -> BoxFuture<'_, anyhow::Result<Box<dyn Publisher>>> {
        Box::pin(async move {
            if self.wire() {
                return self.wire_publisher(idx, stats).await;
            }
            let counted = Some(stats.clone());
            let client = connect(
                &self.target,
                &self.tls,
                format!("msgbench-pub-{idx}"),
                counted,
            )
            .await?;
            Ok(Box::new(NatsPublisher {
                client,
                subjects: self.subjects.clone(),
                buf: PayloadBuf::new(self.w.payload_bytes as usize),
                stats,
                rec,
                request_reply: self.request_reply(),
            }) as Box<dyn Publisher>)
        })
    }

    fn connect_idle(&self, idx: u32) -> BoxFuture<'_, anyhow::Result<Box<dyn Send>>> {
        Box::pin(async move {
            let c = connect(
                &self.target,
                &self.tls,
                format!("msgbench-idle-{idx}"),
                None,
            )
            .await?;
            c.flush().await?;
            Ok(Box::new(c) as Box<dyn Send>)
        })
    }
}

impl NatsDriver {
    async fn wire_subscribe(
        &self,
        idx: u32,
        topics: Vec<u32>,
        mut rec: ReceiveRecorder,
        mut stop: Stop,
    ) -> anyhow::Result<JoinHandle<()>> {
        let c = handshake::connect(&self.target, &self.tls, &format!("msgbench-sub-{idx}")).await?;
        let mut cmd = String::new();
        for (sid, &t) in topics.iter().enumerate() {
            cmd.push_str(&format!(
                "SUB {} {}\r\n",
                self.subjects[t as usize],
                sid + 1
            ));
        }
        cmd.push_str("PING\r\n");
        c.writer.lock().await.write_all(cmd.as_bytes()).await?;
        let pong = Arc::new(Notify::new());
        let stats = rec.stats().clone();
        let (writer, p) = (c.writer.clone(), pong.clone());
        let task = tokio::spawn(async move {
            let errs = rec.stats().clone();
            let read_errs = errs.clone();
            let read = wire::read_frames(
                c.reader,
                c.buf,
                c.max_payload,
                writer,
                p,
                |payload| rec.on_payload(Header::decode(payload), clock::now_us()),
                |e| {
                    record_error(
                        &read_errs,
                        u8::MAX,
                        &format!("server: {}", e.chars().take(60).collect::<String>()),
                    )
                },
            );
            tokio::select! {
                // No reconnect: the server closing the connection is counted, not hidden.
                r = read => connection_lost(&errs, r),
                _ = stop.changed() => {}
            }
        });
        // The server has registered the subscriptions once it answers the PING after them.
        tokio::time::timeout(std::time::Duration::from_secs(10), pong.notified())
            .await
            .map_err(|_| anyhow::anyhow!("subscribe: no PONG within 10 s"))?;
        register_subscription(&stats, &topics);
        Ok(task)
    }

    async fn wire_publisher(&self, idx: u32, stats: Shared) -> anyhow::Result<Box<dyn Publisher>> {
        let c = handshake::connect(&self.target, &self.tls, &format!("msgbench-pub-{idx}")).await?;
        let payload = vec![b'x'; self.w.payload_bytes as usize];
        let pong = Arc::new(Notify::new());
        let (writer, p, errs) = (c.writer.clone(), pong.clone(), stats.clone());
        let reader = tokio::spawn(async move {
            let server_errs = errs.clone();
            let r = wire::read_frames(
                c.reader,
                c.buf,
                c.max_payload,
                writer,
                p,
                |_| {},
                move |e| {
                    record_error(
                        &server_errs,
                        u8::MAX,
                        &format!("server: {}", e.chars().take(60).collect::<String>()),
                    )
                },
            )
            .await;
            // Aborted when the publisher is dropped; ending by itself means the server closed.
            connection_lost(&errs, r);
        });
        Ok(Box::new(WirePublisher {
            writer: c.writer,
            frames: self
                .subjects
                .iter()
                .map(|s| wire::pub_template(s.as_bytes(), &payload))
                .collect(),
            out: Vec::with_capacity(64 * 1024),
            pong,
            reader,
            stats,
        }))
    }
}

/// Core publisher on the wire path: one buffer and one write per batch.
struct WirePublisher {
    writer: Arc<tokio::sync::Mutex<crate::net::WriteHalf>>,
    /// Per topic: its `PUB` frame and where the payload (header first) starts in it.
    frames: Vec<(Vec<u8>, usize)>,
    out: Vec<u8>,
    pong: Arc<Notify>,
    reader: JoinHandle<()>,
    stats: Shared,
}

impl Publisher for WirePublisher {
    fn send_batch<'a>(&'a mut self, batch: &'a [Outgoing]) -> BoxFuture<'a, usize> {
        Box::pin(async move {
            self.out.clear();
            for m in batch {
                let (frame, at) = &self.frames[m.topic as usize];
                let start = self.out.len() + at;
                self.out.extend_from_slice(frame);
                m.header
                    .encode(&mut self.out[start..start + crate::payload::HEADER_BYTES]);
            }
            match self.writer.lock().await.write_all(&self.out).await {
                Ok(()) => batch.len(),
                Err(_) => {
                    let phase = batch.first().map_or(u8::MAX, |m| m.header.phase);
                    record_error(&self.stats, phase, "write");
                    0
                }
            }
        })
    }

    fn finish(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            // PING after the last PUB: its PONG means the server has processed everything.
            // A connection already lost (counted as `disconnected`) can never answer.
            if self.reader.is_finished() {
                record_error(&self.stats, u8::MAX, "flush");
                return;
            }
            let ok = self
                .writer
                .lock()
                .await
                .write_all(b"PING\r\n")
                .await
                .is_ok();
            let pong =
                tokio::time::timeout(std::time::Duration::from_secs(30), self.pong.notified())
                    .await;
            if !ok || pong.is_err() {
                record_error(&self.stats, u8::MAX, "flush");
            }
        })
    }
}

impl Drop for WirePublisher {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// Counts a wire connection that ended by itself, and why when the server broke the protocol.
fn connection_lost(stats: &Shared, read: Result<(), wire::ProtocolError>) {
    if let Err(e) = read {
        tracing::warn!(error = %e, "NATS server broke the protocol; connection closed");
        record_error(stats, u8::MAX, &format!("protocol: {e}"));
    }
    record_error(stats, u8::MAX, DISCONNECTED);
}

fn rec_stats(rec: &ReceiveRecorder) -> &Shared {
    rec.stats()
}

struct NatsPublisher {
    client: async_nats::Client,
    subjects: Vec<Subject>,
    buf: PayloadBuf,
    stats: Shared,
    rec: ReceiveRecorder,
    request_reply: bool,
}

impl Publisher for NatsPublisher {
    fn send_batch<'a>(&'a mut self, batch: &'a [Outgoing]) -> BoxFuture<'a, usize> {
        Box::pin(async move {
            if self.request_reply {
                // Requests of one batch are in flight together (open loop within the window).
                let reqs = batch.iter().map(|m| {
                    let payload = self.buf.make(&m.header);
                    let subject = self.subjects[m.topic as usize].clone();
                    let client = self.client.clone();
                    async move { (m.header, client.request(subject, payload).await) }
                });
                let replies = futures::future::join_all(reqs).await;
                let mut ok = 0;
                for (h, r) in replies {
                    match r {
                        Ok(reply) => {
                            ok += 1;
                            self.rec
                                .on_payload(Header::decode(&reply.payload), clock::now_us());
                        }
                        Err(e) => {
                            record_error(&self.stats, h.phase, &format!("request:{:?}", e.kind()))
                        }
                    }
                }
                return ok;
            }
            let mut sent = 0;
            for m in batch {
                let payload = self.buf.make(&m.header);
                match self
                    .client
                    .publish(self.subjects[m.topic as usize].clone(), payload)
                    .await
                {
                    Ok(()) => sent += 1,
                    Err(_) => record_error(&self.stats, m.header.phase, "publish"),
                }
            }
            sent
        })
    }

    fn finish(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if self.client.flush().await.is_err() {
                record_error(&self.stats, u8::MAX, "flush");
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// A fake server: INFO with max_payload 1024, PONG to every PING, and `then` after the
    /// second PONG (the one that confirms the subscriptions).
    async fn server_sending(then: &'static [u8]) -> TargetUrl {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            s.write_all(b"INFO {\"max_payload\":1024}\r\n")
                .await
                .unwrap();
            let (mut seen, mut pongs) = (Vec::new(), 0);
            let mut chunk = [0u8; 4096];
            while let Ok(n @ 1..) = s.read(&mut chunk).await {
                seen.extend_from_slice(&chunk[..n]);
                let pings = seen.windows(6).filter(|w| w == b"PING\r\n").count();
                while pongs < pings {
                    pongs += 1;
                    s.write_all(b"PONG\r\n").await.unwrap();
                    if pongs == 2 {
                        s.write_all(then).await.unwrap();
                    }
                }
            }
        });
        TargetUrl::parse(&format!("nats://127.0.0.1:{port}")).unwrap()
    }

    /// A MSG longer than the server's max_payload ends the subscriber's connection with an
    /// error that says so (before: an arithmetic overflow panic for a count near usize::MAX).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_oversized_msg_ends_the_connection_with_the_reason() {
        let target = server_sending(b"MSG t.0 1 18446744073709551615\r\n").await;
        let w: Workload = serde_norway::from_str("protocol: nats\ndurationSeconds: 1").unwrap();
        let driver = NatsDriver::new(Arc::new(w), target, ClientPath::Wire).unwrap();
        let names = ["warmup".to_string(), "measured".to_string()];
        let stats: Shared = Arc::new(std::sync::Mutex::new(crate::recorder::TaskStats::new(
            &names,
            1,
            Delivery::FanOut,
            0,
        )));
        let rec = ReceiveRecorder::new(1, 0, crate::recorder::Senders::ANY, stats.clone());
        let (_stop_tx, stop) = tokio::sync::watch::channel(false);
        let task = driver.subscribe(0, vec![0], rec, stop).await.unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(10), task)
            .await
            .expect("the connection ends by itself")
            .expect("no panic");
        let errors = stats.lock().unwrap().phases[1].errors.clone();
        let want =
            "protocol: MSG payload of 18446744073709551615 bytes, more than max_payload 1024";
        assert_eq!(errors.get(want), Some(&1), "{errors:?}");
        assert_eq!(errors.get(DISCONNECTED), Some(&1), "{errors:?}");
    }
}
