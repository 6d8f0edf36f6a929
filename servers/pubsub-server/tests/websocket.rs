//! `/ws` with a WebSocket client (tokio-tungstenite): echo and broadcast modes.
mod common;

use std::time::Duration;

use common::*;
use futures::{SinkExt, StreamExt};
use tokio_tungstenite::connect_async;
use tokio_tungstenite::tungstenite::Message;

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn next_text<S>(ws: &mut S) -> String
where
    S: futures::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    loop {
        let m = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("ws timeout")
            .expect("ws open")
            .expect("ws frame");
        if let Message::Text(t) = m {
            return t.to_string();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_mode_returns_each_frame_to_its_sender() {
    let server = Server::start(&[("WS_MODE", "echo")]);
    let url = format!("ws://127.0.0.1:{}/ws", server.port);
    let (mut a, _) = connect_async(&url).await.unwrap();
    for i in 0..5 {
        a.send(Message::text(format!("hello {i}"))).await.unwrap();
        assert_eq!(next_text(&mut a).await, format!("hello {i}"));
    }
}

/// Frames far larger than the server's read buffer still arrive whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_larger_than_the_read_buffer_arrive_whole() {
    let server = Server::start(&[("WS_MODE", "echo")]);
    let url = format!("ws://127.0.0.1:{}/ws", server.port);
    let (mut a, _) = connect_async(&url).await.unwrap();
    let big: String = (0..300_000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    a.send(Message::text(big.clone())).await.unwrap();
    assert_eq!(next_text(&mut a).await, big);
}

/// Two `/ws` clients of `server`, returned once both are registered (the gauge says so).
async fn two_clients(server: &Server) -> (Ws, Ws) {
    let url = format!("ws://127.0.0.1:{}/ws", server.port);
    let (a, _) = connect_async(&url).await.unwrap();
    let (b, _) = connect_async(&url).await.unwrap();
    eventually("two ws clients", Duration::from_secs(10), || async {
        let m = http("GET", &server.url("/metrics"), None).await.1;
        m.as_str()
            .unwrap()
            .contains("pubsub_ws_clients 2")
            .then_some(())
    })
    .await;
    (a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broadcast_mode_reaches_every_client() {
    let server = Server::start(&[("WS_MODE", "broadcast")]);
    let (mut a, mut b) = two_clients(&server).await;
    a.send(Message::text("from a")).await.unwrap();
    assert_eq!(next_text(&mut a).await, "from a");
    assert_eq!(next_text(&mut b).await, "from a");
    assert_eq!(server.terminate(), Some(0));
}

/// A burst faster than one frame per write: every client still gets every frame, in order, and
/// nothing counts as skipped (the server batches frames per write, it does not drop them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broadcast_burst_arrives_whole_and_in_order() {
    const N: usize = 500; // below the ring's 1024, so no client may legitimately skip
    let server = Server::start(&[("WS_MODE", "broadcast"), ("WORKER_THREADS", "1")]);
    let (mut a, mut b) = two_clients(&server).await;
    for i in 0..N {
        a.feed(Message::text(format!("m{i}"))).await.unwrap();
    }
    a.flush().await.unwrap();
    for i in 0..N {
        assert_eq!(next_text(&mut b).await, format!("m{i}"));
    }
    for i in 0..N {
        assert_eq!(next_text(&mut a).await, format!("m{i}"));
    }
    assert_eq!(metric(&server, "pubsub_ws_dropped_total").await, 0.0);
    assert_eq!(metric(&server, "pubsub_ws_messages_total").await, N as f64);
}
