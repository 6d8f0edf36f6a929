//! NATS JetStream: creates its stream (replicas, storage) unless told to use one; publishes
//! sync or async with a bounded ack window; consumes with push, pull (batch) or ordered
//! consumers. Publish-ack latency is recorded apart from end-to-end latency.
use super::jetstream_readback as readback;
use super::nats::{connect, subjects};
use super::{record_error, Driver, Outgoing, PayloadBuf, Publisher, Stop};
use crate::clock;
use crate::kept::{ReadBack, ReadScope};
use crate::options::SharedSetup;
use crate::payload::Header;
use crate::recorder::{
    note_sent, record_ack, record_ack_error, register_subscription, ReceiveRecorder, Shared,
};
use crate::tls::TlsClient;
use async_nats::jetstream::{self, consumer, context::PublishAckFuture, stream};
use async_nats::Subject;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use futures::StreamExt;
use msgbench_crds::workload::{
    JetStreamConsumer, JetStreamOptions, JetStreamPublish, StreamStorage, Workload,
};
use runner_api::target::TargetUrl;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;

pub struct JetStreamDriver {
    w: Arc<Workload>,
    o: JetStreamOptions,
    target: TargetUrl,
    tls: Arc<TlsClient>,
    subjects: Vec<Subject>,
    setup: SharedSetup,
}

/// Stream metadata key carrying the leader's setup token (one per trial).
const SETUP_TOKEN: &str = "msgbench.dev/setup";

impl JetStreamDriver {
    pub fn new(w: Arc<Workload>, target: TargetUrl, setup: SharedSetup) -> anyhow::Result<Self> {
        Ok(JetStreamDriver {
            setup,
            o: w.jetstream.clone().unwrap_or_default(),
            subjects: subjects(&w),
            tls: TlsClient::for_target(&target)?,
            w,
            target,
        })
    }
    async fn context(&self, name: String) -> anyhow::Result<jetstream::Context> {
        Ok(jetstream::new(
            connect(&self.target, &self.tls, name, None).await?,
        ))
    }

