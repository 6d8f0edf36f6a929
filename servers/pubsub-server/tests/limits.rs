//! Large, hostile and odd inputs against the real binary with its default configuration:
//! 1 MiB bodies, oversized bodies, more connections than allowed, cache-busting query strings.
mod common;

use std::time::Duration;

use common::*;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const MIB: u64 = 1 << 20;
/// The sample PubSubServer runs in a 128Mi container; the server must stay well inside it.
const CONTAINER: u64 = 128 * MIB;
const HEADROOM: u64 = 24 * MIB;

/// A publish body of exactly `len` bytes (a string payload padded to fit).
fn body_of_len(len: usize) -> String {
    let head = r#"{"topic":"big","payload":""#;
    let tail = r#""}"#;
    format!("{head}{}{tail}", "x".repeat(len - head.len() - tail.len()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_mib_publishes_stay_inside_a_128mi_container() {
    let server = Server::start(&[]);
    let body = body_of_len(MIB as usize);
    let mut peak = 0;
    for i in 0..300 {
        let (status, v) = try_http("POST", &server.url("/publish"), Some(body.clone()))
            .await
            .unwrap_or_else(|| panic!("publish {i}: server gone"));
        assert_eq!(status, 200, "publish {i}: {v}");
        if i % 25 == 0 {
            // Reads render and cache pages of these messages too.
            let page = get(&server.url(&format!("/messages?limit=1000&before={}", i + 1))).await;
            assert!(page["items"].is_array());
            peak = peak.max(server.rss_bytes());
        }
    }
    peak = peak.max(server.rss_bytes());
    eprintln!("peak VmRSS after 300 x 1 MiB publishes: {} MiB", peak / MIB);
    assert!(
        peak < CONTAINER - HEADROOM,
        "VmRSS {} MiB, limit {} MiB",
        peak / MIB,
        (CONTAINER - HEADROOM) / MIB
    );
    assert_eq!(get(&server.url("/health")).await["status"], "ok");
    let evicted = metric(&server, r#"pubsub_evicted_messages_total{reason="budget"}"#).await;
    assert!(
        evicted > 0.0,
        "no message was evicted for the memory budget"
    );
    let newest = get(&server.url("/messages?limit=1")).await;
    assert_eq!(
        newest["items"][0]["topic"], "big",
        "{}",
        newest["next_before"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_limit_is_a_413_naming_the_limit() {
    let server = Server::start(&[]);
    let (status, v) = try_http(
        "POST",
        &server.url("/publish"),
        Some(body_of_len(MIB as usize + 1)),
    )
    .await
    .expect("answered");
    assert_eq!(status, 413, "{v}");
    assert_eq!(v["error"], "body: must be at most 1048576 bytes", "{v}");
    assert_eq!(get(&server.url("/health")).await["published"], 0);
}

/// One HTTP/1.1 request on an already open connection; returns the status line.
async fn request_on(conn: &mut TcpStream, path: &str) -> String {
    let req = format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n");
    conn.write_all(req.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    let n = tokio::time::timeout(Duration::from_secs(10), conn.read(&mut buf))
        .await
        .expect("response in time")
        .unwrap();
    let text = String::from_utf8_lossy(&buf[..n]).into_owned();
    text.lines().next().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_cap_are_refused_with_a_503() {
    let server = Server::start(&[("MAX_CONNECTIONS", "2")]);
    let addr = format!("127.0.0.1:{}", server.port);
    let mut first = TcpStream::connect(&addr).await.unwrap();
    let mut second = TcpStream::connect(&addr).await.unwrap();
    assert!(request_on(&mut first, "/health").await.contains(" 200 "));
    assert!(request_on(&mut second, "/health").await.contains(" 200 "));

    let (status, v) = try_http("GET", &server.url("/health"), None)
        .await
        .expect("a refusal is an HTTP answer, not a reset");
    assert_eq!(status, 503, "{v}");
    assert!(v["error"].as_str().unwrap().contains("connections"), "{v}");
    // Existing connections are unaffected.
    assert!(request_on(&mut first, "/health").await.contains(" 200 "));

    // Freeing a slot lets a new connection in; the refusal was counted.
    drop(second);
    let rejected = eventually("a slot frees up", Duration::from_secs(10), || async {
        match try_http("GET", &server.url("/metrics"), None).await {
            Some((200, Value::String(text))) => text
                .lines()
                .find_map(|l| l.strip_prefix("pubsub_connections_rejected_total "))
                .map(|v| v.trim().parse::<f64>().unwrap()),
            _ => None,
        }
    })
    .await;
    assert!(rejected >= 1.0, "{rejected}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_query_parameters_do_not_bypass_the_cache() {
    // PUBLISH_ACK=stored: the publish answers once the message is committed. (Polling a new
    // page until it appeared raced the writer: a poll before the commit cached that page empty
    // for the whole TTL.)
    let server = Server::start(&[("CACHE_TTL_SECONDS", "3600"), ("PUBLISH_ACK", "stored")]);
    let first = get(&server.url("/messages?x=1")).await;
    assert_eq!(first["items"], json!([]));
    let id = publish(&server, "t", json!("x"), None).await;
    // A different `limit` is a different page: it shows the stored message.
    let p = get(&server.url("/messages?limit=5")).await;
    assert_eq!(p["items"][0]["id"], id, "{p}");
    // Same parameters that matter (limit defaults to 100): the cached page, whatever else.
    for q in ["?x=2", "?limit=100", "?limit=0100&_=17", "?before=&y=%ff"] {
        let (status, page) = http("GET", &server.url(&format!("/messages{q}")), None).await;
        assert_eq!(status, 200, "{q}: {page}");
        assert_eq!(page, first, "{q} missed the cache");
    }
}
