//! POST /publish: validate, assign an id, queue for persistence, fan out to the topic room and
//! `__all__`. Nothing here waits on a subscriber.
//!
//! Ack semantics (PUBLISH_ACK): `stored` (default with a database file) answers 200 only once
//! the message is committed, so every acknowledged message survives a crash; a message that
//! could not be stored is answered 503 (it may already have been delivered: delivery does not
//! wait for the disk). `queued` (default with `:memory:`) answers once the message is delivered
//! and queued: a crash loses what was still queued, and a full queue drops it (counted).
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;
use socketioxide::{BroadcastError, SocketError};

use crate::app::{now_ms, SharedApp, MAX_PUBLISHER_LEN, MAX_TOPIC_LEN};
use crate::config::{AckMode, EmitMode};
use crate::metrics::Metrics;
use crate::records::{Record, Stored};

pub const WILDCARD: &str = "__all__";
pub const EVENT: &str = "message";

/// The body as raw JSON pieces, so a wrong type is reported per field and the payload is
/// forwarded byte for byte without being re-parsed into a tree.
#[derive(Deserialize)]
struct RawPublish<'a> {
    #[serde(borrow, default)]
    topic: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    payload: Option<&'a RawValue>,
    #[serde(borrow, default)]
    publisher: Option<&'a RawValue>,
}

/// Makes `"payload": null` count as present (plain `Option` would turn it into `None`).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

#[derive(Debug)]
pub struct Publish<'a> {
    pub topic: String,
    pub payload: &'a RawValue,
    pub publisher: Option<String>,
}

/// A rejected field and the rule it broke, rendered as `{"error": "<field>: <rule>"}`.
#[derive(Debug, PartialEq)]
pub struct Rejection {
    pub field: &'static str,
    pub rule: String,
}

fn reject(field: &'static str, rule: impl Into<String>) -> Rejection {
    Rejection {
        field,
        rule: rule.into(),
    }
}

pub fn parse(body: &[u8]) -> Result<Publish<'_>, Rejection> {
    // serde would also accept a positional array for a struct; the contract is an object.
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(reject("body", "must be a JSON object"));
    }
    let raw: RawPublish = serde_json::from_slice(body)
        .map_err(|e| reject("body", format!("must be a JSON object ({e})")))?;
    let topic = raw.topic.ok_or_else(|| reject("topic", "is required"))?;
    let topic: String =
        serde_json::from_str(topic.get()).map_err(|_| reject("topic", "must be a string"))?;
    if topic.is_empty() {
        return Err(reject("topic", "must not be empty"));
    }
    if topic.len() > MAX_TOPIC_LEN {
        return Err(reject(
            "topic",
            format!("must be at most {MAX_TOPIC_LEN} bytes"),
        ));
    }
    let payload = raw
        .payload
        .ok_or_else(|| reject("payload", "is required"))?;
    let publisher = match raw
        .publisher
        .map(|p| serde_json::from_str::<Option<String>>(p.get()))
    {
        None => None,
        Some(Ok(p)) => p,
        Some(Err(_)) => return Err(reject("publisher", "must be a string or null")),
    };
    if publisher
        .as_ref()
        .is_some_and(|p| p.len() > MAX_PUBLISHER_LEN)
    {
        return Err(reject(
            "publisher",
            format!("must be at most {MAX_PUBLISHER_LEN} bytes"),
        ));
    }
    Ok(Publish {
        topic,
        payload,
        publisher,
    })
}

#[derive(Serialize)]
pub struct OutMessage<'a> {
    pub id: u64,
    pub topic: &'a str,
    pub payload: &'a RawValue,
    pub publisher: Option<&'a str>,
    pub timestamp: i64,
}

/// Largest accepted request body (the router's `DefaultBodyLimit`).
pub const MAX_BODY: usize = 1 << 20;
/// Longest wait for the writer's answer (PUBLISH_ACK=stored) before a 503.
const STORE_TIMEOUT: Duration = Duration::from_secs(10);

