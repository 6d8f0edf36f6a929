//! Plain WebSocket: echo round trips on each publisher connection, or broadcast fan-out from
//! publishers to subscribers. Binary frames carry the header; text frames are read too.
use super::{record_error, Driver, Outgoing, PayloadBuf, Publisher, Stop};
use crate::clock;
use crate::payload::Header;
use crate::recorder::{register_subscription, ReceiveRecorder, Shared};
use futures::future::BoxFuture;
use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt, StreamExt};
use msgbench_crds::workload::{WebSocketMode, WebSocketOptions, Workload};
use runner_api::result::Delivery;
use runner_api::target::TargetUrl;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

pub struct WebSocketDriver {
    w: Arc<Workload>,
    o: WebSocketOptions,
    url: String,
}

impl WebSocketDriver {
    pub fn new(w: Arc<Workload>, target: TargetUrl) -> Self {
        let o = w.websocket.clone().unwrap_or_default();
        let url = format!("ws://{}{}", target.addr(), o.path);
        WebSocketDriver { w, o, url }
    }
    async fn connect(&self) -> anyhow::Result<Ws> {
        // As the pusher driver: tungstenite zero-fills its whole read buffer per read, and the
        // default 128 KiB made that memset the generator's main cost under fan-out.
        let config = WebSocketConfig::default().read_buffer_size(16 * 1024);
        let (ws, _) = tokio::time::timeout(
            Duration::from_secs(10),
            tokio_tungstenite::connect_async_with_config(self.url.as_str(), Some(config), true),
        )
        .await
        .map_err(|_| anyhow::anyhow!("connect to {}: timed out", self.url))?
        .map_err(|e| anyhow::anyhow!("connect to {}: {e}", self.url))?;
        Ok(ws)
    }
    fn echo(&self) -> bool {
        self.o.mode == WebSocketMode::Echo
    }
}

/// Header of a received frame, binary or text.
pub fn frame_header(m: &Message) -> Option<Option<Header>> {
    match m {
        Message::Binary(b) => Some(Header::decode(b)),
        Message::Text(t) => Some(Header::from_text(t.as_str())),
        _ => None,
    }
}

fn read_loop(
    mut rx: SplitStream<Ws>,
    mut rec: ReceiveRecorder,
    mut stop: Stop,
    record: bool,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                m = rx.next() => match m {
                    Some(Ok(m)) => {
                        if let Some(h) = frame_header(&m) {
                            if record {
                                rec.on_payload(h, clock::now_us());
                            }
                        }
                    }
                    Some(Err(e)) => {
                        rec.on_error(&format!("read: {}", e.to_string().chars().take(50).collect::<String>()));
                        break;
                    }
                    // Closed by the server (no reconnect): counted, not hidden.
                    None => {
                        rec.on_error(super::DISCONNECTED);
                        break;
                    }
                },
                _ = stop.changed() => break,
            }
        }
    })
}

impl Driver for WebSocketDriver {
    fn closed_loop_batch(&self) -> u64 {
        512
    }

    fn delivery(&self) -> Delivery {
        if self.echo() {
            Delivery::RoundTrip
        } else {
            Delivery::FanOut
        }
    }

    fn subscribe(
        &self,
        _idx: u32,
        _topics: Vec<u32>,
        rec: ReceiveRecorder,
        stop: Stop,
    ) -> BoxFuture<'_, anyhow::Result<JoinHandle<()>>> {
        Box::pin(async move {
            let ws = self.connect().await?;
            // Broadcast reaches every connection whatever the topic.
            if !self.echo() {
                register_subscription(rec.stats(), &(0..self.w.topics).collect::<Vec<_>>());
            }
            let (tx, rx) = ws.split();
            let h = read_loop(rx, rec, stop, !self.echo());
            Ok(tokio::spawn(async move {
                let _keep = tx;
                let _ = h.await;
            }))
        })
    }

    fn publisher(
        &self,
        _idx: u32,
        stats: Shared,
        rec: ReceiveRecorder,
        stop: Stop,
    ) -> BoxFuture<'_, anyhow::Result<Box<dyn Publisher>>> {
        Box::pin(async move {
            let ws = self.connect().await?;
            let (tx, rx) = ws.split();
            // Echo: this connection's replies are the measurement. Broadcast: drain and ignore.
            let reader = read_loop(rx, rec, stop, self.echo());
            Ok(Box::new(WsPublisher {
                tx,
                reader,
                stats,
                buf: PayloadBuf::new(self.w.payload_bytes as usize),
            }) as Box<dyn Publisher>)
        })
    }

    fn connect_idle(&self, _idx: u32) -> BoxFuture<'_, anyhow::Result<Box<dyn Send>>> {
        Box::pin(async move {
            let ws = self.connect().await?;
            let (tx, mut rx) = ws.split();
            // Reading answers pings while held.
            let pump = tokio::spawn(async move { while let Some(Ok(_)) = rx.next().await {} });
            Ok(Box::new(Idle { _tx: tx, pump }) as Box<dyn Send>)
        })
    }
}

pub struct Idle<T: Send> {
    pub _tx: T,
    pub pump: JoinHandle<()>,
}
impl<T: Send> Drop for Idle<T> {
    fn drop(&mut self) {
        self.pump.abort();
    }
}

struct WsPublisher {
    tx: SplitSink<Ws, Message>,
    reader: JoinHandle<()>,
    stats: Shared,
    buf: PayloadBuf,
}

impl Publisher for WsPublisher {
    fn send_batch<'a>(&'a mut self, batch: &'a [Outgoing]) -> BoxFuture<'a, usize> {
        Box::pin(async move {
            let mut sent = 0;
            for m in batch {
                let payload = self.buf.make(&m.header);
                match self.tx.feed(Message::Binary(payload)).await {
                    Ok(()) => sent += 1,
                    Err(_) => record_error(&self.stats, m.header.phase, "send"),
                }
            }
            // One flush per batch: many frames share a write.
            if self.tx.flush().await.is_err() {
                record_error(&self.stats, u8::MAX, "flush");
            }
            sent
        })
    }

    fn finish(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let _ = self.tx.flush().await;
        })
    }
}

impl Drop for WsPublisher {
    fn drop(&mut self) {
        self.reader.abort();
    }
}
