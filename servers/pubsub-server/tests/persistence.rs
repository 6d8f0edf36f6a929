//! A file database survives a restart: messages stay readable and ids continue.
mod common;

use std::time::Duration;

use common::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_database_survives_restart() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("pubsub.db");
    let db = db.to_str().unwrap();
    let env = [("DATABASE_FILE", db), ("CACHE_TTL_SECONDS", "0")];

    let server = Server::start(&env);
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(publish(&server, "orders", json!({ "n": i }), Some("svc")).await);
    }
    // Graceful stop flushes the writer queue before exiting.
    assert_eq!(server.terminate(), Some(0));

    let server = Server::start(&env);
    let page = get(&server.url("/messages?topic=orders")).await;
    let got: Vec<u64> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_u64().unwrap())
        .rev()
        .collect();
    assert_eq!(got, ids);
    assert_eq!(page["items"][0]["payload"], json!({ "n": 4 }));
    assert_eq!(page["items"][0]["publisher"], "svc");
    let next = publish(&server, "orders", json!("after"), None).await;
    assert_eq!(
        next,
        ids.last().unwrap() + 1,
        "ids continue after a restart"
    );
    eventually("new message persisted", Duration::from_secs(10), || async {
        let p = get(&server.url("/messages?limit=1")).await;
        (p["items"][0]["id"] == next).then_some(())
    })
    .await;
}
