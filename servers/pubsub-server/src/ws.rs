//! `/ws`: plain WebSocket for the seeds' WebSocket scenarios. WS_MODE=echo returns every frame
//! to its sender; WS_MODE=broadcast sends every frame to all /ws clients through a bounded
//! broadcast ring (1024): a client that falls behind skips what it missed, counted in
//! `pubsub_ws_dropped_total`, so one slow reader never holds memory or the others back.
//! A client's task writes every frame already waiting in the ring (up to `MAX_BATCH`) before
//! one flush, so a busy server makes one write syscall per client per batch, not per frame.
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::response::Response;
use futures::{Sink, SinkExt, StreamExt};
use prometheus::IntCounter;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::sync::broadcast::Receiver;

use crate::app::SharedApp;
use crate::config::WsMode;

pub const BROADCAST_CAPACITY: usize = 1024;
const MAX_MESSAGE: usize = 1 << 20;
/// Frames queued before one flush at most: bounds one client's turn on the worker thread.
pub const MAX_BATCH: usize = 64;

/// tungstenite zero-fills up to this much of its read buffer on every read attempt, including
/// the ones that find nothing (a fan-out client's read half is polled on every wake-up): at the
/// default 128 KiB that memset was half the server's CPU in broadcast. Larger frames still
/// arrive whole (the buffer grows to fit them); reads just come in smaller pieces.
const READ_BUFFER: usize = 4 * 1024;

pub async fn upgrade(State(app): State<SharedApp>, ws: WebSocketUpgrade) -> Response {
    ws.max_message_size(MAX_MESSAGE)
        .read_buffer_size(READ_BUFFER)
        .on_upgrade(move |socket| serve(app, socket))
}

async fn serve(app: SharedApp, socket: WebSocket) {
    app.metrics.ws_clients.inc();
    let (mut tx, mut rx) = socket.split();
    let mut stop = app.shutdown.clone();
    let mut feed = app.ws_tx.subscribe();
    let broadcast = app.cfg.ws_mode == WsMode::Broadcast;
    loop {
        tokio::select! {
            incoming = rx.next() => {
                let msg = match incoming {
                    Some(Ok(m @ (Message::Text(_) | Message::Binary(_)))) => m,
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                    Some(Ok(_)) => continue, // ping/pong are answered by the library
                };
                app.metrics.ws_messages.inc();
                if broadcast {
                    let _ = app.ws_tx.send(msg);
                } else if tx.send(msg).await.is_err() {
                    break;
                }
            }
            fanout = feed.recv(), if broadcast => match fanout {
                Ok(m) => {
                    if forward(&mut tx, m, &mut feed, &app.metrics.ws_dropped).await.is_err() {
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

/// Queues `first` and the frames already waiting in the ring behind it (up to `MAX_BATCH` in
/// all; skips are counted as in the select loop), then flushes them in one write.
pub async fn forward<S>(
    tx: &mut S,
    first: Message,
    feed: &mut Receiver<Message>,
    dropped: &IntCounter,
) -> Result<(), S::Error>
where
    S: Sink<Message> + Unpin,
{
    tx.feed(first).await?;
    for _ in 1..MAX_BATCH {
        match feed.try_recv() {
            Ok(m) => tx.feed(m).await?,
            Err(TryRecvError::Lagged(n)) => dropped.inc_by(n),
            // Closed is seen by the select loop's next recv.
            Err(TryRecvError::Empty | TryRecvError::Closed) => break,
        }
    }
    tx.flush().await
}

async fn stopped(stop: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;
    use std::pin::Pin;
    use std::task::{Context, Poll};
    use tokio::sync::broadcast;

    /// Records frames and the number of frames each flush carried.
    #[derive(Default)]
    struct Recorder {
        queued: Vec<Message>,
        flushes: Vec<usize>,
        sent: Vec<Message>,
    }

    impl Sink<Message> for Recorder {
        type Error = Infallible;
        fn poll_ready(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }
        fn start_send(mut self: Pin<&mut Self>, m: Message) -> Result<(), Infallible> {
            self.queued.push(m);
            Ok(())
        }
        fn poll_flush(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Result<(), Infallible>> {
            let batch: Vec<Message> = self.queued.drain(..).collect();
            self.flushes.push(batch.len());
            self.sent.extend(batch);
            Poll::Ready(Ok(()))
        }
        fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }
    }

    fn text(i: usize) -> Message {
        Message::Text(i.to_string().into())
    }

    fn numbers(sent: &[Message]) -> Vec<usize> {
        sent.iter()
            .map(|m| match m {
                Message::Text(t) => t.as_str().parse().unwrap(),
                other => panic!("unexpected {other:?}"),
            })
            .collect()
    }

    #[tokio::test]
    async fn waiting_frames_go_out_in_order_with_one_flush_per_batch() {
        let (tx, mut rx) = broadcast::channel(BROADCAST_CAPACITY);
        for i in 0..MAX_BATCH + 6 {
            tx.send(text(i)).unwrap();
        }
        let dropped = IntCounter::new("d", "d").unwrap();
        let mut sink = Recorder::default();
        let first = rx.recv().await.unwrap();
        forward(&mut sink, first, &mut rx, &dropped).await.unwrap();
        let first = rx.recv().await.unwrap();
        forward(&mut sink, first, &mut rx, &dropped).await.unwrap();
        assert_eq!(sink.flushes, vec![MAX_BATCH, 6]);
        assert_eq!(numbers(&sink.sent), (0..MAX_BATCH + 6).collect::<Vec<_>>());
        assert_eq!(dropped.get(), 0);
    }

    #[tokio::test]
    async fn a_client_that_fell_behind_skips_and_counts_what_it_missed() {
        let (tx, mut rx) = broadcast::channel(4);
        tx.send(text(0)).unwrap();
        let first = rx.recv().await.unwrap();
        // The ring overwrites 1..=3 while this client is busy: 4 slots hold 4..=7.
        for i in 1..8 {
            tx.send(text(i)).unwrap();
        }
        let dropped = IntCounter::new("d", "d").unwrap();
        let mut sink = Recorder::default();
        forward(&mut sink, first, &mut rx, &dropped).await.unwrap();
        assert_eq!(numbers(&sink.sent), vec![0, 4, 5, 6, 7]);
        assert_eq!(dropped.get(), 3);
        assert_eq!(sink.flushes, vec![5]);
    }
}