fn rejected(app: &SharedApp, code: StatusCode, r: Rejection) -> Response {
    app.metrics
        .publish_rejected
        .with_label_values(&[r.field])
        .inc();
    let error = format!("{}: {}", r.field, r.rule);
    (code, Json(serde_json::json!({ "error": error }))).into_response()
}

/// A body that could not be read: over the limit is a 413 that names the limit (axum's own
/// answer is a plain-text "length limit exceeded"), anything else a 400.
fn unreadable(app: &SharedApp, e: BytesRejection) -> Response {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        let r = reject("body", format!("must be at most {MAX_BODY} bytes"));
        return rejected(app, StatusCode::PAYLOAD_TOO_LARGE, r);
    }
    rejected(app, e.status(), reject("body", e.body_text()))
}

pub async fn publish(
    State(app): State<SharedApp>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let start = Instant::now();
    let body = match body {
        Ok(b) => b,
        Err(e) => return unreadable(&app, e),
    };
    let msg = match parse(&body) {
        Ok(m) => m,
        Err(r) => return rejected(&app, StatusCode::BAD_REQUEST, r),
    };
    let id = match app.ids.next(&app.store).await {
        Ok(id) => id,
        Err(e) => {
            tracing::error!(error = %e, "cannot reserve message ids");
            let r = reject("persistence", format!("cannot reserve an id: {e}"));
            return rejected(&app, StatusCode::SERVICE_UNAVAILABLE, r);
        }
    };
    let timestamp = now_ms();
    let out = OutMessage {
        id,
        topic: &msg.topic,
        payload: msg.payload,
        publisher: msg.publisher.as_deref(),
        timestamp,
    };
    // Encode once; both emissions copy these bytes (the packet is built before any await).
    let encoded = serde_json::value::to_raw_value(&out).expect("message serializes");
    let rec = Record::Message {
        id,
        payload: msg.payload.get().to_owned(),
        topic: msg.topic.clone(),
        publisher: msg.publisher.clone(),
        timestamp,
    };
    // Queued first, so the write overlaps the fan-out.
    let stored = match app.cfg.publish_ack {
        AckMode::Stored => Some(app.store.enqueue_acked(rec).await),
        AckMode::Queued => {
            app.store.enqueue(rec);
            None
        }
    };
    emit(&app, &msg.topic, &encoded).await;
    app.graph
        .lock()
        .expect("graph mutex")
        .record(msg.publisher.as_deref(), &msg.topic);
    if let Some(wait) = stored {
        if let Err(rule) = await_stored(wait).await {
            let r = reject("persistence", rule);
            return rejected(&app, StatusCode::SERVICE_UNAVAILABLE, r);
        }
    }
    app.metrics.published.inc();
    app.metrics
        .publish_seconds
        .observe(start.elapsed().as_secs_f64());
    Json(serde_json::json!({ "id": id })).into_response()
}

async fn await_stored(wait: tokio::sync::oneshot::Receiver<Stored>) -> Result<(), String> {
    match tokio::time::timeout(STORE_TIMEOUT, wait).await {
        Ok(Ok(res)) => res,
        Ok(Err(_)) => Err("the writer has stopped; not stored".into()),
        Err(_) => Err(format!(
            "not confirmed within {}s (it may still be stored)",
            STORE_TIMEOUT.as_secs()
        )),
    }
}

