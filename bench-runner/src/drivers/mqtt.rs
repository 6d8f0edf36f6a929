//! MQTT 3.1.1 / 5 (rumqttc): QoS 0/1/2, per-topic or wildcard subscriptions, over TCP or TLS
//! (`mqtts://`, on both client paths). Publish-ack
//! latency (PUBACK for QoS 1, PUBCOMP for QoS 2) is recorded apart from end-to-end latency.
use super::mqtt_client::{self, Client, Ev, Loop};
use super::{record_error, Driver, Outgoing, PayloadBuf, Publisher, Stop};
use crate::clock;
use crate::options::ClientPath;
use crate::payload::Header;
use crate::recorder::{
    note_sent, record_ack, record_ack_error, register_subscription, ReceiveRecorder, Shared,
};
use crate::refusal::TargetRefused;
use crate::tls::TlsClient;
use futures::future::BoxFuture;
use msgbench_crds::workload::{MqttOptions, MqttVersion, Workload};
use runner_api::target::TargetUrl;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;

pub struct MqttDriver {
    w: Arc<Workload>,
    o: MqttOptions,
    target: TargetUrl,
    /// `mqtts://`: both client paths speak TLS with it.
    tls: Option<Arc<TlsClient>>,
    runner: u16,
    topics: Vec<String>,
    client: ClientPath,
}

impl MqttDriver {
    pub fn new(
        w: Arc<Workload>,
        target: TargetUrl,
        runner: u16,
        client: ClientPath,
        tls: Option<Arc<TlsClient>>,
    ) -> Self {
        let topics = (0..w.topics)
            .map(|t| format!("{}/{t}", w.topic_prefix))
            .collect();
        MqttDriver {
            o: w.mqtt.clone().unwrap_or_default(),
            w,
            target,
            tls,
            runner,
            topics,
            client,
        }
    }

    /// Connects and waits for CONNACK (the first event after a successful connect).
    async fn connect(&self, role: &str, idx: u32) -> anyhow::Result<(Client, Loop)> {
        // Client ids from the run's own prefix: two runs on one broker never take over each
        // other's sessions.
        let id = format!("{}-{}-{role}-{idx}", self.w.topic_prefix, self.runner);
        let login = super::mqtt_wire::login(&self.target);
        let tls = self.tls.as_ref().map(|t| t.config());
        let addr = (self.target.host.as_str(), self.target.port);
        let (c, mut l) = mqtt_client::new(addr, id, &self.o, login, tls);
        let connected = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                match l.poll().await {
                    Ok(Ev::ConnAck) => return Ok(()),
                    Ok(_) => continue,
                    Err(e) => return Err(e),
                }
            }
        })
        .await;
        match connected {
            Ok(Ok(())) => Ok((c, l)),
            Ok(Err(e)) => match e.refusal {
                Some(why) => Err(TargetRefused::new(why, &self.target.raw, e.text).into()),
                None => anyhow::bail!("connect to {}: {e}", self.target.raw),
            },
            Err(_) => anyhow::bail!("connect to {}: no CONNACK within 10 s", self.target.raw),
        }
    }
}

impl Driver for MqttDriver {
    fn closed_loop_batch(&self) -> u64 {
        512
    }

    /// PUBACK (QoS 1) or PUBCOMP (QoS 2); QoS 0 is not acknowledged.
    fn publish_acks(&self) -> bool {
        self.o.qos > 0
    }

