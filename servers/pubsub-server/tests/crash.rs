//! kill -9 in the middle of a publish stream, then a restart on the same database file:
//! everything acknowledged as stored is there, and no id is handed out twice.
mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use serde_json::json;

struct Stream {
    acked: Arc<Mutex<Vec<u64>>>,
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// `n` publishers in closed loops; each records the ids of its 200 answers.
fn publish_stream(server: &Server, n: usize) -> Stream {
    let acked = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = (0..n)
        .map(|p| {
            let (acked, stop, url) = (acked.clone(), stop.clone(), server.url("/publish"));
            tokio::spawn(async move {
                let mut seq = 0;
                while !stop.load(Ordering::Relaxed) {
                    let body = json!({ "topic": "crash", "payload": { "p": p, "seq": seq } });
                    match try_http("POST", &url, Some(body.to_string())).await {
                        Some((200, v)) => acked.lock().unwrap().push(v["id"].as_u64().unwrap()),
                        _ => break,
                    }
                    seq += 1;
                }
            })
        })
        .collect();
    Stream { acked, stop, tasks }
}

/// Starts a stream, kills the server with SIGKILL once `min_acked` publishes were answered
/// (publishers still running), and returns the acknowledged ids.
async fn crash_mid_stream(server: Server, min_acked: usize) -> Vec<u64> {
    let stream = publish_stream(&server, 4);
    eventually(
        "publishes acknowledged",
        Duration::from_secs(60),
        || async { (stream.acked.lock().unwrap().len() >= min_acked).then_some(()) },
    )
    .await;
    server.kill9();
    stream.stop.store(true, Ordering::Relaxed);
    for t in stream.tasks {
        t.await.unwrap();
    }
    let acked = stream.acked.lock().unwrap().clone();
    acked
}

async fn stored_ids(server: &Server) -> Vec<u64> {
    let mut ids = Vec::new();
    let mut before = String::new();
    loop {
        let page = get(&server.url(&format!("/messages?limit=1000{before}"))).await;
        let items = page["items"].as_array().unwrap();
        ids.extend(items.iter().map(|m| m["id"].as_u64().unwrap()));
        match page["next_before"].as_u64() {
            Some(b) => before = format!("&before={b}"),
            None => return ids,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_loses_nothing_acknowledged_and_never_reuses_an_id() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("pubsub.db");
    let env = [
        ("DATABASE_FILE", db.to_str().unwrap()),
        ("CACHE_TTL_SECONDS", "0"),
    ];
    let acked = crash_mid_stream(Server::start(&env), 200).await;

    let server = Server::start(&env);
    let stored = stored_ids(&server).await;
    let lost: Vec<u64> = acked
        .iter()
        .filter(|id| !stored.contains(id))
        .copied()
        .collect();
    assert!(
        lost.is_empty(),
        "acknowledged but lost after kill -9: {lost:?}"
    );
    let next = publish(&server, "crash", json!("after"), None).await;
    let highest = acked.iter().chain(&stored).max().copied().unwrap();
    assert!(
        next > highest,
        "id {next} after restart; {highest} was handed out before"
    );
}

/// PUBLISH_ACK=queued answers before the write (documented: a crash may lose those), but even
/// then an id handed out before the crash is never handed out again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_are_not_reused_after_a_crash_when_acks_come_early() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("pubsub.db");
    let env = [
        ("DATABASE_FILE", db.to_str().unwrap()),
        ("CACHE_TTL_SECONDS", "0"),
        ("PUBLISH_ACK", "queued"),
    ];
    let acked = crash_mid_stream(Server::start(&env), 300).await;
    let server = Server::start(&env);
    let next = publish(&server, "crash", json!("after"), None).await;
    let highest = *acked.iter().max().unwrap();
    assert!(
        next > highest,
        "id {next} after restart; {highest} was handed out before"
    );
}
