//! Socket.IO pub/sub (the msgbench wire protocol): publish by HTTP `POST /publish`, receive
//! `message` events over Engine.IO v4 / WebSocket. HTTP publish latency (response from the
//! intended send time) is recorded apart from delivery latency. `https://` targets: both over
//! TLS, and a token on the handshake and the publishes alike.
pub mod rest_probe;

use super::http_auth::TokenAuth;
use super::http_publish::{PipelinedPublisher, RequestEncoder};
use super::websocket::Idle;
use super::{Driver, Outgoing, Publisher, Stop};
use crate::clock;
use crate::payload::Header;
use crate::recorder::{register_subscription, ReceiveRecorder, Shared};
use crate::refusal::TargetRefused;
use crate::tls::TlsClient;
use futures::future::BoxFuture;
use futures::{SinkExt, StreamExt};
use msgbench_crds::workload::Workload;
use runner_api::target::TargetUrl;
use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;

pub const ALL_ROOM: &str = "__all__";

pub struct SocketIoDriver {
    w: Arc<Workload>,
    target: TargetUrl,
    /// `https://`: the handshake and the publishes go over TLS.
    tls: Option<Arc<TlsClient>>,
    rooms: Vec<String>,
}

impl SocketIoDriver {
    pub fn new(w: Arc<Workload>, target: TargetUrl, tls: Option<Arc<TlsClient>>) -> Self {
        let rooms = (0..w.topics)
            .map(|t| format!("{}-{t}", w.topic_prefix))
            .collect();
        SocketIoDriver {
            w,
            target,
            tls,
            rooms,
        }
    }

    fn all_room(&self) -> bool {
        self.w.socketio.as_ref().is_some_and(|s| s.all_room)
    }

    /// Opens an Engine.IO v4 WebSocket and connects to namespace `/`. A server that refuses
    /// the connect (`44`) after a token was sent refused the token.
    async fn connect(&self) -> anyhow::Result<super::websocket::Ws> {
        let path = "/socket.io/?EIO=4&transport=websocket";
        let mut ws = super::websocket::open(&self.target, self.tls.as_deref(), path).await?;
        let joined = async {
            expect_packet(&mut ws, "0").await?; // Engine.IO open
            ws.send(Message::text("40")).await?; // Socket.IO connect to "/"
            expect_packet(&mut ws, "40").await
        };
        match joined.await {
            Ok(_) => Ok(ws),
            Err(e) => {
                let auth = TokenAuth::for_target(&self.target)?;
                match e.downcast_ref::<ConnectRefused>() {
                    Some(ConnectRefused(said)) if auth.has_token() => {
                        let why = format!("socket.io connect refused: {}", auth.scrub(said));
                        Err(TargetRefused::auth(&self.target.raw, why).into())
                    }
                    _ => Err(e),
                }
            }
        }
    }
}

/// The server's `44` (CONNECT_ERROR) packet.
#[derive(Debug)]
struct ConnectRefused(String);

impl std::fmt::Display for ConnectRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "socket.io connect refused: {}", self.0)
    }
}

impl std::error::Error for ConnectRefused {}

/// Reads until a text packet starting with `prefix` (answering pings), bounded in time.
async fn expect_packet(ws: &mut super::websocket::Ws, prefix: &str) -> anyhow::Result<String> {
    let r = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(m) = ws.next().await {
            if let Message::Text(t) = m? {
                let t = t.as_str();
                if t == "2" {
                    ws.send(Message::text("3")).await?;
                } else if t.starts_with(prefix) {
                    return Ok(t.to_string());
                } else if t.starts_with("44") {
                    return Err(ConnectRefused(t.to_string()).into());
                }
            }
        }
        anyhow::bail!("connection closed while waiting for packet {prefix:?}")
    })
    .await;
    r.map_err(|_| anyhow::anyhow!("no socket.io packet {prefix:?} within 10 s"))?
}

/// The header of a `42["message",{...}]` event, if the frame is one (`Some(None)`: a message
/// whose payload is not ours).
pub fn message_header(frame: &str) -> Option<Option<Header>> {
    let body = frame.strip_prefix("42")?;
    // Fast path, no JSON tree per delivery: the header is the first characters of the string
    // after the `"payload":"` key. That byte sequence cannot occur inside another JSON string
    // (its quotes would be escaped), and base64url never contains a quote, so a payload that is
    // not ours fails to decode instead of being misread.
    if let Some(event) = body.strip_prefix(r#"["message",{"#) {
        if let Some(i) = event.find(r#""payload":""#) {
            return Some(Header::from_text(&event[i + 11..]));
        }
    }
    let (name, d): (&str, serde_json::Value) = serde_json::from_str(body).ok()?;
    if name != "message" {
        return None;
    }
    Some(
        d.get("payload")
            .and_then(|p| p.as_str())
            .and_then(Header::from_text),
    )
}

/// `POST /publish` requests, one message each.
pub struct PublishRequests {
    /// Request head up to the Content-Length value (host and path are fixed).
    head: Vec<u8>,
    /// `{"topic":"…","publisher":"…","payload":"` per topic index.
    prefixes: Vec<Vec<u8>>,
    len: usize,
}

