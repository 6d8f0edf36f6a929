//! Pusher Channels (protocol 7; e.g. sockudo): subscribers open `/app/{key}` WebSockets and
//! subscribe to public channels `<prefix>-<n>`; publishers send signed HTTP API requests
//! (`api`, one connection each: `publish`), whose 2xx answers are the server's acks. The text header travels as the event's
//! `data` string, so delivery latency is measured in the publishing process (one clock).
mod api;
mod publish;

use super::websocket::{Idle, Ws};
use super::{Driver, Publisher, Stop};
use crate::clock;
use crate::payload::Header;
use crate::recorder::{register_subscription, ReceiveRecorder, Shared};
use futures::future::BoxFuture;
use futures::{SinkExt, StreamExt};
use msgbench_crds::workload::Workload;
use runner_api::target::{Credentials, TargetUrl};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;

pub use api::{sign, signed_query, App, BATCH_LIMIT, EVENT};

const PONG: &str = r#"{"event":"pusher:pong","data":{}}"#;
/// How `EVENT` appears in a frame (serde_json output has no spaces).
const EVENT_KEY: &str = r#""event":"msgbench""#;

pub struct PusherDriver {
    w: Arc<Workload>,
    target: TargetUrl,
    addr: String,
    /// The WebSocket path and query (`/app/{key}?…`).
    path: String,
    app: App,
    channels: Vec<String>,
}

impl PusherDriver {
    /// Refuses a target without the app's credentials, or whose app id or key would need
    /// escaping in a URL (Pusher's are plain alphanumerics).
    pub fn new(w: Arc<Workload>, target: TargetUrl) -> anyhow::Result<Self> {
        let Some(Credentials::PusherApp {
            app_id,
            key,
            secret,
        }) = target.auth.clone()
        else {
            anyhow::bail!(
                "--target {}: protocol pusher needs the app's credentials (app id, key, secret)",
                target.raw
            );
        };
        let plain = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        };
        if !plain(&app_id) || !plain(&key) {
            anyhow::bail!("pusher app id and key must be non-empty and use only A-Z a-z 0-9 - _ .");
        }
        let addr = target.addr();
        let path = format!("/app/{key}?protocol=7&client=msgbench&version=0.1");
        let channels = (0..w.topics)
            .map(|t| format!("{}-{t}", w.topic_prefix))
            .collect();
        let app = App {
            id: app_id,
            key,
            secret,
        };
        Ok(PusherDriver {
            w,
            target,
            addr,
            path,
            app,
            channels,
        })
    }

    /// Opens a WebSocket and waits for `pusher:connection_established`.
    async fn connect(&self) -> anyhow::Result<Ws> {
        // Plain ws:// only: the signed HTTP API publishes have no TLS client yet.
        let mut ws = super::websocket::open(&self.target, None, &self.path).await?;
        expect_event(&mut ws, "pusher:connection_established", None).await?;
        Ok(ws)
    }
}

/// The event name and channel of a control frame (parsed in full: they are rare).
fn event_of(frame: &str) -> Option<(String, Option<String>, serde_json::Value)> {
    let v: serde_json::Value = serde_json::from_str(frame).ok()?;
    let name = v.get("event")?.as_str()?.to_string();
    let channel = v.get("channel").and_then(|c| c.as_str()).map(String::from);
    Some((name, channel, v.get("data").cloned().unwrap_or_default()))
}

/// Reads until event `name` (on `channel`, if given), answering pings; a `pusher:error` or a
/// close fails with the server's reason. Bounded in time.
async fn expect_event(ws: &mut Ws, name: &str, channel: Option<&str>) -> anyhow::Result<()> {
    let r = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(m) = ws.next().await {
            let t = match m? {
                Message::Text(t) => t,
                Message::Close(c) => anyhow::bail!(
                    "the server closed the connection: {}",
                    c.map(|c| format!("{} {}", u16::from(c.code), c.reason))
                        .unwrap_or_default()
                ),
                _ => continue,
            };
            let Some((event, ch, data)) = event_of(t.as_str()) else {
                continue;
            };
            match event.as_str() {
                "pusher:ping" => ws.send(Message::text(PONG)).await?,
                "pusher:error" => anyhow::bail!("pusher:error {data}"),
                e if e == name && (channel.is_none() || ch.as_deref() == channel) => {
                    return Ok(());
                }
                _ => {}
            }
        }
        anyhow::bail!("connection closed while waiting for {name}")
    })
    .await;
    r.map_err(|_| anyhow::anyhow!("no {name} within 10 s"))?
}

/// What a received frame is to a subscriber.
#[derive(Debug, PartialEq)]
enum Frame {
    /// One of our events: its header (`None`: the data is not one of ours).
    Delivery(Option<Header>),
    Ping,
    Other,
}