    /// Waits until the leader has (re)created the stream for this trial: its metadata carries
    /// `token`, so a stream left from an earlier trial is never mistaken for it.
    async fn await_leader_stream(
        &self,
        js: &jetstream::Context,
        token: &str,
        wait: Duration,
    ) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Ok(s) = js.get_stream(&self.o.stream).await {
                if s.cached_info()
                    .config
                    .metadata
                    .get(SETUP_TOKEN)
                    .map(String::as_str)
                    == Some(token)
                {
                    return Ok(());
                }
            }
            if tokio::time::Instant::now() >= deadline {
                anyhow::bail!(
                    "jetstream.stream {:?}: runner 1 did not create it for {token} within {wait:?} \
                     (with several runners only runner 1 creates the stream; the others wait)",
                    self.o.stream
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// A consumer's item as the subscriber loop takes it: the message's header (None: not
/// msgbench's), or the consumer's error by kind.
fn received<K>(
    m: Result<jetstream::Message, async_nats::error::Error<K>>,
) -> Result<Option<Header>, String>
where
    K: Clone + std::fmt::Debug + std::fmt::Display + PartialEq,
{
    m.map(|m| Header::decode(&m.payload))
        .map_err(|e| consume_error(&e))
}

/// How a consumer's error is counted in the result's errors: `consume:<kind>`.
fn consume_error<K>(e: &async_nats::error::Error<K>) -> String
where
    K: Clone + std::fmt::Debug + std::fmt::Display + PartialEq,
{
    format!("consume:{:?}", e.kind())
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
            let token = match &self.setup {
                SharedSetup::Alone => None,
                SharedSetup::Leader { token } => Some(token.clone()),
                SharedSetup::Follower { token, wait } => {
                    return self.await_leader_stream(&js, token, *wait).await
                }
            };
            // A stale stream of the same name would skew counts: start from an empty one.
            let _ = js.delete_stream(&self.o.stream).await;
            js.create_stream(stream::Config {
                name: self.o.stream.clone(),
                subjects: vec![format!("{}.>", self.w.topic_prefix)],
                storage: match self.o.storage {
                    StreamStorage::File => stream::StorageType::File,
                    StreamStorage::Memory => stream::StorageType::Memory,
                },
                num_replicas: self.o.replicas as usize,
                metadata: token
                    .map(|t| [(SETUP_TOKEN.to_string(), t)].into())
                    .unwrap_or_default(),
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
            let follower = matches!(self.setup, SharedSetup::Follower { .. });
            if self.o.create_stream && !follower {
                let js = self.context("msgbench-admin".into()).await?;
                match js.delete_stream(&self.o.stream).await {
                    Ok(_) => {}
                    // Gone with its server: an R1 stream in memory whose server a fault killed.
                    Err(e) if e.to_string().contains("stream not found") => {
                        tracing::info!(stream = %self.o.stream, "stream already gone at cleanup");
                    }
                    Err(e) => anyhow::bail!("deleting stream: {e}"),
                }
            }
            Ok(())
        })
    }

    fn read_back(&self, scope: ReadScope) -> BoxFuture<'_, Option<ReadBack>> {
        Box::pin(async move {
            let token = match &self.setup {
                SharedSetup::Leader { token } | SharedSetup::Follower { token, .. } => {
                    Some((SETUP_TOKEN, token.as_str()))
                }
                SharedSetup::Alone => None,
            };
            let follower = matches!(self.setup, SharedSetup::Follower { .. });
            let t = readback::Target {
                stream: &self.o.stream,
                token: token.filter(|_| self.o.create_stream),
                subjects: (scope.topics().iter())
                    .map(|&i| self.subjects[i as usize].to_string())
                    .collect(),
                // Runner 1 deletes a stream it created once done: a follower's 404 may be that.
                may_call_gone: !(follower && self.o.create_stream),
            };
            let connect = || connect(&self.target, &self.tls, "msgbench-readback".into(), None);
            Some(readback::read_back(connect, t, &scope).await)
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
            let counted = Some(rec.stats().clone());
            let client = connect(
                &self.target,
                &self.tls,
                format!("msgbench-js-sub-{idx}"),
                counted,
            )
            .await?;
            let js = jetstream::new(client.clone());
            let stream = js
                .get_stream(&self.o.stream)
                .await
                .map_err(|e| anyhow::anyhow!("get stream: {e}"))?;
            let filter = self.subjects[topics[0] as usize].to_string();
            let mut msgs = consumer_messages(&self.o, &client, &stream, filter).await?;
            client.flush().await?;
            register_subscription(rec.stats(), &topics[..1]);
            Ok(tokio::spawn(async move {
                loop {
                    tokio::select! {
                        m = msgs.next() => match m {
                            Some(Ok(h)) => rec.on_payload(h, clock::now_us()),
                            Some(Err(kind)) => rec.on_receive_error(&kind),
                            None => break,
                        },
                        _ = stop.changed() => break,
                    }
                }
            }))
        })
    }

    fn publish_acks(&self) -> bool {
        true
    }

    fn publisher(
        &self,
        idx: u32,
        stats: Shared,
        _rec: ReceiveRecorder,
        _stop: Stop,
    ) -> BoxFuture<'_, anyhow::Result<Box<dyn Publisher>>> {
        Box::pin(async move {
            let counted = Some(stats.clone());
            let client = connect(
                &self.target,
                &self.tls,
                format!("msgbench-js-pub-{idx}"),
                counted,
            )
            .await?;
            let (window, batch) = match (self.o.publish, self.o.ack_batch) {
                (JetStreamPublish::Sync, _) => (1, None),
                (JetStreamPublish::Async, Some(b)) => (b as usize, Some(b)),
                (JetStreamPublish::Async, None) => (self.o.max_in_flight as usize, None),
            };
            // The client's own ack limit must never be the one that bites (it errors, by default).
            let js = jetstream::ContextBuilder::default()
                .max_ack_inflight(window.max(5_000))
                .build(client);
            Ok(Box::new(JsPublisher::new(
                js,
                self.subjects.clone(),
                PayloadBuf::new(self.w.payload_bytes as usize),
                stats,
                window,
                batch,
            )) as Box<dyn Publisher>)
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

/// Each item: a message's header (None: not msgbench's), or the consumer's error by kind (it
/// stays in the result's errors rather than reading as a bad payload).
type MessageStream = futures::stream::BoxStream<'static, Result<Option<Header>, String>>;

/// The subscriber's messages from a consumer of `stream` on `filter`, of the kind the
/// workload names.
async fn consumer_messages(
    o: &JetStreamOptions,
    client: &async_nats::Client,
    stream: &stream::Stream,
    filter: String,
) -> anyhow::Result<MessageStream> {
    Ok(match o.consumer {
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
            c.messages().await?.map(received).boxed()
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
            c.messages().await?.map(received).boxed()
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
                .max_messages_per_batch(o.pull_batch as usize)
                .messages()
                .await?;
            m.then(|m| async move {
                let m = m.map_err(|e| consume_error(&e))?;
                let h = Header::decode(&m.payload);
                let _ = m.ack().await;
                Ok(h)
            })
            .boxed()
        }
    })
}

/// Publishes with at most `window` acks outstanding (sliding), or in ack batches: `batch`
/// publishes, then all their acks before the next batch. Either way an acker task awaits the
/// acks concurrently, so each is timed the moment it arrives (from the message's intended send
/// time, like end-to-end latency), not when the window or batch is next drained.
struct JsPublisher {
    js: jetstream::Context,
    subjects: Vec<Subject>,
    buf: PayloadBuf,
    stats: Shared,
    window: Arc<Semaphore>,
    /// Ack batch size, and publishes of the current batch so far.
    batch: Option<u32>,
    in_batch: u32,
    acks: Option<mpsc::UnboundedSender<PendingAck>>,
    acker: Option<JoinHandle<()>>,
}

/// One unacked publish; its permit holds a window slot until the ack is recorded.
type PendingAck = (Header, PublishAckFuture, OwnedSemaphorePermit);

impl JsPublisher {
    fn new(
        js: jetstream::Context,
        subjects: Vec<Subject>,
        buf: PayloadBuf,
        stats: Shared,
        window: usize,
        batch: Option<u32>,
    ) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        JsPublisher {
            acker: Some(tokio::spawn(acker(rx, stats.clone()))),
            js,
            subjects,
            buf,
            stats,
            window: Arc::new(Semaphore::new(window)),
            batch,
            in_batch: 0,
            acks: Some(tx),
        }
    }
}

/// Records each ack (or its error) as soon as it resolves, then frees its window slot; ends
/// once the publisher has finished and nothing is outstanding.
async fn acker(mut rx: mpsc::UnboundedReceiver<PendingAck>, stats: Shared) {
    let mut pending = FuturesUnordered::new();
    let mut open = true;
    while open || !pending.is_empty() {
        tokio::select! {
            m = rx.recv(), if open => match m {
                Some((h, f, permit)) => pending.push(async move { (h, f.await, permit) }),
                None => open = false,
            },
            Some((h, r, permit)) = pending.next(), if !pending.is_empty() => {
                match r {
                    Ok(_) => record_ack(&stats, &h),
                    Err(e) => record_ack_error(&stats, h.phase, &format!("ack:{:?}", e.kind())),
                }
                drop(permit);
            }
        }
    }
}

impl JsPublisher {
    /// Ack-batch mode: after the batch's last publish, waits until every ack of the batch has
    /// been recorded (all its window slots are back).
    async fn end_of_batch(&mut self) {
        let Some(n) = self.batch else { return };
        self.in_batch += 1;
        if self.in_batch < n {
            return;
        }
        self.in_batch = 0;
        // Permits return when acks (or ack errors) are recorded; all n back = batch done.
        let _ = self.window.acquire_many(n).await;
    }
}

impl Publisher for JsPublisher {
    fn send_batch<'a>(&'a mut self, batch: &'a [Outgoing]) -> BoxFuture<'a, usize> {
        Box::pin(async move {
            let mut sent = 0;
            for m in batch {
                // Waits while `window` acks are outstanding (sync publish: window 1).
                let Ok(permit) = self.window.clone().acquire_owned().await else {
                    break;
                };
                let payload = self.buf.make(&m.header);
                match self
                    .js
                    .publish(self.subjects[m.topic as usize].clone(), payload)
                    .await
                {
                    Ok(f) => {
                        sent += 1;
                        // Before the acker holds the future, so the ack cannot come first.
                        note_sent(&self.stats, m.header.phase, 1);
                        if let Some(acks) = &self.acks {
                            let _ = acks.send((m.header, f, permit));
                        }
                        self.end_of_batch().await;
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
            self.acks = None;
            self.in_batch = 0;
            if let Some(mut acker) = self.acker.take() {
                // Each ack also times out on its own (the context's request timeout).
                if tokio::time::timeout(Duration::from_secs(30), &mut acker)
                    .await
                    .is_err()
                {
                    acker.abort();
                }
            }
        })
    }
}