/// Every socket gets a message once: the topic room minus `__all__` members, plus `__all__`.
/// The two sets are disjoint, so they can be emitted concurrently (default) or one after the
/// other. Emission copies one encoded packet into each subscriber's bounded buffer; a full
/// buffer (slow subscriber) loses this message and is counted, the publisher never waits.
async fn emit(app: &SharedApp, topic: &str, out: &RawValue) {
    if topic == WILDCARD {
        let res = app.io.to(WILDCARD).emit(EVENT, out).await;
        count(&app.metrics, res);
        return;
    }
    match app.cfg.emit_mode {
        EmitMode::Sequential => {
            let in_topic = app
                .io
                .to(topic.to_owned())
                .except(WILDCARD)
                .emit(EVENT, out)
                .await;
            let all = app.io.to(WILDCARD).emit(EVENT, out).await;
            count(&app.metrics, in_topic);
            count(&app.metrics, all);
        }
        // One worker thread cannot run two emissions at once: a spawned task would only add a
        // wake-up per publish (measured: ~25% more CPU per delivery), so both run here.
        EmitMode::Parallel if app.runtime.worker_threads == 1 => {
            let (in_topic, all) = tokio::join!(
                app.io
                    .to(topic.to_owned())
                    .except(WILDCARD)
                    .emit(EVENT, out),
                app.io.to(WILDCARD).emit(EVENT, out),
            );
            count(&app.metrics, in_topic);
            count(&app.metrics, all);
        }
        EmitMode::Parallel => {
            // The `__all__` emission runs on another worker while this one serves the topic
            // room; the task owns a copy of the encoded message.
            let io = app.io.clone();
            let shared = out.to_owned();
            let other = tokio::spawn(async move { io.to(WILDCARD).emit(EVENT, &*shared).await });
            let in_topic = app
                .io
                .to(topic.to_owned())
                .except(WILDCARD)
                .emit(EVENT, out)
                .await;
            count(&app.metrics, in_topic);
            match other.await {
                Ok(res) => count(&app.metrics, res),
                Err(e) => tracing::error!(error = %e, "wildcard emission task failed"),
            }
        }
    }
}

fn count(m: &Metrics, res: Result<(), BroadcastError>) {
    match res {
        Ok(()) => {}
        Err(BroadcastError::Socket(errs)) => {
            for e in errs {
                let reason = match e {
                    SocketError::InternalChannelFull => "buffer_full",
                    SocketError::Closed => "closed",
                };
                m.subscriber_dropped.with_label_values(&[reason]).inc();
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "emission failed");
            m.subscriber_dropped.with_label_values(&["error"]).inc();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(body: &str) -> String {
        let r = parse(body.as_bytes()).unwrap_err();
        format!("{}: {}", r.field, r.rule)
    }

    #[test]
    fn accepts_any_json_payload_and_optional_publisher() {
        let p = parse(br#"{"topic":"a","payload":{"x":[1,2]},"publisher":"p1"}"#).unwrap();
        assert_eq!(p.topic, "a");
        assert_eq!(p.payload.get(), r#"{"x":[1,2]}"#);
        assert_eq!(p.publisher.as_deref(), Some("p1"));
        let p = parse(br#"{"topic":"t\u00e9","payload":null,"publisher":null}"#).unwrap();
        assert_eq!(p.topic, "té");
        assert_eq!(p.payload.get(), "null");
        assert_eq!(p.publisher, None);
    }

    #[test]
    fn rejections_name_the_field() {
        assert!(err("not json").starts_with("body: must be a JSON object"));
        assert!(err("[1]").starts_with("body:"));
        assert_eq!(err(r#"{"payload":1}"#), "topic: is required");
        assert_eq!(err(r#"{"topic":5,"payload":1}"#), "topic: must be a string");
        assert_eq!(
            err(r#"{"topic":"","payload":1}"#),
            "topic: must not be empty"
        );
        assert_eq!(err(r#"{"topic":"a"}"#), "payload: is required");
        assert_eq!(
            err(r#"{"topic":"a","payload":1,"publisher":7}"#),
            "publisher: must be a string or null"
        );
        let long = format!(r#"{{"topic":"{}","payload":1}}"#, "x".repeat(300));
        assert_eq!(err(&long), "topic: must be at most 256 bytes");
    }
}