    fn subscribe(
        &self,
        idx: u32,
        topics: Vec<u32>,
        mut rec: ReceiveRecorder,
        mut stop: Stop,
    ) -> BoxFuture<'_, anyhow::Result<JoinHandle<()>>> {
        Box::pin(async move {
            let (c, mut l) = self.connect("sub", idx).await?;
            let filters: Vec<String> = if self.o.wildcard {
                vec![format!("{}/#", self.w.topic_prefix)]
            } else {
                topics
                    .iter()
                    .map(|&t| self.topics[t as usize].clone())
                    .collect()
            };
            for f in &filters {
                c.subscribe(f, self.o.qos)
                    .await
                    .map_err(anyhow::Error::msg)?;
            }
            let mut acked = 0;
            tokio::time::timeout(Duration::from_secs(10), async {
                while acked < filters.len() {
                    match l.poll().await {
                        Ok(Ev::SubAck) => acked += 1,
                        Ok(_) => {}
                        Err(e) => return Err(anyhow::anyhow!("subscribe: {e}")),
                    }
                }
                Ok(())
            })
            .await
            .map_err(|_| anyhow::anyhow!("subscribe: no SUBACK within 10 s"))??;
            register_subscription(rec.stats(), &topics);
            let qos = self.o.qos;
            Ok(tokio::spawn(async move {
                loop {
                    tokio::select! {
                        ev = l.poll() => match ev {
                            Ok(Ev::Publish(p)) => rec.on_payload(Header::decode(&p), clock::now_us()),
                            // rumqttc reconnected (clean session: the broker, perhaps a
                            // restarted one, holds no subscription of ours): subscribe again,
                            // as any MQTT application does. Requests queue until polled.
                            Ok(Ev::ConnAck) => {
                                for f in &filters {
                                    if let Err(e) = c.subscribe(f, qos).await {
                                        rec.on_error(&format!("resubscribe: {e}"));
                                    }
                                }
                            }
                            Ok(_) => {}
                            Err(e) => {
                                rec.on_error(&format!("subscriber: {}", short(&e)));
                                tokio::time::sleep(Duration::from_millis(200)).await;
                            }
                        },
                        _ = stop.changed() => break,
                    }
                }
                c.disconnect().await;
            }))
        })
    }

    fn publisher(
        &self,
        idx: u32,
        stats: Shared,
        _rec: ReceiveRecorder,
        mut stop: Stop,
    ) -> BoxFuture<'_, anyhow::Result<Box<dyn Publisher>>> {
        Box::pin(async move {
            // MQTT 3.1.1 at QoS 0/1: the batched wire path (one write per batch), unless the
            // library was asked for.
            let wire = self.client == ClientPath::Wire;
            if wire && self.o.version == MqttVersion::V311 && self.o.qos <= 1 {
                let setup = super::mqtt_wire::WireSetup {
                    client_id: &format!("{}-{}-pub-{idx}", self.w.topic_prefix, self.runner),
                    keep_alive: self.o.keep_alive_seconds,
                    qos: self.o.qos,
                    max_in_flight: self.o.max_in_flight,
                    topics: self.topics.iter().map(|t| t.as_bytes().to_vec()).collect(),
                    payload_bytes: self.w.payload_bytes as usize,
                };
                let tls = self.tls.as_deref();
                let p = super::mqtt_wire::WirePublisher::connect(&self.target, tls, setup, stats)
                    .await?;
                return Ok(Box::new(p) as Box<dyn Publisher>);
            }
            let (c, mut l) = self.connect("pub", idx).await?;
            let acks = Arc::new(Mutex::new(Acks::default()));
            let (a, st) = (acks.clone(), stats.clone());
            let qos = self.o.qos;
            // The event loop drives the socket; it maps packet ids to send times for acks.
            let pump = tokio::spawn(async move {
                loop {
                    let ev = tokio::select! {
                        ev = l.poll() => ev,
                        _ = stop.changed() => break,
                    };
                    match ev {
                        Ok(Ev::Sent(id)) => {
                            let mut a = a.lock().expect("acks lock");
                            a.written += 1;
                            if qos > 0 {
                                if let Some(x) = a.queued.pop_front() {
                                    a.by_id.insert(id, x);
                                }
                            }
                        }
                        Ok(Ev::PubAck(id)) | Ok(Ev::PubComp(id)) => {
                            let x = a.lock().expect("acks lock").by_id.remove(&id);
                            if let Some(h) = x {
                                record_ack(&st, &h);
                            }
                        }
                        Ok(_) => {}
                        Err(e) => {
                            record_error(&st, u8::MAX, &format!("publisher: {}", short(&e)));
                            tokio::time::sleep(Duration::from_millis(200)).await;
                        }
                    }
                }
            });
            Ok(Box::new(MqttPublisher {
                c,
                qos,
                topics: self.topics.clone(),
                buf: PayloadBuf::new(self.w.payload_bytes as usize),
                stats,
                acks,
                pump,
                handed: 0,
            }) as Box<dyn Publisher>)
        })
    }

    fn connect_idle(&self, idx: u32) -> BoxFuture<'_, anyhow::Result<Box<dyn Send>>> {
        Box::pin(async move {
            let (c, mut l) = self.connect("idle", idx).await?;
            // Keep-alives need the loop polled while the connection is held.
            let pump = tokio::spawn(async move { while l.poll().await.is_ok() {} });
            Ok(Box::new(IdleConn { _c: c, pump }) as Box<dyn Send>)
        })
    }
}

struct IdleConn {
    _c: Client,
    pump: JoinHandle<()>,
}
impl Drop for IdleConn {
    fn drop(&mut self) {
        self.pump.abort();
    }
}

#[derive(Default)]
struct Acks {
    /// Headers of publishes handed to the client, not yet written.
    queued: VecDeque<Header>,
    by_id: HashMap<u16, Header>,
    /// Publishes written to the socket.
    written: u64,
}

struct MqttPublisher {
    c: Client,
    qos: u8,
    topics: Vec<String>,
    buf: PayloadBuf,
    stats: Shared,
    acks: Arc<Mutex<Acks>>,
    pump: JoinHandle<()>,
    handed: u64,
}

impl Publisher for MqttPublisher {
    fn send_batch<'a>(&'a mut self, batch: &'a [Outgoing]) -> BoxFuture<'a, usize> {
        Box::pin(async move {
            let mut sent = 0;
            for m in batch {
                let payload = self.buf.make(&m.header);
                if self.qos > 0 {
                    self.acks
                        .lock()
                        .expect("acks lock")
                        .queued
                        .push_back(m.header);
                    note_sent(&self.stats, m.header.phase, 1);
                }
                match self
                    .c
                    .publish(&self.topics[m.topic as usize], self.qos, payload)
                    .await
                {
                    Ok(()) => sent += 1,
                    Err(_) if self.qos > 0 => {
                        record_ack_error(&self.stats, m.header.phase, "publish")
                    }
                    Err(_) => record_error(&self.stats, m.header.phase, "publish"),
                }
            }
            self.handed += sent as u64;
            sent
        })
    }

    fn finish(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            // Wait (bounded) until everything is written and, for QoS 1/2, acknowledged.
            let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
            loop {
                let done = {
                    let a = self.acks.lock().expect("acks lock");
                    a.written >= self.handed && a.queued.is_empty() && a.by_id.is_empty()
                };
                if done {
                    break;
                }
                if tokio::time::Instant::now() >= deadline {
                    record_error(&self.stats, u8::MAX, "acksOutstandingAtEnd");
                    break;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    }
}

impl Drop for MqttPublisher {
    fn drop(&mut self) {
        self.pump.abort();
    }
}

fn short(e: &dyn std::fmt::Display) -> String {
    e.to_string().chars().take(60).collect()
}
