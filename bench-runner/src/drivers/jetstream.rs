//! NATS JetStream: creates its stream (replicas, storage) unless told to use one; publishes
//! sync or async with a bounded ack window; consumes with push, pull (batch) or ordered
//! consumers. Publish-ack latency is recorded apart from end-to-end latency.
use super::nats::{connect, subjects};
use super::{record_error, Driver, Outgoing, PayloadBuf, Publisher, Stop, Target};
use crate::clock;
use crate::payload::Header;
use crate::recorder::{record_ack, register_subscription, ReceiveRecorder, Shared};
use async_nats::jetstream::{self, consumer, context::PublishAckFuture, stream};
use async_nats::Subject;
use futures::future::BoxFuture;
use futures::StreamExt;
use msgbench_crds::workload::{
    JetStreamConsumer, JetStreamOptions, JetStreamPublish, JetStreamStorage, Workload,
};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

pub struct JetStreamDriver {
    w: Arc<Workload>,
    o: JetStreamOptions,
    target: Target,
    subjects: Vec<Subject>,
}

impl JetStreamDriver {
    pub fn new(w: Arc<Workload>, target: Target) -> Self {
        JetStreamDriver {
            o: w.jetstream.clone().unwrap_or_default(),
            subjects: subjects(&w),
            w,
            target,
        }
    }
    async fn context(&self, name: String) -> anyhow::Result<jetstream::Context> {
        Ok(jetstream::new(connect(&self.target, name).await?))
    }
}

impl Driver for JetStreamDriver {
    fn prepare(&self) -> BoxFuture<'_, anyhow::Result<()>> {
        Box::pin(async move {
            let js = self.context("msgbench-admin".into()).await?;
            if !self.o.create_stream {
                js.get_stream(&self.o.stream).await.map_err(|e| {
                    anyhow::anyhow!("jetstream.stream {:?}: cannot use it: {e}", self.o.stream)
                })?;
                return Ok(());
            }
            // A stale stream of the same name would skew counts: start from an empty one.
            let _ = js.delete_stream(&self.o.stream).await;
            js.create_stream(stream::Config {
                name: self.o.stream.clone(),
                subjects: vec![format!("{}.>", self.w.topic_prefix)],
                storage: match self.o.storage {
                    JetStreamStorage::File => stream::StorageType::File,
                    JetStreamStorage::Memory => stream::StorageType::Memory,
                },
                num_replicas: self.o.replicas as usize,
                ..Default::default()
            })
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "creating stream {:?} (replicas {}, {:?}): {e}",
                    self.o.stream,
                    self.o.replicas,
                    self.o.storage
                )
            })?;
            Ok(())
        })
    }

    fn cleanup(&self) -> BoxFuture<'_, anyhow::Result<()>> {
        Box::pin(async move {
            if self.o.create_stream {
                let js = self.context("msgbench-admin".into()).await?;
                js.delete_stream(&self.o.stream)
                    .await
                    .map_err(|e| anyhow::anyhow!("deleting stream: {e}"))?;
            }
            Ok(())
        })
    }

    fn subscribe(
        &self,
        idx: u32,
        topics: Vec<u32>,
        mut rec: ReceiveRecorder,
        mut stop: Stop,
    ) -> BoxFuture<'_, anyhow::Result<JoinHandle<()>>> {
        Box::pin(async move {
            let client = connect(&self.target, format!("msgbench-js-sub-{idx}")).await?;
            let js = jetstream::new(client.clone());
            let stream = js
                .get_stream(&self.o.stream)
                .await
                .map_err(|e| anyhow::anyhow!("get stream: {e}"))?;
            let filter = self.subjects[topics[0] as usize].to_string();
            let mut msgs: futures::stream::BoxStream<'static, Option<Header>> =
                match self.o.consumer {
                    JetStreamConsumer::Push => {
                        let c = stream
                            .create_consumer(consumer::push::Config {
                                deliver_subject: client.new_inbox(),
                                filter_subject: filter,
                                deliver_policy: consumer::DeliverPolicy::New,
                                ack_policy: consumer::AckPolicy::None,
                                ..Default::default()
                            })
                            .await?;
                        let m = c.messages().await?;
                        m.map(|m| m.ok().and_then(|m| Header::decode(&m.payload)))
                            .boxed()
                    }
                    JetStreamConsumer::Ordered => {
                        let c = stream
                            .create_consumer(consumer::push::OrderedConfig {
                                deliver_subject: client.new_inbox(),
                                filter_subject: filter,
                                deliver_policy: consumer::DeliverPolicy::New,
                                ..Default::default()
                            })
                            .await?;
                        let m = c.messages().await?;
                        m.map(|m| m.ok().and_then(|m| Header::decode(&m.payload)))
                            .boxed()
                    }
                    JetStreamConsumer::Pull => {
                        let c = stream
                            .create_consumer(consumer::pull::Config {
                                filter_subject: filter,
                                deliver_policy: consumer::DeliverPolicy::New,
                                ack_policy: consumer::AckPolicy::Explicit,
                                ..Default::default()
                            })
                            .await?;
                        let m = c
                            .stream()
                            .max_messages_per_batch(self.o.pull_batch as usize)
                            .messages()
                            .await?;
                        m.then(|m| async move {
                            let m = m.ok()?;
                            let h = Header::decode(&m.payload);
                            let _ = m.ack().await;
                            h
                        })
                        .boxed()
                    }
                };
            client.flush().await?;
            register_subscription(rec.stats(), &topics[..1]);
            Ok(tokio::spawn(async move {
                loop {
                    tokio::select! {
                        m = msgs.next() => match m {
                            Some(h) => rec.on_payload(h, clock::now_us()),
                            None => break,
                        },
                        _ = stop.changed() => break,
                    }
                }
            }))
        })
    }

    fn publisher(
        &self,
        idx: u32,
        stats: Shared,
        _rec: ReceiveRecorder,
        _stop: Stop,
    ) -> BoxFuture<'_, anyhow::Result<Box<dyn Publisher>>> {
        Box::pin(async move {
            let js = self.context(format!("msgbench-js-pub-{idx}")).await?;
            let window = match self.o.publish {
                JetStreamPublish::Sync => 1,
                JetStreamPublish::Async => self.o.max_in_flight as usize,
            };
            Ok(Box::new(JsPublisher {
                js,
                subjects: self.subjects.clone(),
                buf: PayloadBuf::new(self.w.payload_bytes as usize),
                stats,
                window,
                pending: VecDeque::new(),
            }) as Box<dyn Publisher>)
        })
    }

    fn connect_idle(&self, idx: u32) -> BoxFuture<'_, anyhow::Result<Box<dyn Send>>> {
        Box::pin(async move {
            let c = connect(&self.target, format!("msgbench-idle-{idx}")).await?;
            c.flush().await?;
            Ok(Box::new(c) as Box<dyn Send>)
        })
    }
}

