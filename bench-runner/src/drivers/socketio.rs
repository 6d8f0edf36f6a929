//! Socket.IO pub/sub (the msgbench wire protocol): publish by HTTP `POST /publish`, receive
//! `message` events over Engine.IO v4 / WebSocket. HTTP publish latency (response from the
//! intended send time) is recorded apart from delivery latency.
use super::websocket::Idle;
use super::{record_error, Driver, Outgoing, Publisher, Stop, Target};
use crate::clock;
use crate::payload::Header;
use crate::recorder::{record_ack, register_subscription, ReceiveRecorder, Shared};
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use msgbench_crds::workload::Workload;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;

pub const ALL_ROOM: &str = "__all__";

pub struct SocketIoDriver {
    w: Arc<Workload>,
    target: Target,
    rooms: Vec<String>,
    http: Client<HttpConnector, Full<Bytes>>,
}

impl SocketIoDriver {
    pub fn new(w: Arc<Workload>, target: Target) -> Self {
        let rooms = (0..w.topics)
            .map(|t| format!("{}-{t}", w.topic_prefix))
            .collect();
        let http = Client::builder(hyper_util::rt::TokioExecutor::new())
            .pool_max_idle_per_host(1024)
            .build_http();
        SocketIoDriver {
            w,
            target,
            rooms,
            http,
        }
    }

    fn all_room(&self) -> bool {
        self.w.socketio.as_ref().is_some_and(|s| s.all_room)
    }

    /// Opens an Engine.IO v4 WebSocket and connects to namespace `/`.
    async fn connect(&self) -> anyhow::Result<super::websocket::Ws> {
        let url = format!(
            "ws://{}/socket.io/?EIO=4&transport=websocket",
            self.target.addr()
        );
        let (mut ws, _) = tokio::time::timeout(
            Duration::from_secs(10),
            tokio_tungstenite::connect_async(url.as_str()),
        )
        .await
        .map_err(|_| anyhow::anyhow!("connect to {url}: timed out"))?
        .map_err(|e| anyhow::anyhow!("connect to {url}: {e}"))?;
        expect_packet(&mut ws, "0").await?; // Engine.IO open
        ws.send(Message::text("40")).await?; // Socket.IO connect to "/"
        expect_packet(&mut ws, "40").await?;
        Ok(ws)
    }
}

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
                    anyhow::bail!("socket.io connect refused: {t}");
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

impl Driver for SocketIoDriver {
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
            let uri: hyper::Uri = format!("http://{}/publish", self.target.addr()).parse()?;
            Ok(Box::new(HttpPublisher {
                http: self.http.clone(),
                uri,
                rooms: self.rooms.clone(),
                name: format!("msgbench-{idx}"),
                len: self.w.payload_bytes as usize,
                stats,
            }) as Box<dyn Publisher>)
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

struct HttpPublisher {
    http: Client<HttpConnector, Full<Bytes>>,
    uri: hyper::Uri,
    rooms: Vec<String>,
    name: String,
    len: usize,
    stats: Shared,
}

impl Publisher for HttpPublisher {
    fn send_batch<'a>(&'a mut self, batch: &'a [Outgoing]) -> BoxFuture<'a, usize> {
        Box::pin(async move {
            // Due requests go out together (open loop within the batch), over pooled connections.
            let reqs = batch.iter().map(|m| {
                let body = serde_json::json!({
                    "topic": self.rooms[m.topic as usize],
                    "payload": m.header.to_text(self.len),
                    "publisher": self.name,
                });
                let req = hyper::Request::post(self.uri.clone())
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from(body.to_string())))
                    .expect("valid request");
                let http = self.http.clone();
                async move {
                    let r = match http.request(req).await {
                        Ok(resp) => {
                            let status = resp.status();
                            let _ = resp.into_body().collect().await;
                            if status.is_success() {
                                Ok(())
                            } else {
                                Err(format!("http{}", status.as_u16()))
                            }
                        }
                        Err(e) => Err(if e.is_connect() {
                            "connect".to_string()
                        } else {
                            "http".to_string()
                        }),
                    };
                    (m.header, r)
                }
            });
            let mut ok = 0;
            for (h, r) in futures::future::join_all(reqs).await {
                match r {
                    Ok(()) => {
                        ok += 1;
                        record_ack(&self.stats, h.phase, h.intended_us);
                    }
                    Err(kind) => record_error(&self.stats, h.phase, &format!("publish:{kind}")),
                }
            }
            ok
        })
    }

    fn finish(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_events_yield_their_header() {
        let h = Header {
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
    }
}
