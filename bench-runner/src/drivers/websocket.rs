//! Plain WebSocket: echo round trips on each publisher connection, or broadcast fan-out from
//! publishers to subscribers. Binary frames carry the header; text frames are read too. Over
//! TLS for `wss://` and `https://`, with a token where the target takes it; the Socket.IO and
//! Pusher drivers open their WebSockets here too.
use super::http_auth::TokenAuth;
use super::{record_error, Driver, Outgoing, PayloadBuf, Publisher, Stop};
use crate::clock;
use crate::payload::Header;
use crate::recorder::{register_subscription, ReceiveRecorder, Shared};
use crate::refusal::keep_refusal;
use crate::tls::TlsClient;
use futures::future::BoxFuture;
use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt, StreamExt};
use msgbench_crds::workload::{WebSocketMode, WebSocketOptions, Workload};
use runner_api::result::Delivery;
use runner_api::target::TargetUrl;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderName, HeaderValue};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::WebSocketStream;

pub type Ws = WebSocketStream<crate::net::Stream>;

pub struct WebSocketDriver {
    w: Arc<Workload>,
    o: WebSocketOptions,
    target: TargetUrl,
    tls: Option<Arc<TlsClient>>,
}

impl WebSocketDriver {
    pub fn new(w: Arc<Workload>, target: TargetUrl, tls: Option<Arc<TlsClient>>) -> Self {
        let o = w.websocket.clone().unwrap_or_default();
        WebSocketDriver { w, o, target, tls }
    }
    async fn connect(&self) -> anyhow::Result<Ws> {
        open(&self.target, self.tls.as_deref(), &self.o.path).await
    }
    fn echo(&self) -> bool {
        self.o.mode == WebSocketMode::Echo
    }
}

/// Opens a WebSocket to `path` (and query) on `target`: TCP, TLS with `tls`, the token where
/// the target takes it, the upgrade, within 10 s. A 401 or 403 answer is a refused login.
pub async fn open(target: &TargetUrl, tls: Option<&TlsClient>, path: &str) -> anyhow::Result<Ws> {
    let auth = TokenAuth::for_target(target)?;
    let scheme = if tls.is_some() { "wss" } else { "ws" };
    // Holds the token when it goes in the query: never printed, errors name target.raw.
    let url = format!("{scheme}://{}{}", target.addr(), auth.path(path));
    let mut req = url
        .into_client_request()
        .map_err(|e| anyhow::anyhow!("{}: not a WebSocket URL: {e}", target.raw))?;
    if let Some((name, value)) = &auth.header {
        let name = HeaderName::from_bytes(name.as_bytes())?;
        let value = HeaderValue::from_str(value)
            .map_err(|_| anyhow::anyhow!("the token cannot be an HTTP header value"))?;
        req.headers_mut().insert(name, value);
    }
    // tungstenite zero-fills its whole read buffer per read: 16 KiB, not the default 128 KiB,
    // which made that memset the generator's main cost under fan-out.
    let config = WebSocketConfig::default().read_buffer_size(16 * 1024);
    let f = async {
        let stream = crate::net::dial(target, tls, Duration::from_secs(10)).await?;
        match tokio_tungstenite::client_async_with_config(req, stream, Some(config)).await {
            Ok((ws, _)) => Ok(ws),
            Err(tungstenite::Error::Http(resp)) => {
                let body = resp.body().as_deref().unwrap_or_default();
                let status = resp.status().as_u16();
                match auth.refusal(target, "the WebSocket upgrade", status, body) {
                    Some(r) => Err(r.into()),
                    None => Err(anyhow::anyhow!("HTTP error: {}", resp.status())),
                }
            }
            Err(e) => Err(e.into()),
        }
    };
    tokio::time::timeout(Duration::from_secs(10), f)
        .await
        .map_err(|_| anyhow::anyhow!("connect to {}: timed out", target.raw))?
        .map_err(|e| keep_refusal(e, |e| anyhow::anyhow!("connect to {}: {e}", target.raw)))
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