struct JsPublisher {
    js: jetstream::Context,
    subjects: Vec<Subject>,
    buf: PayloadBuf,
    stats: Shared,
    window: usize,
    pending: VecDeque<(Header, PublishAckFuture)>,
}

impl JsPublisher {
    async fn settle_one(&mut self) {
        if let Some((h, f)) = self.pending.pop_front() {
            match f.await {
                Ok(_) => record_ack(&self.stats, h.phase, h.intended_us),
                Err(e) => record_error(&self.stats, h.phase, &format!("ack:{:?}", e.kind())),
            }
        }
    }
}

impl Publisher for JsPublisher {
    fn send_batch<'a>(&'a mut self, batch: &'a [Outgoing]) -> BoxFuture<'a, usize> {
        Box::pin(async move {
            let mut sent = 0;
            for m in batch {
                while self.pending.len() >= self.window {
                    self.settle_one().await;
                }
                let payload = self.buf.make(&m.header);
                match self
                    .js
                    .publish(self.subjects[m.topic as usize].clone(), payload)
                    .await
                {
                    Ok(f) => {
                        sent += 1;
                        self.pending.push_back((m.header, f));
                    }
                    Err(e) => record_error(
                        &self.stats,
                        m.header.phase,
                        &format!("publish:{:?}", e.kind()),
                    ),
                }
            }
            sent
        })
    }

    fn finish(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
            while !self.pending.is_empty() && tokio::time::Instant::now() < deadline {
                self.settle_one().await;
            }
        })
    }
}