fn classify(frame: &str) -> Frame {
    // Fast path, no JSON tree per delivery: an unescaped `"event":"msgbench"` can only be the
    // event key (a quote inside a JSON string is escaped); our data is base64url text, read
    // from right after `"data":"`.
    if frame.contains(EVENT_KEY) {
        if let Some(i) = frame.find(r#""data":""#) {
            return Frame::Delivery(Header::from_text(&frame[i + 8..]));
        }
    }
    match event_of(frame) {
        Some((e, _, _)) if e == "pusher:ping" => Frame::Ping,
        Some((e, _, d)) if e == EVENT => Frame::Delivery(d.as_str().and_then(Header::from_text)),
        _ => Frame::Other,
    }
}

impl Driver for PusherDriver {
    /// Publishes go over the HTTP API: a 2xx answer is the server's ack.
    fn publish_acks(&self) -> bool {
        true
    }

    fn prepare(&self) -> BoxFuture<'_, anyhow::Result<()>> {
        Box::pin(api::check_credentials(&self.addr, &self.app))
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
            for &t in &topics {
                let channel = &self.channels[t as usize];
                let sub =
                    serde_json::json!({"event": "pusher:subscribe", "data": {"channel": channel}});
                ws.send(Message::text(sub.to_string())).await?;
                expect_event(
                    &mut ws,
                    "pusher_internal:subscription_succeeded",
                    Some(channel),
                )
                .await
                .map_err(|e| anyhow::anyhow!("subscribe to {channel}: {e}"))?;
            }
            register_subscription(rec.stats(), &topics);
            Ok(tokio::spawn(async move {
                loop {
                    tokio::select! {
                        m = ws.next() => match m {
                            Some(Ok(Message::Text(t))) => {
                                let now = clock::now_us();
                                match classify(t.as_str()) {
                                    Frame::Delivery(h) => rec.on_payload(h, now),
                                    Frame::Ping => if ws.send(Message::text(PONG)).await.is_err() { break; },
                                    Frame::Other => {}
                                }
                            }
                            Some(Ok(_)) => {}
                            Some(Err(e)) => { rec.on_error(&format!("read: {}", e.to_string().chars().take(50).collect::<String>())); break; }
                            // Closed by the server (no reconnect): counted, not hidden.
                            None => { rec.on_error(super::DISCONNECTED); break; }
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
        _idx: u32,
        stats: Shared,
        _rec: ReceiveRecorder,
        _stop: Stop,
    ) -> BoxFuture<'_, anyhow::Result<Box<dyn Publisher>>> {
        Box::pin(async move {
            let enc = api::EventRequests::new(
                &self.app,
                &self.addr,
                &self.channels,
                self.w.payload_bytes as usize,
            );
            let p = publish::ConnectionPerRequest::new(&self.addr, enc, stats);
            Ok(Box::new(p) as Box<dyn Publisher>)
        })
    }

    fn connect_idle(&self, _idx: u32) -> BoxFuture<'_, anyhow::Result<Box<dyn Send>>> {
        Box::pin(async move {
            let ws = self.connect().await?;
            let (mut tx, mut rx) = ws.split();
            // Unanswered pusher:ping gets the connection closed.
            let pump = tokio::spawn(async move {
                while let Some(Ok(m)) = rx.next().await {
                    if matches!(&m, Message::Text(t) if classify(t.as_str()) == Frame::Ping)
                        && tx.send(Message::text(PONG)).await.is_err()
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
    fn frames_are_deliveries_pings_or_other() {
        assert_eq!(EVENT_KEY, format!("\"event\":\"{EVENT}\""));
        let h = Header {
            run: 0,
            runner: 3,
            phase: 1,
            publisher: 2,
            seq: 77,
            intended_us: 5_000,
        };
        let frame = format!(
            r#"{{"event":"msgbench","channel":"msgbench-0","data":"{}"}}"#,
            h.to_text(40)
        );
        assert_eq!(classify(&frame), Frame::Delivery(Some(h)));
        // Field order is not assumed: the fallback parses the frame.
        let reordered = format!(
            r#"{{"data":"{}","channel":"c","event":"msgbench"}}"#,
            h.to_text(40)
        );
        assert_eq!(classify(&reordered), Frame::Delivery(Some(h)));
        assert_eq!(
            classify(r#"{"event":"pusher:ping","data":{}}"#),
            Frame::Ping
        );
        let established = r#"{"event":"pusher:connection_established","data":"{\"socket_id\":\"1.2\",\"activity_timeout\":120}"}"#;
        assert_eq!(classify(established), Frame::Other);
        // Another app's event on the channel is not a delivery of ours.
        assert_eq!(
            classify(r#"{"event":"other","channel":"c","data":"x"}"#),
            Frame::Other
        );
        assert_eq!(
            classify(r#"{"event":"msgbench","channel":"c","data":"\"not ours\""}"#),
            Frame::Delivery(None)
        );
    }
}
