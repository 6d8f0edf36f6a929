//! `/ws`: plain WebSocket for the seeds' WebSocket scenarios. WS_MODE=echo returns every frame
//! to its sender; WS_MODE=broadcast sends every frame to all /ws clients through a bounded
//! broadcast ring (1024): a client that falls behind skips what it missed, counted in
//! `pubsub_ws_dropped_total`, so one slow reader never holds memory or the others back.
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::response::Response;
use futures::{SinkExt, StreamExt};
use tokio::sync::broadcast::error::RecvError;

use crate::app::SharedApp;
use crate::config::WsMode;

pub const BROADCAST_CAPACITY: usize = 1024;
const MAX_MESSAGE: usize = 1 << 20;

pub async fn upgrade(State(app): State<SharedApp>, ws: WebSocketUpgrade) -> Response {
    ws.max_message_size(MAX_MESSAGE)
        .on_upgrade(move |socket| serve(app, socket))
}

async fn serve(app: SharedApp, socket: WebSocket) {
    app.metrics.ws_clients.inc();
    let (mut tx, mut rx) = socket.split();
    let mut stop = app.shutdown.clone();
    let mut feed = app.ws_tx.subscribe();
    loop {
        tokio::select! {
            incoming = rx.next() => {
                let msg = match incoming {
                    Some(Ok(m @ (Message::Text(_) | Message::Binary(_)))) => m,
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                    Some(Ok(_)) => continue, // ping/pong are answered by the library
                };
                app.metrics.ws_messages.inc();
                match app.cfg.ws_mode {
                    WsMode::Echo => {
                        if tx.send(msg).await.is_err() {
                            break;
                        }
                    }
                    WsMode::Broadcast => {
                        let _ = app.ws_tx.send(msg);
                    }
                }
            }
            fanout = feed.recv(), if app.cfg.ws_mode == WsMode::Broadcast => match fanout {
                Ok(m) => {
                    if tx.send(m).await.is_err() {
                        break;
                    }
                }
                Err(RecvError::Lagged(n)) => app.metrics.ws_dropped.inc_by(n),
                Err(RecvError::Closed) => break,
            },
            _ = stopped(&mut stop) => {
                let _ = tx.send(Message::Close(None)).await;
                break;
            }
        }
    }
    app.metrics.ws_clients.dec();
}

async fn stopped(stop: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}
