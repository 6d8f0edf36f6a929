//! Real Socket.IO clients (python-socketio and the official Node socket.io-client) against the
//! real binary: what POST /publish sends arrives, once, in order, on the topic and on `__all__`,
//! in both emission modes; the REST views report what happened.
mod common;

use std::time::Duration;

use common::*;
use serde_json::{json, Value};

fn ids_and_topics(msgs: &[Value]) -> Vec<(u64, String)> {
    msgs.iter()
        .map(|m| {
            (
                m["id"].as_u64().unwrap(),
                m["topic"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

async fn delivers_in_order(emit_mode: &str, workers: &str, client: SioClient) {
    let server = Server::start(&[
        ("EMIT_MODE", emit_mode),
        ("CACHE_TTL_SECONDS", "0"),
        ("WORKER_THREADS", workers),
    ]);
    let (status, health) = http("GET", &server.url("/health"), None).await;
    assert_eq!(status, 200);
    assert_eq!(health["emit_mode"], emit_mode);
    assert_eq!(health["worker_threads"].to_string(), workers);

    const N: usize = 30;
    // Topic "a" gets every other message; "b" the rest.
    let topic_of = |i: usize| if i.is_multiple_of(2) { "a" } else { "b" };
    let on_a = Subscriber::subscribe_with(client, &server, &["a"], N / 2, false);
    let on_all = Subscriber::subscribe_with(client, &server, &["__all__"], N, true);
    // Subscribed to both: must still get each message exactly once.
    let on_both = Subscriber::subscribe_with(client, &server, &["a", "__all__"], N, false);

    let mut sent = Vec::new();
    for i in 0..N {
        let payload = json!({ "seq": i, "text": format!("m{i}") });
        let id = publish(&server, topic_of(i), payload, Some("pub-1")).await;
        sent.push((id, topic_of(i).to_owned()));
    }

    let clients = get(&server.url("/clients")).await;
    assert_eq!(clients["total"], 3, "{clients}");
    let graph = get(&server.url("/graph/state")).await;
    assert_eq!(graph["publishers"][0]["publisher"], "pub-1", "{graph}");
    assert_eq!(graph["publishers"][0]["topics"]["a"], N / 2);
    assert_eq!(graph["publishers"][0]["topics"]["b"], N / 2);
    let subs_of = |topic: &str| -> usize {
        graph["topics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["topic"] == topic)
            .map_or(0, |t| t["subscribers"].as_array().unwrap().len())
    };
    assert_eq!(subs_of("a"), 2, "{graph}");
    assert_eq!(subs_of("__all__"), 2, "{graph}");

    let a = on_a.received();
    let expected_a: Vec<_> = sent.iter().filter(|(_, t)| t == "a").cloned().collect();
    assert_eq!(ids_and_topics(&a), expected_a);
    assert_eq!(a[0]["payload"], json!({ "seq": 0, "text": "m0" }));
    assert_eq!(a[0]["publisher"], "pub-1");
    assert!(a[0]["timestamp"].as_i64().unwrap() > 1_600_000_000_000);
    assert_eq!(ids_and_topics(&on_all.received()), sent);
    assert_eq!(ids_and_topics(&on_both.received()), sent);

    // Persistence is asynchronous: wait until the writer caught up, then check the pages.
    let newest = sent.last().unwrap().0;
    let page = eventually("messages persisted", Duration::from_secs(10), || async {
        let p = get(&server.url("/messages?limit=10")).await;
        (p["items"][0]["id"] == newest).then_some(p)
    })
    .await;
    assert_eq!(page["items"].as_array().unwrap().len(), 10);
    let next = page["next_before"].as_u64().unwrap();
    let page2 = get(&server.url(&format!("/messages?limit=10&before={next}"))).await;
    assert_eq!(page2["items"][0]["id"], next - 1);
    let only_b = get(&server.url("/messages?topic=b&limit=1000")).await;
    assert_eq!(only_b["items"].as_array().unwrap().len(), N / 2);
    // The `__all__` subscriber acknowledged every message with `consumed`.
    let cons = eventually(
        "consumptions persisted",
        Duration::from_secs(10),
        || async {
            let c = get(&server.url("/consumptions")).await;
            (c["total"] == N).then_some(c)
        },
    )
    .await;
    // Each `consumed` event is handled on its own task, so only the set is deterministic.
    let mut consumed: Vec<u64> = cons["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["message_id"].as_u64().unwrap())
        .collect();
    consumed.sort_unstable();
    assert_eq!(consumed, sent.iter().map(|(id, _)| *id).collect::<Vec<_>>());

    let metrics = http("GET", &server.url("/metrics"), None).await.1;
    let text = metrics.as_str().unwrap();
    assert!(
        text.contains(&format!("pubsub_published_total {N}")),
        "{text}"
    );
    assert!(
        text.contains(&format!("pubsub_consumed_total {N}")),
        "{text}"
    );
    assert_eq!(server.terminate(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_emission_delivers_once_in_order() {
    delivers_in_order("parallel", "2", SioClient::Python).await;
}

/// The official Node socket.io-client: a second client library nobody here wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_client_receives_topic_and_all_in_order() {
    delivers_in_order("parallel", "2", SioClient::Node).await;
}

/// One worker: the two emissions are joined on the publishing task instead of spawned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_emission_on_one_worker_delivers_once_in_order() {
    delivers_in_order("parallel", "1", SioClient::Python).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequential_emission_delivers_once_in_order() {
    delivers_in_order("sequential", "1", SioClient::Python).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_publish_input_is_a_400_naming_the_field() {
    let server = Server::start(&[]);
    for (body, field) in [
        ("not json", "body:"),
        (r#"{"payload":"x"}"#, "topic:"),
        (r#"{"topic":7,"payload":"x"}"#, "topic:"),
        (r#"{"topic":"t"}"#, "payload:"),
        (r#"{"topic":"t","payload":1,"publisher":[1]}"#, "publisher:"),
    ] {
        let (status, v) = http("POST", &server.url("/publish"), Some(body)).await;
        assert_eq!(status, 400, "{body}");
        assert!(
            v["error"].as_str().unwrap().starts_with(field),
            "{body} -> {v}"
        );
    }
    let (status, v) = http("GET", &server.url("/messages?limit=5000"), None).await;
    assert_eq!(status, 400);
    assert!(v["error"].as_str().unwrap().starts_with("limit:"), "{v}");
    // Nothing was published.
    assert_eq!(get(&server.url("/health")).await["published"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_endpoints_are_cached_for_the_ttl() {
    let server = Server::start(&[("CACHE_TTL_SECONDS", "3600")]);
    let first = get(&server.url("/graph/state")).await;
    assert_eq!(first["publishers"], json!([]));
    publish(&server, "t", json!("x"), Some("p")).await;
    // Within the TTL the cached rendering is served; a different query is a different entry.
    assert_eq!(get(&server.url("/graph/state")).await, first);
    let health = get(&server.url("/health")).await;
    assert_eq!(health["published"], 1, "health is live, never cached");
}
