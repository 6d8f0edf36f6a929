//! Socket.IO namespace `/`: `subscribe` / `unsubscribe` join and leave topic rooms (`__all__` is
//! the wildcard room), `consumed` records a consumption. Acks answer `{"ok": true}` or
//! `{"ok": false, "error": "topic: <rule>"}`.
use serde_json::{json, Value};
use socketioxide::extract::{AckSender, SocketRef, TryData};
use socketioxide::handler::ConnectHandler;
use socketioxide::SocketIo;

use crate::app::{now_ms, ClientInfo, SharedApp, MAX_TOPICS_PER_CLIENT, MAX_TOPIC_LEN};
use crate::records::Record;

/// Topics from a `subscribe`/`unsubscribe` argument: a string or an array of strings.
pub fn topics_of(arg: &Value) -> Result<Vec<String>, String> {
    let list: Vec<&Value> = match arg {
        Value::Array(items) if !items.is_empty() => items.iter().collect(),
        Value::Array(_) => return Err("topic: must not be an empty array".into()),
        other => vec![other],
    };
    if list.len() > MAX_TOPICS_PER_CLIENT {
        return Err(format!(
            "topic: at most {MAX_TOPICS_PER_CLIENT} topics per request"
        ));
    }
    list.into_iter()
        .map(|v| match v.as_str() {
            Some("") => Err("topic: must not be empty".to_owned()),
            Some(t) if t.len() > MAX_TOPIC_LEN => {
                Err(format!("topic: must be at most {MAX_TOPIC_LEN} bytes"))
            }
            Some(t) => Ok(t.to_owned()),
            None => Err("topic: must be a string or an array of strings".to_owned()),
        })
        .collect()
}

pub fn register(io: &SocketIo, app: SharedApp) {
    // socketioxide sends the CONNECT packet and only then spawns the connect handler: a client
    // that emits `subscribe` as soon as it is connected could reach a socket with no handler
    // yet on a loaded machine (the event dropped, its ack never sent; seen in CI). A connect
    // middleware runs before CONNECT is sent, so the handlers are registered there.
    let register_handlers = move |s: SocketRef| {
        let app = app.clone();
        async move {
            on_connect(s, app);
            Ok::<(), std::convert::Infallible>(())
        }
    };
    io.ns("/", (async |_: SocketRef| {}).with(register_handlers));
}

fn on_connect(s: SocketRef, app: SharedApp) {
    let id = s.id.to_string();
    app.clients.lock().expect("clients mutex").insert(
        id.clone(),
        ClientInfo {
            connected_at_ms: now_ms(),
            topics: Default::default(),
        },
    );
    app.metrics.socketio_clients.inc();

    let a = app.clone();
    s.on("subscribe", move |s: SocketRef, TryData(arg): TryData<Value>, ack: AckSender| {
        let app = a.clone();
        async move {
            let res = arg.map_err(|_| "topic: must be a string or an array of strings".to_owned());
            let reply = match res.and_then(|v| topics_of(&v)) {
                Err(e) => json!({ "ok": false, "error": e }),
                Ok(topics) => {
                    let mut clients = app.clients.lock().expect("clients mutex");
                    let Some(info) = clients.get_mut(&s.id.to_string()) else {
                        let _ = ack.send(&json!({ "ok": false, "error": "not connected" }));
                        return;
                    };
                    let fresh: Vec<String> =
                        topics.into_iter().filter(|t| !info.topics.contains(t)).collect();
                    if info.topics.len() + fresh.len() > MAX_TOPICS_PER_CLIENT {
                        json!({ "ok": false, "error": format!("topic: at most {MAX_TOPICS_PER_CLIENT} subscriptions per client") })
                    } else {
                        app.metrics.subscriptions.add(fresh.len() as i64);
                        info.topics.extend(fresh.iter().cloned());
                        s.join(fresh);
                        json!({ "ok": true })
                    }
                }
            };
            let _ = ack.send(&reply);
        }
    });

    let a = app.clone();
    s.on(
        "unsubscribe",
        move |s: SocketRef, TryData(arg): TryData<Value>, ack: AckSender| {
            let app = a.clone();
            async move {
                let res =
                    arg.map_err(|_| "topic: must be a string or an array of strings".to_owned());
                let reply = match res.and_then(|v| topics_of(&v)) {
                    Err(e) => json!({ "ok": false, "error": e }),
                    Ok(topics) => {
                        let mut clients = app.clients.lock().expect("clients mutex");
                        if let Some(info) = clients.get_mut(&s.id.to_string()) {
                            let gone: Vec<String> = topics
                                .into_iter()
                                .filter(|t| info.topics.remove(t))
                                .collect();
                            app.metrics.subscriptions.sub(gone.len() as i64);
                            s.leave(gone);
                        }
                        json!({ "ok": true })
                    }
                };
                let _ = ack.send(&reply);
            }
        },
    );

    let a = app.clone();
    s.on(
        "consumed",
        move |s: SocketRef, TryData(arg): TryData<Value>| {
            let app = a.clone();
            async move {
                let Some(message_id) = arg.ok().and_then(|v| v.get("id").and_then(Value::as_u64))
                else {
                    tracing::debug!(client = %s.id, "ignoring `consumed` without a numeric id");
                    return;
                };
                app.metrics.consumed.inc();
                app.store.enqueue(Record::Consumption {
                    message_id,
                    client: s.id.to_string(),
                    timestamp: now_ms(),
                });
            }
        },
    );

    s.on_disconnect(move |s: SocketRef| {
        let app = app.clone();
        async move {
            let removed = app
                .clients
                .lock()
                .expect("clients mutex")
                .remove(&s.id.to_string());
            if let Some(info) = removed {
                app.metrics.subscriptions.sub(info.topics.len() as i64);
            }
            app.metrics.socketio_clients.dec();
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_arguments() {
        assert_eq!(topics_of(&json!("a")).unwrap(), vec!["a"]);
        assert_eq!(
            topics_of(&json!(["a", "__all__"])).unwrap(),
            vec!["a", "__all__"]
        );
        assert!(topics_of(&json!(5)).unwrap_err().starts_with("topic:"));
        assert!(topics_of(&json!([])).unwrap_err().starts_with("topic:"));
        assert!(topics_of(&json!(["a", 1]))
            .unwrap_err()
            .starts_with("topic:"));
        assert!(topics_of(&json!("")).unwrap_err().starts_with("topic:"));
    }
}