impl PublishRequests {
    /// `auth`: the token, as the handshake carries it (a server that checks it there will
    /// check it on publishes too).
    pub fn new(
        addr: &str,
        topics: &[String],
        publisher: &str,
        len: usize,
        auth: &TokenAuth,
    ) -> Self {
        let head = format!(
            "POST {} HTTP/1.1\r\nhost: {addr}\r\n{}content-type: application/json\r\ncontent-length: ",
            auth.path("/publish"),
            auth.header_line()
        )
        .into_bytes();
        let prefixes = topics
            .iter()
            .map(|t| {
                // JSON-encoded strings, so any topic or publisher name stays valid JSON.
                let mut p = format!(
                    "{{\"topic\":{},\"publisher\":{},\"payload\":",
                    serde_json::Value::from(t.as_str()),
                    serde_json::Value::from(publisher)
                );
                p.push('"');
                p.into_bytes()
            })
            .collect();
        PublishRequests {
            head,
            prefixes,
            len,
        }
    }
}

impl RequestEncoder for PublishRequests {
    fn encode(&mut self, msgs: &[Outgoing], buf: &mut Vec<u8>) -> usize {
        let m = &msgs[0];
        let text = m.header.to_text(self.len);
        let prefix = &self.prefixes[m.topic as usize];
        let body_len = prefix.len() + text.len() + 2; // closing quote and brace
        buf.extend_from_slice(&self.head);
        let _ = write!(buf, "{body_len}\r\n\r\n");
        buf.extend_from_slice(prefix);
        buf.extend_from_slice(text.as_bytes());
        buf.extend_from_slice(b"\"}");
        1
    }
}

impl Driver for SocketIoDriver {
    /// Publishes go over HTTP (`POST /publish`): a 2xx answer is the server's ack.
    fn publish_acks(&self) -> bool {
        true
    }

    fn subscribe(
        &self,
        _idx: u32,
        topics: Vec<u32>,
        mut rec: ReceiveRecorder,
        mut stop: Stop,
    ) -> BoxFuture<'_, anyhow::Result<JoinHandle<()>>> {
        Box::pin(async move {
            let mut ws = self.connect().await?;
            let rooms: Vec<String> = if self.all_room() {
                vec![ALL_ROOM.into()]
            } else {
                topics
                    .iter()
                    .map(|&t| self.rooms[t as usize].clone())
                    .collect()
            };
            // Subscribe with an ack id and wait for each ack: the room is joined after that.
            for (i, room) in rooms.iter().enumerate() {
                let ack = 100 + i;
                ws.send(Message::text(format!(
                    "42{ack}{}",
                    serde_json::json!(["subscribe", room])
                )))
                .await?;
                expect_packet(&mut ws, &format!("43{ack}")).await?;
            }
            register_subscription(rec.stats(), &topics);
            Ok(tokio::spawn(async move {
                loop {
                    tokio::select! {
                        m = ws.next() => match m {
                            Some(Ok(Message::Text(t))) => {
                                let now = clock::now_us();
                                let t = t.as_str();
                                if t == "2" {
                                    if ws.send(Message::text("3")).await.is_err() { break; }
                                } else if let Some(h) = message_header(t) {
                                    rec.on_payload(h, now);
                                }
                            }
                            Some(Ok(_)) => {}
                            Some(Err(e)) => { rec.on_error(&format!("read: {}", e.to_string().chars().take(50).collect::<String>())); break; }
                            None => { rec.on_error("closed"); break; }
                        },
                        _ = stop.changed() => break,
                    }
                }
                let _ = ws.close(None).await;
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
            let enc = PublishRequests::new(
                &self.target.addr(),
                &self.rooms,
                &format!("msgbench-{idx}"),
                self.w.payload_bytes as usize,
                &TokenAuth::for_target(&self.target)?,
            );
            let tls = self.tls.as_deref();
            let p = PipelinedPublisher::connect(&self.target, tls, enc, stats).await?;
            Ok(Box::new(p) as Box<dyn Publisher>)
        })
    }

    fn connect_idle(&self, _idx: u32) -> BoxFuture<'_, anyhow::Result<Box<dyn Send>>> {
        Box::pin(async move {
            let ws = self.connect().await?;
            let (mut tx, mut rx) = ws.split();
            // Engine.IO pings must be answered or the server drops the connection.
            let pump = tokio::spawn(async move {
                while let Some(Ok(m)) = rx.next().await {
                    if matches!(&m, Message::Text(t) if t.as_str() == "2")
                        && tx.send(Message::text("3")).await.is_err()
                    {
                        break;
                    }
                }
            });
            Ok(Box::new(Idle { _tx: (), pump }) as Box<dyn Send>)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_events_yield_their_header() {
        let h = Header {
            run: 0,
            runner: 3,
            phase: 1,
            publisher: 2,
            seq: 77,
            intended_us: 5_000,
        };
        let frame = format!(
            r#"42["message",{{"id":1,"topic":"t","payload":"{}","publisher":null,"timestamp":1}}]"#,
            h.to_text(30)
        );
        assert_eq!(message_header(&frame), Some(Some(h)));
        assert_eq!(message_header(r#"42["other",{}]"#), None);
        assert_eq!(message_header("3"), None);
        assert_eq!(message_header(r#"42["message",{"payload":7}]"#), Some(None));
        // The fast path never reads a key-like sequence inside a string (its quotes are escaped).
        let tricky = format!(
            r#"42["message",{{"id":1,"topic":"x\"payload\":\"{}","payload":"{}"}}]"#,
            "A".repeat(22),
            h.to_text(30)
        );
        assert_eq!(message_header(&tricky), Some(Some(h)));
        // A string payload that is not ours is a bad payload, not a misread header.
        assert_eq!(
            message_header(r#"42["message",{"id":1,"payload":"\"not base64 at all\""}]"#),
            Some(None)
        );
    }
}
